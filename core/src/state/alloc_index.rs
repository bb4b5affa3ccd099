//! What an allocation write changes besides the by-id table, in two halves that share no
//! tree: the allocation indexes (by node: the by-node index, each node's usage, the nodes
//! allocations name but the node table lacks; by job: the by-job index) and the job
//! summaries.
//!
//! Every write goes into the by-id table first ([`StateStore::insert_alloc`];
//! [`StateStore::insert_new_alloc`] for an id that should be free;
//! [`StateStore::revise_alloc`] for the next version of a stored one), and its change is then
//! indexed on its own ([`StateStore::index_alloc_change`]). A command that writes many
//! allocations (a plan, a batch of client reports) may instead hand the changes over in
//! one batch ([`StateStore::index_alloc_changes`]): each half then replays the batch in
//! order, so every tree ends as the writes one by one would leave it, and from
//! [`PARALLEL_INDEX_FROM`] changes the allocation indexes are lent to the store's helper
//! thread ([`super::helper`]), moved out of the store and handed back to be landed
//! ([`StateStore::land_indexes`]) when the caller next needs them. Meanwhile the FSM's
//! applier writes the next entries' allocations by id and their summaries, and lends
//! their batches after the first (of any size: the indexes are away), so the helper
//! writes the batches in order while the caller runs ahead of it by at most
//! [`MAX_WAITING_BATCHES`]. The summaries stay with the caller because every entry's job
//! statuses are derived from them. The FSM's apply is the one serial path every write
//! takes (and a restart's replay is nothing else), so this is where the second core
//! shortens it.

use super::helper::Pending;
use super::{ByNode, JobAlloc, JobAllocs, JobSummary, NodeUse, StateStore, Table, TableIndexes};
use crate::types::*;
use imbl::OrdMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};

/// From this many changes in a batch the two halves run on two threads: below it waking the
/// helper costs more than it saves. Core's own tests take the helper's way from two, so
/// that their small plans and reports run it, with the indexes lent while the next entry
/// applies.
const PARALLEL_INDEX_FROM: usize = if cfg!(test) { 2 } else { 256 };

/// At most this many lent batches wait for the helper: with that many waiting, the caller
/// waits for the oldest before it lends the next, so that what waits (each batch's changes,
/// and the replaced versions they hold) stays bounded when the helper falls behind, and
/// the helper still has the rest to write meanwhile.
const MAX_WAITING_BATCHES: usize = 8;

/// The allocation indexes, lent to the helper thread while it writes one or more batches
/// into them, in order. Until they land ([`StateStore::land_indexes`]), the store's by-node
/// index, node usage, tainted nodes and by-job index are empty.
#[derive(Debug)]
#[must_use = "land them (StateStore::land_indexes) before the allocation indexes are used"]
pub(crate) struct LentIndexes {
    trees: Pending<IndexTrees>,
    /// One per batch that may still be waiting, oldest first: it hears when the helper is
    /// done with that batch (or has given up on it, unwinding from a panic that landing
    /// resumes).
    waiting: VecDeque<Receiver<()>>,
}

/// One allocation written into the by-id table whose indexes are not yet changed.
#[derive(Debug)]
#[must_use = "index it (StateStore::index_alloc_change or _changes) before reading the indexes"]
pub(crate) struct AllocChange {
    pub(crate) old: Option<Arc<Allocation>>,
    pub(crate) new: Arc<Allocation>,
}

/// The allocation indexes' half, borrowed apart from the summaries' half.
struct Indexes<'a> {
    by_node: &'a mut ByNode,
    usage: &'a mut OrdMap<NodeId, NodeUse>,
    tainted: &'a mut OrdMap<NodeId, Option<Arc<Node>>>,
    nodes: &'a OrdMap<NodeId, Arc<Node>>,
    by_job: &'a mut OrdMap<JobKey, JobAllocs>,
}

/// The allocation indexes moved out of the store, for the helper thread to write. `nodes`
/// is a copy of the node table's root (read only, and dropped before the store writes a
/// node again, so the table is still written in place).
#[derive(Debug)]
struct IndexTrees {
    by_node: ByNode,
    usage: OrdMap<NodeId, NodeUse>,
    tainted: OrdMap<NodeId, Option<Arc<Node>>>,
    nodes: OrdMap<NodeId, Arc<Node>>,
    by_job: OrdMap<JobKey, JobAllocs>,
}

