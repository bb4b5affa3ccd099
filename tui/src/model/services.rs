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
