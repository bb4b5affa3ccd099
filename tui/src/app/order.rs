//! A table's rows in display order, kept sorted as rows come, change and go, so that one
//! changed row costs a binary search and a short move instead of re-sorting every row.
//!
//! Rows live in slots that never move; the order is a vector of slot numbers (4 bytes
//! each), so making room for a row shifts a few kilobytes even for 10,000 rows.

use crate::kinds::{RowKey, SortKey};
use std::cmp::Ordering;
use std::collections::HashMap;

/// Where a row sorts: by the sorted column's value (when the table is sorted), then by the
/// view's natural order, then by the row's key, so that no two rows ever compare equal.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rank {
    pub column: Option<SortKey>,
    pub natural: Vec<SortKey>,
}

#[derive(Clone, Debug)]
struct Slot {
    rank: Rank,
    key: RowKey,
}

impl Slot {
    fn cmp_to(&self, rank: &Rank, key: &RowKey) -> Ordering {
        self.rank.cmp(rank).then_with(|| self.key.cmp(key))
    }
}

/// Invariants: `sorted` holds every occupied slot once, in ascending (rank, key) order;
/// `slot_of` maps each present key to its slot; `free` lists exactly the empty slots.
#[derive(Clone, Debug, Default)]
pub struct RowOrder {
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    slot_of: HashMap<RowKey, u32>,
    sorted: Vec<u32>,
    /// Shown in reverse: the exact mirror of the ascending order, ties included.
    descending: bool,
}

impl RowOrder {
    /// An order of `rows` (keys are expected to be distinct; a repeated key keeps its
    /// last rank).
    pub fn build(rows: Vec<(Rank, RowKey)>, descending: bool) -> Self {
        let mut order = RowOrder {
            descending,
            ..Default::default()
        };
        order.slots.reserve(rows.len());
        for (rank, key) in rows {
            if let Some(old) = order.slot_of.get(&key) {
                order.slots[*old as usize] = Some(Slot { rank, key });
                continue;
            }
            let slot = order.slots.len() as u32;
            order.slot_of.insert(key.clone(), slot);
            order.slots.push(Some(Slot { rank, key }));
        }
        order.sorted = (0..order.slots.len() as u32).collect();
        let slots = &order.slots;
        order
            .sorted
            .sort_unstable_by(|a, b| match (&slots[*a as usize], &slots[*b as usize]) {
                (Some(a), Some(b)) => a.cmp_to(&b.rank, &b.key),
                _ => Ordering::Equal,
            });
        order
    }

    /// Whether the order is shown in reverse (set at build time).
    pub fn is_descending(&self) -> bool {
        self.descending
    }

    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    pub fn contains(&self, key: &RowKey) -> bool {
        self.slot_of.contains_key(key)
    }

    /// The row shown at display position `index`.
    pub fn get(&self, index: usize) -> Option<&RowKey> {
        let sorted_index = if self.descending {
            self.sorted.len().checked_sub(index + 1)?
        } else {
            index
        };
        let slot = *self.sorted.get(sorted_index)?;
        self.slots[slot as usize].as_ref().map(|s| &s.key)
    }

    /// The display position of `key`, found by binary search on its stored rank.
    pub fn position(&self, key: &RowKey) -> Option<usize> {
        let at = self.sorted_index(key)?;
        Some(if self.descending {
            self.sorted.len() - 1 - at
        } else {
            at
        })
    }

    /// The rows in display order.
    pub fn iter(&self) -> impl Iterator<Item = &RowKey> + '_ {
        self.rows_from(0).map(|(_, key)| key)
    }

    /// The rows from display position `start` on, with their positions: what a table
    /// scrolled to `start` draws, without walking the rows above it.
    pub fn rows_from(&self, start: usize) -> impl Iterator<Item = (usize, &RowKey)> + '_ {
        (start..self.len()).map_while(|i| self.get(i).map(|key| (i, key)))
    }

    /// Puts `key` where `rank` sorts, or takes it out when `rank` is `None`.
    pub fn set(&mut self, key: RowKey, rank: Option<Rank>) {
        self.remove(&key);
        let Some(rank) = rank else {
            return;
        };
        let at = self
            .sorted
            .partition_point(|slot| match &self.slots[*slot as usize] {
                Some(s) => s.cmp_to(&rank, &key) == Ordering::Less,
                None => false,
            });
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.slot_of.insert(key.clone(), slot);
        self.slots[slot as usize] = Some(Slot { rank, key });
        self.sorted.insert(at, slot);
    }

    fn remove(&mut self, key: &RowKey) {
        let Some(at) = self.sorted_index(key) else {
            return;
        };
        let slot = self.sorted.remove(at);
        self.slots[slot as usize] = None;
        self.slot_of.remove(key);
        self.free.push(slot);
    }

    fn sorted_index(&self, key: &RowKey) -> Option<usize> {
        let slot = *self.slot_of.get(key)?;
        let rank = &self.slots[slot as usize].as_ref()?.rank;
        self.sorted
            .binary_search_by(|s| match &self.slots[*s as usize] {
                Some(other) => other.cmp_to(rank, key),
                None => Ordering::Less,
            })
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn rank(column: Option<u64>, natural: u64) -> Rank {
        Rank {
            column: column.map(SortKey::Num),
            natural: vec![SortKey::Num(natural)],
        }
    }

    /// What the order must show: every present row by (rank, key), mirrored if descending.
    fn full_sort(rows: &BTreeMap<u64, Rank>, descending: bool) -> Vec<RowKey> {
        let mut all: Vec<(Rank, RowKey)> = rows
            .iter()
            .map(|(k, r)| (r.clone(), RowKey::Event(*k)))
            .collect();
        all.sort();
        let mut keys: Vec<RowKey> = all.into_iter().map(|(_, k)| k).collect();
        if descending {
            keys.reverse();
        }
        keys
    }

    proptest! {
        /// Rows arriving, changing rank (ties included) and leaving one at a time leave the
        /// order exactly as a full re-sort of the same rows, positions included.
        #[test]
        fn incremental_order_equals_a_full_sort(
            descending in any::<bool>(),
            initial in proptest::collection::vec((0u64..30, proptest::option::of(0u64..4), 0u64..4), 0..30),
            ops in proptest::collection::vec(
                (0u64..30, proptest::option::of((proptest::option::of(0u64..4), 0u64..4))),
                0..80,
            ),
        ) {
            let mut model: BTreeMap<u64, Rank> = BTreeMap::new();
            for (k, column, natural) in &initial {
                model.insert(*k, rank(*column, *natural));
            }
            let rows = initial
                .iter()
                .map(|(k, column, natural)| (rank(*column, *natural), RowKey::Event(*k)))
                .collect();
            let mut order = RowOrder::build(rows, descending);
            prop_assert_eq!(order.iter().cloned().collect::<Vec<_>>(), full_sort(&model, descending));
            for (k, change) in ops {
                let r = change.map(|(column, natural)| rank(column, natural));
                match &r {
                    Some(r) => model.insert(k, r.clone()),
                    None => model.remove(&k),
                };
                order.set(RowKey::Event(k), r);
                let want = full_sort(&model, descending);
                prop_assert_eq!(order.iter().cloned().collect::<Vec<_>>(), want.clone());
                prop_assert_eq!(order.len(), want.len());
                for (i, key) in want.iter().enumerate() {
                    prop_assert_eq!(order.position(key), Some(i));
                }
                prop_assert_eq!(order.contains(&RowKey::Event(k)), model.contains_key(&k));
            }
        }
    }
}
