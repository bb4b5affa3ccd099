//! The set of blocked evals and its indexes, kept consistent in one place.
//!
//! Invariants, held at every method's return:
//! - every tracked eval is in exactly one of `captured`, `escaped`, `system`, by its kind;
//! - `slots` maps each occupied slot to the one eval in it, and every tracked eval occupies
//!   its slot (so a job has at most one job-wide blocked eval, and at most one per node);
//! - `system_by_node` and `system_by_job` list exactly the tracked system evals;
//! - `stats` equals a recount.

use super::stats::BlockedStats;
use super::tracked::{BlockedKind, Slot, Tracked};
use crate::{EvalId, JobKey, NodeId};
use std::collections::{HashMap, HashSet};

#[derive(Default, Debug)]
pub(super) struct Store {
    captured: HashMap<EvalId, Tracked>,
    escaped: HashMap<EvalId, Tracked>,
    system: HashMap<EvalId, Tracked>,
    slots: HashMap<Slot, EvalId>,
    system_by_node: HashMap<NodeId, HashSet<EvalId>>,
    system_by_job: HashMap<JobKey, HashSet<EvalId>>,
    stats: BlockedStats,
}

impl Store {
    pub(super) fn stats(&self) -> &BlockedStats {
        &self.stats
    }

    pub(super) fn in_slot(&self, slot: &Slot) -> Option<&Tracked> {
        let id = self.slots.get(slot)?;
        self.get(id)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Tracked> {
        self.captured
            .values()
            .chain(self.escaped.values())
            .chain(self.system.values())
    }

    /// Tracks `t`. Its slot must be free: the caller resolves duplicates first.
    pub(super) fn insert(&mut self, t: Tracked) {
        let id = t.eval.id;
        let previous = self.slots.insert(t.slot(), id);
        debug_assert!(
            previous.is_none(),
            "slot of eval {id} was occupied by {previous:?}"
        );
        if let BlockedKind::System { node } = t.kind {
            self.system_by_node.entry(node).or_default().insert(id);
            self.system_by_job
                .entry(t.eval.job_key())
                .or_default()
                .insert(id);
        }
        self.stats.add(&t);
        self.map_mut(t.kind).insert(id, t);
    }

    /// Stops tracking `id`, returning what was tracked.
    pub(super) fn remove(&mut self, id: &EvalId) -> Option<Tracked> {
        let t = self
            .captured
            .remove(id)
            .or_else(|| self.escaped.remove(id))
            .or_else(|| self.system.remove(id))?;
        self.slots.remove(&t.slot());
        if let BlockedKind::System { node } = t.kind {
            remove_from_index(&mut self.system_by_node, &node, id);
            remove_from_index(&mut self.system_by_job, &t.eval.job_key(), id);
        }
        self.stats.remove(&t);
        Some(t)
    }

    /// Removes every escaped eval and every captured eval `class` may help.
    pub(super) fn take_for_class(&mut self, class: &str) -> Vec<Tracked> {
        let ids: Vec<EvalId> = self
            .escaped
            .keys()
            .copied()
            .chain(
                self.captured
                    .values()
                    .filter(|t| t.released_by_class(class))
                    .map(|t| t.eval.id),
            )
            .collect();
        self.take_all(ids)
    }

    /// Removes the system evals waiting on `node`.
    pub(super) fn take_for_node(&mut self, node: &NodeId) -> Vec<Tracked> {
        let ids: Vec<EvalId> = self
            .system_by_node
            .get(node)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        self.take_all(ids)
    }

    /// Removes every eval blocked after running out of plan attempts.
    pub(super) fn take_failed(&mut self) -> Vec<Tracked> {
        if self.stats.total_failed == 0 {
            return Vec::new();
        }
        let ids: Vec<EvalId> = self
            .iter()
            .filter(|t| t.is_failed())
            .map(|t| t.eval.id)
            .collect();
        self.take_all(ids)
    }

    /// Removes every blocked eval of `job`: the job-wide one and all per-node ones.
    pub(super) fn take_job(&mut self, job: &JobKey) -> Vec<Tracked> {
        let mut ids: Vec<EvalId> = self
            .system_by_job
            .get(job)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        ids.extend(self.slots.get(&Slot::Job(job.clone())).copied());
        self.take_all(ids)
    }

    /// Removes the given evals, returned in arrival order.
    fn take_all(&mut self, ids: Vec<EvalId>) -> Vec<Tracked> {
        let mut out: Vec<Tracked> = ids.iter().filter_map(|id| self.remove(id)).collect();
        out.sort_by_key(|t| t.seq);
        out
    }

    pub(super) fn clear(&mut self) {
        *self = Store::default();
    }

    fn get(&self, id: &EvalId) -> Option<&Tracked> {
        self.captured
            .get(id)
            .or_else(|| self.escaped.get(id))
            .or_else(|| self.system.get(id))
    }

    fn map_mut(&mut self, kind: BlockedKind) -> &mut HashMap<EvalId, Tracked> {
        match kind {
            BlockedKind::Captured => &mut self.captured,
            BlockedKind::Escaped => &mut self.escaped,
            BlockedKind::System { .. } => &mut self.system,
        }
    }

    /// Recomputes the stats from scratch, to check the incremental ones.
    #[cfg(test)]
    pub(super) fn recount(&self) -> BlockedStats {
        let mut s = BlockedStats::default();
        for t in self.iter() {
            s.add(t);
        }
        s
    }

    /// Checks the structural invariants listed in the module docs.
    #[cfg(test)]
    pub(super) fn check_invariants(&self) {
        let total = self.captured.len() + self.escaped.len() + self.system.len();
        assert_eq!(self.slots.len(), total, "one slot per tracked eval");
        for t in self.iter() {
            assert_eq!(
                self.slots.get(&t.slot()),
                Some(&t.eval.id),
                "eval {} owns its slot",
                t.eval.id
            );
            assert_eq!(BlockedKind::of(&t.eval), t.kind);
        }
        let by_node: usize = self.system_by_node.values().map(HashSet::len).sum();
        let by_job: usize = self.system_by_job.values().map(HashSet::len).sum();
        assert_eq!(by_node, self.system.len());
        assert_eq!(by_job, self.system.len());
        assert!(
            self.system_by_node
                .values()
                .chain(self.system_by_job.values())
                .all(|s| !s.is_empty())
        );
        assert_eq!(self.stats, self.recount());
    }
}

fn remove_from_index<K: Eq + std::hash::Hash>(
    index: &mut HashMap<K, HashSet<EvalId>>,
    key: &K,
    id: &EvalId,
) {
    if let Some(set) = index.get_mut(key) {
        set.remove(id);
        if set.is_empty() {
            index.remove(key);
        }
    }
}
