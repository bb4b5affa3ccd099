//! Tunables of the blocked-eval tracker. Defaults follow BEHAVIOUR.md; tests shrink them.

use std::time::Duration;

/// How long an unblock is remembered for the missed-unblock check (see
/// [`BlockedConfig::unblock_window`]).
pub const DEFAULT_UNBLOCK_WINDOW: Duration = Duration::from_secs(10 * 60);

/// How often the runtime should call [`super::BlockedEvals::prune`].
pub const DEFAULT_PRUNE_INTERVAL: Duration = Duration::from_secs(60);

/// How often the runtime should call [`super::BlockedEvals::unblock_failed`] (BEHAVIOUR.md: 1 min).
pub const DEFAULT_FAILED_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// How many duplicate evals the leader should cancel per Raft write.
///
/// Duplicates appear in bursts (a job re-evaluated by many node events blocks many times);
/// cancelling them a bounded batch at a time keeps each cancellation entry small and lets
/// other writes interleave, so a burst never floods the log. 128 ids at 16 bytes each keep
/// one entry around 2 KiB plus the evals' status fields.
pub const DEFAULT_DUPLICATE_BATCH: usize = 128;

/// Tunables of [`super::BlockedEvals`].
///
/// The tracker never reads a clock: the two intervals here are what the runtime uses to
/// schedule its periodic calls, kept with the tracker so one place documents them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BlockedConfig {
    /// How long an unblock stays remembered for the missed-unblock check. Invariant relied
    /// on: no eval spends longer than this between the snapshot its scheduler used and the
    /// `block` call that tracks it. Evals are bounded by the broker's nack timeout (60 s, and
    /// a worker retries on fresher state), so 10 minutes leaves a wide margin while keeping
    /// the memory of unblocks bounded.
    pub unblock_window: Duration,
    /// How often the runtime calls `prune(now)`. An unblock is forgotten between
    /// `unblock_window` and `unblock_window + prune_interval` after it happened.
    pub prune_interval: Duration,
    /// How often the runtime calls `unblock_failed()` to retry evals that ran out of plan
    /// attempts.
    pub failed_sweep_interval: Duration,
    /// The batch size the leader passes to `take_duplicates`.
    pub duplicate_batch: usize,
}

impl Default for BlockedConfig {
    fn default() -> Self {
        Self {
            unblock_window: DEFAULT_UNBLOCK_WINDOW,
            prune_interval: DEFAULT_PRUNE_INTERVAL,
            failed_sweep_interval: DEFAULT_FAILED_SWEEP_INTERVAL,
            duplicate_batch: DEFAULT_DUPLICATE_BATCH,
        }
    }
}
