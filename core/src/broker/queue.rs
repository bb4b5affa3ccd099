//! The ready queues: per scheduler type, evals ordered by priority (higher first), then
//! age (lower create index first), then eval id, so the order is total and never depends
//! on arrival order or hashing.
//!
//! Each type keeps one level per priority value and a bitmap of the non-empty levels, so
//! the highest priority is found with a few bit operations. Within a level, evals almost
//! always arrive oldest first (create indexes grow with the log), so they are appended to
//! a deque and popped from its front: O(1) and cache-friendly, where one heap over 10,000
//! evals costs a dozen cache misses per pop. The rare eval that arrives out of order (a
//! nacked or delayed one, a restore) goes to a small per-level heap instead; a pop takes
//! the older of the two heads.

use crate::{EvalId, Evaluation, Index, SchedulerType};
use rand::Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// An eval's place within its priority level: smaller is dequeued first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct ReadyEntry {
    pub(super) create_index: Index,
    pub(super) id: EvalId,
}

impl ReadyEntry {
    pub(super) fn of(eval: &Evaluation) -> Self {
        Self {
            create_index: eval.create_index,
            id: eval.id,
        }
    }
}

/// The evals of one type and priority. Invariant: `in_order` is sorted ascending.
#[derive(Debug, Default)]
struct Level {
    in_order: VecDeque<ReadyEntry>,
    out_of_order: BinaryHeap<Reverse<ReadyEntry>>,
}

impl Level {
    fn push(&mut self, entry: ReadyEntry) {
        match self.in_order.back() {
            Some(last) if entry < *last => self.out_of_order.push(Reverse(entry)),
            _ => self.in_order.push_back(entry),
        }
    }

    fn pop(&mut self) -> Option<ReadyEntry> {
        let stray_first = match (self.in_order.front(), self.out_of_order.peek()) {
            (Some(front), Some(Reverse(stray))) => stray < front,
            (None, Some(_)) => true,
            _ => false,
        };
        if stray_first {
            self.out_of_order.pop().map(|Reverse(entry)| entry)
        } else {
            self.in_order.pop_front()
        }
    }

    fn is_empty(&self) -> bool {
        self.in_order.is_empty() && self.out_of_order.is_empty()
    }

    fn clear(&mut self) {
        self.in_order.clear();
        self.out_of_order.clear();
    }
}

const LEVELS: usize = u8::MAX as usize + 1;

/// The ready evals of one scheduler type.
#[derive(Debug)]
struct TypeQueue {
    /// Indexed by priority.
    levels: Vec<Level>,
    /// Bit `p` is set iff `levels[p]` is non-empty.
    occupied: [u64; LEVELS / 64],
}

impl Default for TypeQueue {
    fn default() -> Self {
        Self {
            levels: (0..LEVELS).map(|_| Level::default()).collect(),
            occupied: [0; LEVELS / 64],
        }
    }
}

impl TypeQueue {
    fn top_priority(&self) -> Option<u8> {
        let (word, bits) = self
            .occupied
            .iter()
            .enumerate()
            .rev()
            .find(|(_, bits)| **bits != 0)?;
        Some((word * 64 + 63 - bits.leading_zeros() as usize) as u8)
    }

    fn push(&mut self, priority: u8, entry: ReadyEntry) {
        let p = usize::from(priority);
        self.levels[p].push(entry);
        self.occupied[p / 64] |= 1 << (p % 64);
    }

    fn pop(&mut self) -> Option<ReadyEntry> {
        let p = usize::from(self.top_priority()?);
        let entry = self.levels[p].pop();
        if self.levels[p].is_empty() {
            self.occupied[p / 64] &= !(1 << (p % 64));
        }
        entry
    }

    fn clear(&mut self) {
        for p in 0..LEVELS {
            if self.occupied[p / 64] & (1 << (p % 64)) != 0 {
                self.levels[p].clear();
            }
        }
        self.occupied = [0; LEVELS / 64];
    }
}

/// One queue per scheduler type, indexed by `SchedulerType as usize`. Ready evals only
/// ever leave by being dequeued (or by a flush), so no removal from the middle is needed.
#[derive(Debug, Default)]
pub(super) struct ReadyQueues {
    queues: [TypeQueue; SchedulerType::ALL.len()],
}

impl ReadyQueues {
    pub(super) fn push(&mut self, eval: &Evaluation) {
        self.queues[eval.scheduler as usize].push(eval.priority, ReadyEntry::of(eval));
    }

    /// The id of the next eval of type `t`, removed from the queue.
    pub(super) fn pop(&mut self, t: SchedulerType) -> Option<EvalId> {
        self.queues[t as usize].pop().map(|entry| entry.id)
    }

    pub(super) fn has_ready(&self, types: &[SchedulerType]) -> bool {
        types
            .iter()
            .any(|&t| self.queues[t as usize].occupied != [0; LEVELS / 64])
    }

    /// The queue to dequeue from among `types`: the one whose head has the highest
    /// priority. When several heads tie on that priority, one of them is drawn uniformly
    /// from `rng`, so no scheduler type starves another of equal priority. Randomness is
    /// only drawn on a tie; a type listed twice counts once.
    pub(super) fn pick(
        &self,
        types: &[SchedulerType],
        rng: &mut impl Rng,
    ) -> Option<SchedulerType> {
        let mut best = None;
        // Bit `t` set for each type whose head has the `best` priority.
        let mut tied = 0u8;
        for &t in types {
            let Some(top) = self.queues[t as usize].top_priority() else {
                continue;
            };
            let bit = 1u8 << (t as u8);
            match best {
                Some(b) if top < b => {}
                Some(b) if top == b => tied |= bit,
                _ => (best, tied) = (Some(top), bit),
            }
        }
        best?;
        let skip = match tied.count_ones() {
            1 => 0,
            n => rng.random_range(0..n),
        };
        for _ in 0..skip {
            tied &= tied - 1;
        }
        Some(SchedulerType::ALL[tied.trailing_zeros() as usize])
    }

    pub(super) fn clear(&mut self) {
        self.queues.iter_mut().for_each(TypeQueue::clear);
    }

    /// Every queued eval of type `t` with its priority, in no particular order.
    #[cfg(test)]
    pub(super) fn iter(&self, t: SchedulerType) -> impl Iterator<Item = (u8, ReadyEntry)> + '_ {
        let queue = &self.queues[t as usize];
        (0..LEVELS)
            .filter(|&p| queue.occupied[p / 64] & (1 << (p % 64)) != 0)
            .flat_map(move |p| {
                let level = &queue.levels[p];
                let strays = level.out_of_order.iter().map(|Reverse(entry)| *entry);
                level
                    .in_order
                    .iter()
                    .copied()
                    .chain(strays)
                    .map(move |entry| (p as u8, entry))
            })
    }

    /// Whether the bitmap of type `t` matches its levels and each deque is sorted.
    #[cfg(test)]
    pub(super) fn assert_consistent(&self, t: SchedulerType) {
        let queue = &self.queues[t as usize];
        for (p, level) in queue.levels.iter().enumerate() {
            let bit = queue.occupied[p / 64] & (1 << (p % 64)) != 0;
            let empty = level.in_order.is_empty() && level.out_of_order.is_empty();
            assert_eq!(bit, !empty, "occupancy bit of {t} priority {p}");
            if bit {
                let sorted = level.in_order.iter().zip(level.in_order.iter().skip(1));
                assert!(
                    sorted.into_iter().all(|(a, b)| a < b),
                    "{t} priority {p} unsorted"
                );
            }
        }
    }
}
