//! Blocked evaluations (leader only): evals that could not place everything, parked until
//! capacity that might help them appears.
//!
//! [`BlockedEvals`] is a pure state machine; the leader drives it and acts on what it
//! returns:
//!
//! - An eval the worker wrote as blocked goes to [`BlockedEvals::block`]; one the worker
//!   reblocked while it is still outstanding in the broker goes to [`BlockedEvals::reblock`]
//!   with its broker token.
//! - Node events map to unblocks: a node becoming ready or eligible again, being onlined, or
//!   an allocation on it finishing call [`BlockedEvals::unblock_node`] with the node's class
//!   (`Node::class_key`); a class-wide change calls [`BlockedEvals::unblock_class`].
//! - Every [`Unblocked`] handed back (and every [`BlockOutcome::Enqueue`]) is enqueued in the
//!   broker by the leader, with its token. The tracker never changes an eval's status: the
//!   status write is the leader's.
//! - Periodic calls, at the intervals in [`BlockedConfig`]: [`BlockedEvals::unblock_failed`]
//!   (every `failed_sweep_interval`, 1 min) retries evals that ran out of plan attempts, and
//!   [`BlockedEvals::prune`] (every `prune_interval`) forgets old unblocks. These are plain
//!   methods, not due times: both are unconditional sweeps, so the runtime's interval timer
//!   is all the scheduling they need.
//! - Duplicates (older blocked evals of a job that has a newer one) are drained with
//!   [`BlockedEvals::take_duplicates`]`(config.duplicate_batch)` and cancelled by the leader
//!   with [`DUPLICATE_CANCEL_REASON`], one batch per Raft write, so a burst of duplicates
//!   never floods the log. The leader drains after a block that reported a duplicate and on
//!   its periodic sweep.
//!
//! Invariants held at every method's return:
//! - at most one blocked eval per job among job-wide evals, and at most one per (job, node)
//!   among per-node system evals; of two, the one with the higher
//!   `max(create_index, snapshot_index)` stays (the later arrival on a tie);
//! - no eval is both tracked and released: every eval given to `block` ends up in exactly
//!   one of tracked, duplicates, or returned for enqueue;
//! - [`BlockedStats`] equals a recount;
//! - while disabled, nothing is tracked and every call is a no-op.

mod config;
mod outcome;
mod stats;
mod store;
mod tracked;
mod unblock_index;

#[cfg(test)]
mod tests;

pub use config::{
    BlockedConfig, DEFAULT_DUPLICATE_BATCH, DEFAULT_FAILED_SWEEP_INTERVAL, DEFAULT_PRUNE_INTERVAL,
    DEFAULT_UNBLOCK_WINDOW,
};
pub use outcome::{BlockOutcome, Unblocked};
pub use stats::BlockedStats;
pub use tracked::{BlockedEvalInfo, BlockedKind};

use crate::{EvalStatus, Evaluation, Index, JobKey, NodeId, Timestamp};
use std::collections::VecDeque;
use store::Store;
use tracked::{Slot, Tracked, latest_index};
use unblock_index::UnblockIndexes;

/// The status description the leader writes on a duplicate it cancels.
/// Why the leader cancels the blocked evals [`BlockedEvals::untrack`] drops: nothing will
/// ever unblock them, and an eval left blocked in state would be tracked again by every
/// new leader.
pub const OBSOLETE_CANCEL_REASON: &str =
    "the job was stopped or all of it placed: nothing is left to unblock";

pub const DUPLICATE_CANCEL_REASON: &str = "superseded by a newer blocked evaluation of the job";

/// The leader's tracker of blocked evals. Starts disabled: only the leader enables it.
#[derive(Debug)]
pub struct BlockedEvals {
    config: BlockedConfig,
    enabled: bool,
    store: Store,
    unblocks: UnblockIndexes,
    /// Losers of the one-per-job rule, oldest first, waiting for the leader to cancel them.
    duplicates: VecDeque<Evaluation>,
    next_seq: u64,
}

