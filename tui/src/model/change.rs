//! What arrives from the servers, decoded into the console's own types. Decoding happens
//! in the background tasks, so the pure state only ever sees well-formed values; anything
//! malformed is reported as a [`DecodeError`] and skipped, never a panic.

use super::alloc_name::AllocName;
use super::alloc_wire::decode_alloc;
use super::allocs::AllocTable;
use super::rows::{AllocRow, BlockedKindLabel, BlockedRow, EventRow, JobRow, WorkerRow};
use super::rows::{SchedulingStats, WorkerStatusLabel, workload_label};
use drover_core::{AllocId, Allocation, EvalId, Evaluation, Job, JobKey, Node, NodeId, Timestamp};
use drover_core::{Deployment, JobStatus, JobType, ServiceRegistration};
use drover_proto::WireEnum;
use drover_proto::v1 as pb;
use std::collections::BTreeMap;
use std::time::Duration;

/// A message from the servers that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error(transparent)]
    Convert(#[from] drover_proto::ConvertError),
    #[error("event {event_type} at index {index} has no {expected} payload")]
    Payload {
        event_type: &'static str,
        index: u64,
        expected: &'static str,
    },
}

/// One change to the console's copy of the cluster.
#[derive(Clone, Debug)]
pub enum Change {
    Node(Box<Node>),
    NodeRemoved(NodeId),
    Alloc(AllocRow),
    AllocRemoved(AllocId),
    Eval(Box<Evaluation>),
    EvalRemoved(EvalId),
    Job(JobRow),
    JobRemoved(JobKey),
    Service(Box<ServiceRegistration>),
    /// A registration deregistered, by id.
    ServiceRemoved(String),
    /// A deployment created, or its status or counts changed.
    Deployment(Box<Deployment>),
    /// The scheduler configuration changed: whether the eval broker is paused, which the
    /// header shows at once rather than at the next poll of the broker.
    SchedulerConfig {
        pause_eval_broker: bool,
    },
    /// Something the console shows only in the event log.
    LogOnly,
}

/// Everything the read RPCs answered when the console (re)connected: the base the event
/// stream is then applied to.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub nodes: Vec<Node>,
    /// Built, sums included, by the task that read it, so taking it over costs the
    /// console's thread nothing.
    pub allocs: AllocTable,
    pub jobs: Vec<JobRow>,
    pub evals: Vec<Evaluation>,
    /// Every service registration (empty from a server without a catalog, or when the
    /// token may not read it).
    pub services: Vec<ServiceRegistration>,
    /// Every deployment (empty from a server without deployments, or when the token may
    /// not read them).
    pub deployments: Vec<Deployment>,
    /// The lowest index the reads answered at: events from here on may already be in the
    /// snapshot, which is harmless because applying them is idempotent.
    pub index: u64,
    /// The server's node health periods; `None` from a server that does not send them.
    pub health_periods: Option<HealthPeriods>,
}

/// The periods a server counts lost and flaky nodes down by: with them the console shows
/// the server's own countdown, also for nodes that change health after the list was read.
pub use drover_core::node_health::HealthPeriods;

/// The server's periods as the node list sends them.
pub fn health_periods(p: &pb::HealthPeriods) -> HealthPeriods {
    HealthPeriods {
        lost_grace: Duration::from_millis(p.lost_grace_ms),
        flaky_cool_down: Duration::from_millis(p.flaky_cool_down_ms),
    }
}

/// Who leads and how far the log has come, as the server the console talks to sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterInfo {
    pub server_id: String,
    pub leader_id: String,
    pub role: &'static str,
    pub term: u64,
    pub applied_index: u64,
    /// Every server of the cluster (empty when the token may not list them).
    pub servers: Vec<ServerState>,
}

/// One server as the membership lists it (from the server the console talks to).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerState {
    pub id: String,
    /// Its configured name; its id when it did not say.
    pub name: String,
    pub role: &'static str,
    /// Whether the server the console talks to reaches it.
    pub reachable: bool,
    /// The address the membership lists it at.
    pub address: String,
    pub version: String,
}

