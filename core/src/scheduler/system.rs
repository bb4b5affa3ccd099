//! The system and sysbatch scheduler: one allocation of each group on every eligible node.
//!
//! The per-node diff of each live allocation is the node reconciler's
//! ([`super::reconcile_node`]): keep, update (in place, or replaced on the same node
//! `max_parallel` at a time), stop, lost, or unknown while the node is disconnected inside
//! the group's window (with a follow-up eval at its end) and continued when it is back.
//! Eligible nodes that match the job and hold no live allocation of a group get one; nodes
//! filtered out by the job's constraints are simply not this job's, never placement
//! failures. A sysbatch allocation that finished on a node is never run there again for
//! the same job version.

use super::generic::max_attempts;
use super::reconcile::{Placement, PlacementKind, describe, disconnect_follow_ups, update};
use super::reconcile_node::{self, NodeBucket, NodeFacts};
use super::stack::{CandidateLimit, SelectOptions, Stack};
use super::{Env, Planner, SchedulerError, feasible, util};
use crate::state::StateSnapshot;
use crate::types::*;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Above this many nodes without room, one job-wide escaped blocked eval replaces the
/// per-node ones, so a full cluster cannot flood the blocked set.
pub const MAX_PER_NODE_BLOCKED: usize = 16;

const NODE_LEFT: &str = "alloc not needed as node no longer matches the job";
const GROUP_LEFT: &str = "alloc not needed as its group left the job";
const DRAINING: &str = "alloc stopped as its node is draining";
const DUPLICATE: &str = "alloc not needed: another runs on this node";

#[derive(Debug)]
pub struct SystemScheduler {
    job_type: JobType,
    env: Env,
}

#[derive(Default)]
struct Pass {
    plan: Option<Plan>,
    failures: BTreeMap<String, AllocMetric>,
    queued: BTreeMap<String, u32>,
    failed_nodes: BTreeSet<NodeId>,
}

impl Pass {
    /// Whether the eval's unplaced work is blocked per node: a fresh eval with few failed
    /// nodes. Otherwise job-wide (escaped: any capacity change retries it), or as it is
    /// when the eval was itself a blocked one.
    fn blocks_per_node(&self, eval: &Evaluation) -> bool {
        eval.status != EvalStatus::Blocked
            && !self.failed_nodes.is_empty()
            && self.failed_nodes.len() <= MAX_PER_NODE_BLOCKED
    }

    /// How the eval closes: without a blocked eval of its own when the failures were
    /// blocked per node, else with one job-wide escaped blocked eval.
    fn finish(&self, per_node: bool) -> util::Finish {
        util::Finish {
            failures: self.failures.clone(),
            queued: self.queued.clone(),
            block: (!per_node).then(|| (BTreeMap::new(), true)),
        }
    }
}

impl util::PlannedPass for Pass {
    fn take_plan(&mut self) -> Option<Plan> {
        self.plan.take()
    }

    /// Per-node blocked evals are written before the eval closes, so only a job-wide
    /// closing rides with the plan.
    fn finish(&self, eval: &Evaluation) -> Option<util::Finish> {
        (!self.blocks_per_node(eval)).then(|| Pass::finish(self, false))
    }
}

impl SystemScheduler {
    pub fn new(job_type: JobType, env: Env) -> Self {
        Self { job_type, env }
    }

    pub fn process(
        &mut self,
        eval: &Evaluation,
        snapshot: StateSnapshot,
        planner: &mut dyn Planner,
    ) -> Result<(), SchedulerError> {
        let mut rng = self.env.rng_for(eval);
        let settled = util::submit_until_settled(
            eval,
            snapshot,
            max_attempts(self.job_type),
            self.env,
            &mut rng,
            planner,
            |state, rng| self.compute(state, eval, rng),
        )?;
        let Some((pass, state)) = settled else {
            return Ok(());
        };
        let per_node = pass.blocks_per_node(eval);
        if per_node {
            self.block_per_node(eval, &state, &pass, &mut rng, planner)?;
        }
        util::finish_eval(
            eval,
            &state,
            pass.finish(per_node),
            self.env,
            &mut rng,
            planner,
        )
    }

