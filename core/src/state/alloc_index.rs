//! What an allocation write changes besides the by-id table, in two halves that share no
//! tree: by node (the by-node index, each node's usage, the nodes allocations name but the
//! node table lacks) and by job (the by-job index and the job summaries).
//!
//! Every write goes into the by-id table first ([`StateStore::insert_alloc`];
//! [`StateStore::insert_new_alloc`] for an id that should be free;
//! [`StateStore::revise_alloc`] for the next version of a stored one), and its change is then
//! indexed on its own ([`StateStore::index_alloc_change`]). A command that writes many
//! allocations (a plan, a batch of client reports) may instead hand the changes over in
//! one batch ([`StateStore::index_alloc_changes`]): each half then replays the batch in
//! order, so every tree ends as the writes one by one would leave it, and from
//! [`PARALLEL_INDEX_FROM`] changes the by-node half runs on the store's helper thread
//! ([`super::helper`]), its trees moved out of the store and handed back to be landed
//! ([`StateStore::land_by_node`]) when the caller next needs them: the FSM's applier lets
//! the next entry's by-id writes run meanwhile. The FSM's apply is the one serial path
//! every write takes (and a restart's replay is nothing else), so this is where the
//! second core shortens it.

use super::{JobAlloc, JobAllocs, JobSummary, NodeUse, StateStore, Table, TableIndexes};
use crate::types::*;
use imbl::OrdMap;
use std::sync::Arc;

/// From this many changes in a batch the two halves run on two threads: below it waking the
/// helper costs more than it saves. Core's own tests take the helper's way from two, so
/// that their small plans and reports run it, with its by-node half in flight.
const PARALLEL_INDEX_FROM: usize = if cfg!(test) { 2 } else { 256 };

/// The by-node half of a batch of allocation writes, still being written on the helper
/// thread. Until it lands ([`StateStore::land_by_node`]), the store's by-node trees (the
/// by-node index, node usage, tainted nodes) are empty.
#[derive(Debug)]
#[must_use = "land it (StateStore::land_by_node) before the by-node trees are used"]
pub(crate) struct ByNodeInFlight(super::helper::Pending<ByNodeTrees>);

/// One allocation written into the by-id table whose indexes are not yet changed.
#[derive(Debug)]
#[must_use = "index it (StateStore::index_alloc_change or _changes) before reading the indexes"]
pub(crate) struct AllocChange {
    pub(crate) old: Option<Arc<Allocation>>,
    pub(crate) new: Arc<Allocation>,
}

/// The by-node half's trees, borrowed apart from the by-job half's.
struct ByNode<'a> {
    by_node: &'a mut OrdMap<(NodeId, AllocId), Arc<Allocation>>,
    usage: &'a mut OrdMap<NodeId, NodeUse>,
    tainted: &'a mut OrdMap<NodeId, Option<Arc<Node>>>,
    nodes: &'a OrdMap<NodeId, Arc<Node>>,
}

/// The by-node half's trees moved out of the store, for the helper thread to write. `nodes`
/// is a copy of the node table's root (read only, and dropped before the store writes a
/// node again, so the table is still written in place).
#[derive(Debug)]
struct ByNodeTrees {
    by_node: OrdMap<(NodeId, AllocId), Arc<Allocation>>,
    usage: OrdMap<NodeId, NodeUse>,
    tainted: OrdMap<NodeId, Option<Arc<Node>>>,
    nodes: OrdMap<NodeId, Arc<Node>>,
}

impl ByNodeTrees {
    fn half(&mut self) -> ByNode<'_> {
        ByNode {
            by_node: &mut self.by_node,
            usage: &mut self.usage,
            tainted: &mut self.tainted,
            nodes: &self.nodes,
        }
    }
}

/// The by-job half's trees.
struct ByJob<'a> {
    by_job: &'a mut OrdMap<JobKey, JobAllocs>,
    summaries: &'a mut OrdMap<JobKey, Arc<JobSummary>>,
    indexes: &'a mut TableIndexes,
    jobs: &'a OrdMap<JobKey, Arc<Job>>,
}