impl ServerState {
    pub fn from_member(m: &pb::Member) -> Self {
        ServerState {
            id: m.id.clone(),
            name: if m.name.is_empty() {
                m.id.clone()
            } else {
                m.name.clone()
            },
            role: role_label(m.role),
            reachable: m.status != pb::MemberStatus::Unreachable as i32,
            address: m.address.clone(),
            version: m.version.clone(),
        }
    }
}

/// What one server says of itself when the console asks it directly (it can only ask
/// the servers it was given): its term, how far it has applied the log, and whom it
/// takes for the leader. Servers disagree during an election; this shows where.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerView {
    pub server_id: String,
    /// The URL the console asked it at.
    pub url: String,
    pub role: &'static str,
    pub term: u64,
    pub applied_index: u64,
    /// Empty while it knows none.
    pub leader_id: String,
}

impl ServerView {
    pub fn from_status(url: &str, s: &pb::ClusterStatusResponse) -> Self {
        ServerView {
            server_id: s.server_id.clone(),
            url: url.to_owned(),
            role: role_label(s.role),
            term: s.term,
            applied_index: s.applied_index,
            leader_id: s.leader_id.clone(),
        }
    }
}

/// One allocation in full, for the allocation detail.
#[derive(Clone, Debug)]
pub struct AllocDetail {
    pub alloc: Allocation,
}

pub fn alloc_row(a: &Allocation) -> AllocRow {
    AllocRow {
        id: a.id,
        name: AllocName::new(&a.name, a.job_id.as_str(), &a.task_group),
        job: JobKey {
            namespace: a.namespace.clone(),
            id: a.job_id.clone(),
        },
        task_group: a.task_group.as_str().into(),
        node_id: a.node_id,
        desired: a.desired_status,
        client: a.client_status,
        resources: a.resources,
        create_time: a.create_time,
        modify_index: a.modify_index,
        deployment: a
            .links
            .get()
            .deployment
            .as_ref()
            .map(super::rows::DeploymentPart::of),
    }
}

/// A node as the console keeps it: without its attributes and meta, which no view shows
/// and which are most of a real node's size (dozens of fingerprinted attributes each).
pub fn decode_node(mut p: pb::Node) -> Result<Node, DecodeError> {
    p.attributes = Default::default();
    p.meta = Default::default();
    Ok(Node::try_from(p)?)
}

pub fn job_row(j: &Job) -> JobRow {
    JobRow {
        key: JobKey::new(&j.namespace, j.id.as_str()),
        job_type: j.job_type,
        priority: j.priority,
        status: j.status,
        stop: j.stop,
        version: j.version,
        parent_id: j.parent_id.as_ref().map(ToString::to_string),
        submit_time: j.submit_time,
        modify_index: j.modify_index,
    }
}

pub fn decode_job_entry(p: pb::JobListEntry) -> Result<JobRow, DecodeError> {
    Ok(JobRow {
        key: drover_proto::convert::job_key(&p.namespace, &p.id)?,
        job_type: JobType::from_wire("job_type", p.job_type)?,
        priority: u8::try_from(p.priority).unwrap_or(u8::MAX),
        status: JobStatus::from_wire("status", p.status)?,
        stop: p.stop,
        version: p.version,
        parent_id: (!p.parent_id.is_empty()).then_some(p.parent_id),
        submit_time: Timestamp::from_millis(p.submit_time_unix_ms),
        modify_index: p.modify_index,
    })
}

pub fn decode_worker(p: pb::WorkerInfo) -> WorkerRow {
    WorkerRow {
        schedulers: p
            .enabled_schedulers
            .iter()
            .filter_map(|v| drover_core::SchedulerType::from_wire("", *v).ok())
            .map(|t| t.as_str().to_owned())
            .collect(),
        status: WorkerStatusLabel::from_wire(p.status),
        workload: workload_label(p.workload_status),
        started: Timestamp::from_millis(p.started_unix_ms),
        id: p.id,
        server_id: p.server_id,
    }
}

