//! Every allocation the console knows, packed for a million of them: the rows sit in one
//! dense vector found through an id index (a map of whole rows would keep half its buckets
//! empty at that size), their repeated strings are shared, and the per-node and per-job
//! sums are kept as rows come and go, so no frame ever walks the rows.

use super::intern::Interner;
use super::rows::{AllocRow, JobCounts, Usage};
use drover_core::{AllocId, JobKey, NodeId};
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

#[derive(Clone, Debug, Default)]
pub struct AllocTable {
    /// In no particular order. Invariant: `index[rows[i].id] == i` for every row, and
    /// `index` holds nothing else.
    rows: Vec<AllocRow>,
    index: FxHashMap<AllocId, u32>,
    /// Invariant: equals the sum over live rows, per node.
    usage: FxHashMap<NodeId, Usage>,
    /// Invariant: equals the counts over rows, per job.
    job_counts: FxHashMap<JobKey, JobCounts>,
    strings: Interner,
}

impl AllocTable {
    /// An empty table with room for `rows` rows (a load knows roughly how many come).
    pub fn with_capacity(rows: usize) -> Self {
        AllocTable {
            rows: Vec::with_capacity(rows),
            index: FxHashMap::with_capacity_and_hasher(rows, Default::default()),
            ..Default::default()
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn get(&self, id: &AllocId) -> Option<&AllocRow> {
        let at = *self.index.get(id)?;
        self.rows.get(at as usize)
    }

    pub fn contains_key(&self, id: &AllocId) -> bool {
        self.index.contains_key(id)
    }

    /// Every row, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &AllocRow> + '_ {
        self.rows.iter()
    }

    pub fn keys(&self) -> impl Iterator<Item = &AllocId> + '_ {
        self.rows.iter().map(|row| &row.id)
    }

    /// Resource use summed over the live allocations on `node`.
    pub fn usage(&self, node: &NodeId) -> Usage {
        self.usage.get(node).copied().unwrap_or_default()
    }

    /// Allocation counts of `job` by client status.
    pub fn job_counts(&self, job: &JobKey) -> JobCounts {
        self.job_counts.get(job).copied().unwrap_or_default()
    }

    /// Puts `row` in, replacing the row of the same id, and moves the sums with it. Its
    /// strings are swapped for the copies the table already holds.
    pub fn upsert(&mut self, mut row: AllocRow) {
        row.job = self.strings.job(&row.job);
        row.task_group = self.strings.text(&row.task_group);
        self.count_node(&row, true);
        self.count_job(&row, true);
        if let Some(old) = self.put(row) {
            self.count_node(&old, false);
            self.count_job(&old, false);
        }
    }

    /// Puts in rows decoded together, which already share their job's strings (see
    /// [`JobStrings`](super::JobStrings)): a load's million rows skip the interning, at
    /// the cost of one more copy of each job's key, and the counts of a run of rows of one
    /// job are summed before they are added.
    pub fn insert_batch(&mut self, rows: Vec<AllocRow>) {
        self.rows.reserve(rows.len());
        let mut run: Option<(JobKey, JobCounts)> = None;
        for row in rows {
            match &mut run {
                // Rows of one batch share their key's pointers, so this compares no text.
                Some((job, counts)) if *job == row.job => counts.apply(row.client, true),
                _ => {
                    if let Some((job, counts)) = run.take() {
                        self.job_counts.entry(job).or_default().add(&counts);
                    }
                    let mut counts = JobCounts::default();
                    counts.apply(row.client, true);
                    run = Some((row.job.clone(), counts));
                }
            }
            self.count_node(&row, true);
            if let Some(old) = self.put(row) {
                // Rare (an id twice): the run is added first, as it may hold `old`.
                if let Some((job, counts)) = &mut run {
                    self.job_counts.entry(job.clone()).or_default().add(counts);
                    *counts = JobCounts::default();
                }
                self.count_node(&old, false);
                self.count_job(&old, false);
            }
        }
        if let Some((job, counts)) = run {
            self.job_counts.entry(job).or_default().add(&counts);
        }
    }

    /// Puts `row` in its place, counted by the caller; returns the row it replaced, not
    /// counted out yet.
    fn put(&mut self, row: AllocRow) -> Option<AllocRow> {
        let next = self.rows.len();
        match self.index.entry(row.id) {
            Entry::Occupied(at) => Some(std::mem::replace(&mut self.rows[*at.get() as usize], row)),
            Entry::Vacant(slot) => {
                slot.insert(
                    u32::try_from(next)
                        .expect("fewer than four billion allocations in one console"),
                );
                self.rows.push(row);
                None
            }
        }
    }

