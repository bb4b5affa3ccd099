//! Slot bookkeeping for one group: which `job.group[i]` names are held, which are being
//! replaced, which are free, and which holders are surplus.

use super::classify::Replace;
use crate::types::*;
use std::sync::Arc;

pub struct Slots {
    count: u32,
    job: String,
    group: String,
    held: Vec<Arc<Allocation>>,
    replacing: Vec<(Arc<Allocation>, Replace)>,
}

/// The outcome: `held` keep their slots, `excess` are stopped, each replaced allocation says
/// whether its stand-in is placed, and `free` names get new placements.
pub struct Decided {
    pub held: Vec<Arc<Allocation>>,
    pub excess: Vec<Arc<Allocation>>,
    pub replaced: Vec<(Arc<Allocation>, Replace, bool)>,
    pub free: Vec<String>,
}

impl Slots {
    pub fn new(count: u32, job: &str, group: &str) -> Self {
        Self {
            count,
            job: job.to_string(),
            group: group.to_string(),
            held: Vec::new(),
            replacing: Vec::new(),
        }
    }

    pub fn hold(&mut self, a: Arc<Allocation>) {
        self.held.push(a);
    }

    pub fn replace(&mut self, a: Arc<Allocation>, why: Replace) {
        self.replacing.push((a, why));
    }

    /// Whether another allocation already holds `a`'s name.
    pub fn is_held(&self, a: &Allocation) -> bool {
        self.held.iter().any(|h| h.id != a.id && h.name == a.name)
    }

    pub fn take_holders_named(&mut self, name: &str) -> Vec<Arc<Allocation>> {
        let (named, rest) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.name == name);
        self.held = rest;
        named
    }

    pub fn decide(self) -> Decided {
        // Best holder of each index first: running before starting, then the oldest. The
        // name is parsed once per allocation (not once per comparison), and the key ends in
        // the unique id, so an unstable sort gives the same order as a stable one.
        let mut held: Vec<_> = self
            .held
            .into_iter()
            .map(|a| {
                let key = (
                    a.name_index().unwrap_or(u32::MAX),
                    a.client_status != ClientStatus::Running,
                    a.create_index,
                    a.id,
                );
                (key, a)
            })
            .collect();
        held.sort_unstable_by_key(|(key, _)| *key);
        let mut taken = Taken::new(self.count);
        let (mut kept, mut excess) = (Vec::new(), Vec::new());
        for ((index, ..), a) in held {
            if taken.take(index) {
                kept.push(a);
            } else {
                excess.push(a);
            }
        }
        let mut replaced = Vec::new();
        for (a, why) in self.replacing {
            let place = a.name_index().is_some_and(|i| taken.take(i));
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
