//! Reschedule policy arithmetic: may a failed allocation be replaced, and when.

use crate::types::*;
use std::time::Duration;

/// What to do with one failed allocation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Reschedule {
    /// Replace it in this eval, after waiting `delay` since the failure.
    Now { delay: Duration },
    /// Replace it at `due` through a follow-up eval.
    Later { due: Timestamp, delay: Duration },
    /// Attempts are used up (or rescheduling is off): it keeps its slot, failed.
    No,
}

/// When the allocation failed: the latest task finish, else its last client update.
pub fn failed_at(alloc: &Allocation) -> Timestamp {
    alloc
        .task_states
        .values()
        .filter_map(|t| t.finished_at)
        .max()
        .unwrap_or(alloc.modify_time)
}

/// The delay before the next attempt, from the policy and the attempts so far.
pub fn next_delay(policy: &ReschedulePolicy, tracker: Option<&RescheduleTracker>) -> Duration {
    let events = tracker.map(|t| t.events.as_slice()).unwrap_or_default();
    let cap = |d: Duration| {
        if policy.max_delay.is_zero() {
            d
        } else {
            d.min(policy.max_delay)
        }
    };
    match policy.delay_function {
        DelayFunction::Constant => policy.delay,
        DelayFunction::Exponential => match events.last() {
            None => policy.delay,
            Some(last) => cap(Duration::from_millis(last.delay_ms.max(1)).saturating_mul(2)),
        },
        DelayFunction::Fibonacci => match events {
            [] | [_] => policy.delay,
            [.., a, b] => cap(Duration::from_millis(a.delay_ms.saturating_add(b.delay_ms))),
        },
    }
}

/// Decides whether a failed allocation is replaced now, later, or not at all. An eval that is
/// the allocation's own follow-up counts as due, so a delayed reschedule always happens once.
pub fn decide(
    alloc: &Allocation,
    policy: &ReschedulePolicy,
    now: Timestamp,
    eval: EvalId,
) -> Reschedule {
    if !policy.enabled() {
        return Reschedule::No;
    }
    let tracker = alloc.links.get().reschedule_tracker.as_deref();
    if !policy.unlimited {
        let recent = tracker
            .map(|t| {
                t.events
                    .iter()
                    .filter(|e| now.since(e.time) <= policy.interval)
                    .count()
            })
            .unwrap_or(0);
        if recent >= policy.attempts as usize {
            return Reschedule::No;
        }
    }
    let delay = next_delay(policy, tracker);
    let due = failed_at(alloc).saturating_add(delay);
    if due <= now || alloc.links.get().follow_up_eval_id == Some(eval) {
        Reschedule::Now { delay }
    } else {
        Reschedule::Later { due, delay }
    }
}

/// The tracker a replacement carries: the previous attempts still relevant plus this one.
pub fn next_tracker(
    prev: &Allocation,
    policy: &ReschedulePolicy,
    now: Timestamp,
    delay: Duration,
) -> RescheduleTracker {
    let mut events: Vec<RescheduleEvent> = prev
        .links
        .get()
        .reschedule_tracker
        .as_deref()
        .map(|t| {
            t.events
                .iter()
                .filter(|e| policy.unlimited || now.since(e.time) <= policy.interval)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    // Unlimited policies would grow the tracker forever; the delay math needs only the tail.
    const KEEP: usize = 10;
    if events.len() >= KEEP {
        events.drain(..events.len() + 1 - KEEP);
    }
    events.push(RescheduleEvent {
        time: now,
        prev_alloc_id: prev.id,
        prev_node_id: prev.node_id,
        delay_ms: delay.as_millis().min(u64::MAX as u128) as u64,
    });
    RescheduleTracker { events }
}
