//! A plan: what one scheduler run wants to change, and the result of applying it.
//!
//! The plan applier checks every node of a plan against the latest state and commits only
//! what fits; the scheduler retries the rest against fresher state.

use super::{
    AllocId, Allocation, ClientStatus, DesiredStatus, EvalId, Evaluation, Index, JobKey, NodeId,
};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

/// A change of an existing allocation's status decided by a scheduler: stop, evict, mark lost,
/// mark unknown (disconnected, desired stays `run`), or record a reconnect.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct AllocTransition {
    pub alloc_id: AllocId,
    pub desired_status: DesiredStatus,
    pub desired_description: String,
    /// Set when the servers decide the client status (lost, unknown, running on reconnect).
    pub client_status: Option<ClientStatus>,
    /// Eval that will act on the allocation later (disconnect window end, delayed reschedule).
    pub follow_up_eval_id: Option<EvalId>,
    /// Set on preemption: the allocation that evicted this one.
    pub preempted_by: Option<AllocId>,
}

impl AllocTransition {
    pub fn stop(alloc_id: AllocId, description: impl Into<String>) -> Self {
        Self {
            alloc_id,
            desired_status: DesiredStatus::Stop,
            desired_description: description.into(),
            client_status: None,
            follow_up_eval_id: None,
            preempted_by: None,
        }
    }

    /// Whether this only stops the allocation, marks it lost/unknown, or records the follow-up
    /// eval that will act on it: allowed on nodes that are not ready (a down node's
    /// allocations must still be marked lost, or told when they will be).
    pub fn is_stop_or_mark(&self) -> bool {
        self.desired_status != DesiredStatus::Run
            || matches!(
                self.client_status,
                Some(ClientStatus::Lost | ClientStatus::Unknown)
            )
            || (self.client_status.is_none() && self.follow_up_eval_id.is_some())
    }
}

/// Desired changes per group, for dry-run plans (`job plan`).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct DesiredUpdates {
    pub place: u32,
    pub stop: u32,
    pub migrate: u32,
    pub in_place_update: u32,
    pub destructive_update: u32,
    pub ignore: u32,
    pub preemptions: u32,
    pub reconnect: u32,
    pub disconnect: u32,
    pub reschedule_now: u32,
    pub reschedule_later: u32,
    /// Canaries placed for a deployment.
    pub canary: u32,
}

#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct PlanAnnotations {
    pub desired_tg_updates: BTreeMap<String, DesiredUpdates>,
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct Plan {
    pub eval_id: EvalId,
    /// The broker token of the eval, so the applier can pause its nack timer.
    pub eval_token: String,
    pub priority: u8,
    /// Commit all of it or nothing.
    pub all_at_once: bool,
    pub job: Option<JobKey>,
    /// New allocations and in-place updates, by node. Shared, so that the plan, the
    /// applier's result and the `ApplyPlan` command hold one copy of each allocation.
    pub node_allocation: BTreeMap<NodeId, Vec<Arc<Allocation>>>,
    /// Status changes of existing allocations, by node.
    pub node_update: BTreeMap<NodeId, Vec<AllocTransition>>,
    /// Allocations evicted to make room, by node.
    pub node_preemptions: BTreeMap<NodeId, Vec<AllocTransition>>,
    /// Evals to create or update together with the plan (follow-ups written on allocations).
    pub evals: Vec<Evaluation>,
    /// How the plan's eval ends if all of the plan commits: a blocked eval for what could
    /// not be placed, then the eval itself, complete. Written in the plan's own entry only
    /// when nothing is refused ([`PlanResult::closed`]), which saves the scheduler a Raft
    /// commit of its own at the end of most evals; otherwise the scheduler goes on and
    /// closes the eval with its own writes.
    ///
    /// Off the wire: a plan forwarded by another server (perhaps of another version)
    /// arrives without it, and that server's worker closes its eval itself.
    #[serde(skip)]
    pub closing: Vec<Evaluation>,
    /// The state index the plan was computed at.
    pub snapshot_index: Index,
    pub annotations: Option<PlanAnnotations>,
    /// The deployment this plan creates or changes (see `PlanApply::deployment`).
    pub deployment: Option<super::Deployment>,
    /// Older deployments of the job this plan cancels.
    pub deployment_updates: Vec<super::DeploymentStatusUpdate>,
    /// Which nodes' entries changed, and how often. Change the three per-node maps only
    /// through the plan's methods: the placement stack trusts this record to know which
    /// nodes' view of the plan it must recompute.
    #[serde(skip)]
    changes: NodeChanges,
}