impl IndexTrees {
    fn half(&mut self) -> Indexes<'_> {
        Indexes {
            by_node: &mut self.by_node,
            usage: &mut self.usage,
            tainted: &mut self.tainted,
            nodes: &self.nodes,
            by_job: &mut self.by_job,
        }
    }
}

/// The job summaries' half.
struct Summaries<'a> {
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

    /// Brings every index in step with `changes`, in their order, after the batches of
    /// `lent` if the caller has indexes lent. From [`PARALLEL_INDEX_FROM`] changes, or when
    /// they are lent already, the allocation indexes are still being written on the helper
    /// thread when this returns: they come back to be landed ([`Self::land_indexes`]) or
    /// handed to the next call, so that the caller's next writes overlap them. The summaries
    /// are written here, at once.
    pub(crate) fn index_alloc_changes(
        &mut self,
        index: Index,
        changes: Vec<AllocChange>,
        lent: Option<LentIndexes>,
    ) -> Option<LentIndexes> {
        let (trees, mut waiting) = match lent {
            Some(LentIndexes { trees, mut waiting }) => {
                while waiting.len() >= MAX_WAITING_BATCHES
                    && let Some(oldest) = waiting.pop_front()
                {
                    // Done or unwound: either way the helper has moved past it.
                    let _ = oldest.recv();
                }
                (trees, waiting)
            }
            None if changes.len() < PARALLEL_INDEX_FROM => {
                self.index_here(index, &changes);
                return None;
            }
            None => {
                self.assert_indexes_home();
                let trees = IndexTrees {
                    by_node: std::mem::take(&mut self.allocs_by_node),
                    usage: std::mem::take(&mut self.node_usage),
                    tainted: std::mem::take(&mut self.tainted_nodes),
                    nodes: self.nodes.clone(),
                    by_job: std::mem::take(&mut self.allocs_by_job),
                };
                self.indexes_lent = true;
                (Pending::Done(trees), VecDeque::new())
            }
        };
        let changes = Arc::new(changes);
        let for_helper = changes.clone();
        let (written, heard) = sync_channel(1);
        // The helper runs its jobs in order, so the batches lent before this one are
        // written by the time this job waits for them.
        let trees = super::helper::spawn(move || {
            let mut trees = trees.wait();
            let mut half = trees.half();
            for_helper.iter().for_each(|c| half.change(c));
            let _ = written.send(());
            trees
        });
        waiting.push_back(heard);
        let mut summaries = self.summaries_half();
        changes.iter().for_each(|c| summaries.change(index, c));
        Some(LentIndexes { trees, waiting })
    }

    /// Puts the allocation indexes the helper wrote back into the store, once it is done.
    pub(crate) fn land_indexes(&mut self, lent: LentIndexes) {
        let IndexTrees {
            by_node,
            usage,
            tainted,
            nodes: _,
            by_job,
        } = lent.trees.wait();
        self.allocs_by_node = by_node;
        self.node_usage = usage;
        self.tainted_nodes = tainted;
        self.allocs_by_job = by_job;
        self.indexes_lent = false;
    }

    /// While a batch's allocation indexes are lent to the helper, the store's copies are
    /// empty: reading or writing them then would be a bug of the caller's.
    pub(super) fn assert_indexes_home(&self) {
        debug_assert!(
            !self.indexes_lent,
            "the allocation indexes are read or written while the helper holds them"
        );
    }

    /// Both halves of `changes`, one after the other on this thread.
    fn index_here(&mut self, index: Index, changes: &[AllocChange]) {
        let (mut indexes, mut summaries) = self.alloc_halves();
        changes.iter().for_each(|c| indexes.change(c));
        changes.iter().for_each(|c| summaries.change(index, c));
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

    fn alloc_halves(&mut self) -> (Indexes<'_>, Summaries<'_>) {
        self.assert_indexes_home();
        (
            Indexes {
                by_node: &mut self.allocs_by_node,
                usage: &mut self.node_usage,
                tainted: &mut self.tainted_nodes,
                nodes: &self.nodes,
                by_job: &mut self.allocs_by_job,
            },
            Summaries {
                summaries: &mut self.summaries,
                indexes: &mut self.indexes,
                jobs: &self.jobs,
            },
        )
    }

    /// The summaries' half alone, which stays home while the indexes are lent.
    fn summaries_half(&mut self) -> Summaries<'_> {
        Summaries {
            summaries: &mut self.summaries,
            indexes: &mut self.indexes,
            jobs: &self.jobs,
        }
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
        let (mut indexes, mut summaries) = self.alloc_halves();
        indexes.remove(&old);
        summaries.remove(index, &old);
        self.touch(Table::Allocs, index);
        Some(old)
    }
}

