//! The broker's two kinds of timer, held as due times the runtime polls
//! (`EvalBroker::next_deadline`) rather than as OS timers.

use crate::{EvalId, Timestamp};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

/// Nack deadlines of unacked evals, earliest first.
///
/// Unlike delays, a nack timer is usually cancelled (by the ack) long before it is due, so
/// it needs a real removal: a lazy-deletion heap would keep one dead entry per ack for a
/// whole nack timeout, millions of them under load.
#[derive(Debug, Default)]
pub(super) struct NackTimers {
    due: BTreeSet<(Timestamp, EvalId)>,
}

impl NackTimers {
    pub(super) fn insert(&mut self, at: Timestamp, id: EvalId) {
        self.due.insert((at, id));
    }

    pub(super) fn remove(&mut self, at: Timestamp, id: EvalId) {
        self.due.remove(&(at, id));
    }

    pub(super) fn first(&self) -> Option<(Timestamp, EvalId)> {
        self.due.first().copied()
    }

    pub(super) fn clear(&mut self) {
        self.due.clear();
    }

    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = &(Timestamp, EvalId)> {
        self.due.iter()
    }
}

/// Evals waiting for a due time (their own `wait` / `wait_until`, or a nack back-off).
///
/// A delayed eval only leaves when due (or on a flush), so a min-heap suffices. Ties on the
/// due time leave in arrival order, which decides which of a job's evals reaches the job
/// first.
#[derive(Debug, Default)]
pub(super) struct DelayQueue {
    heap: BinaryHeap<Reverse<(Timestamp, u64, EvalId)>>,
    arrivals: u64,
}

impl DelayQueue {
    pub(super) fn push(&mut self, at: Timestamp, id: EvalId) {
        self.arrivals += 1;
        self.heap.push(Reverse((at, self.arrivals, id)));
    }

    pub(super) fn first_due(&self) -> Option<Timestamp> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    pub(super) fn pop(&mut self) -> Option<(Timestamp, EvalId)> {
        self.heap.pop().map(|Reverse((at, _, id))| (at, id))
    }

    pub(super) fn clear(&mut self) {
        self.heap.clear();
    }

    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = (Timestamp, EvalId)> + '_ {
        self.heap.iter().map(|Reverse((at, _, id))| (*at, *id))
    }
}
