//! The service catalog as the console keeps it: every registration by id, and which
//! registrations each allocation has, so the allocation detail never walks the catalog.

use drover_core::{AllocId, ServiceRegistration};
use std::collections::{BTreeSet, HashMap};

/// Invariant: `by_alloc` lists exactly the ids in `by_id`, each under its allocation.
#[derive(Debug, Default)]
pub struct ServiceTable {
    by_id: HashMap<String, ServiceRegistration>,
    by_alloc: HashMap<AllocId, BTreeSet<String>>,
}

impl ServiceTable {
    pub fn of(registrations: Vec<ServiceRegistration>) -> Self {
        let mut table = Self::default();
        for r in registrations {
            table.upsert(r);
        }
        table
    }

    pub fn get(&self, id: &str) -> Option<&ServiceRegistration> {
        self.by_id.get(id)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &ServiceRegistration> {
        self.by_id.values()
    }

    /// Keeps `r` unless a newer version of it (by modify index) is held: replaying events
    /// the load already covers changes nothing.
    pub fn upsert(&mut self, r: ServiceRegistration) {
        if let Some(old) = self.by_id.get(&r.id) {
            if old.modify_index > r.modify_index {
                return;
            }
            // An id names its allocation, but a malformed one must not leave a stale entry.
            if old.alloc_id != r.alloc_id {
                let (id, alloc) = (old.id.clone(), old.alloc_id);
                self.unindex(alloc, &id);
            }
        }
        self.by_alloc
            .entry(r.alloc_id)
            .or_default()
            .insert(r.id.clone());
        self.by_id.insert(r.id.clone(), r);
    }

    pub fn remove(&mut self, id: &str) {
        if let Some(old) = self.by_id.remove(id) {
            self.unindex(old.alloc_id, id);
        }
    }

    fn unindex(&mut self, alloc: AllocId, id: &str) {
        if let Some(ids) = self.by_alloc.get_mut(&alloc) {
            ids.remove(id);
            if ids.is_empty() {
                self.by_alloc.remove(&alloc);
            }
        }
    }

    /// The registrations of one allocation, in id order.
    pub fn of_alloc(&self, alloc: AllocId) -> impl Iterator<Item = &ServiceRegistration> {
        self.by_alloc
            .get(&alloc)
            .into_iter()
            .flatten()
            .filter_map(|id| self.by_id.get(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Registration `n` of allocation `alloc` at `modify_index`.
    fn registration(n: u8, alloc: u8, modify_index: u64) -> ServiceRegistration {
        let mut r = crate::fixtures::services(40, 60).swap_remove(0);
        r.id = format!("reg-{n}");
        r.alloc_id = crate::fixtures::alloc_id(alloc.into());
        r.modify_index = modify_index;
        r
    }

    proptest! {
        /// Whatever the order of upserts and removals, each allocation lists exactly the
        /// registrations held for it, and a registration is the newest version applied.
        #[test]
        fn by_alloc_equals_a_recount(
            steps in prop::collection::vec((any::<bool>(), 0u8..6, 0u8..3, 0u64..5), 0..40)
        ) {
            let mut table = ServiceTable::default();
            let mut newest: HashMap<String, ServiceRegistration> = HashMap::new();
            for (remove, n, alloc, index) in steps {
                let r = registration(n, alloc, index);
                if remove {
                    table.remove(&r.id);
                    newest.remove(&r.id);
                } else {
                    if newest.get(&r.id).is_none_or(|old| old.modify_index <= index) {
                        newest.insert(r.id.clone(), r.clone());
                    }
                    table.upsert(r);
                }
            }
            prop_assert_eq!(table.len(), newest.len());
            for alloc in 0u8..3 {
                let alloc = crate::fixtures::alloc_id(alloc.into());
                let held: Vec<&str> = table.of_alloc(alloc).map(|r| r.id.as_str()).collect();
                let mut expected: Vec<&str> = newest
                    .values()
                    .filter(|r| r.alloc_id == alloc)
                    .map(|r| r.id.as_str())
                    .collect();
                expected.sort_unstable();
                prop_assert_eq!(held, expected);
            }
            for r in newest.values() {
                prop_assert_eq!(table.get(&r.id), Some(r));
            }
        }
    }
}