impl Indexes<'_> {
    fn change(&mut self, change: &AllocChange) {
        self.change_by_node(change);
        self.change_by_job(change);
    }

    fn remove(&mut self, old: &Allocation) {
        self.unindex_on_node(old);
        forget_if_unnamed(self.tainted, self.by_node, &old.node_id);
        self.remove_job_entry(old);
    }

    fn change_by_node(&mut self, AllocChange { old, new }: &AllocChange) {
        match old {
            Some(old) if same_keys(old, new) => return self.replace_on_node(old, new),
            Some(old) => self.unindex_on_node(old),
            None => {}
        }
        self.index_on_node(new);
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

    /// Two versions under the same keys: the by-node entry changes only with the servers'
    /// modify index (never for a node's report), and the node's usage with what it holds.
    fn replace_on_node(&mut self, old: &Allocation, new: &Arc<Allocation>) {
        if old.alloc_modify_index != new.alloc_modify_index {
            self.by_node
                .insert((new.node_id, new.id), new.alloc_modify_index);
        }
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

    fn index_on_node(&mut self, a: &Arc<Allocation>) {
        self.by_node.insert((a.node_id, a.id), a.alloc_modify_index);
        if a.uses_resources() {
            change_use(self.usage, a.node_id, |u| u.count(a, 1));
        }
    }

    fn unindex_on_node(&mut self, a: &Allocation) {
        self.by_node.remove(&(a.node_id, a.id));
        if a.uses_resources() {
            change_use(self.usage, a.node_id, |u| u.count(a, -1));
        }
    }

    /// A change that leaves every field of the entry as it was (a report of task events
    /// alone, a server change of fields the reconciler does not read) writes nothing.
    fn change_by_job(&mut self, AllocChange { old, new }: &AllocChange) {
        let entry = JobAlloc::new(new);
        match old.as_deref() {
            Some(old) if !same_keys(old, new) => self.remove_job_entry(old),
            Some(old) if JobAlloc::new(old) == entry => return,
            _ => {}
        }
        self.put_job_entry(new.job_key(), entry);
    }

    /// Puts `entry` in the job's map (replacing one with its id), making the map for the
    /// job's first allocation.
    fn put_job_entry(&mut self, key: JobKey, entry: JobAlloc) {
        match self.by_job.get_mut(&key) {
            Some(entries) => entries.insert(entry),
            None => {
                self.by_job.insert(key, JobAllocs::one(entry));
            }
        }
    }

    fn remove_job_entry(&mut self, a: &Allocation) {
        let key = a.job_key();
        if let Some(entries) = self.by_job.get_mut(&key) {
            entries.remove(&a.id);
            if entries.is_empty() {
                self.by_job.remove(&key);
            }
        }
    }
}

impl Summaries<'_> {
    fn change(&mut self, index: Index, AllocChange { old, new }: &AllocChange) {
        match old {
            Some(old) if same_keys(old, new) => {
                self.summary(index, &new.job_key(), |s| {
                    s.count_alloc(old, -1);
                    s.count_alloc(new, 1);
                });
                return;
            }
            Some(old) => self.summary(index, &old.job_key(), |s| s.count_alloc(old, -1)),
            None => {}
        }
        self.summary(index, &new.job_key(), |s| s.count_alloc(new, 1));
        if let Some(old) = old {
            self.drop_if_orphaned(index, &old.job_key());
        }
    }

    fn remove(&mut self, index: Index, old: &Allocation) {
        self.summary(index, &old.job_key(), |s| s.count_alloc(old, -1));
        self.drop_if_orphaned(index, &old.job_key());
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
    by_node: &ByNode,
    id: &NodeId,
) {
    if matches!(tainted.get(id), Some(None)) && !names_node(by_node, id) {
        tainted.remove(id);
    }
}

/// Whether any allocation in the by-node index is on `id`.
pub(super) fn names_node(by_node: &ByNode, id: &NodeId) -> bool {
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
