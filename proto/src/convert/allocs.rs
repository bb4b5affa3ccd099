//! Allocations, their task states and metrics, and the parts of plans that carry them.

use super::enums::parse_dimension;
use super::resources::required_resources;
use super::{
    ConvertError, Result, WireEnum, Within, each, each_value, opt_id_text, parse_id, parse_opt_id,
    required,
};
use crate::v1 as pb;
use drover_core::*;

// --- Core → proto ---------------------------------------------------------------------------

impl From<&AllocStateEntry> for pb::AllocStateEntry {
    fn from(e: &AllocStateEntry) -> Self {
        pb::AllocStateEntry {
            client_status: e.client_status.to_wire(),
            time_unix_ms: e.time.as_millis(),
        }
    }
}

impl From<&TaskEvent> for pb::TaskEvent {
    fn from(e: &TaskEvent) -> Self {
        pb::TaskEvent {
            time_unix_ms: e.time().as_millis(),
            kind: e.kind().to_string(),
            message: e.message().to_string(),
            exit_code: e.exit_code(),
            infra_failure: e.infra_failure(),
        }
    }
}

impl From<&TaskState> for pb::TaskState {
    fn from(t: &TaskState) -> Self {
        pb::TaskState {
            state: t.state.to_wire(),
            failed: t.failed,
            restarts: t.restarts,
            started_at_unix_ms: t.started_at.map(Timestamp::as_millis),
            finished_at_unix_ms: t.finished_at.map(Timestamp::as_millis),
            events: t.events.iter().map(Into::into).collect(),
            usage: t.usage.map(|u| pb::TaskUsage {
                cpu_mhz: u.cpu_mhz,
                memory_mb: u.memory_mb,
            }),
        }
    }
}

impl From<&RescheduleTracker> for pb::RescheduleTracker {
    fn from(t: &RescheduleTracker) -> Self {
        pb::RescheduleTracker {
            events: t
                .events
                .iter()
                .map(|e| pb::RescheduleEvent {
                    time_unix_ms: e.time.as_millis(),
                    prev_alloc_id: e.prev_alloc_id.to_string(),
                    prev_node_id: e.prev_node_id.to_string(),
                    delay_ms: e.delay_ms,
                })
                .collect(),
        }
    }
}

impl From<&PlacementMetric> for pb::PlacementMetric {
    fn from(m: &PlacementMetric) -> Self {
        pb::PlacementMetric {
            nodes_evaluated: m.nodes_evaluated,
            nodes_filtered: m.nodes_filtered,
            nodes_exhausted: m.nodes_exhausted,
            score: m.score,
        }
    }
}

impl From<&AllocMetric> for pb::AllocMetric {
    fn from(m: &AllocMetric) -> Self {
        pb::AllocMetric {
            nodes_evaluated: m.nodes_evaluated,
            nodes_filtered: m.nodes_filtered,
            nodes_available: m.nodes_available.clone(),
            class_filtered: m.class_filtered.clone(),
            constraint_filtered: m.constraint_filtered.clone(),
            nodes_exhausted: m.nodes_exhausted,
            class_exhausted: m.class_exhausted.clone(),
            dimension_exhausted: m
                .dimension_exhausted
                .iter()
                .map(|(d, n)| (d.as_str().to_owned(), *n))
                .collect(),
            coalesced_failures: m.coalesced_failures,
            score: m.score,
            ports_exhausted: super::network::shortages_to(&m.ports_exhausted),
        }
    }
}