    /// System evals are blocked per node, so that node's capacity change releases exactly
    /// its own eval.
    fn block_per_node(
        &self,
        eval: &Evaluation,
        state: &StateSnapshot,
        pass: &Pass,
        rng: &mut ChaCha8Rng,
        planner: &mut dyn Planner,
    ) -> Result<(), SchedulerError> {
        if pass.failed_nodes.is_empty() || pass.failed_nodes.len() > MAX_PER_NODE_BLOCKED {
            return Ok(());
        }
        for node in &pass.failed_nodes {
            let mut b = eval.clone();
            b.id = EvalId::from_bytes(rand::Rng::random(rng));
            b.node_id = Some(*node);
            b.triggered_by = TriggeredBy::QueuedAllocs;
            b.status = EvalStatus::Blocked;
            b.status_description = format!("no room for the job on node {node}");
            b.previous_eval = Some(eval.id);
            b.failed_tg_allocs = pass.failures.clone();
            b.snapshot_index = state.latest_index();
            b.wait = None;
            b.wait_until = None;
            b.create_time = self.env.now;
            b.modify_time = self.env.now;
            planner.create_eval(b)?;
        }
        Ok(())
    }

    fn compute<'s>(
        &self,
        state: &'s StateSnapshot,
        eval: &Evaluation,
        rng: &mut ChaCha8Rng,
    ) -> Pass {
        let key = eval.job_key();
        let mut plan = Plan::new(
            eval.id,
            eval.priority,
            Some(key.clone()),
            state.latest_index(),
        );
        let mut pass = Pass::default();
        let mut desired: BTreeMap<String, DesiredUpdates> = BTreeMap::new();
        let allocs: Vec<Arc<Allocation>> = state.allocs_by_job(&key).cloned().collect();
        let job = state.job(&key).filter(|j| !j.stop);
        let Some(job) = job else {
            for a in allocs.iter().filter(|a| is_live(a)) {
                plan.append_update(a.node_id, AllocTransition::stop(a.id, describe::STOPPED));
                desired.entry(a.task_group.to_string()).or_default().stop += 1;
            }
            plan.annotations = Some(PlanAnnotations {
                desired_tg_updates: desired,
            });
            pass.plan = Some(plan);
            return pass;
        };
        let (nodes, by_dc) = feasible::ready_nodes_in_dcs(state, job);
        let node_match = feasible::NodeMatch::new(job);
        // Per (group, node): what is there now.
        let mut live: BTreeMap<(&str, NodeId), Vec<Arc<Allocation>>> = BTreeMap::new();
        let mut finished: BTreeSet<(&str, NodeId)> = BTreeSet::new();
        for a in &allocs {
            if job.group(&a.task_group).is_none() {
                if is_live(a) {
                    plan.append_update(a.node_id, AllocTransition::stop(a.id, GROUP_LEFT));
                    desired.entry(a.task_group.to_string()).or_default().stop += 1;
                }
                continue;
            }
            if is_live(a) {
                live.entry((a.task_group.as_str(), a.node_id))
                    .or_default()
                    .push(a.clone());
            } else if self.job_type == JobType::SysBatch
                && a.job_version == job.version
                && a.desired_status == DesiredStatus::Run
                && matches!(
                    a.client_status,
                    ClientStatus::Complete | ClientStatus::Failed
                )
            {
                finished.insert((a.task_group.as_str(), a.node_id));
            }
        }
        let mut to_place: Vec<(&'s Arc<Node>, &TaskGroup, Option<Arc<Allocation>>)> = Vec::new();
        // Allocations to mark unknown, with the end of their disconnect window.
        let mut unknown: Vec<(Arc<Allocation>, Timestamp)> = Vec::new();
        for group in &job.groups {
            let d = desired.entry(group.name.clone()).or_default();
            let mut stale = Vec::new();
            // Existing allocations: keep, stop, or mark stale.
            for ((g, node_id), list) in
                live.range((group.name.as_str(), NodeId::MIN)..=(group.name.as_str(), NodeId::MAX))
            {
                debug_assert_eq!(*g, group.name);
                let mut list = list.clone();
                list.sort_by_key(|a| (a.client_status != ClientStatus::Running, a.create_index));
                for extra in list.split_off(1.min(list.len())) {
                    plan.append_update(*node_id, AllocTransition::stop(extra.id, DUPLICATE));
                    d.stop += 1;
                }
                let Some(a) = list.pop() else { continue };
                let node = state.node(node_id).map(|n| &**n);
                let facts = NodeFacts {
                    node,
                    matches_job: node.is_some_and(|n| node_match.matches(n, &group.name)),
                    job_version: job.version,
                    now: self.env.now,
                    eval: eval.id,
                };
                match reconcile_node::bucket(&a, group, facts) {
                    NodeBucket::Ignore => d.ignore += 1,
                    NodeBucket::Update => stale.push(a),
                    NodeBucket::Migrate => {
                        plan.append_update(*node_id, AllocTransition::stop(a.id, DRAINING));
                        d.migrate += 1;
                    }
                    NodeBucket::Stop => {
                        plan.append_update(*node_id, AllocTransition::stop(a.id, NODE_LEFT));
                        d.stop += 1;
                    }
                    NodeBucket::Lost => {
                        let mut t = AllocTransition::stop(a.id, describe::LOST);
                        t.client_status = Some(ClientStatus::Lost);
                        plan.append_update(*node_id, t);
                        d.stop += 1;
                    }
                    NodeBucket::Disconnecting { due } => {
                        unknown.push((a, due));
                        d.disconnect += 1;
                    }
                    NodeBucket::Reconnecting => {
                        plan.append_update(
                            *node_id,
                            mark(&a, describe::RECONNECTED, a.client_status, None),
                        );
                        d.reconnect += 1;
                    }
                }
            }
            self.update_stale(state, job, group, stale, &mut plan, &mut to_place, d, rng);
            // Eligible nodes that suit the group and hold nothing of it: place. A node its
            // constraints filter out is not this group's, so it is no placement failure.
            for node in &nodes {
                let key = (group.name.as_str(), node.id);
                if live.contains_key(&key)
                    || finished.contains(&key)
                    || !node_match.matches(node, &group.name)
                {
                    continue;
                }
                to_place.push((node, group, None));
            }
        }
        let (marked, follow_ups) = disconnect_follow_ups(job, eval, self.env.now, unknown, rng);
        for (a, id) in marked {
            plan.append_update(
                a.node_id,
                mark(&a, describe::UNKNOWN, ClientStatus::Unknown, Some(id)),
            );
        }
        plan.evals.extend(follow_ups);
        let preemption = state.scheduler_config().preemption;
        let allow_preemption = match self.job_type {
            JobType::SysBatch => preemption.sysbatch,
            _ => preemption.system,
        };
        plan.reserve_nodes(to_place.len());
        let mut stack = Stack::new(state, job, CandidateLimit::All);
        // Each select sees one node; failures report the datacenters' counts instead (set
        // here once, so the per-node `set_nodes` does not recount them).
        stack.set_nodes_available(by_dc.clone());
        // Every system allocation of a group has the same name: formatted once per group.
        let names: BTreeMap<&str, compact_str::CompactString> = job
            .groups
            .iter()
            .map(|g| {
                let name = Allocation::name_for(job.id.as_str(), &g.name, 0);
                (g.name.as_str(), name)
            })
            .collect();
        for (node, group, previous) in to_place {
            let node_id = node.id;
            stack.set_nodes(vec![node], rng);
            let kind = if previous.is_some() {
                PlacementKind::Destructive
            } else {
                PlacementKind::New
            };
            let p = Placement {
                group: group.name.clone(),
                name: names
                    .get(group.name.as_str())
                    .cloned()
                    .unwrap_or_else(|| Allocation::name_for(job.id.as_str(), &group.name, 0)),
                previous,
                kind,
                deployment: None,
            };
            let opts = SelectOptions {
                penalty_nodes: BTreeSet::new(),
                preferred_nodes: Vec::new(),
                allow_preemption,
            };
            let d = util::group_entry(&mut desired, &group.name);
            util::group_entry(&mut pass.queued, &group.name);
            match stack.select(group, &plan, &opts) {
                Some(ranked) => {
                    if p.previous.is_none() {
                        d.place += 1;
                    }
                    d.preemptions += ranked.preempted.len() as u32;
                    let alloc = util::new_alloc(
                        job,
                        &key.namespace,
                        group,
                        &p,
                        eval,
                        &ranked,
                        stack.metrics(),
                        self.env.now,
                        rng,
                    );
                    util::append_with_preemptions(&mut plan, alloc, &ranked);
                }
                None => {
                    if let Some(prev) = &p.previous {
                        // Could not re-home the new version: the old one keeps running.
                        plan.remove_updates_of(prev.node_id, prev.id);
                    }
                    let mut m = stack.metrics().clone();
                    m.nodes_available = by_dc.clone();
                    let entry = pass.failures.entry(group.name.clone()).or_insert(m);
                    entry.coalesced_failures += 1;
                    *pass.queued.entry(group.name.clone()).or_default() += 1;
                    pass.failed_nodes.insert(node_id);
                }
            }
        }
        plan.annotations = Some(PlanAnnotations {
            desired_tg_updates: desired,
        });
        util::add_preemption_evals(&mut plan, state, self.env.now, rng);
        pass.plan = Some(plan);
        pass
    }

    /// Old-version allocations: in place when possible, else replaced on the same node,
    /// `max_parallel` per pass; a rolling-update eval continues after the stagger.
    #[allow(clippy::too_many_arguments)]
    fn update_stale<'s, 'j>(
        &self,
        state: &'s StateSnapshot,
        job: &Job,
        group: &'j TaskGroup,
        stale: Vec<Arc<Allocation>>,
        plan: &mut Plan,
        to_place: &mut Vec<(&'s Arc<Node>, &'j TaskGroup, Option<Arc<Allocation>>)>,
        d: &mut DesiredUpdates,
        rng: &mut ChaCha8Rng,
    ) {
        let key = job.key();
        let fits = feasible::NodeMatch::new(job);
        let mut destructive = Vec::new();
        for a in stale {
            let old = state
                .job_version(&key, a.job_version)
                .and_then(|j| j.group(&group.name).cloned());
            let node = state.node(&a.node_id);
            if update::in_place(&a, old.as_ref(), group, node.map(|n| &**n), &fits) {
                let mut updated = (*a).clone();
                updated.job_version = job.version;
                updated.resources = group.resources();
                plan.append_alloc(updated);
                d.in_place_update += 1;
            } else {
                destructive.push(a);
            }
        }
        let width = update::max_parallel(job, group) as usize;
        let budget = if width == 0 { destructive.len() } else { width };
        destructive.sort_by_key(|a| (a.node_id, a.id));
        let rest = destructive.split_off(budget.min(destructive.len()));
        for a in destructive {
            let Some(node) = state.node(&a.node_id) else {
                continue;
            };
            plan.append_update(a.node_id, AllocTransition::stop(a.id, describe::UPDATING));
            d.destructive_update += 1;
            to_place.push((node, group, Some(a)));
        }
        if !rest.is_empty() {
            d.ignore += rest.len() as u32;
            let stagger = group.update.as_ref().unwrap_or(&job.update).stagger;
            if !plan
                .evals
                .iter()
                .any(|e| e.triggered_by == TriggeredBy::RollingUpdate)
            {
                let id = EvalId::from_bytes(rand::Rng::random(rng));
                let mut e = Evaluation::new(id, job, TriggeredBy::RollingUpdate, self.env.now);
                e.wait = Some(stagger);
                plan.evals.push(e);
            }
        }
    }
}

fn is_live(a: &Allocation) -> bool {
    a.desired_status == DesiredStatus::Run && !a.client_terminal()
}

/// A transition that keeps the allocation wanted and records `client_status` in its state
/// history (unknown on a disconnect, the status it reported on a reconnect).
fn mark(
    a: &Allocation,
    why: &str,
    client_status: ClientStatus,
    follow_up: Option<EvalId>,
) -> AllocTransition {
    AllocTransition {
        alloc_id: a.id,
        desired_status: DesiredStatus::Run,
        desired_description: why.to_string(),
        client_status: Some(client_status),
        follow_up_eval_id: follow_up,
        preempted_by: None,
    }
}
