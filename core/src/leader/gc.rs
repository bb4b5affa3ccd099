//! Garbage collection: terminal evals and allocations untouched for longer than the
//! threshold are deleted, in bounded `EvalDelete` batches.
//!
//! An allocation is garbage once it is terminal on both sides (the servers want it stopped
//! or the client finished it, and the client no longer runs it). An eval is garbage once it
//! is terminal and every allocation it created is garbage too, so an allocation never
//! outlives the eval it points at.

use crate::fsm::Command;
use crate::state::StateSnapshot;
use crate::types::{AllocId, Allocation, EvalId, Timestamp};
use std::time::Duration;

/// Garbage collection of terminal evals and allocations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcConfig {
    /// How often the leader looks for garbage.
    pub interval: Duration,
    /// Terminal evals and allocations untouched for longer than this are deleted.
    pub threshold: Duration,
    /// At most this many ids per delete entry.
    pub batch: usize,
}

impl Default for GcConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(5 * 60),
            threshold: Duration::from_secs(60 * 60),
            batch: 1_000,
        }
    }
}

fn alloc_is_garbage(a: &Allocation, cutoff: Timestamp) -> bool {
    a.is_terminal() && a.client_terminal() && a.modify_time <= cutoff
}

/// The delete commands for everything past the threshold at `now`.
pub fn collect_garbage(snap: &StateSnapshot, now: Timestamp, config: &GcConfig) -> Vec<Command> {
    let cutoff = now.saturating_sub(config.threshold);
    let allocs: Vec<AllocId> = snap
        .allocs()
        .filter(|a| alloc_is_garbage(a, cutoff))
        .map(|a| a.id)
        .collect();
    let evals: Vec<EvalId> = snap
        .evals()
        .filter(|e| e.is_terminal() && e.modify_time <= cutoff)
        .filter(|e| {
            snap.allocs_by_eval(&e.id)
                .all(|a| alloc_is_garbage(a, cutoff))
        })
        .map(|e| e.id)
        .collect();
    if allocs.is_empty() && evals.is_empty() {
        return Vec::new();
    }
    tracing::info!(
        evals = evals.len(),
        allocs = allocs.len(),
        "garbage collecting terminal evals and allocations"
    );
    let batch = config.batch.max(1);
    let mut commands = Vec::new();
    let mut evals = evals.into_iter().peekable();
    let mut allocs = allocs.into_iter().peekable();
    while evals.peek().is_some() || allocs.peek().is_some() {
        let eval_ids: Vec<EvalId> = evals.by_ref().take(batch).collect();
        let alloc_ids: Vec<AllocId> = allocs.by_ref().take(batch - eval_ids.len()).collect();
        commands.push(Command::EvalDelete {
            eval_ids,
            alloc_ids,
        });
    }
    commands
}
