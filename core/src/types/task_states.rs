//! An allocation's task states, by task name.

use super::TaskState;
use compact_str::CompactString;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use thin_vec::ThinVec;

/// Task name → state, sorted by name, names unique.
///
/// A boxed slice rather than a `BTreeMap`: a group runs one task or a few, and a `BTreeMap`
/// allocates a leaf with room for eleven entries whatever it holds (about 1 KB for one task
/// state), which across a million running allocations was the largest part of the servers'
/// memory. Lookups binary-search a handful of entries. It serializes as a map, exactly as
/// the `BTreeMap` did, so Raft logs and snapshots written before read the same.
///
/// A thin vector (one pointer, its length and capacity beside the entries) rather than a
/// boxed slice: it keeps the allocation record 8 bytes smaller, which is what makes room for
/// its ports within the 320-byte size class (see `Allocation`).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct TaskStates(ThinVec<(CompactString, TaskState)>);

impl TaskStates {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn position(&self, task: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(name, _)| name.as_str().cmp(task))
    }

    pub fn get(&self, task: &str) -> Option<&TaskState> {
        self.position(task).ok().map(|i| &self.0[i].1)
    }

    pub fn get_mut(&mut self, task: &str) -> Option<&mut TaskState> {
        self.position(task).ok().map(|i| &mut self.0[i].1)
    }

    /// Sets `task`'s state, returning the one it replaces (as `BTreeMap::insert` does).
    pub fn insert(
        &mut self,
        task: impl Into<CompactString>,
        state: TaskState,
    ) -> Option<TaskState> {
        let task = task.into();
        match self.position(&task) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, state)),
            Err(i) => {
                self.0.reserve_exact(1);
                self.0.insert(i, (task, state));
                None
            }
        }
    }

    /// `(task, state)` in task name order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &TaskState)> {
        self.into_iter()
    }

    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.0.iter().map(|(name, _)| name.as_str())
    }

    pub fn values(&self) -> impl ExactSizeIterator<Item = &TaskState> {
        self.0.iter().map(|(_, state)| state)
    }

    /// Sorts by name; of entries with the same name the last one wins, as in a map built by
    /// inserting them in order.
    fn from_entries(mut entries: Vec<(CompactString, TaskState)>) -> Self {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
        let mut out = ThinVec::with_capacity(entries.len());
        out.extend(entries);
        Self(out)
    }
}

impl<K: Into<CompactString>> FromIterator<(K, TaskState)> for TaskStates {
    fn from_iter<I: IntoIterator<Item = (K, TaskState)>>(iter: I) -> Self {
        Self::from_entries(iter.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}

impl<'a> IntoIterator for &'a TaskStates {
    type Item = (&'a str, &'a TaskState);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (CompactString, TaskState)>,
        fn(&'a (CompactString, TaskState)) -> (&'a str, &'a TaskState),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(name, state)| (name.as_str(), state))
    }
}

impl IntoIterator for TaskStates {
    type Item = (CompactString, TaskState);
    type IntoIter = thin_vec::IntoIter<(CompactString, TaskState)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl std::ops::Index<&str> for TaskStates {
    type Output = TaskState;

    /// Panics when `task` has no state, as indexing a map does.
    fn index(&self, task: &str) -> &TaskState {
        self.get(task)
            .unwrap_or_else(|| panic!("no state for task {task:?}"))
    }
}

impl Serialize for TaskStates {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for TaskStates {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;

        impl<'de> Visitor<'de> for Entries {
            type Value = TaskStates;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of task name to task state")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TaskStates, A::Error> {
                // A hint from the input bounds the up-front reservation, never trusted whole.
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some(entry) = map.next_entry::<CompactString, TaskState>()? {
                    entries.push(entry);
                }
                Ok(TaskStates::from_entries(entries))
            }
        }

        d.deserialize_map(Entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TaskRunState;
    use std::collections::BTreeMap;

    fn state(restarts: u32) -> TaskState {
        TaskState {
            state: TaskRunState::Running,
            restarts,
            ..TaskState::default()
        }
    }

    #[test]
    fn behaves_as_the_map_it_replaces() {
        let inserts = [("web", 1), ("db", 2), ("web", 3), ("cache", 4), ("a", 5)];
        let mut map = BTreeMap::new();
        let mut states = TaskStates::new();
        for (task, restarts) in inserts {
            assert_eq!(
                states.insert(task, state(restarts)),
                map.insert(task.to_string(), state(restarts)),
                "insert {task}"
            );
        }
        let collected: TaskStates = inserts.iter().map(|(t, r)| (*t, state(*r))).collect();
        assert_eq!(collected, states, "collect keeps the last of equal names");
        assert!(
            states
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .eq(map.clone())
        );
        assert_eq!(states.get("web"), map.get("web"));
        assert_eq!(states.get("nope"), None);
        assert_eq!(states["db"].restarts, 2);
        assert_eq!(states.len(), map.len());
    }

    #[test]
    fn encodes_exactly_as_the_map_did() {
        let map: BTreeMap<String, TaskState> =
            [("web".to_string(), state(1)), ("db".to_string(), state(2))].into();
        let states: TaskStates = map.clone().into_iter().collect();
        let old = postcard::to_allocvec(&map).unwrap();
        assert_eq!(postcard::to_allocvec(&states).unwrap(), old);
        let back: TaskStates = postcard::from_bytes(&old).unwrap();
        assert_eq!(back, states);
        let json = serde_json::to_string(&states).unwrap();
        assert_eq!(json, serde_json::to_string(&map).unwrap());
    }
}
