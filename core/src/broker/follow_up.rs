//! What the leader writes for an eval that reached the delivery limit.

use super::BrokerConfig;
use crate::{EvalId, EvalStatus, Evaluation, Timestamp, TriggeredBy};
use rand::Rng;
use std::time::Duration;

/// A failed eval's final update and the eval that retries its job later.
#[derive(Clone, Debug, PartialEq)]
pub struct FailedFollowUp {
    /// The eval marked failed, pointing at its follow-up through `next_eval`.
    pub failed: Evaluation,
    /// A pending eval for the same job that waits `follow_up_base_wait` plus a random
    /// share of `follow_up_max_jitter` (so evals that failed together do not retry
    /// together), with `previous_eval` set to the failed one.
    pub follow_up: Evaluation,
}

/// Builds both evals for the leader to write in one command before it acks the failed
/// eval. Pure: the id and the jitter come from `rng`. Indexes are left to the state store.
pub fn failed_follow_up(
    eval: &Evaluation,
    config: &BrokerConfig,
    now: Timestamp,
    rng: &mut impl Rng,
) -> FailedFollowUp {
    let jitter_ms = u64::try_from(config.follow_up_max_jitter.as_millis()).unwrap_or(u64::MAX);
    let jitter = match jitter_ms {
        0 => Duration::ZERO,
        max => Duration::from_millis(rng.random_range(0..max)),
    };
    let mut follow_up = eval.follow_up(
        EvalId::from_bytes(rng.random()),
        TriggeredBy::FailedFollowUp,
        now,
    );
    follow_up.wait = Some(config.follow_up_base_wait + jitter);
    let mut failed = eval.clone();
    failed.status = EvalStatus::Failed;
    failed.status_description = format!(
        "evaluation reached delivery limit ({})",
        config.delivery_limit
    );
    failed.next_eval = Some(follow_up.id);
    failed.modify_time = now;
    FailedFollowUp { failed, follow_up }
}