impl From<&Allocation> for pb::Allocation {
    fn from(a: &Allocation) -> Self {
        pb::Allocation {
            id: a.id.to_string(),
            eval_id: a.eval_id.to_string(),
            name: a.name.to_string(),
            namespace: a.namespace.to_string(),
            job_id: a.job_id.to_string(),
            job_version: a.job_version,
            task_group: a.task_group.to_string(),
            node_id: a.node_id.to_string(),
            desired_status: a.desired_status.to_wire(),
            desired_description: a.desired_description.to_string(),
            client_status: a.client_status.to_wire(),
            client_description: a.client_description.to_string(),
            state_history: a.state_history.iter().map(Into::into).collect(),
            task_states: a
                .task_states
                .iter()
                .map(|(k, t)| (k.to_owned(), t.into()))
                .collect(),
            reschedule_tracker: a.links.get().reschedule_tracker.as_deref().map(Into::into),
            previous_allocation: opt_id_text(&a.links.get().previous_allocation),
            next_allocation: opt_id_text(&a.links.get().next_allocation),
            follow_up_eval_id: opt_id_text(&a.links.get().follow_up_eval_id),
            preempted_by: opt_id_text(&a.links.get().preempted_by),
            preempted_allocations: a
                .links
                .get()
                .preempted_allocations
                .iter()
                .map(ToString::to_string)
                .collect(),
            resources: Some((&a.resources).into()),
            ports: a.ports.iter().map(Into::into).collect(),
            metrics: Some((&a.metrics).into()),
            create_index: a.create_index,
            modify_index: a.modify_index,
            alloc_modify_index: a.alloc_modify_index,
            create_time_unix_ms: a.create_time.as_millis(),
            migrate: a.links.get().migrate,
            modify_time_unix_ms: a.modify_time.as_millis(),
            deployment_id: a
                .links
                .get()
                .deployment
                .as_ref()
                .map(|d| d.id.to_string())
                .unwrap_or_default(),
            canary: a.links.get().deployment.as_ref().is_some_and(|d| d.canary),
            deployment_health: a
                .links
                .get()
                .deployment
                .as_ref()
                .and_then(|d| d.health.as_ref())
                .map(super::deployments::health_wire),
        }
    }
}

impl From<&AllocTransition> for pb::AllocTransition {
    fn from(t: &AllocTransition) -> Self {
        pb::AllocTransition {
            alloc_id: t.alloc_id.to_string(),
            desired_status: t.desired_status.to_wire(),
            desired_description: t.desired_description.clone(),
            client_status: t.client_status.map(WireEnum::to_wire),
            follow_up_eval_id: opt_id_text(&t.follow_up_eval_id),
            preempted_by: opt_id_text(&t.preempted_by),
        }
    }
}

impl From<&DesiredUpdates> for pb::DesiredUpdates {
    fn from(d: &DesiredUpdates) -> Self {
        pb::DesiredUpdates {
            place: d.place,
            stop: d.stop,
            migrate: d.migrate,
            in_place_update: d.in_place_update,
            destructive_update: d.destructive_update,
            ignore: d.ignore,
            preemptions: d.preemptions,
            reconnect: d.reconnect,
            disconnect: d.disconnect,
            reschedule_now: d.reschedule_now,
            reschedule_later: d.reschedule_later,
            canary: d.canary,
        }
    }
}

impl From<&PlanAnnotations> for pb::PlanAnnotations {
    fn from(a: &PlanAnnotations) -> Self {
        pb::PlanAnnotations {
            desired_tg_updates: a
                .desired_tg_updates
                .iter()
                .map(|(g, d)| (g.clone(), d.into()))
                .collect(),
        }
    }
}

/// A plan's changes grouped by node, in node id order, for `JobService.Plan`.
pub fn node_plans(plan: &Plan) -> Vec<pb::NodePlan> {
    plan.nodes()
        .map(|node| {
            let transitions = |m: &std::collections::BTreeMap<NodeId, Vec<AllocTransition>>| {
                m.get(&node)
                    .map(|ts| ts.iter().map(Into::into).collect())
                    .unwrap_or_default()
            };
            pb::NodePlan {
                node_id: node.to_string(),
                place: plan
                    .node_allocation
                    .get(&node)
                    .map(|allocs| allocs.iter().map(|a| pb::Allocation::from(&**a)).collect())
                    .unwrap_or_default(),
                update: transitions(&plan.node_update),
                preempt: transitions(&plan.node_preemptions),
            }
        })
        .collect()
}