impl StateStore {
    /// Stores an allocation, replacing any earlier one with its id: the FSM's two steps
    /// ([`Self::insert_alloc`], then indexing) in one, for tests.
    #[cfg(test)]
    pub(crate) fn put_alloc(&mut self, index: Index, mut alloc: Allocation) -> Arc<Allocation> {
        if let Some(shared) = self.shared_job_key(&alloc.job_key()) {
            alloc.namespace = shared.namespace.clone();
            alloc.job_id = shared.id.clone();
        }
        let change = self.insert_alloc(index, alloc);
        self.index_alloc_change(index, &change);
        change.new
    }

    /// Brings every index in step with one by-id write.
    pub(crate) fn index_alloc_change(&mut self, index: Index, change: &AllocChange) {
        self.index_here(index, std::slice::from_ref(change));
    }

    /// Writes an allocation into the by-id table only. Until its change has been indexed
    /// ([`Self::index_alloc_change`] or [`Self::index_alloc_changes`]), only
    /// [`Self::alloc`] may be read. Its namespace and job id are stored as they are: an
    /// allocation decoded from the log should first point them at
    /// [`Self::shared_job_key`]'s strings.
    pub(crate) fn insert_alloc(&mut self, index: Index, alloc: Allocation) -> AllocChange {
        let new = Arc::new(alloc);
        let old = self.allocs.insert(new.id, new.clone());
        self.touch(Table::Allocs, index);
        AllocChange { old, new }
    }

    /// [`Self::insert_alloc`] for an allocation whose id should be free, as a new
    /// placement's is: one walk down the by-id table (a cold one, at a million entries)
    /// instead of a lookup and then an insert. If the id is taken after all, the table is
    /// put back as it was and `alloc` is handed back (in the `Arc` made for it, which
    /// nothing else holds). Its key strings are stored as they are, as
    /// [`Self::insert_alloc`]'s are.
    pub(crate) fn insert_new_alloc(
        &mut self,
        index: Index,
        alloc: Allocation,
    ) -> Result<AllocChange, Arc<Allocation>> {
        let new = Arc::new(alloc);
        match self.allocs.insert(new.id, new.clone()) {
            None => {
                self.touch(Table::Allocs, index);
                Ok(AllocChange { old: None, new })
            }
            Some(old) => {
                self.allocs.insert(old.id, old);
                Err(new)
            }
        }
    }

    /// Writes the next version of stored allocation `id` in one walk of the by-id table:
    /// `revise` is handed the stored version and returns the next, or `None` to leave it
    /// (the walk has then copied its path out of any snapshot, which changes no value).
    /// The next version must keep the stored one's job key, whose strings are then
    /// already the shared ones. `None` when `id` is not stored or `revise` declined.
    pub(crate) fn revise_alloc(
        &mut self,
        index: Index,
        id: &AllocId,
        revise: impl FnOnce(&Allocation) -> Option<Allocation>,
    ) -> Option<AllocChange> {
        let slot = self.allocs.get_mut(id)?;
        let next = revise(slot)?;
        debug_assert!(
            next.id == *id && next.job_id == slot.job_id && next.namespace == slot.namespace,
            "a revision keeps the allocation's id and job"
        );
        let new = Arc::new(next);
        let old = std::mem::replace(slot, new.clone());
        self.touch(Table::Allocs, index);
        Some(AllocChange {
            old: Some(old),
            new,
        })
    }

