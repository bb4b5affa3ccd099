//! The store's write primitives. Only the FSM calls them; each keeps every secondary index,
//! the node usage table and the job summaries in step with the primary table it changes.

use super::{
    JOB_VERSIONS_KEPT, JobAlloc, JobSummary, StateStore, Table, summary::derive_job_status,
};
use crate::types::*;
use std::sync::Arc;

/// From this many allocations a restore builds its indexes on two threads.
const PARALLEL_RESTORE_FROM: usize = 50_000;

impl StateStore {
    /// Stores a job and records it as a version. Older versions beyond the kept number go.
    pub(crate) fn put_job(&mut self, index: Index, job: Job) -> Arc<Job> {
        let key = job.key();
        let job = Arc::new(job);
        self.jobs.insert(key.clone(), job.clone());
        self.touch(Table::Jobs, index);
        if self
            .job_versions
            .get(&(key.clone(), job.version))
            .is_none_or(|v| **v != *job)
        {
            self.job_versions
                .insert((key.clone(), job.version), job.clone());
            if let Some(old) = job.version.checked_sub(JOB_VERSIONS_KEPT) {
                self.job_versions.remove(&(key.clone(), old));
            }
            self.touch(Table::JobVersions, index);
        }
        self.summaries
            .entry(key.clone())
            .or_insert_with(|| Arc::new(JobSummary::new(key)));
        job
    }

    /// Marks a job version stable (its deployment succeeded), in the versions table and,
    /// when it is the job's current version, in the jobs table.
    pub(crate) fn mark_job_version_stable(&mut self, index: Index, key: &JobKey, version: u64) {
        if let Some(v) = self.job_versions.get(&(key.clone(), version))
            && !v.stable
        {
            let mut v = (**v).clone();
            v.stable = true;
            v.modify_index = index;
            self.job_versions
                .insert((key.clone(), version), Arc::new(v));
            self.touch(Table::JobVersions, index);
        }
        if let Some(j) = self.jobs.get(key)
            && j.version == version
            && !j.stable
        {
            let mut j = (**j).clone();
            j.stable = true;
            j.modify_index = index;
            let j = Arc::new(j);
            self.jobs.insert(key.clone(), j.clone());
            self.job_versions.insert((key.clone(), version), j);
            self.touch(Table::Jobs, index);
        }
    }

    /// Removes a job and its versions. Its summary stays while allocs or evals refer to it.
    pub(crate) fn remove_job(&mut self, index: Index, key: &JobKey) -> Option<Arc<Job>> {
        let job = self.jobs.remove(key)?;
        self.touch(Table::Jobs, index);
        let versions: Vec<_> = self
            .job_versions
            .range((key.clone(), 0)..=(key.clone(), u64::MAX))
            .map(|(k, _)| k.clone())
            .collect();
        for v in versions {
            self.job_versions.remove(&v);
        }
        self.touch(Table::JobVersions, index);
        if self.summaries.get(key).is_some_and(|s| s.is_empty()) {
            self.summaries.remove(key);
            self.touch(Table::JobSummaries, index);
        }
        Some(job)
    }

    pub(crate) fn put_node(&mut self, index: Index, mut node: Node) -> Arc<Node> {
        node.stored_class_key = StoredClassKey(Some(node.hash_class_key()));
        let node = Arc::new(node);
        if let Some(old) = self.nodes.insert(node.id, node.clone()) {
            if old.name != node.name {
                self.nodes_by_name.remove(&(old.name.clone(), old.id));
            }
            self.unlist_schedulable(&old);
        }
        self.nodes_by_name.insert((node.name.clone(), node.id));
        self.list_schedulable(&node);
        self.retaint(&node.id);
        self.touch(Table::Nodes, index);
        node
    }

    pub(crate) fn remove_node(&mut self, index: Index, id: &NodeId) -> Option<Arc<Node>> {
        let node = self.nodes.remove(id)?;
        self.nodes_by_name.remove(&(node.name.clone(), node.id));
        self.unlist_schedulable(&node);
        self.retaint(id);
        self.touch(Table::Nodes, index);
        Some(node)
    }

    /// Adds a node to its datacenter's schedulable set, if it is schedulable.
    pub(super) fn list_schedulable(&mut self, node: &Arc<Node>) {
        if !node.is_schedulable() {
            return;
        }
        match self.schedulable.get_mut(&node.datacenter) {
            Some(set) => {
                set.insert(node.id, node.clone());
            }
            None => {
                self.schedulable.insert(
                    node.datacenter.clone(),
                    imbl::OrdMap::unit(node.id, node.clone()),
                );
            }
        }
    }

