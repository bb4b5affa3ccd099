//! Ordered maps and sets built from sorted entries with full leaves.
//!
//! imbl's B-tree splits a full leaf at its middle. Entries inserted in ascending order
//! therefore leave every leaf but the last half full: each split keeps the lower half and
//! the inserts move on to the upper one. A leaf is a fixed-size array whatever it holds, so
//! a restart that built its indexes that way held twice the leaf memory it needed (random
//! writes leave leaves about 69 % full). Inserting every second entry first, then the ones
//! between, gives each half-full leaf exactly the entries that fall between its own, so it
//! fills without splitting.
//!
//! Only the memory depends on imbl's split rule: the map holds the same entries in any case.

use imbl::OrdMap;

/// The map of `entries`, with its leaves as full as the B-tree allows when the keys ascend
/// with none twice. Otherwise (never so for the callers, whose entries come from a map) it
/// is built by inserting them in order, so a later entry for a key wins as it would there.
pub fn from_sorted<K: Ord + Clone, V: Clone>(entries: Vec<(K, V)>) -> OrdMap<K, V> {
    if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
        return entries.into_iter().collect();
    }
    let mut map = OrdMap::new();
    insert_in_packing_order(entries, |(key, value)| {
        map.insert(key, value);
    });
    map
}

/// Hands `insert` the entries, sorted by key, in the order that fills a B-tree's leaves:
/// every second one, then the ones between.
pub fn insert_in_packing_order<T>(sorted: Vec<T>, mut insert: impl FnMut(T)) {
    let mut between = Vec::with_capacity(sorted.len() / 2);
    for (i, entry) in sorted.into_iter().enumerate() {
        if i % 2 == 0 {
            insert(entry);
        } else {
            between.push(entry);
        }
    }
    between.into_iter().for_each(insert);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The packed build holds exactly what inserting the entries one by one holds.
        #[test]
        fn holds_what_inserting_one_by_one_holds(
            keys in proptest::collection::btree_set(any::<u32>(), 0..2_000)
        ) {
            let entries: Vec<(u32, u64)> = keys.iter().map(|&k| (k, u64::from(k) * 3)).collect();
            let packed = from_sorted(entries.clone());
            let inserted: OrdMap<u32, u64> = entries.iter().cloned().collect();
            prop_assert_eq!(packed.len(), entries.len());
            prop_assert!(packed.iter().map(|(k, v)| (*k, *v)).eq(entries.iter().cloned()));
            prop_assert_eq!(packed, inserted);
        }

        /// Entries out of order or with a key twice give what inserting them in order gives.
        #[test]
        fn unsorted_entries_give_what_inserting_them_gives(
            entries in proptest::collection::vec((0u8..50, any::<u16>()), 0..300)
        ) {
            let inserted: OrdMap<u8, u16> = entries.iter().cloned().collect();
            prop_assert_eq!(from_sorted(entries), inserted);
        }
    }
}