    /// Brings every index in step with `changes`, in their order. From
    /// [`PARALLEL_INDEX_FROM`] changes, the by-node half is still being written on the
    /// helper thread when this returns: it comes back to be landed
    /// ([`Self::land_by_node`]), so that the caller's next writes overlap it.
    pub(crate) fn index_alloc_changes(
        &mut self,
        index: Index,
        changes: Vec<AllocChange>,
    ) -> Option<ByNodeInFlight> {
        if changes.len() < PARALLEL_INDEX_FROM {
            self.index_here(index, &changes);
            return None;
        }
        self.assert_by_node_home();
        let changes = Arc::new(changes);
        let mut trees = ByNodeTrees {
            by_node: std::mem::take(&mut self.allocs_by_node),
            usage: std::mem::take(&mut self.node_usage),
            tainted: std::mem::take(&mut self.tainted_nodes),
            nodes: self.nodes.clone(),
        };
        let for_helper = changes.clone();
        let by_node = super::helper::spawn(move || {
            let mut half = trees.half();
            for_helper.iter().for_each(|c| half.change(c));
            trees
        });
        let (_, mut by_job) = self.alloc_halves();
        changes.iter().for_each(|c| by_job.change(index, c));
        self.by_node_away = true;
        Some(ByNodeInFlight(by_node))
    }

    /// Puts the by-node trees the helper wrote back into the store, once it is done.
    pub(crate) fn land_by_node(&mut self, in_flight: ByNodeInFlight) {
        let ByNodeTrees {
            by_node,
            usage,
            tainted,
            nodes: _,
        } = in_flight.0.wait();
        self.allocs_by_node = by_node;
        self.node_usage = usage;
        self.tainted_nodes = tainted;
        self.by_node_away = false;
    }

    /// While a batch's by-node half is in flight, the store's by-node trees are empty:
    /// reading or writing them then would be a bug of the caller's.
    pub(super) fn assert_by_node_home(&self) {
        debug_assert!(
            !self.by_node_away,
            "the by-node trees are read or written while the helper holds them"
        );
    }

    /// Both halves of `changes`, one after the other on this thread.
    fn index_here(&mut self, index: Index, changes: &[AllocChange]) {
        let (mut by_node, mut by_job) = self.alloc_halves();
        changes.iter().for_each(|c| by_node.change(c));
        changes.iter().for_each(|c| by_job.change(index, c));
    }

    /// The key whose strings the allocations of job `key` share: its summary's, or before
    /// the summary exists its job's; `None` when the store has neither. An allocation
    /// decoded from the log carries its own copies; at a million allocations those two
    /// small heap strings each were tens of megabytes, and shared `Arc`s also let job key
    /// comparisons settle on pointer equality.
    pub(crate) fn shared_job_key(&self, key: &JobKey) -> Option<&JobKey> {
        match self.summaries.get_key_value(key) {
            Some((shared, _)) => Some(shared),
            None => self.jobs.get_key_value(key).map(|(shared, _)| shared),
        }
    }

    fn alloc_halves(&mut self) -> (ByNode<'_>, ByJob<'_>) {
        self.assert_by_node_home();
        (
            ByNode {
                by_node: &mut self.allocs_by_node,
                usage: &mut self.node_usage,
                tainted: &mut self.tainted_nodes,
                nodes: &self.nodes,
            },
            ByJob {
                by_job: &mut self.allocs_by_job,
                summaries: &mut self.summaries,
                indexes: &mut self.indexes,
                jobs: &self.jobs,
            },
        )
    }

    /// Changes a node's entry in `node_usage`, dropping it once it holds nothing.
    pub(super) fn change_use(&mut self, node: NodeId, f: impl FnOnce(&mut NodeUse)) {
        change_use(&mut self.node_usage, node, f);
    }

    pub(super) fn with_summary(
        &mut self,
        index: Index,
        key: &JobKey,
        f: impl FnOnce(&mut JobSummary),
    ) {
        with_summary(&mut self.summaries, &mut self.indexes, index, key, f);
    }

    pub(super) fn drop_summary_if_orphaned(&mut self, index: Index, key: &JobKey) {
        drop_summary_if_orphaned(
            &mut self.summaries,
            &mut self.indexes,
            &self.jobs,
            index,
            key,
        );
    }