// --- Proto → core ---------------------------------------------------------------------------

fn state_entry(p: pb::AllocStateEntry) -> Result<AllocStateEntry> {
    Ok(AllocStateEntry {
        client_status: ClientStatus::from_wire("client_status", p.client_status)?,
        time: Timestamp::from_millis(p.time_unix_ms),
    })
}

fn task_event(p: pb::TaskEvent) -> TaskEvent {
    TaskEvent::new(Timestamp::from_millis(p.time_unix_ms), &p.kind, p.message)
        .with_exit_code(p.exit_code)
        .with_infra_failure(p.infra_failure)
}

pub(crate) fn task_state(p: pb::TaskState) -> Result<TaskState> {
    Ok(TaskState {
        state: TaskRunState::from_wire("state", p.state)?,
        failed: p.failed,
        restarts: p.restarts,
        started_at: p.started_at_unix_ms.map(Timestamp::from_millis),
        finished_at: p.finished_at_unix_ms.map(Timestamp::from_millis),
        events: p.events.into_iter().map(task_event).collect(),
        usage: p.usage.map(|u| drover_core::types::TaskUsage {
            cpu_mhz: u.cpu_mhz,
            memory_mb: u.memory_mb,
        }),
    })
}

/// Task name -> state, naming a bad entry `task_states["name"]`.
pub(crate) fn task_states(
    p: std::collections::BTreeMap<String, pb::TaskState>,
) -> Result<TaskStates> {
    each_value("task_states", p, task_state)
}

fn reschedule_tracker(p: pb::RescheduleTracker) -> Result<RescheduleTracker> {
    Ok(RescheduleTracker {
        events: each("events", p.events, |e| {
            Ok(RescheduleEvent {
                time: Timestamp::from_millis(e.time_unix_ms),
                prev_alloc_id: parse_id("prev_alloc_id", &e.prev_alloc_id)?,
                prev_node_id: parse_id("prev_node_id", &e.prev_node_id)?,
                delay_ms: e.delay_ms,
            })
        })?,
    })
}

fn placement_metric(p: pb::PlacementMetric) -> PlacementMetric {
    PlacementMetric {
        nodes_evaluated: p.nodes_evaluated,
        nodes_filtered: p.nodes_filtered,
        nodes_exhausted: p.nodes_exhausted,
        score: p.score,
    }
}

pub(crate) fn alloc_metric(p: pb::AllocMetric) -> Result<AllocMetric> {
    let dimension_exhausted = p
        .dimension_exhausted
        .into_iter()
        .map(|(k, n)| {
            let d = parse_dimension(&format!("dimension_exhausted[{k:?}]"), &k)?;
            Ok((d, n))
        })
        .collect::<Result<_>>()?;
    Ok(AllocMetric {
        nodes_evaluated: p.nodes_evaluated,
        nodes_filtered: p.nodes_filtered,
        nodes_available: p.nodes_available,
        class_filtered: p.class_filtered,
        constraint_filtered: p.constraint_filtered,
        nodes_exhausted: p.nodes_exhausted,
        class_exhausted: p.class_exhausted,
        dimension_exhausted,
        ports_exhausted: super::network::shortages(p.ports_exhausted)?,
        coalesced_failures: p.coalesced_failures,
        score: p.score,
    })
}

super::rooted_try_from!(pb::AllocMetric => AllocMetric, "metric", alloc_metric);

