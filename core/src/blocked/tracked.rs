//! What the tracker remembers about one blocked eval, and how it is classified.

use crate::{EvalId, Evaluation, Index, JobKey, NodeId, SchedulerType, Timestamp, TriggeredBy};
use std::collections::BTreeMap;

/// How a blocked eval waits, which decides what releases it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum BlockedKind {
    /// Its constraints were captured by node class: released by an unblock of any class it
    /// did not mark ineligible.
    Captured,
    /// A constraint escaped node classes (e.g. on `unique.*`): any class unblock may help.
    Escaped,
    /// One node's share of a system or sysbatch job: released by that node's unblock only.
    System { node: NodeId },
}

impl BlockedKind {
    /// System kind wins over escaped: a per-node eval only ever concerns its node, so the
    /// node's unblock is the precise trigger whatever its constraints looked like.
    pub fn of(eval: &Evaluation) -> Self {
        match (eval.scheduler, eval.node_id) {
            (SchedulerType::System | SchedulerType::SysBatch, Some(node)) => {
                BlockedKind::System { node }
            }
            _ if eval.escaped_computed_class => BlockedKind::Escaped,
            _ => BlockedKind::Captured,
        }
    }

    /// Whether an unblock of `class` may let an eval of this kind place more. Classes the
    /// eval never saw count as "might fit": the node that triggered the unblock may be of a
    /// class that did not exist when the scheduler ran.
    pub(super) fn released_by_class(self, eval: &Evaluation, class: &str) -> bool {
        match self {
            BlockedKind::Escaped => true,
            BlockedKind::Captured => eval.class_eligibility.get(class) != Some(&false),
            BlockedKind::System { .. } => false,
        }
    }
}

/// Where a blocked eval sits in the one-per-job rule: job-wide evals share one slot per
/// job, per-node system evals one slot per (job, node), since each is a different node's
/// share of the work and cancelling one for another would lose it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(super) enum Slot {
    Job(JobKey),
    Node(JobKey, NodeId),
}

impl Slot {
    pub(super) fn of(eval: &Evaluation, kind: BlockedKind) -> Self {
        match kind {
            BlockedKind::System { node } => Slot::Node(eval.job_key(), node),
            BlockedKind::Captured | BlockedKind::Escaped => Slot::Job(eval.job_key()),
        }
    }
}

/// The index that decides which of two blocked evals of a job is newer: the later of when
/// the eval was created and the state it was computed on.
pub(super) fn latest_index(eval: &Evaluation) -> Index {
    eval.create_index.max(eval.snapshot_index)
}

/// One blocked eval with what travels with it.
#[derive(Clone, Debug)]
pub(super) struct Tracked {
    pub(super) eval: Evaluation,
    /// The broker token of a reblocked eval still outstanding there.
    pub(super) token: Option<String>,
    pub(super) since: Timestamp,
    /// Arrival order; releases and listings are sorted by it so output never depends on
    /// hash-map iteration order.
    pub(super) seq: u64,
    pub(super) kind: BlockedKind,
}

impl Tracked {
    pub(super) fn slot(&self) -> Slot {
        Slot::of(&self.eval, self.kind)
    }

    pub(super) fn released_by_class(&self, class: &str) -> bool {
        self.kind.released_by_class(&self.eval, class)
    }

    pub(super) fn is_failed(&self) -> bool {
        self.eval.triggered_by == TriggeredBy::MaxPlanAttempts
    }

    pub(super) fn info(&self) -> BlockedEvalInfo {
        BlockedEvalInfo {
            eval_id: self.eval.id,
            job: self.eval.job_key(),
            kind: self.kind,
            class_eligibility: self.eval.class_eligibility.clone(),
            escaped: self.eval.escaped_computed_class,
            triggered_by: self.eval.triggered_by,
            snapshot_index: self.eval.snapshot_index,
            blocked_since: self.since,
            outstanding: self.token.is_some(),
            unblocked_by: self.describe_trigger(),
        }
    }

    /// A sentence for operators naming what would release this eval.
    fn describe_trigger(&self) -> String {
        let mut s = match self.kind {
            BlockedKind::System { node } => format!("node {} gains capacity", node.short()),
            BlockedKind::Escaped => {
                "a node of any class gains capacity (constraints escape node classes)".to_owned()
            }
            BlockedKind::Captured => {
                let eligible: Vec<&str> = self
                    .eval
                    .class_eligibility
                    .iter()
                    .filter(|(_, ok)| **ok)
                    .map(|(class, _)| class.as_str())
                    .collect();
                if eligible.is_empty() {
                    "a node of any new class gains capacity".to_owned()
                } else {
                    format!(
                        "a node of class {} or any new class gains capacity",
                        eligible.join(", ")
                    )
                }
            }
        };
        if self.is_failed() {
            s.push_str("; also retried by the failed-eval sweep");
        }
        s
    }
}

/// One blocked eval as operators see it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BlockedEvalInfo {
    pub eval_id: EvalId,
    pub job: JobKey,
    pub kind: BlockedKind,
    /// Node class -> whether a node of it was feasible when the eval was computed.
    pub class_eligibility: BTreeMap<String, bool>,
    pub escaped: bool,
    pub triggered_by: TriggeredBy,
    pub snapshot_index: Index,
    /// When the tracker took it (at restore: the eval's last modify time).
    pub blocked_since: Timestamp,
    /// Reblocked while still outstanding in the broker (it carries a token).
    pub outstanding: bool,
    /// What would release it, e.g. "a node of class a or any new class gains capacity".
    pub unblocked_by: String,
}
