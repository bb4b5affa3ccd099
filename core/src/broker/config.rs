//! The broker's tunables. Defaults are Nomad's; tests shrink them rather than wait.

use std::time::Duration;

/// How many cancelable evals one reaper write carries.
///
/// Nomad caps a write request at 7281 ids (256 KiB of 36-character UUID strings). A drover
/// cancellation carries each eval's update, not just its id, so a batch a tenth that size
/// (about 728 evals of a few hundred bytes each) keeps one Raft entry near the same
/// 256 KiB: large enough that a burst of thousands of superseded evals drains in a few
/// writes, small enough that one entry never stalls the log or the plan applier behind it.
pub const CANCEL_BATCH_SIZE: usize = 728;

/// Timeouts, delays and limits of an [`EvalBroker`](super::EvalBroker).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerConfig {
    /// How long a dequeued eval may stay unacked before the broker nacks it itself.
    pub nack_timeout: Duration,
    /// How many times an eval is handed out before it goes to the failed queue.
    pub delivery_limit: u32,
    /// Re-enqueue delay after the nack of an eval's first delivery.
    pub initial_nack_delay: Duration,
    /// Re-enqueue delay step after later nacks: delivery `n` waits `(n - 1) x` this.
    pub subsequent_nack_delay: Duration,
    /// Cancelable evals handed out per ack and per sweep (see [`CANCEL_BATCH_SIZE`]).
    pub cancel_batch_size: usize,
    /// How often the reaper takes a cancel batch when no ack wakes it.
    pub cancel_sweep_interval: Duration,
    /// Fixed part of a failed follow-up eval's wait.
    pub follow_up_base_wait: Duration,
    /// Upper bound (exclusive) of the random part of a failed follow-up eval's wait, which
    /// spreads the retries of many evals that failed together.
    pub follow_up_max_jitter: Duration,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            nack_timeout: Duration::from_secs(60),
            delivery_limit: 3,
            initial_nack_delay: Duration::from_secs(1),
            subsequent_nack_delay: Duration::from_secs(20),
            cancel_batch_size: CANCEL_BATCH_SIZE,
            cancel_sweep_interval: Duration::from_secs(5),
            follow_up_base_wait: Duration::from_secs(60),
            follow_up_max_jitter: Duration::from_secs(5 * 60),
        }
    }
}

impl BrokerConfig {
    /// The delay before an eval nacked after its `deliveries`-th hand-out is ready again:
    /// nothing if it was never delivered, `initial_nack_delay` after the first delivery,
    /// then `(deliveries - 1) x subsequent_nack_delay`, so a failing eval backs off.
    pub fn nack_delay(&self, deliveries: u32) -> Duration {
        match deliveries {
            0 => Duration::ZERO,
            1 => self.initial_nack_delay,
            n => self.subsequent_nack_delay.saturating_mul(n - 1),
        }
    }
}
