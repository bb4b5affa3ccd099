//! Slot bookkeeping for one group: which `job.group[i]` names are held, which are being
//! replaced, which are free, and which holders are surplus.

use super::classify::Replace;
use crate::types::*;
use std::collections::BTreeSet;
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

    pub fn decide(mut self) -> Decided {
        // Best holder of each index first: running before starting, then the oldest.
        self.held.sort_by_key(|a| {
            (
                a.name_index().unwrap_or(u32::MAX),
                a.client_status != ClientStatus::Running,
                a.create_index,
                a.id,
            )
        });
        let mut taken = BTreeSet::new();
        let (mut held, mut excess) = (Vec::new(), Vec::new());
        for a in self.held {
            match a.name_index() {
                Some(i) if i < self.count && taken.insert(i) => held.push(a),
                _ => excess.push(a),
            }
        }
        let mut replaced = Vec::new();
        for (a, why) in self.replacing {
            let place = a
                .name_index()
                .is_some_and(|i| i < self.count && taken.insert(i));
            replaced.push((a, why, place));
        }
        let free = (0..self.count)
            .filter(|i| !taken.contains(i))
            .map(|i| Allocation::name_for(&self.job, &self.group, i))
            .collect();
        Decided {
            held,
            excess,
            replaced,
            free,
        }
    }
}
