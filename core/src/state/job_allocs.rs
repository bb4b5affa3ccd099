//! One job's entries in the per-job allocation index, by allocation id.
//!
//! The index is a map of jobs, each holding a map of its allocations, so an entry's key is
//! the allocation id alone: under a `(JobKey, AllocId)` key each entry carried the job's two
//! strings (a third of its bytes), and every leaf copied on write cloned them. But a B-tree
//! leaf is a fixed array of sixteen entries whatever it holds, so a job of one allocation
//! would pay for sixteen. A job's entries therefore sit in one exact-size slice while they
//! are few, and in a B-tree once they are many; which one is a function of the count alone
//! ([`FEW`]), so a store restored from a snapshot holds what the live one did. Either form
//! holds the entries alone, each keyed by its own [`JobAlloc::id`]: a separate key would be
//! a copy of it (16 bytes of every entry).

use super::JobAlloc;
use crate::types::AllocId;
use imbl::OrdSet;
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

/// Up to this many entries sit in one slice: rewriting a slice to insert costs about what
/// copying a B-tree leaf on write does, and the slice wastes nothing.
pub const FEW: usize = 32;

/// One job's entries, in id order; never empty in the index (an empty job has no entry).
#[derive(Clone, Debug)]
pub enum JobAllocs {
    /// At most [`FEW`] entries, sorted by id, exactly as many as held; each entry's own
    /// [`JobAlloc::id`] is its key.
    Few(Arc<[JobAlloc]>),
    /// More than [`FEW`].
    Many(OrdSet<ById>),
}

/// An entry as a B-tree holds it: ordered, equal and looked up by its allocation's id alone
/// (no two entries of a job share one); compare the entries inside to compare them whole.
#[derive(Clone, Debug)]
pub struct ById(pub JobAlloc);

impl PartialEq for ById {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for ById {}

impl PartialOrd for ById {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ById {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.id.cmp(&other.0.id)
    }
}

impl Borrow<AllocId> for ById {
    fn borrow(&self) -> &AllocId {
        &self.0.id
    }
}

impl JobAllocs {
    /// Entries sorted by id, with no id twice.
    pub fn from_sorted(entries: Vec<JobAlloc>) -> Self {
        debug_assert!(entries.windows(2).all(|w| w[0].id < w[1].id));
        if entries.len() <= FEW {
            Self::Few(entries.into())
        } else {
            let mut many = OrdSet::new();
            super::packed::insert_in_packing_order(entries, |e| {
                many.insert(ById(e));
            });
            Self::Many(many)
        }
    }

    /// A job's first entry.
    pub fn one(entry: JobAlloc) -> Self {
        Self::Few(Arc::new([entry]))
    }

    pub fn len(&self) -> usize {
        match self {
            Self::Few(few) => few.len(),
            Self::Many(many) => many.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Puts `entry` under its own id, replacing any entry there.
    pub fn insert(&mut self, entry: JobAlloc) {
        let id = entry.id;
        match self {
            Self::Few(few) => match few.binary_search_by_key(&id, |e| e.id) {
                Ok(at) => Arc::make_mut(few)[at] = entry,
                Err(at) if few.len() < FEW => {
                    let mut grown = Vec::with_capacity(few.len() + 1);
                    grown.extend_from_slice(&few[..at]);
                    grown.push(entry);
                    grown.extend_from_slice(&few[at..]);
                    *few = grown.into();
                }
                Err(_) => {
                    let mut many: OrdSet<ById> = few.iter().cloned().map(ById).collect();
                    many.insert(ById(entry));
                    *self = Self::Many(many);
                }
            },
            Self::Many(many) => {
                many.insert(ById(entry));
            }
        }
    }

    /// Removes the entry under `id`, if any.
    pub fn remove(&mut self, id: &AllocId) {
        match self {
            Self::Few(few) => {
                if let Ok(at) = few.binary_search_by_key(id, |e| e.id) {
                    let kept: Vec<_> = few[..at].iter().chain(&few[at + 1..]).cloned().collect();
                    *few = kept.into();
                }
            }
            Self::Many(many) => {
                many.remove(id);
                if many.len() <= FEW {
                    *self = Self::Few(many.iter().map(|e| e.0.clone()).collect());
                }
            }
        }
    }

    /// The entry under `id` of a job of few entries, for tests that break an entry on
    /// purpose (changing its `id` unsorts the slice). A B-tree's entries cannot be reached in
    /// place: their ids place them.
    #[cfg(test)]
    pub fn few_entry_mut(&mut self, id: &AllocId) -> Option<&mut JobAlloc> {
        match self {
            Self::Few(few) => {
                let at = few.binary_search_by_key(id, |e| e.id).ok()?;
                Some(&mut Arc::make_mut(few)[at])
            }
            Self::Many(_) => None,
        }
    }

    /// The entries in id order.
    pub fn iter(&self) -> Entries<'_> {
        self.after(None)
    }

    /// The entries with ids above `after` (all for `None`), in id order.
    pub fn after(&self, after: Option<AllocId>) -> Entries<'_> {
        match self {
            Self::Few(few) => {
                let from = match after {
                    Some(id) => few.partition_point(|e| e.id <= id),
                    None => 0,
                };
                Entries::Few(few[from..].iter())
            }
            Self::Many(many) => {
                let from = match after {
                    Some(id) => Bound::Excluded(id),
                    None => Bound::Unbounded,
                };
                Entries::Many(many.range((from, Bound::Unbounded)))
            }
        }
    }
}

/// Equal when they hold the same entries, whichever form holds them.
impl PartialEq for JobAllocs {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

/// [`JobAllocs::after`]'s iterator.
pub enum Entries<'a> {
    Few(std::slice::Iter<'a, JobAlloc>),
    Many(imbl::ordset::RangedIter<'a, ById, imbl::shared_ptr::DefaultSharedPtr>),
}

impl std::fmt::Debug for Entries<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entries").finish_non_exhaustive()
    }
}

impl Entries<'_> {
    /// The entries of a job that has none.
    pub fn none() -> Self {
        Self::Few([].iter())
    }
}