    pub(crate) fn remove_alloc(&mut self, index: Index, id: &AllocId) -> Option<Arc<Allocation>> {
        let old = self.allocs.remove(id)?;
        let (mut by_node, mut by_job) = self.alloc_halves();
        by_node.remove(&old);
        by_job.remove(index, &old);
        self.touch(Table::Allocs, index);
        Some(old)
    }
}

impl ByNode<'_> {
    fn change(&mut self, AllocChange { old, new }: &AllocChange) {
        match old {
            Some(old) if same_keys(old, new) => return self.replace(old, new),
            Some(old) => self.unindex(old),
            None => {}
        }
        self.index(new);
        // Only an allocation that moves to a node can change whether a missing node is
        // named.
        let moved_from = old.as_ref().map(|o| o.node_id);
        if moved_from != Some(new.node_id) {
            if !self.nodes.contains_key(&new.node_id) {
                self.tainted.insert(new.node_id, None);
            }
            if let Some(from) = moved_from {
                forget_if_unnamed(self.tainted, self.by_node, &from);
            }
        }
    }

    fn remove(&mut self, old: &Allocation) {
        self.unindex(old);
        forget_if_unnamed(self.tainted, self.by_node, &old.node_id);
    }

    /// Two versions under the same keys: the entry is replaced where it is.
    fn replace(&mut self, old: &Allocation, new: &Arc<Allocation>) {
        self.by_node.insert((new.node_id, new.id), new.clone());
        let held = |a: &Allocation| a.uses_resources().then_some(a.resources);
        let (old_ports, new_ports) = (held_ports(old), held_ports(new));
        if held(old) == held(new) && old_ports == new_ports {
            return;
        }
        change_use(self.usage, new.node_id, |u| {
            if let Some(r) = held(old) {
                u.resources = u.resources - r;
                u.live = u.live.saturating_sub(1);
            }
            if let Some(r) = held(new) {
                u.resources += r;
                u.live += 1;
            }
            if old_ports != new_ports {
                u.change_ports(|p| {
                    p.remove(old_ports);
                    p.add(new_ports);
                });
            }
        });
    }

    fn index(&mut self, a: &Arc<Allocation>) {
        self.by_node.insert((a.node_id, a.id), a.clone());
        if a.uses_resources() {
            change_use(self.usage, a.node_id, |u| u.count(a, 1));
        }
    }

    fn unindex(&mut self, a: &Allocation) {
        self.by_node.remove(&(a.node_id, a.id));
        if a.uses_resources() {
            change_use(self.usage, a.node_id, |u| u.count(a, -1));
        }
    }
}

impl ByJob<'_> {
    fn change(&mut self, index: Index, AllocChange { old, new }: &AllocChange) {
        match old {
            Some(old) if same_keys(old, new) => {
                let key = new.job_key();
                self.put_entry(&key, new);
                self.summary(index, &key, |s| {
                    s.count_alloc(old, -1);
                    s.count_alloc(new, 1);
                });
                return;
            }
            Some(old) => self.unindex(index, old),
            None => {}
        }
        self.index(index, new);
        if let Some(old) = old {
            self.drop_if_orphaned(index, &old.job_key());
        }
    }

    fn remove(&mut self, index: Index, old: &Allocation) {
        self.unindex(index, old);
        self.drop_if_orphaned(index, &old.job_key());
    }

    fn index(&mut self, index: Index, a: &Arc<Allocation>) {
        let key = a.job_key();
        self.put_entry(&key, a);
        self.summary(index, &key, |s| s.count_alloc(a, 1));
    }

    fn unindex(&mut self, index: Index, a: &Allocation) {
        let key = a.job_key();
        if let Some(entries) = self.by_job.get_mut(&key) {
            entries.remove(&a.id);
            if entries.is_empty() {
                self.by_job.remove(&key);
            }
        }
        self.summary(index, &key, |s| s.count_alloc(a, -1));
    }

    /// Puts `a`'s entry in its job's map, making the map for the job's first allocation.
    fn put_entry(&mut self, key: &JobKey, a: &Arc<Allocation>) {
        let entry = JobAlloc::new(a.clone());
        match self.by_job.get_mut(key) {
            Some(entries) => entries.insert(entry),
            None => {
                self.by_job.insert(key.clone(), JobAllocs::one(entry));
            }
        }
    }

    fn summary(&mut self, index: Index, key: &JobKey, f: impl FnOnce(&mut JobSummary)) {
        with_summary(self.summaries, self.indexes, index, key, f);
    }

    fn drop_if_orphaned(&mut self, index: Index, key: &JobKey) {
        drop_summary_if_orphaned(self.summaries, self.indexes, self.jobs, index, key);
    }
}