/// What changed in the plan's per-node lists: a revision per node and, in order, the node of
/// every change. The placement stack keeps each node's view of the plan and reads only the
/// changes made since its last select, so revisiting a node the plan left alone costs
/// nothing, and a select costs one lookup per change rather than one per visited node.
///
/// Not part of the plan's value: ignored by equality and `Debug`, and not serialized. A
/// deserialized plan is untracked ([`Revision::Unknown`] everywhere). A clone gets its own
/// token, so a reader never mistakes one copy's record for the other's.
#[derive(Default)]
struct NodeChanges(Option<Tracked>);

struct Tracked {
    token: PlanToken,
    revisions: FxHashMap<NodeId, u32>,
    journal: Vec<NodeId>,
}

/// Tells one plan's change record from another's; see [`Plan::changed_nodes`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PlanToken(u64);

impl PlanToken {
    /// A token no other plan of this process holds. Only identity: nothing scheduled
    /// depends on its value.
    fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        PlanToken(NEXT.fetch_add(1, AtomicOrdering::Relaxed))
    }
}

impl NodeChanges {
    fn tracked() -> Self {
        NodeChanges(Some(Tracked {
            token: PlanToken::fresh(),
            revisions: FxHashMap::default(),
            journal: Vec::new(),
        }))
    }

    fn record(&mut self, node: NodeId) {
        if let Some(t) = &mut self.0 {
            let r = t.revisions.entry(node).or_insert(0);
            *r = r.wrapping_add(1);
            t.journal.push(node);
        }
    }
}

impl Clone for NodeChanges {
    fn clone(&self) -> Self {
        NodeChanges(self.0.as_ref().map(|t| Tracked {
            token: PlanToken::fresh(),
            revisions: t.revisions.clone(),
            journal: t.journal.clone(),
        }))
    }
}

impl PartialEq for NodeChanges {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for NodeChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("..")
    }
}

/// Where one node's entries in a plan stand; see [`Plan::node_revision`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Revision {
    /// The plan has never had an entry for the node.
    Untouched,
    /// The node's entries changed this many times (wrapping).
    At(u32),
    /// Not tracked (a deserialized plan): look at the maps.
    Unknown,
}

impl Plan {
    pub fn new(eval_id: EvalId, priority: u8, job: Option<JobKey>, snapshot_index: Index) -> Self {
        Self {
            eval_id,
            eval_token: String::new(),
            priority,
            all_at_once: false,
            job,
            node_allocation: BTreeMap::new(),
            node_update: BTreeMap::new(),
            node_preemptions: BTreeMap::new(),
            evals: Vec::new(),
            closing: Vec::new(),
            snapshot_index,
            annotations: None,
            deployment: None,
            deployment_updates: Vec::new(),
            changes: NodeChanges::tracked(),
        }
    }

    pub fn append_alloc(&mut self, alloc: impl Into<Arc<Allocation>>) {
        let alloc = alloc.into();
        self.changes.record(alloc.node_id);
        self.node_allocation
            .entry(alloc.node_id)
            .or_default()
            .push(alloc);
    }

    pub fn append_update(&mut self, node_id: NodeId, t: AllocTransition) {
        self.changes.record(node_id);
        self.node_update.entry(node_id).or_default().push(t);
    }

    pub fn append_preemption(&mut self, node_id: NodeId, t: AllocTransition) {
        self.changes.record(node_id);
        self.node_preemptions.entry(node_id).or_default().push(t);
    }

    /// Makes room for changes on `additional` more nodes, for a scheduler that knows how
    /// many placements it is about to make.
    pub fn reserve_nodes(&mut self, additional: usize) {
        if let Some(t) = &mut self.changes.0 {
            t.revisions.reserve(additional);
            t.journal.reserve(additional);
        }
    }

    /// Drops the status changes the plan makes to `alloc` on `node_id` (a replacement that
    /// could not be placed leaves the allocation it would replace running).
    pub fn remove_updates_of(&mut self, node_id: NodeId, alloc: AllocId) {
        if let Some(list) = self.node_update.get_mut(&node_id) {
            list.retain(|t| t.alloc_id != alloc);
            if list.is_empty() {
                self.node_update.remove(&node_id);
            }
            self.changes.record(node_id);
        }
    }

    /// How far the plan's entries for `node` have changed: equal revisions of one plan mean
    /// equal entries.
    pub fn node_revision(&self, node: &NodeId) -> Revision {
        match &self.changes.0 {
            None => Revision::Unknown,
            Some(t) => t
                .revisions
                .get(node)
                .map_or(Revision::Untouched, |r| Revision::At(*r)),
        }
    }

    /// The node of every change to the per-node lists so far, in order, with this plan's
    /// token; `None` for an untracked (deserialized) plan. A reader remembers the token and
    /// how far it read, and next time reads only what follows.
    pub fn changed_nodes(&self) -> Option<(PlanToken, &[NodeId])> {
        self.changes
            .0
            .as_ref()
            .map(|t| (t.token, t.journal.as_slice()))
    }