/// Yields the entries alone: each carries its id.
impl<'a> Iterator for Entries<'a> {
    type Item = &'a JobAlloc;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::Few(few) => few.next(),
            Self::Many(many) => many.next().map(|e| &e.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn entry(n: u64) -> JobAlloc {
        JobAlloc::new(&mock::alloc(
            n,
            &mock::service_job("web", 80),
            mock::node_id(n % 3),
            n as u32,
        ))
    }

    /// The form is a function of the count alone.
    fn form_fits(m: &JobAllocs) -> bool {
        matches!(
            (m, m.len() <= FEW),
            (JobAllocs::Few(_), true) | (JobAllocs::Many(_), false)
        )
    }

    proptest! {
        /// Inserts and removes hold what a plain sorted map holds, in the form its count
        /// names, and read the same from any starting id; an insert under a held id
        /// replaces the entry.
        #[test]
        fn holds_what_a_sorted_map_holds(
            ops in proptest::collection::vec((any::<bool>(), 0u64..80, 0u64..4), 1..400),
            after in 0u64..80,
        ) {
            let entries: Vec<JobAlloc> = (0..80).map(entry).collect();
            let mut m = JobAllocs::from_sorted(Vec::new());
            let mut model: BTreeMap<AllocId, u64> = BTreeMap::new();
            for (put, n, version) in ops {
                let id = entries[n as usize].id;
                if put {
                    let mut e = entries[n as usize].clone();
                    e.job_version = version;
                    m.insert(e);
                    model.insert(id, version);
                } else {
                    m.remove(&id);
                    model.remove(&id);
                }
                prop_assert!(form_fits(&m), "{} entries in the wrong form", m.len());
                prop_assert_eq!(m.len(), model.len());
            }
            let held: Vec<(AllocId, u64)> = m.iter().map(|e| (e.id, e.job_version)).collect();
            prop_assert_eq!(held, model.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
            let from = entries[after as usize].id;
            let tail: Vec<AllocId> = m.after(Some(from)).map(|e| e.id).collect();
            let model_tail: Vec<AllocId> = model
                .range((Bound::Excluded(from), Bound::Unbounded))
                .map(|(k, _)| *k)
                .collect();
            prop_assert_eq!(tail, model_tail);
            let rebuilt = JobAllocs::from_sorted(m.iter().cloned().collect());
            prop_assert!(form_fits(&rebuilt));
            prop_assert_eq!(rebuilt, m);
        }
    }

    #[test]
    fn a_write_to_a_shared_slice_leaves_the_other_copy_alone() {
        let mut m = JobAllocs::from_sorted((0..3).map(entry).collect());
        let before = m.clone();
        let id = entry(1).id;
        m.few_entry_mut(&id).expect("held").job_version += 1;
        m.remove(&entry(0).id);
        assert_eq!(before.len(), 3);
        assert!(before.iter().zip(0..).all(|(e, n)| *e == entry(n)));
        assert_eq!(m.len(), 2);
        let first = m.iter().next().expect("an entry");
        assert_eq!(
            (first.id, first.job_version),
            (id, entry(1).job_version + 1)
        );
    }
}