    /// Takes a node's old version out of its datacenter's schedulable set.
    fn unlist_schedulable(&mut self, old: &Node) {
        if !old.is_schedulable() {
            return;
        }
        if let Some(set) = self.schedulable.get_mut(&old.datacenter) {
            set.remove(&old.id);
            if set.is_empty() {
                self.schedulable.remove(&old.datacenter);
            }
        }
    }

    /// Brings a node's entry in `tainted_nodes` in line with the node table and the
    /// allocations that name it.
    pub(super) fn retaint(&mut self, id: &NodeId) {
        let entry = match self.nodes.get(id) {
            Some(node) if node.is_tainted() => Some(Some(node.clone())),
            Some(_) => None,
            None if self.has_allocs_on(id) => Some(None),
            None => None,
        };
        match entry {
            Some(e) => {
                self.tainted_nodes.insert(*id, e);
            }
            None => {
                self.tainted_nodes.remove(id);
            }
        }
    }

    fn has_allocs_on(&self, id: &NodeId) -> bool {
        self.allocs_by_node
            .range((*id, AllocId::MIN)..=(*id, AllocId::MAX))
            .next()
            .is_some()
    }

    /// Stores an allocation, replacing any earlier one with its id.
    pub(crate) fn put_alloc(&mut self, index: Index, mut alloc: Allocation) -> Arc<Allocation> {
        self.share_job_key(&mut alloc);
        let alloc = Arc::new(alloc);
        let old = self.allocs.insert(alloc.id, alloc.clone());
        match &old {
            // The usual write (a client status, a desired transition) keeps every index key:
            // the entries are replaced where they are rather than removed and re-inserted.
            Some(old) if same_keys(old, &alloc) => {
                self.reindex_alloc(index, old, &alloc);
                self.touch(Table::Allocs, index);
                return alloc;
            }
            Some(old) => self.unindex_alloc(index, old),
            None => {}
        }
        self.index_alloc(index, &alloc);
        // Only an allocation that moves to a node can change whether a missing node is
        // named.
        let moved_from = old.as_ref().map(|o| o.node_id);
        if moved_from != Some(alloc.node_id) {
            if !self.nodes.contains_key(&alloc.node_id) {
                self.tainted_nodes.insert(alloc.node_id, None);
            }
            if let Some(from) = moved_from {
                self.forget_if_unnamed(&from);
            }
        }
        if let Some(old) = &old {
            self.drop_summary_if_orphaned(index, &old_key(old));
        }
        self.touch(Table::Allocs, index);
        alloc
    }