pub fn decode_blocked(p: pb::BlockedEval) -> BlockedRow {
    let job = p.job.unwrap_or_default();
    BlockedRow {
        job: JobKey::new(
            if job.namespace.is_empty() {
                drover_core::DEFAULT_NAMESPACE
            } else {
                &job.namespace
            },
            &job.id,
        ),
        kind: BlockedKindLabel::from_wire(p.kind),
        node_id: p.node_id,
        class_eligibility: p.class_eligibility.into_iter().collect::<BTreeMap<_, _>>(),
        escaped: p.escaped,
        triggered_by: drover_core::TriggeredBy::from_wire("", p.triggered_by)
            .map(|t| t.as_str().to_owned())
            .unwrap_or_else(|_| "?".to_owned()),
        blocked_since: Timestamp::from_millis(p.blocked_since_unix_ms),
        unblocked_by: p.unblocked_by,
        eval_id: p.eval_id,
    }
}

pub fn scheduling_stats(
    broker: Option<pb::BrokerStatsResponse>,
    plans: Option<pb::PlanQueueStatsResponse>,
) -> SchedulingStats {
    let mut s = SchedulingStats::default();
    if let Some(b) = broker {
        let total = b.stats.and_then(|s| s.total).unwrap_or_default();
        s.ready = total.ready;
        s.unacked = total.unacked;
        s.pending = total.pending;
        s.waiting = total.waiting;
        s.failed = total.failed;
        s.blocked = b.blocked;
        s.broker_enabled = b.enabled;
        s.broker_paused = b.paused;
    }
    if let Some(p) = plans.and_then(|p| p.stats) {
        s.plan_depth = p.depth;
        s.plan_peak = p.peak_depth;
        s.plans_enqueued = p.enqueued;
        s.plans_dequeued = p.dequeued;
    }
    s
}

pub fn role_label(value: i32) -> &'static str {
    match pb::RaftRole::try_from(value) {
        Ok(pb::RaftRole::Leader) => "leader",
        Ok(pb::RaftRole::Follower) => "follower",
        Ok(pb::RaftRole::Candidate) => "candidate",
        Ok(pb::RaftRole::Learner) => "learner",
        Ok(pb::RaftRole::Shutdown) => "shutdown",
        Ok(pb::RaftRole::Unspecified) | Err(_) => "?",
    }
}

fn topic_label(value: i32) -> &'static str {
    match pb::Topic::try_from(value) {
        Ok(pb::Topic::Job) => "job",
        Ok(pb::Topic::Node) => "node",
        Ok(pb::Topic::Evaluation) => "evaluation",
        Ok(pb::Topic::Allocation) => "allocation",
        Ok(pb::Topic::Operator) => "operator",
        Ok(pb::Topic::Service) => "service",
        Ok(pb::Topic::Deployment) => "deployment",
        Ok(pb::Topic::Unspecified) | Err(_) => "?",
    }
}

fn event_type_label(value: i32) -> &'static str {
    use pb::EventType as E;
    match E::try_from(value) {
        Ok(E::JobRegistered) => "job-registered",
        Ok(E::JobDeregistered) => "job-deregistered",
        Ok(E::JobStatusChanged) => "job-status",
        Ok(E::NodeRegistration) => "node-registration",
        Ok(E::NodeDeregistration) => "node-deregistration",
        Ok(E::NodeStatus) => "node-status",
        Ok(E::NodeEligibility) => "node-eligibility",
        Ok(E::NodeDrain) => "node-drain",
        Ok(E::NodeHealth) => "node-health",
        Ok(E::NodeSnapshot) => "node-snapshot",
        Ok(E::EvaluationUpdated) => "eval-updated",
        Ok(E::EvaluationDeleted) => "eval-deleted",
        Ok(E::AllocationUpdated) => "alloc-updated",
        Ok(E::AllocationClientUpdated) => "alloc-client",
        Ok(E::AllocationDeleted) => "alloc-deleted",
        Ok(E::PlanResult) => "plan-result",
        Ok(E::SchedulerConfigUpdated) => "scheduler-config",
        Ok(E::ServiceRegistered) => "service-registered",
        Ok(E::ServiceDeregistered) => "service-deregistered",
        Ok(E::DeploymentStatusUpdate) => "deployment-status",
        Ok(E::DeploymentPromotion) => "deployment-promotion",
        Ok(E::DeploymentAllocHealth) => "deployment-health",
        Ok(E::Unspecified) | Err(_) => "?",
    }
}

