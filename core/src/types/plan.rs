//! A plan: what one scheduler run wants to change, and the result of applying it.
//!
//! The plan applier checks every node of a plan against the latest state and commits only
//! what fits; the scheduler retries the rest against fresher state.

use super::{
    AllocId, Allocation, ClientStatus, DesiredStatus, EvalId, Evaluation, Index, JobKey, NodeId,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

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
    /// The state index the plan was computed at.
    pub snapshot_index: Index,
    pub annotations: Option<PlanAnnotations>,
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
            snapshot_index,
            annotations: None,
        }
    }

    pub fn append_alloc(&mut self, alloc: impl Into<Arc<Allocation>>) {
        let alloc = alloc.into();
        self.node_allocation
            .entry(alloc.node_id)
            .or_default()
            .push(alloc);
    }

    pub fn append_update(&mut self, node_id: NodeId, t: AllocTransition) {
        self.node_update.entry(node_id).or_default().push(t);
    }

    pub fn append_preemption(&mut self, node_id: NodeId, t: AllocTransition) {
        self.node_preemptions.entry(node_id).or_default().push(t);
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

    /// A plan with nothing to commit (evals alone still count as something).
    pub fn is_no_op(&self) -> bool {
        self.node_allocation.values().all(Vec::is_empty)
            && self.node_update.values().all(Vec::is_empty)
            && self.node_preemptions.values().all(Vec::is_empty)
            && self.evals.is_empty()
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
