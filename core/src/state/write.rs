//! The store's write primitives. Only the FSM calls them; each keeps every secondary index,
//! the node usage table and the job summaries in step with the primary table it changes.

use super::alloc_index::names_node;
use super::{
    JOB_VERSIONS_KEPT, JobAlloc, JobAllocs, JobSummary, StateStore, Table,
    summary::derive_job_status,
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
        names_node(&self.allocs_by_node, id)
    }

    /// Puts a snapshot's allocations (none present yet, `allocs` in id order as a snapshot
    /// holds them) in the table and every index in bulk, to the same store as writing and
    /// indexing each in turn. Each index is filled in its own key order (by
    /// id, by job, by node), so every insert lands beside the last instead of at a random
    /// place, and each job's summary and each node's usage is looked up once, not once per
    /// allocation: a restart at a million allocations spends most of its snapshot load
    /// here. Only pointers move: each allocation was put behind its `Arc` on the thread
    /// that decoded it, and is changed in place here only to share its job's key strings.
    ///
    /// After one pass that groups the allocations by job, the work splits in two halves
    /// that share no tree and cost about the same: the by-job half (summaries and the
    /// by-job index) on the store's helper thread, the by-node half and the table here.
    pub(super) fn restore_allocs(&mut self, mut allocs: Vec<Arc<Allocation>>) {
        debug_assert!(self.allocs.is_empty(), "restore into an empty store");
        if !allocs.is_sorted_by_key(|a| a.id) {
            allocs.sort_unstable_by_key(|a| a.id);
        }
        let groups = self.group_by_job(&mut allocs);
        let by_node: Vec<&Arc<Allocation>> = allocs.iter().collect();
        let summaries = std::mem::take(&mut self.summaries);
        let by_job_half = move || index_by_job(summaries, groups);
        // (A small store is built on this thread: a thread costs more than it saves there.)
        let by_job_half = if allocs.len() < PARALLEL_RESTORE_FROM {
            super::helper::Pending::Done(by_job_half())
        } else {
            super::helper::spawn(by_job_half)
        };
        self.index_by_node(by_node);
        self.allocs = super::packed::from_sorted(allocs.into_iter().map(|a| (a.id, a)).collect());
        let (summaries, by_job) = by_job_half.wait();
        self.summaries = summaries;
        self.allocs_by_job = by_job;
    }

    /// Groups `allocs` by job, each group in id order, and points every allocation's
    /// namespace and job id at the strings [`Self::shared_job_key`] names (or one copy per
    /// job the store lacks). Groups come out in job key order.
    fn group_by_job(&self, allocs: &mut [Arc<Allocation>]) -> Vec<JobGroup> {
        let mut at: rustc_hash::FxHashMap<JobKey, usize> = Default::default();
        let mut groups: Vec<JobGroup> = Vec::new();
        for a in allocs {
            let probe = a.job_key();
            let i = match at.get(&probe) {
                Some(&i) => i,
                None => {
                    // The allocations of a job the store lacks share the first one's strings.
                    let key = self.shared_job_key(&probe).cloned().unwrap_or(probe);
                    at.insert(key.clone(), groups.len());
                    groups.push(JobGroup {
                        key,
                        allocs: Vec::new(),
                    });
                    groups.len() - 1
                }
            };
            let group = &mut groups[i];
            if !(Arc::ptr_eq(&a.namespace, &group.key.namespace)
                && Arc::ptr_eq(&a.job_id.0, &group.key.id.0))
            {
                let a = Arc::make_mut(a);
                a.namespace = group.key.namespace.clone();
                a.job_id = group.key.id.clone();
            }
            group.allocs.push(a.clone());
        }
        groups.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        groups
    }

    /// The by-node half of [`restore_allocs`](Self::restore_allocs): the index, each node's
    /// usage, and the nodes that allocations name but the node table lacks.
    fn index_by_node(&mut self, mut by_node: Vec<&Arc<Allocation>>) {
        by_node.sort_unstable_by_key(|a| (a.node_id, a.id));
        for same_node in by_node.chunk_by(|x, y| x.node_id == y.node_id) {
            let node = same_node[0].node_id;
            if !self.nodes.contains_key(&node) {
                self.tainted_nodes.insert(node, None);
            }
            let live = same_node.iter().filter(|a| a.uses_resources());
            self.change_use(node, |u| live.for_each(|a| u.count(a, 1)));
        }
        let entries = by_node
            .iter()
            .map(|a| ((a.node_id, a.id), a.alloc_modify_index))
            .collect();
        self.allocs_by_node = super::packed::from_sorted(entries);
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
}

/// One job's allocations, in id order, under the key whose strings they share.
struct JobGroup {
    key: JobKey,
    allocs: Vec<Arc<Allocation>>,
}

/// The by-job half of [`StateStore::restore_allocs`]: counts each group into its job's
/// summary (made where the job has none) and builds the by-job index; `groups` in key order.
fn index_by_job(
    mut summaries: imbl::OrdMap<JobKey, Arc<JobSummary>>,
    groups: Vec<JobGroup>,
) -> (
    imbl::OrdMap<JobKey, Arc<JobSummary>>,
    imbl::OrdMap<JobKey, JobAllocs>,
) {
    let mut job_index = Vec::with_capacity(groups.len());
    for JobGroup { key, allocs } in groups {
        let summary = summaries
            .entry(key.clone())
            .or_insert_with(|| Arc::new(JobSummary::new(key.clone())));
        let summary = Arc::make_mut(summary);
        let mut entries = Vec::with_capacity(allocs.len());
        for a in allocs {
            summary.count_alloc(&a, 1);
            entries.push(JobAlloc::new(&a));
        }
        job_index.push((key, JobAllocs::from_sorted(entries)));
    }
    (summaries, super::packed::from_sorted(job_index))
}