/// Every allocation write that holds or frees resources changes its node's entry: found in
/// one walk when it exists (the map's `entry` walks twice).
fn change_use(usage: &mut OrdMap<NodeId, NodeUse>, node: NodeId, f: impl FnOnce(&mut NodeUse)) {
    if let Some(entry) = usage.get_mut(&node) {
        f(entry);
        if entry.is_empty() {
            usage.remove(&node);
        }
        return;
    }
    let mut entry = NodeUse::default();
    f(&mut entry);
    if !entry.is_empty() {
        usage.insert(node, entry);
    }
}

fn with_summary(
    summaries: &mut OrdMap<JobKey, Arc<JobSummary>>,
    indexes: &mut TableIndexes,
    index: Index,
    key: &JobKey,
    f: impl FnOnce(&mut JobSummary),
) {
    // Every allocation write changes its job's summary: found in one walk when it exists
    // (the map's `entry` walks twice).
    let change = |s: &mut JobSummary| {
        f(s);
        s.modify_index = index;
    };
    match summaries.get_mut(key) {
        Some(entry) => change(Arc::make_mut(entry)),
        None => {
            let mut s = JobSummary::new(key.clone());
            change(&mut s);
            summaries.insert(key.clone(), Arc::new(s));
        }
    }
    indexes.raise(Table::JobSummaries, index);
}

fn drop_summary_if_orphaned(
    summaries: &mut OrdMap<JobKey, Arc<JobSummary>>,
    indexes: &mut TableIndexes,
    jobs: &OrdMap<JobKey, Arc<Job>>,
    index: Index,
    key: &JobKey,
) {
    if !jobs.contains_key(key) && summaries.get(key).is_some_and(|s| s.is_empty()) {
        summaries.remove(key);
        indexes.raise(Table::JobSummaries, index);
    }
}

/// Drops a missing node from `tainted_nodes` once no allocation names it.
fn forget_if_unnamed(
    tainted: &mut OrdMap<NodeId, Option<Arc<Node>>>,
    by_node: &OrdMap<(NodeId, AllocId), Arc<Allocation>>,
    id: &NodeId,
) {
    if matches!(tainted.get(id), Some(None)) && !names_node(by_node, id) {
        tainted.remove(id);
    }
}

/// Whether any allocation in the by-node index is on `id`.
pub(super) fn names_node(
    by_node: &OrdMap<(NodeId, AllocId), Arc<Allocation>>,
    id: &NodeId,
) -> bool {
    by_node
        .range((*id, AllocId::MIN)..=(*id, AllocId::MAX))
        .next()
        .is_some()
}

/// Whether two versions of an allocation sit under the same keys in every index (node, job,
/// eval), so that replacing one by the other changes only the indexes' values.
fn same_keys(a: &Allocation, b: &Allocation) -> bool {
    a.node_id == b.node_id
        && a.eval_id == b.eval_id
        && a.job_id == b.job_id
        && a.namespace == b.namespace
}

/// The ports an allocation holds on its node: all of them while it uses resources.
fn held_ports(a: &Allocation) -> &[AllocatedPort] {
    if a.uses_resources() { &a.ports } else { &[] }
}
