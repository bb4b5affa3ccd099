//! What the job being placed already has in the snapshot, indexed once per eval so that the
//! per-node checks (job anti-affinity, `distinct_hosts`, `distinct_property`) cost a hash
//! lookup rather than a scan of the node's allocations.

use crate::scheduler::feasible::{AllocLookup, PlanOnNode, Target};
use crate::state::{JobAlloc, StateSnapshot};
use crate::types::*;
use rustc_hash::FxHashMap;
use std::collections::HashMap;

/// Whether `a` belongs to `job`.
pub(super) fn is_of_job(a: &Allocation, job: &Job) -> bool {
    a.job_id == job.id && *a.namespace == *job.namespace
}

/// Live allocations of the job on one node: in total and per group name.
#[derive(Debug, Default)]
struct NodeCount<'s> {
    job: u32,
    groups: Vec<(&'s str, u32)>,
}

/// The job's allocations in the snapshot.
#[derive(Debug, Default)]
pub(super) struct Footprint<'s> {
    /// Every allocation of the job, terminal ones included, as its per-job index entry: an
    /// id the plan places for this job that is not here is a brand-new allocation, known
    /// without searching the store. The entries are read, not the allocations: those are
    /// looked up by id only for what a plan touches.
    allocs: FxHashMap<AllocId, &'s JobAlloc>,
    /// Allocations that use resources, per node.
    live: FxHashMap<NodeId, NodeCount<'s>>,
    /// The group names the job's allocations carry.
    groups: Vec<&'s str>,
}

impl<'s> Footprint<'s> {
    pub(super) fn new(snapshot: &'s StateSnapshot, job: &Job) -> Self {
        let mut f = Footprint::default();
        for a in snapshot.job_allocs(&job.key()) {
            f.allocs.insert(a.id, a);
            if !f.groups.contains(&a.group.as_str()) {
                f.groups.push(&a.group);
            }
            if a.uses_resources() {
                let count = f.live.entry(a.node_id).or_default();
                count.job += 1;
                match count.groups.iter_mut().find(|(g, _)| *g == a.group) {
                    Some((_, n)) => *n += 1,
                    None => count.groups.push((&a.group, 1)),
                }
            }
        }
        f
    }

    /// Live allocations of the job, and of its group `group`, on `node` in the snapshot.
    pub(super) fn counts(&self, node: &NodeId, group: &str) -> (u32, u32) {
        if self.live.is_empty() {
            return (0, 0);
        }
        self.live.get(node).map_or((0, 0), |c| {
            let g = c
                .groups
                .iter()
                .find(|(g, _)| *g == group)
                .map_or(0, |g| g.1);
            (c.job, g)
        })
    }

    /// Whether every allocation of the job in the snapshot is of group `name`.
    pub(super) fn only_group(&self, name: &str) -> bool {
        self.groups.iter().all(|g| *g == name)
    }

    /// The job's live allocations in `snapshot` (the one the footprint was taken of).
    pub(super) fn live_allocs(
        &self,
        snapshot: &'s StateSnapshot,
    ) -> impl Iterator<Item = &'s Allocation> + '_ {
        self.allocs
            .values()
            .filter(|a| a.uses_resources())
            .filter_map(move |a| snapshot.job_alloc(a).map(|a| &**a))
    }
}

/// Finds the allocations a plan touches: the job's own from the footprint, placements of
/// the job that are not in it as new (no search), anything else in the store.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lookup<'a, 's> {
    pub(super) snapshot: &'s StateSnapshot,
    pub(super) job: &'s Job,
    pub(super) footprint: &'a Footprint<'s>,
}

impl<'s> AllocLookup<'s> for Lookup<'_, 's> {
    fn existing(&self, id: &AllocId, placing: Option<&Allocation>) -> Option<&'s Allocation> {
        if self.footprint.allocs.contains_key(id) {
            return self.snapshot.alloc(id).map(|a| &**a);
        }
        if placing.is_some_and(|p| is_of_job(p, self.job)) {
            return None;
        }
        self.snapshot.alloc(id).map(|a| &**a)
    }
}