pub(crate) fn allocation(p: pb::Allocation) -> Result<Allocation> {
    if p.job_id.is_empty() {
        return Err(ConvertError::new("job_id", super::Problem::Missing));
    }
    Ok(Allocation {
        id: parse_id("id", &p.id)?,
        eval_id: parse_id("eval_id", &p.eval_id)?,
        name: p.name.into(),
        namespace: p.namespace.into(),
        job_id: JobId::new(&p.job_id),
        job_version: p.job_version,
        task_group: p.task_group.into(),
        node_id: parse_id("node_id", &p.node_id)?,
        desired_status: DesiredStatus::from_wire("desired_status", p.desired_status)?,
        desired_description: p.desired_description.into(),
        client_status: ClientStatus::from_wire("client_status", p.client_status)?,
        client_description: p.client_description.into(),
        state_history: each("state_history", p.state_history, state_entry)?.into(),
        task_states: task_states(p.task_states)?,
        links: Links::new(AllocLinks {
            deployment: super::deployments::alloc_deployment(
                &p.deployment_id,
                p.canary,
                p.deployment_health,
            )?,
            reschedule_tracker: p
                .reschedule_tracker
                .map(reschedule_tracker)
                .transpose()
                .within("reschedule_tracker")?
                .map(Box::new),
            previous_allocation: parse_opt_id("previous_allocation", &p.previous_allocation)?,
            next_allocation: parse_opt_id("next_allocation", &p.next_allocation)?,
            follow_up_eval_id: parse_opt_id("follow_up_eval_id", &p.follow_up_eval_id)?,
            preempted_by: parse_opt_id("preempted_by", &p.preempted_by)?,
            preempted_allocations: each("preempted_allocations", p.preempted_allocations, |id| {
                parse_id("", &id)
            })?,
            migrate: p.migrate,
        }),
        resources: required_resources("resources", p.resources)?,
        ports: each("ports", p.ports, super::network::allocated_port)?.into(),
        metrics: placement_metric(required("metrics", p.metrics)?),
        create_index: p.create_index,
        modify_index: p.modify_index,
        alloc_modify_index: p.alloc_modify_index,
        create_time: Timestamp::from_millis(p.create_time_unix_ms),
        modify_time: Timestamp::from_millis(p.modify_time_unix_ms),
    })
}

super::rooted_try_from!(pb::Allocation => Allocation, "alloc", allocation);

pub(crate) fn alloc_transition(p: pb::AllocTransition) -> Result<AllocTransition> {
    Ok(AllocTransition {
        alloc_id: parse_id("alloc_id", &p.alloc_id)?,
        desired_status: DesiredStatus::from_wire("desired_status", p.desired_status)?,
        desired_description: p.desired_description,
        client_status: p
            .client_status
            .map(|v| ClientStatus::from_wire("client_status", v))
            .transpose()?,
        follow_up_eval_id: parse_opt_id("follow_up_eval_id", &p.follow_up_eval_id)?,
        preempted_by: parse_opt_id("preempted_by", &p.preempted_by)?,
    })
}

super::rooted_try_from!(pb::AllocTransition => AllocTransition, "transition", alloc_transition);

fn desired_updates(p: pb::DesiredUpdates) -> DesiredUpdates {
    DesiredUpdates {
        canary: p.canary,
        place: p.place,
        stop: p.stop,
        migrate: p.migrate,
        in_place_update: p.in_place_update,
        destructive_update: p.destructive_update,
        ignore: p.ignore,
        preemptions: p.preemptions,
        reconnect: p.reconnect,
        disconnect: p.disconnect,
        reschedule_now: p.reschedule_now,
        reschedule_later: p.reschedule_later,
    }
}

impl From<pb::DesiredUpdates> for DesiredUpdates {
    fn from(p: pb::DesiredUpdates) -> Self {
        desired_updates(p)
    }
}

impl From<pb::PlanAnnotations> for PlanAnnotations {
    fn from(p: pb::PlanAnnotations) -> Self {
        PlanAnnotations {
            desired_tg_updates: p
                .desired_tg_updates
                .into_iter()
                .map(|(g, d)| (g, desired_updates(d)))
                .collect(),
        }
    }
}
