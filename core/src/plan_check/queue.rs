//! The queue of plans waiting for the applier: higher priority first, then first come,
//! first served.
//!
//! The applier takes one plan at a time, so a burst of low-priority batch plans must not
//! delay a high-priority service plan; within one priority, arrival order keeps it fair.

use crate::types::Plan;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What the queue orders by. The runtime queues its own type (a plan plus the channel to
/// answer the worker on) by implementing this.
pub trait Prioritized {
    /// Higher runs first.
    fn priority(&self) -> u8;
}

impl Prioritized for Plan {
    fn priority(&self) -> u8 {
        self.priority
    }
}

/// Gauges and counters of the queue, for metrics and the console.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct PlanQueueStats {
    /// Plans waiting now.
    pub depth: usize,
    /// The most plans ever waiting at once.
    pub peak_depth: usize,
    /// Plans pushed since the queue was created.
    pub enqueued: u64,
    /// Plans popped (or drained) since the queue was created.
    pub dequeued: u64,
}

/// Pending plans, ordered by priority (higher first), then arrival (earlier first).
#[derive(Debug)]
pub struct PlanQueue<T: Prioritized = Plan> {
    heap: BinaryHeap<Entry<T>>,
    /// Arrival number of the next push; never reused, so ties always break by arrival.
    next_seq: u64,
    stats: PlanQueueStats,
}

#[derive(Debug)]
struct Entry<T> {
    priority: u8,
    seq: u64,
    item: T,
}

impl<T> Entry<T> {
    /// Greater means served first: higher priority, then lower arrival number.
    fn key(&self) -> (u8, std::cmp::Reverse<u64>) {
        (self.priority, std::cmp::Reverse(self.seq))
    }
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<T> Eq for Entry<T> {}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl<T: Prioritized> Default for PlanQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Prioritized> PlanQueue<T> {
    pub fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
            next_seq: 0,
            stats: PlanQueueStats::default(),
        }
    }

    /// Queues `item` and returns its arrival number.
    pub fn push(&mut self, item: T) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry {
            priority: item.priority(),
            seq,
            item,
        });
        self.stats.enqueued += 1;
        self.stats.depth = self.heap.len();
        self.stats.peak_depth = self.stats.peak_depth.max(self.stats.depth);
        seq
    }

    /// The next plan to apply: the highest priority, earliest arrival.
    pub fn pop(&mut self) -> Option<T> {
        let entry = self.heap.pop()?;
        self.stats.dequeued += 1;
        self.stats.depth = self.heap.len();
        Some(entry.item)
    }

    /// The plan `pop` would return, without removing it.
    pub fn peek(&self) -> Option<&T> {
        self.heap.peek().map(|e| &e.item)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    pub fn stats(&self) -> PlanQueueStats {
        self.stats
    }

    /// Empties the queue in service order (leadership lost: the runtime answers every
    /// waiting worker with an error).
    pub fn drain(&mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.heap.len());
        while let Some(item) = self.pop() {
            out.push(item);
        }
        out
    }
}