    /// Every node the plan touches.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        let mut ids: Vec<NodeId> = self
            .node_allocation
            .keys()
            .chain(self.node_update.keys())
            .chain(self.node_preemptions.keys())
            .copied()
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
    }

    /// A plan with nothing to commit (evals or deployment changes alone still count as
    /// something).
    pub fn is_no_op(&self) -> bool {
        self.node_allocation.values().all(Vec::is_empty)
            && self.node_update.values().all(Vec::is_empty)
            && self.node_preemptions.values().all(Vec::is_empty)
            && self.evals.is_empty()
            && self.deployment.is_none()
            && self.deployment_updates.is_empty()
    }
}

/// Per-node lists of the committed part of a plan. The plan applier's result and the
/// `ApplyPlan` command it writes share one copy (serialized as the plain map).
pub type CommittedByNode<T> = Arc<BTreeMap<NodeId, Vec<T>>>;

/// What the applier committed of a plan.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
pub struct PlanResult {
    /// The plan's own allocations (the same `Arc`s), for the nodes that committed.
    pub node_allocation: CommittedByNode<Arc<Allocation>>,
    pub node_update: CommittedByNode<AllocTransition>,
    pub node_preemptions: CommittedByNode<AllocTransition>,
    pub evals: Vec<Evaluation>,
    /// Nodes whose part of the plan was refused, with the reason.
    pub rejected_nodes: BTreeMap<NodeId, String>,
    /// Non-zero when part of the plan was refused: retry against state at least this new.
    pub refresh_index: Index,
    /// The index the committed part was written at.
    pub alloc_index: Index,
    /// The plan's [`Plan::closing`] evals were written with it: the eval is closed.
    #[serde(skip)]
    pub closed: bool,
}

impl PlanResult {
    /// Whether everything the plan asked for was committed.
    pub fn is_full_commit(&self, plan: &Plan) -> bool {
        fn count<T>(m: &BTreeMap<NodeId, Vec<T>>) -> usize {
            m.values().map(Vec::len).sum()
        }
        count(&self.node_allocation) == count(&plan.node_allocation)
            && count(&self.node_update) == count(&plan.node_update)
            && count(&self.node_preemptions) == count(&plan.node_preemptions)
    }

    pub fn is_no_op(&self) -> bool {
        self.node_allocation.is_empty()
            && self.node_update.is_empty()
            && self.node_preemptions.is_empty()
            && self.evals.is_empty()
    }
}

#[cfg(test)]
mod change_tracking_tests {
    use super::*;
    use crate::mock;

    #[test]
    fn every_change_moves_its_nodes_revision_and_is_journaled() {
        let job = mock::service_job("web", 3);
        let (n1, n2) = (mock::node_id(1), mock::node_id(2));
        let mut plan = Plan::new(mock::eval_id(1), 50, Some(job.key()), 1);
        assert_eq!(plan.node_revision(&n1), Revision::Untouched);

        plan.append_alloc(mock::alloc(1, &job, n1, 0));
        plan.append_update(n2, AllocTransition::stop(mock::alloc_id(9), "stop"));
        plan.append_preemption(n1, AllocTransition::stop(mock::alloc_id(8), "evict"));
        assert_eq!(plan.node_revision(&n1), Revision::At(2));
        assert_eq!(plan.node_revision(&n2), Revision::At(1));

        plan.remove_updates_of(n2, mock::alloc_id(9));
        assert!(plan.node_update.is_empty());
        assert_eq!(plan.node_revision(&n2), Revision::At(2));
        // Removing what is not there changes nothing.
        plan.remove_updates_of(n1, mock::alloc_id(9));
        assert_eq!(plan.node_revision(&n1), Revision::At(2));

        let (token, journal) = plan.changed_nodes().expect("a new plan is tracked");
        assert_eq!(journal, &[n1, n2, n1, n2]);
        let copy = plan.clone();
        let (copy_token, copy_journal) = copy.changed_nodes().expect("tracked");
        assert_ne!(token, copy_token, "a clone is told apart from its original");
        assert_eq!(copy_journal, journal);
        assert_eq!(copy, plan, "tracking is not part of the plan's value");
    }

    #[test]
    fn a_deserialized_plan_is_untracked() {
        let job = mock::service_job("web", 1);
        let mut plan = Plan::new(mock::eval_id(1), 50, Some(job.key()), 1);
        plan.append_alloc(mock::alloc(1, &job, mock::node_id(1), 0));
        let back: Plan = serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
        assert_eq!(back, plan);
        assert!(back.changed_nodes().is_none());
        assert_eq!(back.node_revision(&mock::node_id(1)), Revision::Unknown);
    }
}