/// Decodes one event, received at `received`, into the change it makes and the line the
/// event log shows. The line's `seq` is left 0 for the state to number.
pub fn decode_event(e: pb::Event, received: Timestamp) -> Result<(Change, EventRow), DecodeError> {
    use pb::event::Payload;
    let payload = e.payload.clone().map(std::sync::Arc::new);
    let event_type = event_type_label(e.event_type);
    let missing = |expected| DecodeError::Payload {
        event_type,
        index: e.index,
        expected,
    };
    let (change, summary) = match e.payload {
        Some(Payload::Node(n)) => {
            let node = decode_node(n)?;
            let summary = format!(
                "{} {} {}",
                node.name,
                node.status.as_str(),
                node.health.as_str()
            );
            (Change::Node(Box::new(node)), summary)
        }
        Some(Payload::NodeId(id)) => (
            Change::NodeRemoved(drover_proto::convert::parse_id("node_id", &id)?),
            "deleted".to_owned(),
        ),
        Some(Payload::Allocation(a)) => {
            let row = decode_alloc(a)?;
            let summary = format!(
                "{} {}/{}",
                row.name(),
                row.desired.as_str(),
                row.client.as_str()
            );
            (Change::Alloc(row), summary)
        }
        Some(Payload::AllocId(id)) => (
            Change::AllocRemoved(drover_proto::convert::parse_id("alloc_id", &id)?),
            "deleted".to_owned(),
        ),
        Some(Payload::Evaluation(ev)) => {
            let eval = Evaluation::try_from(ev)?;
            let summary = format!(
                "{} {} {}",
                eval.job_id,
                eval.triggered_by.as_str(),
                eval.status.as_str()
            );
            (Change::Eval(Box::new(eval)), summary)
        }
        Some(Payload::EvalId(id)) => (
            Change::EvalRemoved(drover_proto::convert::parse_id("eval_id", &id)?),
            "deleted".to_owned(),
        ),
        Some(Payload::Job(j)) => {
            let job = Job::try_from(j)?;
            let summary = format!(
                "{} v{} {}",
                job.id,
                job.version,
                super::rows::job_status_text(job.status, job.stop)
            );
            (Change::Job(job_row(&job)), summary)
        }
        Some(Payload::JobRef(r)) => (
            Change::JobRemoved(JobKey::try_from(r)?),
            "purged".to_owned(),
        ),
        Some(Payload::SchedulerConfig(c)) => (
            Change::SchedulerConfig {
                pause_eval_broker: c.pause_eval_broker,
            },
            format!(
                "pause_eval_broker={} reject_job_registration={}",
                c.pause_eval_broker, c.reject_job_registration
            ),
        ),
        Some(Payload::ServiceRegistration(r)) => {
            let r = drover_proto::convert::service_registration(r)?;
            let address = r.address.map_or_else(|| "-".to_owned(), |a| a.to_string());
            let summary = format!(
                "{} {address}:{} {} alloc {}",
                r.service_name,
                r.port,
                r.health.as_str(),
                r.alloc_id
            );
            let change = if e.event_type == pb::EventType::ServiceDeregistered as i32 {
                Change::ServiceRemoved(r.id)
            } else {
                Change::Service(Box::new(r))
            };
            (change, summary)
        }
        Some(Payload::Deployment(d)) => {
            let d = Deployment::try_from(d)?;
            let summary = format!(
                "{} v{} {}: {}",
                d.job_id,
                d.job_version,
                d.status.as_str(),
                d.description
            );
            (Change::Deployment(Box::new(d)), summary)
        }
        None => return Err(missing("any")),
    };
    let row = EventRow {
        seq: 0,
        index: e.index,
        topic: topic_label(e.topic),
        event_type,
        key: e.key,
        summary,
        received,
        payload,
    };
    Ok((change, row))
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::mock;

    #[test]
    fn nodes_are_kept_without_attributes_and_meta() {
        let mut node = mock::node(1);
        node.meta.insert("rack".into(), "r1".into());
        let kept = decode_node(pb::Node::from(&node)).expect("a well-formed node");
        assert!(kept.attributes.is_empty() && kept.meta.is_empty());
        node.attributes.clear();
        node.meta.clear();
        // The secret never travels.
        node.secret_id.clear();
        assert_eq!(kept, node);
    }
}
