//! Slot bookkeeping for one group: which `job.group[i]` names are held, which are being
//! replaced, which are free, and which holders are surplus.

use super::classify::Replace;
use crate::state::{JobAlloc, StateSnapshot};
use crate::types::*;

/// Allocations are borrowed from the snapshot's per-job index: a reconcile with nothing to do
/// copies none of them (and touches no reference count), and ranks holders by the index
/// entries' copied fields without reading the allocations.
pub struct Slots<'s> {
    /// Where a holder's name is read: only to tell apart holders of one slot number.
    state: &'s StateSnapshot,
    count: u32,
    job: String,
    group: String,
    held: Vec<&'s JobAlloc>,
    /// [`rank`] of each of `held`, taken while the entry is at hand (it was just classified)
    /// rather than reading every entry again to decide.
    ranks: Vec<Rank>,
    replacing: Vec<(&'s JobAlloc, Replace)>,
}

/// Orders holders of one slot number, best first: running before starting, then the oldest.
/// It ends in the unique id, so "best" is a total order.
type Rank = (u32, bool, Index, AllocId);

fn rank(a: &JobAlloc) -> Rank {
    (
        a.slot.get().unwrap_or(u32::MAX),
        a.client_status != ClientStatus::Running,
        a.create_index,
        a.id,
    )
}

/// The outcome: `held` keep their slots, `excess` are stopped, each replaced allocation says
/// whether its stand-in is placed, and `free` names get new placements.
pub struct Decided<'s> {
    pub held: Vec<&'s JobAlloc>,
    pub excess: Vec<&'s JobAlloc>,
    pub replaced: Vec<(&'s JobAlloc, Replace, bool)>,
    pub free: Vec<compact_str::CompactString>,
}

impl<'s> Slots<'s> {
    pub fn new(state: &'s StateSnapshot, count: u32, job: &str, group: &str) -> Self {
        Self {
            state,
            count,
            job: job.to_string(),
            group: group.to_string(),
            held: Vec::new(),
            ranks: Vec::new(),
            replacing: Vec::new(),
        }
    }

    pub fn hold(&mut self, a: &'s JobAlloc) {
        self.held.push(a);
        self.ranks.push(rank(a));
    }

    pub fn replace(&mut self, a: &'s JobAlloc, why: Replace) {
        self.replacing.push((a, why));
    }

    /// The allocation name of an entry, read from the allocation.
    fn name(&self, a: &JobAlloc) -> Option<&'s str> {
        self.state.job_alloc(a).map(|a| a.name.as_str())
    }

    /// Whether another allocation already holds `a`'s name.
    pub fn is_held(&self, a: &JobAlloc) -> bool {
        self.held
            .iter()
            .any(|h| h.id != a.id && h.slot == a.slot && self.name(h) == self.name(a))
    }

    pub fn take_holders_named(&mut self, name: &str) -> Vec<&'s JobAlloc> {
        let (named, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| self.name(h) == Some(name));
        self.ranks = rest.iter().map(|h| rank(h)).collect();
        self.held = rest;
        named
    }

    pub fn decide(self) -> Decided<'s> {
        // Best holder of each index by [`Rank`]. Holders are bucketed by index rather than
        // sorted (a group of 10,000 has 10,000 holders, and sorting them was most of a
        // reconcile with nothing to do).
        let keys = self.ranks;
        const NONE: u32 = u32::MAX;
        let mut best = vec![NONE; self.count as usize];
        let mut losers = Vec::new();
        for (i, key) in (0u32..).zip(&keys) {
            let Some(slot) = best.get_mut(key.0 as usize) else {
                losers.push(i);
                continue;
            };
            if *slot == NONE {
                *slot = i;
            } else if *key < keys[*slot as usize] {
                losers.push(std::mem::replace(slot, i));
            } else {
                losers.push(i);
            }
        }
        // Same order as sorting every holder by key: the kept ones by index (the key's
        // first part), the others by their whole key.
        losers.sort_unstable_by_key(|&i| keys[i as usize]);
        let mut taken = Taken::new(self.count);
        let mut held: Vec<Option<&JobAlloc>> = self.held.into_iter().map(Some).collect();
        let mut kept = Vec::new();
        for (index, &i) in (0u32..).zip(&best) {
            if i != NONE {
                taken.take(index);
                kept.extend(held[i as usize].take());
            }
        }
        let excess = losers
            .into_iter()
            .filter_map(|i| held[i as usize].take())
            .collect();
        let mut replaced = Vec::new();
        for (a, why) in self.replacing {
            let place = a.slot.get().is_some_and(|i| taken.take(i));
            replaced.push((a, why, place));
        }
        let free = (0..self.count)
            .filter(|i| !taken.is_taken(*i))
            .map(|i| Allocation::name_for(&self.job, &self.group, i))
            .collect();
        Decided {
            held: kept,
            excess,
            replaced,
            free,
        }
    }
}

/// Which indexes below `count` have a holder: one bit each (a group of 10,000 needs 1.25 KB
/// and no tree), since every index below `count` is visited anyway to find the free ones.
struct Taken {
    count: u32,
    bits: Vec<u64>,
}

impl Taken {
    fn new(count: u32) -> Self {
        Self {
            count,
            bits: vec![0; (count as usize).div_ceil(64)],
        }
    }

    /// Takes index `i` if it is a slot (`< count`) nobody took yet.
    fn take(&mut self, i: u32) -> bool {
        if i >= self.count || self.is_taken(i) {
            return false;
        }
        self.bits[(i / 64) as usize] |= 1 << (i % 64);
        true
    }

    fn is_taken(&self, i: u32) -> bool {
        i < self.count && self.bits[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
}