    /// Puts a snapshot's allocations (none present yet, `allocs` in id order as a snapshot
    /// holds them) in the table and every index in bulk, to the same store as one
    /// [`put_alloc`](Self::put_alloc) each. Each index is filled in its own key order (by
    /// id, by job, by node), so every insert lands beside the last instead of at a random
    /// place, and each job's summary and each node's usage is looked up once, not once per
    /// allocation: a restart at a million allocations spends most of its snapshot load
    /// here. Only pointers move: each allocation was put behind its `Arc` on the thread
    /// that decoded it, and is changed in place here only to share its job's key strings.
    pub(super) fn restore_allocs(&mut self, mut allocs: Vec<Arc<Allocation>>) {
        debug_assert!(self.allocs.is_empty(), "restore into an empty store");
        if !allocs.is_sorted_by_key(|a| a.id) {
            allocs.sort_unstable_by_key(|a| a.id);
        }
        /// One job's allocations, in id order, and the key strings they share.
        struct Group {
            namespace: Arc<str>,
            id: JobId,
            allocs: Vec<Arc<Allocation>>,
        }
        let mut groups: std::collections::HashMap<JobKey, Group> = std::collections::HashMap::new();
        for a in &mut allocs {
            let group = groups.entry(old_key(a)).or_insert_with_key(|key| {
                // The strings the summary's key already holds, or this key's for a new one.
                let (namespace, id) = match self.summaries.get_key_value(key) {
                    Some((shared, _)) => (shared.namespace.clone(), shared.id.clone()),
                    None => (key.namespace.clone(), key.id.clone()),
                };
                Group {
                    namespace,
                    id,
                    allocs: Vec::new(),
                }
            });
            if !(Arc::ptr_eq(&a.namespace, &group.namespace)
                && Arc::ptr_eq(&a.job_id.0, &group.id.0))
            {
                let a = Arc::make_mut(a);
                a.namespace = group.namespace.clone();
                a.job_id = group.id.clone();
            }
            group.allocs.push(a.clone());
        }
        let mut groups: Vec<(JobKey, Group)> = groups.into_iter().collect();
        groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut job_index = Vec::with_capacity(allocs.len());
        for (key, group) in groups {
            let summary = self
                .summaries
                .entry(key.clone())
                .or_insert_with(|| Arc::new(JobSummary::new(key)));
            let summary = Arc::make_mut(summary);
            for a in group.allocs {
                summary.count_alloc(&a, 1);
                job_index.push(((old_key(&a), a.id), JobAlloc::new(a)));
            }
        }
        let by_node: Vec<((NodeId, AllocId), Arc<Allocation>)> = allocs
            .iter()
            .map(|a| ((a.node_id, a.id), a.clone()))
            .collect();
        // The by-job index and the table go on a second thread while this one fills the
        // by-node index and the nodes' usage: the trees are independent, a restart has the
        // machine to itself, and the result is the same whichever finishes first.
        // (A small store is built on this thread: a thread costs more than it saves there.)
        let by_id_and_job = move || {
            let table: imbl::OrdMap<AllocId, Arc<Allocation>> =
                allocs.into_iter().map(|a| (a.id, a)).collect();
            (table, job_index.into_iter().collect())
        };
        let (table, by_job) = if by_node.len() < PARALLEL_RESTORE_FROM {
            self.index_by_node(by_node);
            by_id_and_job()
        } else {
            std::thread::scope(|scope| {
                let built = scope.spawn(by_id_and_job);
                self.index_by_node(by_node);
                built
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
        };
        self.allocs = table;
        self.allocs_by_job = by_job;
    }

    /// The by-node half of [`restore_allocs`](Self::restore_allocs): the index, each node's
    /// usage, and the nodes that allocations name but the node table lacks.
    fn index_by_node(&mut self, mut by_node: Vec<((NodeId, AllocId), Arc<Allocation>)>) {
        by_node.sort_unstable_by_key(|(k, _)| *k);
        for same_node in by_node.chunk_by(|x, y| x.0.0 == y.0.0) {
            let node = same_node[0].0.0;
            if !self.nodes.contains_key(&node) {
                self.tainted_nodes.insert(node, None);
            }
            let live = same_node
                .iter()
                .map(|(_, a)| a)
                .filter(|a| a.uses_resources());
            self.change_use(node, |u| live.for_each(|a| u.count(a, 1)));
        }
        self.allocs_by_node = by_node.into_iter().collect();
    }

    /// Points the allocation's namespace and job id at the strings its job's summary already
    /// holds. An allocation decoded from the log carries its own copies; at a million
    /// allocations those two small heap strings each were tens of megabytes, and shared
    /// `Arc`s also let job key comparisons settle on pointer equality.
    fn share_job_key(&self, alloc: &mut Allocation) {
        let key = old_key(alloc);
        if let Some((shared, _)) = self.summaries.get_key_value(&key) {
            alloc.namespace = shared.namespace.clone();
            alloc.job_id = shared.id.clone();
        }
    }

    pub(crate) fn remove_alloc(&mut self, index: Index, id: &AllocId) -> Option<Arc<Allocation>> {
        let old = self.allocs.remove(id)?;
        self.unindex_alloc(index, &old);
        self.forget_if_unnamed(&old.node_id);
        self.touch(Table::Allocs, index);
        self.drop_summary_if_orphaned(index, &old_key(&old));
        Some(old)
    }

    /// Drops a missing node from `tainted_nodes` once no allocation names it.
    fn forget_if_unnamed(&mut self, id: &NodeId) {
        if matches!(self.tainted_nodes.get(id), Some(None)) && !self.has_allocs_on(id) {
            self.tainted_nodes.remove(id);
        }
    }

    /// [`Self::unindex_alloc`] of `old` then [`Self::index_alloc`] of `new`, for two
    /// versions with the same index keys ([`same_keys`]).
    fn reindex_alloc(&mut self, index: Index, old: &Allocation, new: &Arc<Allocation>) {
        let key = old_key(new);
        self.allocs_by_node
            .insert((new.node_id, new.id), new.clone());
        self.allocs_by_job
            .insert((key.clone(), new.id), JobAlloc::new(new.clone()));
        let held = |a: &Allocation| a.uses_resources().then_some(a.resources);
        let (old_ports, new_ports) = (held_ports(old), held_ports(new));
        if held(old) != held(new) || old_ports != new_ports {
            self.change_use(new.node_id, |u| {
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
        self.with_summary(index, &key, |s| {
            s.count_alloc(old, -1);
            s.count_alloc(new, 1);
        });
    }

    /// Changes a node's entry in `node_usage`, dropping it once it holds nothing.
    fn change_use(&mut self, node: NodeId, f: impl FnOnce(&mut super::NodeUse)) {
        let entry = self.node_usage.entry(node).or_default();
        f(entry);
        if entry.is_empty() {
            self.node_usage.remove(&node);
        }
    }

    fn index_alloc(&mut self, index: Index, a: &Arc<Allocation>) {
        let key = old_key(a);
        self.allocs_by_node.insert((a.node_id, a.id), a.clone());
        self.allocs_by_job
            .insert((key.clone(), a.id), JobAlloc::new(a.clone()));
        if a.uses_resources() {
            self.change_use(a.node_id, |u| u.count(a, 1));
        }
        self.with_summary(index, &key, |s| s.count_alloc(a, 1));
    }

    fn unindex_alloc(&mut self, index: Index, a: &Allocation) {
        let key = old_key(a);
        self.allocs_by_node.remove(&(a.node_id, a.id));
        self.allocs_by_job.remove(&(key.clone(), a.id));
        if a.uses_resources() {
            self.change_use(a.node_id, |u| u.count(a, -1));
        }
        self.with_summary(index, &key, |s| s.count_alloc(a, -1));
    }

    pub(crate) fn put_eval(&mut self, index: Index, eval: Evaluation) -> Arc<Evaluation> {
        let eval = Arc::new(eval);
        let key = eval.job_key();
        if let Some(old) = self.evals.get(&eval.id).cloned() {
            self.remove_eval(index, &old.id);
        }
        self.evals.insert(eval.id, eval.clone());
        self.evals_by_job.insert((key.clone(), eval.id));
        self.with_summary(index, &key, |s| {
            s.count_eval(&eval, 1);
            s.offer_queued(&eval);
        });
        self.touch(Table::Evals, index);
        eval
    }

    pub(crate) fn remove_eval(&mut self, index: Index, id: &EvalId) -> Option<Arc<Evaluation>> {
        let old = self.evals.remove(id)?;
        let key = old.job_key();
        self.evals_by_job.remove(&(key.clone(), old.id));
        let newest = self
            .evals_by_job(&key)
            .map(|e| ((e.modify_index, e.id), e.queued_allocations.clone()))
            .max_by_key(|(k, _)| *k);
        self.with_summary(index, &key, |s| {
            s.count_eval(&old, -1);
            if s.queued_from == Some((old.modify_index, old.id)) {
                match &newest {
                    Some((from, q)) => s.set_queued(Some(*from), q),
                    None => s.set_queued(None, &Default::default()),
                }
            }
        });
        self.touch(Table::Evals, index);
        self.drop_summary_if_orphaned(index, &key);
        Some(old)
    }

    pub(crate) fn set_scheduler_config(&mut self, index: Index, mut cfg: SchedulerConfig) {
        cfg.modify_index = index;
        self.scheduler_config = Arc::new(cfg);
        self.touch(Table::SchedulerConfig, index);
    }

    /// Recomputes a job's status from its summary; stores and returns the job if it changed.
    pub(crate) fn refresh_job_status(&mut self, index: Index, key: &JobKey) -> Option<Arc<Job>> {
        let job = self.jobs.get(key)?;
        let status = derive_job_status(job, self.summaries.get(key).map(|s| &**s));
        if job.status == status {
            return None;
        }
        let mut job = (**job).clone();
        job.status = status;
        job.modify_index = index;
        let job = Arc::new(job);
        self.jobs.insert(key.clone(), job.clone());
        self.touch(Table::Jobs, index);
        Some(job)
    }

    fn with_summary(&mut self, index: Index, key: &JobKey, f: impl FnOnce(&mut JobSummary)) {
        let entry = self
            .summaries
            .entry(key.clone())
            .or_insert_with(|| Arc::new(JobSummary::new(key.clone())));
        let s = Arc::make_mut(entry);
        f(s);
        s.modify_index = index;
        self.touch(Table::JobSummaries, index);
    }

    fn drop_summary_if_orphaned(&mut self, index: Index, key: &JobKey) {
        if !self.jobs.contains_key(key) && self.summaries.get(key).is_some_and(|s| s.is_empty()) {
            self.summaries.remove(key);
            self.touch(Table::JobSummaries, index);
        }
    }
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

fn old_key(a: &Allocation) -> JobKey {
    JobKey {
        namespace: a.namespace.clone(),
        id: a.job_id.clone(),
    }
}
