//! Garbage collection: terminal evals and allocations untouched for longer than the
//! threshold are deleted, in bounded `EvalDelete` batches; ACL tokens expired for longer
//! than the threshold are deleted in `AclTokenDelete` batches (an expired token is already
//! refused; keeping it a while lets `acl token list` show why a client was turned away).
//!
//! An allocation is garbage once it is terminal on both sides (the servers want it stopped
//! or the client finished it, and the client no longer runs it). An eval is garbage once it
//! is terminal and every allocation it created is garbage too, so an allocation never
//! outlives the eval it points at.

use crate::AccessorId;
use crate::fsm::Command;
use crate::state::StateSnapshot;
use crate::types::{AllocId, Allocation, EvalId, Timestamp};
use std::collections::HashSet;
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
    let mut commands = collect_evals_and_allocs(snap, cutoff, config.batch.max(1));
    commands.extend(collect_expired_tokens(snap, cutoff, config.batch.max(1)));
    commands
}

fn collect_expired_tokens(snap: &StateSnapshot, cutoff: Timestamp, batch: usize) -> Vec<Command> {
    let expired: Vec<AccessorId> = snap
        .acl_tokens()
        .filter(|t| t.is_expired(cutoff))
        .map(|t| t.accessor_id)
        .collect();
    if !expired.is_empty() {
        tracing::info!(
            tokens = expired.len(),
            "garbage collecting expired acl tokens"
        );
    }
    expired
        .chunks(batch)
        .map(|ids| Command::AclTokenDelete {
            accessor_ids: ids.to_vec(),
        })
        .collect()
}

fn collect_evals_and_allocs(snap: &StateSnapshot, cutoff: Timestamp, batch: usize) -> Vec<Command> {
    // An eval goes only with all of its allocations, so the one pass over the allocations
    // also gathers the evals that one still being kept names (the store keeps no index by
    // eval: at a million allocations it cost tens of megabytes to serve this pass alone).
    let mut allocs = Vec::new();
    let mut named_by_kept = HashSet::new();
    for a in snap.allocs() {
        if alloc_is_garbage(a, cutoff) {
            allocs.push(a.id);
        } else {
            named_by_kept.insert(a.eval_id);
        }
    }
    let evals: Vec<EvalId> = snap
        .evals()
        .filter(|e| e.is_terminal() && e.modify_time <= cutoff)
        .filter(|e| !named_by_kept.contains(&e.id))
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
