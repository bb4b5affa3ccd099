//! Handing superseded (cancelable) evals to the reaper, in bounded and paced batches.
//!
//! The reaper is a runtime task that writes cancellations to the log. It takes one batch
//! each time an ack wakes it ([`EvalBroker::cancel_batch_after_ack`]) and one per sweep
//! ([`EvalBroker::sweep_cancelable`], due every `cancel_sweep_interval`), so the rate of
//! cancellation writes follows scheduler progress and a burst of thousands of superseded
//! evals never floods the log.

use super::{EvalBroker, State};
use crate::broker::stats::Bucket;
use crate::{Evaluation, Timestamp};
use std::sync::Arc;

impl EvalBroker {
    /// Takes up to `max` cancelable evals, oldest first. They leave the broker: the caller
    /// writes them as canceled (re-enqueueing one before that would track it afresh).
    pub fn take_cancelable(&mut self, max: usize) -> Vec<Evaluation> {
        let n = max.min(self.cancelable.len());
        self.cancelable
            .drain(..n)
            .map(|id| {
                let tracked = self
                    .evals
                    .remove(&id)
                    .expect("cancelable evals are tracked");
                debug_assert!(matches!(tracked.state, State::Cancelable));
                self.counters
                    .dec(tracked.eval.scheduler, Bucket::Cancelable);
                // Usually the only reference left: a pending eval was never handed out.
                Arc::unwrap_or_clone(tracked.eval)
            })
            .collect()
    }

    /// The batch the reaper takes when an ack wakes it: one `cancel_batch_size` batch.
    pub fn cancel_batch_after_ack(&mut self) -> Vec<Evaluation> {
        self.take_cancelable(self.config.cancel_batch_size)
    }

    /// When the reaper's next sweep is due: never while nothing is cancelable, at once
    /// before the first sweep, else `cancel_sweep_interval` after the last one.
    pub fn next_cancel_sweep(&self) -> Option<Timestamp> {
        if self.cancelable.is_empty() {
            return None;
        }
        Some(match self.last_cancel_sweep {
            Some(last) => last.saturating_add(self.config.cancel_sweep_interval),
            None => Timestamp::ZERO,
        })
    }

    /// The periodic sweep: one `cancel_batch_size` batch if the sweep is due at `now`,
    /// else nothing. Calling it early or often does not speed cancellation up.
    pub fn sweep_cancelable(&mut self, now: Timestamp) -> Vec<Evaluation> {
        match self.next_cancel_sweep() {
            Some(due) if due <= now => {
                self.last_cancel_sweep = Some(now);
                self.cancel_batch_after_ack()
            }
            _ => Vec::new(),
        }
    }
}