impl BlockedEvals {
    pub fn new(config: BlockedConfig) -> Self {
        Self {
            config,
            enabled: false,
            store: Store::default(),
            unblocks: UnblockIndexes::default(),
            duplicates: VecDeque::new(),
            next_seq: 0,
        }
    }

    pub fn config(&self) -> &BlockedConfig {
        &self.config
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Enabled on gaining leadership, disabled on losing it. Disabling drops everything:
    /// blocked evals, duplicates and the memory of unblocks; the next leader rebuilds from
    /// state with [`BlockedEvals::restore`].
    pub fn set_enabled(&mut self, enabled: bool) {
        if self.enabled == enabled {
            return;
        }
        self.enabled = enabled;
        if !enabled {
            self.store.clear();
            self.unblocks.clear();
            self.duplicates.clear();
        }
    }

    /// Tracks an eval the scheduler could not fully place, until an unblock may help it.
    pub fn block(&mut self, eval: Evaluation, now: Timestamp) -> BlockOutcome {
        self.process(eval, None, now)
    }

    /// Like [`BlockedEvals::block`], for an eval still outstanding in the broker under
    /// `token`; the token is handed back with the eval when it is released.
    pub fn reblock(
        &mut self,
        eval: Evaluation,
        token: impl Into<String>,
        now: Timestamp,
    ) -> BlockOutcome {
        self.process(eval, Some(token.into()), now)
    }

    /// Releases what an unblock of node class `class` at Raft `index` may help: every
    /// escaped eval, and every captured eval that did not mark `class` ineligible (including
    /// those that never saw it). Per-node system evals wait for their node.
    pub fn unblock_class(&mut self, class: &str, index: Index) -> Vec<Unblocked> {
        if !self.enabled {
            return Vec::new();
        }
        self.unblocks.record_class(class, index);
        self.store
            .take_for_class(class)
            .into_iter()
            .map(unblocked)
            .collect()
    }

    /// Releases the system evals waiting on `node`, then everything an unblock of the
    /// node's class releases (see [`BlockedEvals::unblock_class`]). `class` is the node's
    /// `Node::class_key`.
    pub fn unblock_node(&mut self, node: NodeId, class: &str, index: Index) -> Vec<Unblocked> {
        if !self.enabled {
            return Vec::new();
        }
        self.unblocks.record_node(node, index);
        let mut out: Vec<Unblocked> = self
            .store
            .take_for_node(&node)
            .into_iter()
            .map(unblocked)
            .collect();
        out.extend(self.unblock_class(class, index));
        out
    }

    /// Releases every eval blocked after running out of plan attempts
    /// (`TriggeredBy::MaxPlanAttempts`): their failure was contention, not capacity, so no
    /// unblock may ever come. The runtime calls this every `config.failed_sweep_interval`.
    pub fn unblock_failed(&mut self) -> Vec<Unblocked> {
        self.store
            .take_failed()
            .into_iter()
            .map(unblocked)
            .collect()
    }

    /// Stops tracking every blocked eval of `job` (job-wide and per-node), because the job
    /// was deregistered or purged, or one of its evals completed with nothing left blocked.
    /// Returns what was dropped; nothing is queued as a duplicate.
    pub fn untrack(&mut self, job: &JobKey) -> Vec<Evaluation> {
        self.store
            .take_job(job)
            .into_iter()
            .map(|t| t.eval)
            .collect()
    }

    /// Hands out up to `max` duplicates, oldest first, for the leader to cancel in one
    /// write. Pass `config.duplicate_batch`; call again while it returns a full batch.
    pub fn take_duplicates(&mut self, max: usize) -> Vec<Evaluation> {
        let n = max.min(self.duplicates.len());
        self.duplicates.drain(..n).collect()
    }

    /// Forgets unblocks older than `config.unblock_window` (see the invariant in
    /// `unblock_index`). The runtime calls this every `config.prune_interval`. Returns how
    /// many remembered unblock indexes were dropped.
    pub fn prune(&mut self, now: Timestamp) -> usize {
        self.unblocks.prune(now, self.config.unblock_window)
    }

    /// Rebuilds the tracker on a new leader from the evals in state: those with status
    /// `Blocked` are tracked (others are skipped), blocked since their last modify time.
    /// Duplicates among them are queued for cancellation as usual. Returns evals that must be
    /// enqueued at once (none right after enabling, as no unblock is remembered yet).
    pub fn restore(&mut self, evals: impl IntoIterator<Item = Evaluation>) -> Vec<Unblocked> {
        if !self.enabled {
            return Vec::new();
        }
        let mut evals: Vec<Evaluation> = evals
            .into_iter()
            .filter(|e| e.status == EvalStatus::Blocked)
            .collect();
        // Oldest first, so each job's newest eval arrives last and the outcome (which loses,
        // in which order duplicates queue) does not depend on the caller's order.
        evals.sort_by_key(|e| (latest_index(e), e.create_index, e.id));
        let mut enqueue = Vec::new();
        for eval in evals {
            let since = eval.modify_time;
            if let BlockOutcome::Enqueue(u) = self.process(eval, None, since) {
                enqueue.push(*u);
            }
        }
        enqueue
    }

    /// Counters, kept incrementally.
    pub fn stats(&self) -> BlockedStats {
        BlockedStats {
            duplicates: self.duplicates.len(),
            ..self.store.stats().clone()
        }
    }

    /// Every blocked eval, in the order they were blocked, for operators.
    pub fn blocked_list(&self) -> Vec<BlockedEvalInfo> {
        let mut tracked: Vec<&Tracked> = self.store.iter().collect();
        tracked.sort_by_key(|t| t.seq);
        tracked.into_iter().map(Tracked::info).collect()
    }

    fn process(
        &mut self,
        eval: Evaluation,
        token: Option<String>,
        mut since: Timestamp,
    ) -> BlockOutcome {
        if !self.enabled {
            return BlockOutcome::Disabled;
        }
        // The same eval again (a reblock of one still tracked) replaces itself: it is not its
        // own duplicate. It keeps the time it first blocked.
        if let Some(old) = self.store.remove(&eval.id) {
            since = since.min(old.since);
        }

        let kind = BlockedKind::of(&eval);
        let slot = Slot::of(&eval, kind);
        let mut superseded = None;
        if let Some(existing) = self.store.in_slot(&slot) {
            if latest_index(&existing.eval) > latest_index(&eval) {
                let kept = existing.eval.id;
                self.duplicates.push_back(eval);
                return BlockOutcome::Duplicate { kept };
            }
            let existing_id = existing.eval.id;
            if let Some(old) = self.store.remove(&existing_id) {
                superseded = Some(existing_id);
                self.duplicates.push_back(old.eval);
            }
        }

        if self.missed_unblock(&eval, kind) {
            return BlockOutcome::Enqueue(Box::new(Unblocked { eval, token }));
        }

        let seq = self.next_seq;
        self.next_seq += 1;
        self.store.insert(Tracked {
            eval,
            token,
            since,
            seq,
            kind,
        });
        BlockOutcome::Blocked { superseded }
    }

    /// Whether an unblock that would have released `eval` happened after its snapshot.
    fn missed_unblock(&self, eval: &Evaluation, kind: BlockedKind) -> bool {
        let newer = |index: Index| index > eval.snapshot_index;
        match kind {
            BlockedKind::System { node } => self.unblocks.node(&node).is_some_and(newer),
            BlockedKind::Escaped => self.unblocks.any_class().is_some_and(newer),
            BlockedKind::Captured => self
                .unblocks
                .classes()
                .any(|(class, index)| newer(index) && kind.released_by_class(eval, class)),
        }
    }
}

impl Default for BlockedEvals {
    fn default() -> Self {
        Self::new(BlockedConfig::default())
    }
}

fn unblocked(t: Tracked) -> Unblocked {
    Unblocked {
        eval: t.eval,
        token: t.token,
    }
}