/// Counts for one `distinct_property` constraint: allocations of the job (or of one group)
/// per value of the property, in the snapshot and once the plan so far is applied.
#[derive(Debug)]
pub(super) struct PropertySet {
    pub(super) key: String,
    target: Target,
    limit: u32,
    /// `None` for a job-level constraint (every group counts).
    group: Option<String>,
    values: HashMap<String, usize>,
    /// Plan nodes' values, so each node is resolved once per eval.
    node_values: FxHashMap<NodeId, Option<usize>>,
    existing: Vec<u32>,
    proposed: Vec<u32>,
    /// Reused list of the nodes a plan touches.
    plan_nodes: Vec<NodeId>,
}

impl PropertySet {
    pub(super) fn new(
        limit: &crate::scheduler::feasible::PropertyLimit,
        group: Option<&str>,
        snapshot: &StateSnapshot,
        footprint: &Footprint<'_>,
    ) -> Self {
        let mut set = PropertySet {
            key: limit.key.clone(),
            target: limit.target.clone(),
            limit: limit.limit,
            group: group.map(str::to_owned),
            values: HashMap::new(),
            node_values: FxHashMap::default(),
            existing: Vec::new(),
            proposed: Vec::new(),
            plan_nodes: Vec::new(),
        };
        for a in footprint.live_allocs(snapshot) {
            if set.counts(a)
                && let Some(v) = set.value_of(snapshot, a.node_id)
            {
                set.existing[v] += 1;
            }
        }
        set.proposed.clone_from(&set.existing);
        set
    }

    fn counts(&self, a: &Allocation) -> bool {
        self.group.as_deref().is_none_or(|g| a.task_group == g)
    }

    fn intern(&mut self, value: &str) -> usize {
        if let Some(&v) = self.values.get(value) {
            return v;
        }
        let v = self.existing.len();
        self.values.insert(value.to_owned(), v);
        self.existing.push(0);
        self.proposed.push(0);
        v
    }

    fn value_of(&mut self, snapshot: &StateSnapshot, node: NodeId) -> Option<usize> {
        if let Some(v) = self.node_values.get(&node) {
            return *v;
        }
        let value = snapshot
            .node(&node)
            .and_then(|n| self.target.resolve(n).map(|v| v.into_owned()));
        let v = value.map(|value| self.intern(&value));
        self.node_values.insert(node, v);
        v
    }

    /// Recounts with the plan's entries (Nomad does the same per select). Costs a pass over
    /// the plan, which is why only jobs with `distinct_property` pay it.
    pub(super) fn populate(
        &mut self,
        plan: &Plan,
        lookup: &Lookup<'_, '_>,
        scratch: &mut Vec<(AllocId, u32)>,
    ) {
        self.proposed.clone_from(&self.existing);
        let mut nodes = std::mem::take(&mut self.plan_nodes);
        nodes.clear();
        nodes.extend(
            plan.node_allocation
                .keys()
                .chain(plan.node_update.keys())
                .chain(plan.node_preemptions.keys()),
        );
        nodes.sort_unstable();
        nodes.dedup();
        for &node in &nodes {
            let Some(v) = self.value_of(lookup.snapshot, node) else {
                continue;
            };
            let mut delta: i64 = 0;
            PlanOnNode::of(plan, node).for_each_touched(scratch, lookup, |before, after| {
                let ours = |a: &Allocation| is_of_job(a, lookup.job) && self.counts(a);
                delta -= i64::from(before.is_some_and(ours));
                delta += i64::from(after.is_some_and(ours));
            });
            let p = &mut self.proposed[v];
            *p = (i64::from(*p) + delta).max(0) as u32;
        }
        self.plan_nodes = nodes;
    }

    /// Whether one more allocation may go to `node`: it has the property, and fewer than the
    /// limit of allocations sit on nodes with the same value.
    pub(super) fn allows(&self, node: &Node) -> bool {
        let Some(value) = self.target.resolve(node) else {
            return false;
        };
        let count = self.values.get(&*value).map_or(0, |&v| self.proposed[v]);
        count < self.limit
    }
}