    /// Takes the row of `id` out, if there is one, and its share of the sums.
    pub fn remove(&mut self, id: &AllocId) -> Option<AllocRow> {
        let at = self.index.remove(id)? as usize;
        let old = self.rows.swap_remove(at);
        if let Some(moved) = self.rows.get(at) {
            self.index.insert(moved.id, at as u32);
        }
        self.count_node(&old, false);
        self.count_job(&old, false);
        Some(old)
    }

    /// Adds `row` to its node's sum, or takes it out.
    fn count_node(&mut self, row: &AllocRow, added: bool) {
        if !row.is_live() {
            return;
        }
        if added {
            self.usage
                .entry(row.node_id)
                .or_default()
                .add(&row.resources);
        } else if let Some(usage) = self.usage.get_mut(&row.node_id) {
            usage.remove(&row.resources);
        }
    }

    /// Adds `row` to its job's counts, or takes it out.
    fn count_job(&mut self, row: &AllocRow, added: bool) {
        match self.job_counts.get_mut(&row.job) {
            Some(counts) => counts.apply(row.client, added),
            None if added => {
                let mut counts = JobCounts::default();
                counts.apply(row.client, true);
                self.job_counts.insert(row.job.clone(), counts);
            }
            None => {}
        }
    }
}

impl std::ops::Index<&AllocId> for AllocTable {
    type Output = AllocRow;

    fn index(&self, id: &AllocId) -> &AllocRow {
        self.get(id).expect("no allocation with that id")
    }
}

impl Extend<AllocRow> for AllocTable {
    fn extend<I: IntoIterator<Item = AllocRow>>(&mut self, rows: I) {
        for row in rows {
            self.upsert(row);
        }
    }
}

impl FromIterator<AllocRow> for AllocTable {
    fn from_iter<I: IntoIterator<Item = AllocRow>>(rows: I) -> Self {
        let rows = rows.into_iter();
        let mut table = AllocTable::with_capacity(rows.size_hint().0);
        table.extend(rows);
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::alloc_row;
    use drover_core::{ClientStatus, mock};
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// What the index and the sums must always equal: a fresh look over the rows.
    fn check(table: &AllocTable, model: &HashMap<u64, AllocRow>) {
        assert_eq!(table.len(), model.len());
        for (n, row) in model {
            assert_eq!(table.get(&mock::alloc_id(*n)), Some(row));
        }
        let mut usage: HashMap<NodeId, Usage> = HashMap::new();
        let mut jobs: HashMap<JobKey, JobCounts> = HashMap::new();
        for row in model.values() {
            if row.is_live() {
                usage.entry(row.node_id).or_default().add(&row.resources);
            }
            jobs.entry(row.job.clone())
                .or_default()
                .apply(row.client, true);
        }
        for node in (0..3).map(mock::node_id) {
            assert_eq!(
                table.usage(&node),
                usage.get(&node).copied().unwrap_or_default()
            );
        }
        for job in ["web", "api"].map(JobKey::default_ns) {
            assert_eq!(
                table.job_counts(&job),
                jobs.get(&job).copied().unwrap_or_default()
            );
        }
    }

    proptest! {
        /// Rows put in one by one or in batches, replaced and taken out in any order leave
        /// the table, its index and its sums exactly as a fresh count of the rows that
        /// remain.
        #[test]
        fn the_table_and_its_sums_follow_every_change(
            ops in proptest::collection::vec(
                (0u64..20, proptest::option::of((0u64..3, 0usize..4, any::<bool>(), any::<bool>()))),
                0..60,
            ),
        ) {
            let statuses = [ClientStatus::Pending, ClientStatus::Running, ClientStatus::Failed, ClientStatus::Complete];
            let mut table = AllocTable::default();
            let mut model = HashMap::new();
            let mut batch = Vec::new();
            for (n, change) in ops {
                match change {
                    Some((node, status, web, batched)) => {
                        let job = mock::service_job(if web { "web" } else { "api" }, 3);
                        let mut alloc = mock::alloc(n, &job, mock::node_id(node), n as u32);
                        alloc.client_status = statuses[status];
                        let row = alloc_row(&alloc);
                        model.insert(n, row.clone());
                        if batched {
                            batch.push(row);
                            continue;
                        }
                        table.insert_batch(std::mem::take(&mut batch));
                        table.upsert(row);
                    }
                    None => {
                        table.insert_batch(std::mem::take(&mut batch));
                        prop_assert_eq!(table.remove(&mock::alloc_id(n)), model.remove(&n));
                    }
                }
                check(&table, &model);
            }
            table.insert_batch(batch);
            check(&table, &model);
        }
    }
}
