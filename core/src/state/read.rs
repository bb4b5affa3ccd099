//! Read access to the store, used by schedulers, the plan applier and the API.

use super::job_allocs::Entries;
use super::{JobAlloc, JobSummary, NodeTaint, NodeUse, StateStore};
use crate::types::*;
use std::ops::Bound;
use std::sync::Arc;

fn job_range(key: &JobKey) -> (Bound<JobKey>, Bound<JobKey>) {
    (Bound::Included(key.clone()), Bound::Included(key.clone()))
}

impl StateStore {
    pub fn job(&self, key: &JobKey) -> Option<&Arc<Job>> {
        self.jobs.get(key)
    }

    pub fn jobs(&self) -> impl Iterator<Item = &Arc<Job>> + '_ {
        self.jobs.values()
    }

    /// The jobs of `namespace` whose id starts with `prefix`, in id order: a range scan
    /// from the first such key.
    pub fn jobs_with_prefix<'a>(
        &'a self,
        namespace: &str,
        prefix: &'a str,
    ) -> impl Iterator<Item = &'a Arc<Job>> + 'a {
        let from = JobKey::new(namespace, prefix);
        let namespace = from.namespace.clone();
        self.jobs
            .range(from..)
            .take_while(move |(k, _)| k.namespace == namespace && k.id.as_str().starts_with(prefix))
            .map(|(_, j)| j)
    }

    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    /// A specific version of a job, if still kept.
    pub fn job_version(&self, key: &JobKey, version: u64) -> Option<&Arc<Job>> {
        self.job_versions.get(&(key.clone(), version))
    }

    /// Every kept version of a job, newest first.
    pub fn job_versions(&self, key: &JobKey) -> Vec<Arc<Job>> {
        let lo = Bound::Included((key.clone(), 0));
        let hi = Bound::Included((key.clone(), u64::MAX));
        let mut v: Vec<_> = self
            .job_versions
            .range((lo, hi))
            .map(|(_, j)| j.clone())
            .collect();
        v.reverse();
        v
    }

    pub fn job_summary(&self, key: &JobKey) -> Option<&Arc<JobSummary>> {
        self.summaries.get(key)
    }

    pub fn node(&self, id: &NodeId) -> Option<&Arc<Node>> {
        self.nodes.get(id)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Arc<Node>> + '_ {
        self.nodes.values()
    }

    /// The nodes with an id above `after` (every node for `None`), in id order: a page of a
    /// node list reads its own range, not every node.
    pub fn nodes_after(&self, after: Option<&NodeId>) -> impl Iterator<Item = &Arc<Node>> + '_ {
        let from = after.map_or(Bound::Unbounded, |id| Bound::Excluded(*id));
        self.nodes.range((from, Bound::Unbounded)).map(|(_, n)| n)
    }

    /// Every node in id order with what its live allocations hold (`None`: nothing), in one
    /// walk of the node table beside one of the usage table: no lookup per node.
    pub fn nodes_with_use(&self) -> impl Iterator<Item = (&Arc<Node>, Option<&NodeUse>)> + '_ {
        let mut usage = self.node_usage.iter().peekable();
        self.nodes.iter().map(move |(id, node)| {
            while usage.next_if(|(used, _)| *used < id).is_some() {}
            (node, usage.next_if(|(used, _)| *used == id).map(|(_, u)| u))
        })
    }

    /// Each datacenter's schedulable nodes ([`Node::is_schedulable`]), in id order; only
    /// datacenters with at least one.
    pub fn schedulable_nodes(
        &self,
    ) -> impl Iterator<Item = (&str, &imbl::OrdMap<NodeId, Arc<Node>>)> + '_ {
        self.schedulable.iter().map(|(dc, set)| (dc.as_str(), set))
    }

    /// The nodes called `name`, in id order: one range scan.
    pub fn nodes_named<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a Arc<Node>> + 'a {
        let from = (name.to_string(), NodeId::from_bytes([0; 16]));
        let to = (name.to_string(), NodeId::from_bytes([0xff; 16]));
        self.nodes_by_name
            .range(from..=to)
            .filter_map(|(_, id)| self.nodes.get(id))
    }

    /// The nodes whose id starts with `prefix`, in id order: one range scan.
    pub fn nodes_with_prefix(&self, prefix: &IdPrefix) -> impl Iterator<Item = &Arc<Node>> + '_ {
        let (lo, hi) = prefix.bounds(NodeId::from_bytes);
        self.nodes.range(lo..=hi).map(|(_, n)| n)
    }

    /// Every node with its id, in id order; the ids are read from the table itself, so a
    /// walk that only compares ids does not touch the nodes.
    pub fn nodes_by_id(&self) -> impl Iterator<Item = (&NodeId, &Arc<Node>)> + '_ {
        self.nodes.iter()
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// How many nodes are tainted, or gone while allocations name them: none on a healthy
    /// cluster, which lets a reconcile skip every node lookup.
    pub fn tainted_node_count(&self) -> usize {
        self.tainted_nodes.len()
    }

    /// The state of a node that allocations name, from the small index of tainted nodes
    /// rather than the node table.
    pub fn node_taint(&self, id: &NodeId) -> NodeTaint<'_> {
        self.assert_indexes_home();
        match self.tainted_nodes.get(id) {
            None => NodeTaint::Settled,
            Some(Some(node)) => NodeTaint::Tainted(node),
            Some(None) => NodeTaint::Gone,
        }
    }

    /// Resources held on a node by allocations that still use them.
    pub fn node_usage(&self, id: &NodeId) -> Resources {
        self.assert_indexes_home();
        self.node_usage
            .get(id)
            .map_or(Resources::ZERO, |u| u.resources)
    }

    /// Ports held on a node by allocations that still use resources.
    pub fn node_ports(&self, id: &NodeId) -> &crate::ports::NodePorts {
        self.assert_indexes_home();
        self.node_usage
            .get(id)
            .and_then(|u| u.ports.as_deref())
            .unwrap_or(&crate::ports::NO_PORTS)
    }

    /// Both of the above in one lookup; `None` for a node whose allocations hold nothing.
    pub fn node_use(&self, id: &NodeId) -> Option<&super::NodeUse> {
        self.assert_indexes_home();
        self.node_usage.get(id)
    }

    pub fn alloc(&self, id: &AllocId) -> Option<&Arc<Allocation>> {
        self.allocs.get(id)
    }

    /// The allocations whose id starts with `prefix`, in id order: one range scan.
    pub fn allocs_with_prefix(
        &self,
        prefix: &IdPrefix,
    ) -> impl Iterator<Item = &Arc<Allocation>> + '_ {
        let (lo, hi) = prefix.bounds(AllocId::from_bytes);
        self.allocs.range(lo..=hi).map(|(_, a)| a)
    }

    pub fn allocs(&self) -> impl Iterator<Item = &Arc<Allocation>> + '_ {
        self.allocs.values()
    }

    pub fn alloc_count(&self) -> usize {
        self.allocs.len()
    }

    pub fn allocs_by_node(&self, node: &NodeId) -> impl Iterator<Item = &Arc<Allocation>> + '_ {
        self.alloc_versions_on_node(node)
            .filter_map(|(id, _)| self.allocs.get(&id))
    }

    /// The allocations on `node` as the by-node index holds them, in id order: each id
    /// with its `alloc_modify_index` (the last change the servers made), read without
    /// touching the allocations themselves.
    pub fn alloc_versions_on_node(
        &self,
        node: &NodeId,
    ) -> impl Iterator<Item = (AllocId, Index)> + '_ {
        self.assert_indexes_home();
        self.allocs_by_node
            .range((*node, AllocId::MIN)..=(*node, AllocId::MAX))
            .map(|((_, id), index)| (*id, *index))
    }

    /// Each allocation of the job, read by id from its index entry: for callers that need
    /// the whole allocation; [`StateStore::job_allocs`] reads the entries alone.
    pub fn allocs_by_job(&self, key: &JobKey) -> impl Iterator<Item = &Arc<Allocation>> + '_ {
        self.job_entries(key, None)
            .filter_map(|e| self.job_alloc(e))
    }

    /// The allocation an index entry of [`StateStore::job_allocs`] stands for. Always there
    /// in a consistent store; `None` rather than a panic if one were not.
    pub fn job_alloc(&self, entry: &JobAlloc) -> Option<&Arc<Allocation>> {
        self.allocs.get(&entry.id)
    }

    /// [`StateStore::allocs_by_job`] from the first id above `after` (all for `None`), in id
    /// order: a page of a job's allocations reads its own range.
    pub fn allocs_by_job_after(
        &self,
        key: &JobKey,
        after: Option<&AllocId>,
    ) -> impl Iterator<Item = &Arc<Allocation>> + '_ {
        self.job_entries(key, after)
            .filter_map(|e| self.job_alloc(e))
    }

    /// [`StateStore::allocs_by_job`] with each allocation's slot number.
    pub fn job_allocs(&self, key: &JobKey) -> impl Iterator<Item = &JobAlloc> + '_ {
        self.job_entries(key, None)
    }

    /// One job's entries of the per-job index from the first id above `after` (all for
    /// `None`), in id order: the one range every per-job read of allocations walks.
    fn job_entries(
        &self,
        key: &JobKey,
        after: Option<&AllocId>,
    ) -> impl Iterator<Item = &JobAlloc> + '_ {
        self.assert_indexes_home();
        let after = after.copied();
        match self.allocs_by_job.get(key) {
            Some(entries) => entries.after(after),
            None => Entries::none(),
        }
    }

    pub fn eval(&self, id: &EvalId) -> Option<&Arc<Evaluation>> {
        self.evals.get(id)
    }

    pub fn evals(&self) -> impl Iterator<Item = &Arc<Evaluation>> + '_ {
        self.evals.values()
    }

    /// The evals whose id starts with `prefix`, in id order: one range scan.
    pub fn evals_with_prefix(
        &self,
        prefix: &IdPrefix,
    ) -> impl Iterator<Item = &Arc<Evaluation>> + '_ {
        let (lo, hi) = prefix.bounds(EvalId::from_bytes);
        self.evals.range(lo..=hi).map(|(_, e)| e)
    }

    pub fn eval_count(&self) -> usize {
        self.evals.len()
    }

    pub fn evals_by_job(&self, key: &JobKey) -> impl Iterator<Item = &Arc<Evaluation>> + '_ {
        let (lo, hi) = job_range(key);
        let lo = lo.map(|k| (k, EvalId::MIN));
        let hi = hi.map(|k| (k, EvalId::MAX));
        self.evals_by_job
            .range((lo, hi))
            .filter_map(|(_, e)| self.evals.get(e))
    }

    pub fn scheduler_config(&self) -> &Arc<SchedulerConfig> {
        &self.scheduler_config
    }
}
