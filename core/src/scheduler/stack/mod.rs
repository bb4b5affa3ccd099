//! The selection stack: picks the node for one allocation of a group, as Nomad's stack does.
//!
//! A [`Stack`] lives for one scheduling attempt (one snapshot). The scheduler gives it the
//! candidate nodes once ([`Stack::set_nodes`]) and then calls [`Stack::select`] once per
//! allocation to place, appending each result to its plan; every select accounts for what
//! the plan already places on, stops on, or preempts from each node.
//!
//! Per select, nodes are visited in a round-robin walk that continues where the previous
//! select stopped (service and batch shuffle the nodes once, so placements spread and no
//! node is always first). Each visited node goes through the feasibility checks (see
//! [`feasible`](super::feasible)), then ports (for groups that ask for any: `ports.rs`),
//! then resources, then is scored (see [`rank`](super::rank)). The winner's dynamic ports
//! are drawn with a generator seeded from the one given to [`Stack::set_nodes`].
//! The walk stops after [`CandidateLimit`] feasible nodes, so the cost of a placement does
//! not grow with the cluster: only a few candidates are scored. Nodes scoring below zero
//! (penalised, or crowded by the job) are set aside, up to [`MAX_SKIP`], and considered only
//! if the walk runs out of nodes before the limit. For groups that run from a snapshot,
//! idle nodes that last ran it (then fresh idle nodes) are looked up first through an index,
//! so they are found whatever the limit.
//!
//! Costs: per eval, a shuffle of references to the candidate nodes; a node's entry (what a
//! visit reads of it) is built when the walk first reaches it, so nodes never visited cost
//! nothing more. Per select, one lookup per change the plan had since the previous select
//! (usually the one placement just made), to mark the nodes whose view of the plan is stale.
//! Per
//! visited node, nothing more while the plan leaves the node alone: its view (usage, job and
//! group counts once the plan is applied) is kept in its entry; otherwise the plan's entries
//! for it are replayed once. The first visit reads `node_usage` and the job's footprint;
//! class-stable constraints cost an array lookup after the first node of each computed
//! class. Nothing is allocated per visited node (only per select when a node is filtered,
//! for the metrics keys).

mod footprint;
mod ports;

#[cfg(test)]
mod proptests;
#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;

use self::footprint::{Footprint, Lookup, PropertySet, is_of_job};
use super::feasible::{Compiled, ComputedClass, ComputedClasses, PlanOnNode};
use super::preempt::{Evictable, choose_evictions, may_preempt, shortfall};
use super::rank::{
    PENALTY_SCORE, PREEMPTION_SCORE, Score, SnapshotTier, anti_affinity_score, fit_score,
};
use crate::state::StateSnapshot;
use crate::types::*;
use rand::seq::SliceRandom;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// How many nodes scoring below [`SKIP_SCORE_THRESHOLD`] a select sets aside before it
/// accepts such nodes as candidates (Nomad's limit iterator).
pub const MAX_SKIP: usize = 3;

/// Candidates scoring below this are set aside while better ones may still come.
pub const SKIP_SCORE_THRESHOLD: f64 = 0.0;

/// How many idle snapshot-tier nodes a select may find infeasible before it gives up on the
/// tier index and walks normally; bounds the cost when many warm nodes do not fit a group.
pub const TIER_SCAN_BUDGET: usize = 8;

/// How many feasible nodes a select scores before it picks the best.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CandidateLimit {
    /// Every node (system and sysbatch).
    All,
    /// A fixed number, at least 1 (batch: 2).
    Fixed(usize),
    /// `ceil(log2(nodes))`, at least 2 (service).
    Log2,
}

impl CandidateLimit {
    /// The number of candidates for a walk over `nodes` nodes.
    pub fn resolve(self, nodes: usize) -> usize {
        match self {
            CandidateLimit::All => usize::MAX,
            CandidateLimit::Fixed(k) => k.max(1),
            CandidateLimit::Log2 => {
                let log = if nodes <= 1 {
                    0
                } else {
                    (usize::BITS - (nodes - 1).leading_zeros()) as usize
                };
                log.max(2)
            }
        }
    }
}

/// What the scheduler tells a select besides the group and the plan.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct SelectOptions {
    /// Nodes to avoid if another fits (e.g. the node a failed allocation ran on): they get a
    /// [`PENALTY_SCORE`] component.
    pub penalty_nodes: BTreeSet<NodeId>,
    /// Nodes tried before any other (e.g. the node of the allocation being replaced, for
    /// sticky placements): if one of them is feasible, the best of them is chosen.
    pub preferred_nodes: Vec<NodeId>,
    /// Whether lower-priority allocations may be evicted to make room; effective only when
    /// the cluster's preemption config enables it for the job's type.
    pub allow_preemption: bool,
}

/// The node chosen for one allocation.
#[derive(Clone, Debug)]
pub struct RankedNode {
    pub node: Arc<Node>,
    /// The normalized score (see [`rank`](super::rank)).
    pub score: f64,
    /// Allocations to evict for this placement: the scheduler records them in the plan's
    /// `node_preemptions` and on both allocations. Empty when the placement fits as is.
    pub preempted: Vec<Arc<Allocation>>,
    /// The ports the allocation holds there, in its group's order: static ones as asked,
    /// dynamic ones drawn from the node's free range. Empty for a group without ports.
    pub ports: thin_vec::ThinVec<AllocatedPort>,
}

/// The outcome of the class-stable constraints for one computed class.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Verdict {
    Unknown,
    Pass,
    /// Fails; the index of the first failing constraint in `Compiled::stable`.
    Fail(usize),
}

/// One node of the eval's candidate set, in walk order. Its [`Entry`] is built on the first
/// visit: a select visits a few dozen nodes while an eval may offer 50,000, and building an
/// entry for every one of those cost more than the eval's selects.
#[derive(Debug)]
struct Slot<'s> {
    node: &'s Arc<Node>,
    /// Index of the node's entry in [`Walk::entries`], or [`NO_ENTRY`].
    entry: u32,
}

const NO_ENTRY: u32 = u32::MAX;

/// How many nodes of the walk [`Walk::entry`] builds entries for at once.
const BUILD_AHEAD: usize = 16;

/// The candidate nodes in walk order and the entries of those visited so far.
#[derive(Debug, Default)]
struct Walk<'s> {
    slots: Vec<Slot<'s>>,
    entries: Vec<Entry<'s>>,
    /// The entry of each visited node, to mark the ones a plan change makes stale.
    entry_of: FxHashMap<NodeId, u32>,
}

impl<'s> Walk<'s> {
    fn len(&self) -> usize {
        self.slots.len()
    }

    fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The entry of the node at `idx` of the walk, built now if it has none: its class key
    /// interned in `classes`, and its revision in `plan` (what [`Stack::follow_plan`] would
    /// have given it had it existed then).
    ///
    /// The next few nodes of the walk get theirs too: the walk visits them next. At 50,000
    /// nodes a node's first read is a cache miss, so what an entry copies of each node is
    /// read first, in a loop that does nothing else ([`NodeFacts::read`]): the processor
    /// then waits for all of those nodes' memory at once rather than one node after
    /// another, as it did while each node's entry was built before the next node was read.
    fn entry(&mut self, idx: usize, classes: &mut ClassKeys, plan: &Plan) -> &mut Entry<'s> {
        if self.slots[idx].entry == NO_ENTRY {
            let end = (idx + BUILD_AHEAD).min(self.slots.len());
            // `None` for the nodes that have their entry already.
            let mut facts: [Option<NodeFacts<'s>>; BUILD_AHEAD] = [None; BUILD_AHEAD];
            for (slot, facts) in self.slots[idx..end].iter().zip(&mut facts) {
                if slot.entry == NO_ENTRY {
                    *facts = Some(NodeFacts::read(slot.node));
                }
            }
            for (slot, facts) in self.slots[idx..end].iter_mut().zip(&facts) {
                let Some(facts) = facts else {
                    continue;
                };
                let mut entry = Entry::new(slot.node, facts, classes.intern(facts.class_key));
                entry.plan_rev = plan.node_revision(&entry.id);
                slot.entry = u32::try_from(self.entries.len()).expect("fewer than 2^32 nodes");
                self.entry_of.insert(entry.id, slot.entry);
                self.entries.push(entry);
            }
        }
        &mut self.entries[self.slots[idx].entry as usize]
    }

    /// The entry of a node the walk has visited.
    fn visited(&mut self, idx: usize) -> &mut Entry<'s> {
        let e = self.slots[idx].entry;
        debug_assert_ne!(e, NO_ENTRY, "node {idx} was never visited");
        &mut self.entries[e as usize]
    }
}

/// One candidate node of a select, with what every visit reads copied out of the node so a
/// visit touches this (contiguous) entry rather than the node itself.
#[derive(Debug)]
struct Entry<'s> {
    node: &'s Arc<Node>,
    id: NodeId,
    allocatable: Resources,
    schedulable: bool,
    /// Index of the node's class key in [`ClassKeys`].
    class: usize,
    /// Filled the first time a class-stable constraint needs it.
    computed: Option<ComputedClass>,
    /// The snapshot's `node_usage`, fetched on the first visit (the snapshot never changes).
    usage: Option<Resources>,
    /// The ports the node's allocations hold in the snapshot, fetched with `usage`
    /// (borrowed: the index itself is read only when a check needs more than its size).
    ports: Option<&'s crate::ports::NodePorts>,
    /// How many holds `ports` has, from the node's usage entry.
    port_holds: usize,
    /// What the plan changes of the node's ports, as of plan revision `port_rev` (`None`:
    /// not computed for any), kept like `plan_view` so revisits cost nothing.
    port_changes: crate::ports::PortChanges,
    port_rev: Option<u32>,
    /// What the port checks of one group read of the node (by index in `Stack::groups`),
    /// found on the first check.
    resolved: Option<(usize, Result<crate::ports::Resolved, PortShortage>)>,
    /// The node's view at the plan's last revision for it, for one group: reused while the
    /// plan leaves the node alone, so revisiting a node costs a hash lookup.
    plan_view: Option<PlanView>,
    /// The plan's revision for this node as of the last select (see [`Stack::follow_plan`]).
    plan_rev: Revision,
}

/// A [`View`] and what it was computed for.
#[derive(Clone, Copy, Debug)]
struct PlanView {
    revision: u32,
    /// Index of the group in [`Stack::groups`].
    group: usize,
    view: View,
}

/// What an [`Entry`] copies of its node, read apart from the rest of the entry's building
/// (see [`Walk::entry`]).
#[derive(Clone, Copy, Debug)]
struct NodeFacts<'s> {
    id: NodeId,
    allocatable: Resources,
    schedulable: bool,
    class_key: &'s str,
}

impl<'s> NodeFacts<'s> {
    fn read(node: &'s Node) -> Self {
        NodeFacts {
            id: node.id,
            allocatable: node.allocatable(),
            schedulable: node.is_schedulable(),
            class_key: node.class_key(),
        }
    }
}

impl<'s> Entry<'s> {
    fn new(node: &'s Arc<Node>, facts: &NodeFacts<'s>, class: usize) -> Self {
        Entry {
            id: facts.id,
            allocatable: facts.allocatable,
            schedulable: facts.schedulable,
            class,
            computed: None,
            usage: None,
            ports: None,
            port_holds: 0,
            port_changes: Vec::new(),
            port_rev: None,
            resolved: None,
            plan_view: None,
            plan_rev: Revision::Unknown,
            node,
        }
    }

    fn snapshot_usage(&mut self, snapshot: &'s StateSnapshot) -> Resources {
        if let Some(usage) = self.usage {
            return usage;
        }
        let Some(u) = snapshot.node_use(&self.id) else {
            self.usage = Some(Resources::ZERO);
            return Resources::ZERO;
        };
        self.usage = Some(u.resources);
        self.ports = u.ports.as_deref();
        self.port_holds = u.port_holds();
        u.resources
    }
}

/// Class keys seen, and whether a node of each passed the class-stable constraints.
#[derive(Debug, Default)]
struct ClassKeys {
    ids: HashMap<String, usize>,
    names: Vec<String>,
    eligible: Vec<Option<bool>>,
    /// The last key interned: nodes of one class often come in runs.
    last: usize,
}

impl ClassKeys {
    fn intern(&mut self, key: &str) -> usize {
        if self.names.get(self.last).is_some_and(|n| n == key) {
            return self.last;
        }
        if let Some(&id) = self.ids.get(key) {
            self.last = id;
            return id;
        }
        let id = self.names.len();
        self.last = id;
        self.ids.insert(key.to_owned(), id);
        self.names.push(key.to_owned());
        self.eligible.push(None);
        id
    }
}

/// A group's compiled constraints and their per-class verdicts, kept across selects.
#[derive(Debug, Default)]
struct GroupChecks {
    name: String,
    /// The constraints and drivers compiled, to notice a group of the same name that
    /// differs.
    constraints: Vec<Constraint>,
    drivers: Vec<String>,
    compiled: Compiled,
    verdicts: Vec<Verdict>,
    properties: Vec<PropertySet>,
    /// The group's ports arranged for checking nodes; `None` when it asks for none.
    demand: Option<Arc<crate::ports::PortDemand>>,
}

/// Nodes of the set by snapshot tier, in walk order, with a cursor past the leading nodes
/// found busy (a node the plan has started using stays busy for the rest of the eval).
#[derive(Debug, Default)]
struct TierList {
    nodes: Vec<usize>,
    cursor: usize,
}

#[derive(Debug, Default)]
struct TierIndex {
    warm: HashMap<String, TierList>,
    fresh: TierList,
}

/// What stays fixed for the whole eval.
#[derive(Debug)]
struct Eval<'s> {
    snapshot: &'s StateSnapshot,
    job: &'s Job,
    algorithm: SchedulerAlgorithm,
    /// The cluster's preemption config allows this job's type to preempt.
    preemption_enabled: bool,
    job_checks: Compiled,
    footprint: Footprint<'s>,
}

/// What changes as nodes are evaluated.
#[derive(Debug, Default)]
struct Tally {
    job_verdicts: Vec<Verdict>,
    job_properties: Vec<PropertySet>,
    computed: ComputedClasses,
    classes: ClassKeys,
    escaped: bool,
    metrics: AllocMetric,
    scratch: Vec<(AllocId, u32)>,
}

/// What one select is about.
#[derive(Debug)]
struct Selection<'a> {
    group: &'a TaskGroup,
    ask: Resources,
    plan: &'a Plan,
    opts: &'a SelectOptions,
    snapshot_id: Option<&'a str>,
    preempt: bool,
    /// The job has this one group only and all its allocations in the snapshot are of it:
    /// every allocation of the job, existing or planned, is of the group, so counting the
    /// group needs no name comparison.
    only_group: bool,
    /// Index of the group in [`Stack::groups`].
    group_idx: usize,
    /// The group's ports, when it asks for any.
    network: Option<&'a crate::ports::PortDemand>,
}

/// A group's ports, when it asks for any.
fn asks_ports(group: &TaskGroup) -> Option<&GroupNetwork> {
    group.network.as_ref().filter(|n| !n.ports.is_empty())
}

/// A feasible node and its score.
#[derive(Debug)]
struct Candidate<'s> {
    idx: usize,
    score: f64,
    preempted: Vec<&'s Arc<Allocation>>,
}

/// Keeps the higher score; on a tie, the one found first.
fn better<'s>(best: Option<Candidate<'s>>, c: Candidate<'s>) -> Option<Candidate<'s>> {
    match best {
        Some(b) if b.score >= c.score => Some(b),
        _ => Some(c),
    }
}

/// Picks nodes for one job's allocations; see the module docs.
#[derive(Debug)]
pub struct Stack<'s> {
    eval: Eval<'s>,
    tally: Tally,
    groups: Vec<GroupChecks>,
    limit: CandidateLimit,
    nodes: Walk<'s>,
    /// Where the round-robin walk resumes.
    offset: usize,
    /// `limit` resolved for the current node set.
    candidates: usize,
    tiers: Option<TierIndex>,
    /// Position of each node in `nodes`, built on first need.
    by_id: Option<FxHashMap<NodeId, usize>>,
    /// The plan whose changes the entries' `plan_rev` follow, and how many of its changes
    /// they have seen; `None` until the first select after [`Stack::set_nodes`].
    plan_sync: Option<(PlanToken, usize)>,
    /// `nodes_available` was set by [`Stack::set_nodes_available`]; `set_nodes` keeps it.
    available_set: bool,
    /// Draws dynamic ports; seeded from the generator given to [`Stack::set_nodes`], and
    /// only for jobs that ask for ports (so other jobs draw exactly what they did before).
    port_rng: Option<rand_chacha::ChaCha8Rng>,
}

impl<'s> Stack<'s> {
    /// A stack for `job` against `snapshot`, reading the cluster's scheduler config (binpack
    /// or spread, preemption per job type) from the snapshot.
    pub fn new(snapshot: &'s StateSnapshot, job: &'s Job, limit: CandidateLimit) -> Self {
        let config = snapshot.scheduler_config();
        let preemption_enabled = match job.job_type {
            JobType::Service => config.preemption.service,
            JobType::Batch => config.preemption.batch,
            JobType::System => config.preemption.system,
            JobType::SysBatch => config.preemption.sysbatch,
        };
        let job_checks = Compiled::new(&job.constraints);
        let footprint = Footprint::new(snapshot, job);
        let job_properties = job_checks
            .distinct_property
            .iter()
            .map(|p| PropertySet::new(p, None, snapshot, &footprint))
            .collect();
        let tally = Tally {
            escaped: job_checks.escapes(),
            job_properties,
            ..Tally::default()
        };
        Stack {
            eval: Eval {
                snapshot,
                job,
                algorithm: config.algorithm,
                preemption_enabled,
                job_checks,
                footprint,
            },
            tally,
            groups: Vec::new(),
            limit,
            nodes: Walk::default(),
            offset: 0,
            candidates: limit.resolve(0),
            tiers: None,
            by_id: None,
            plan_sync: None,
            available_set: false,
            port_rng: None,
        }
    }

    /// Sets the nodes placements may go to (usually from
    /// [`ready_nodes_in_dcs`](super::feasible::ready_nodes_in_dcs)). Service and batch jobs
    /// shuffle them once with `rng` and walk them round-robin across selects; system and
    /// sysbatch jobs keep the order given. Also sets the metrics' `nodes_available` from
    /// these nodes, unless [`Stack::set_nodes_available`] was called.
    pub fn set_nodes(&mut self, nodes: Vec<&'s Arc<Node>>, rng: &mut impl rand::Rng) {
        let walk = &mut self.nodes;
        walk.entries.clear();
        walk.entry_of.clear();
        walk.slots.clear();
        walk.slots.extend(nodes.into_iter().map(|node| Slot {
            node,
            entry: NO_ENTRY,
        }));
        if !self.eval.job.job_type.is_per_node() {
            walk.slots.shuffle(rng);
        }
        if self.eval.job.groups.iter().any(|g| asks_ports(g).is_some()) {
            self.port_rng = Some(rand::SeedableRng::seed_from_u64(rng.random()));
        }
        self.offset = 0;
        self.candidates = self.limit.resolve(self.nodes.len());
        self.tiers = None;
        self.by_id = None;
        self.plan_sync = None;
        if self.available_set {
            return;
        }
        let available = &mut self.tally.metrics.nodes_available;
        available.clear();
        for e in &self.nodes.slots {
            match available.get_mut(&e.node.datacenter) {
                Some(n) => *n += 1,
                None => {
                    available.insert(e.node.datacenter.clone(), 1);
                }
            }
        }
    }

    /// Sets the metrics' `nodes_available` for the rest of the eval, instead of the count
    /// of the nodes given to [`Stack::set_nodes`] (a system scheduler that sets one node at a
    /// time reports the datacenter counts from `ready_nodes_in_dcs`).
    pub fn set_nodes_available(&mut self, per_dc: BTreeMap<String, u32>) {
        self.tally.metrics.nodes_available = per_dc;
        self.available_set = true;
    }

    /// Metrics of the last select: nodes evaluated, filtered per constraint and class,
    /// exhausted per dimension and class, nodes available per datacenter, and the winning
    /// score. `coalesced_failures` is left for the scheduler.
    pub fn metrics(&self) -> &AllocMetric {
        &self.tally.metrics
    }

    /// Over every select so far: per class key, whether some node of that class passed the
    /// job's and group's class-stable constraints (`false` when every node of it that was
    /// evaluated failed one); and whether the eval is escaped (some constraint could not be
    /// captured by class: `unique.*` targets, `distinct_hosts`, `distinct_property`).
    pub fn class_eligibility(&self) -> (BTreeMap<String, bool>, bool) {
        let c = &self.tally.classes;
        let map = c
            .names
            .iter()
            .zip(&c.eligible)
            .filter_map(|(name, e)| e.map(|e| (name.clone(), e)))
            .collect();
        (map, self.tally.escaped)
    }

    /// Picks the best node for one allocation of `group`, accounting for what `plan` already
    /// places on, stops on and preempts from each node. `None` when nothing fits; the metrics
    /// then say why.
    pub fn select(
        &mut self,
        group: &TaskGroup,
        plan: &Plan,
        opts: &SelectOptions,
    ) -> Option<RankedNode> {
        reset(&mut self.tally.metrics);
        let gi = self.group_checks(group);
        self.follow_plan(plan);
        let mut checks = std::mem::take(&mut self.groups[gi]);
        let demand = checks.demand.clone();
        let sel = Selection {
            group,
            ask: group.resources(),
            plan,
            opts,
            snapshot_id: group.tasks.iter().find_map(|t| t.snapshot.as_deref()),
            preempt: opts.allow_preemption && self.eval.preemption_enabled,
            only_group: matches!(&self.eval.job.groups[..], [g] if g.name == group.name)
                && self.eval.footprint.only_group(&group.name),
            group_idx: gi,
            network: demand.as_deref(),
        };
        let best = self.pick(&mut checks, &sel);
        self.groups[gi] = checks;
        let best = best?;
        let ports = match sel.network {
            Some(ask) => self.assign_ports(&best, &sel, ask)?,
            None => thin_vec::ThinVec::new(),
        };
        self.tally.metrics.score = best.score;
        Some(RankedNode {
            node: self.nodes.slots[best.idx].node.clone(),
            score: best.score,
            preempted: best.preempted.into_iter().cloned().collect(),
            ports,
        })
    }

    /// The index of `group`'s compiled checks, compiling them on first sight.
    fn group_checks(&mut self, group: &TaskGroup) -> usize {
        let drivers = crate::scheduler::feasible::group_drivers(group);
        let ports = asks_ports(group).map(|n| &n.ports[..]);
        if let Some(i) = self.groups.iter().position(|g| {
            g.name == group.name
                && g.constraints == group.constraints
                && g.drivers == drivers
                && g.demand.as_ref().map(|d| d.ports()) == ports
        }) {
            return i;
        }
        let compiled = Compiled::for_group(group);
        self.tally.escaped |= compiled.escapes();
        let properties = compiled
            .distinct_property
            .iter()
            .map(|p| {
                PropertySet::new(
                    p,
                    Some(&group.name),
                    self.eval.snapshot,
                    &self.eval.footprint,
                )
            })
            .collect();
        self.groups.push(GroupChecks {
            name: group.name.clone(),
            constraints: group.constraints.clone(),
            drivers,
            compiled,
            verdicts: Vec::new(),
            properties,
            demand: asks_ports(group).map(|n| Arc::new(crate::ports::PortDemand::new(n))),
        });
        self.groups.len() - 1
    }

    /// Brings every entry's `plan_rev` up to date with `plan`: by reading only the changes
    /// since the last select when it is the same plan, else by asking the plan per node.
    fn follow_plan(&mut self, plan: &Plan) {
        let Some((token, changes)) = plan.changed_nodes() else {
            for e in &mut self.nodes.entries {
                e.plan_rev = Revision::Unknown;
                e.plan_view = None;
                e.port_rev = None;
            }
            self.plan_sync = None;
            return;
        };
        match self.plan_sync {
            Some((t, seen)) if t == token && seen <= changes.len() => {
                let walk = &mut self.nodes;
                for id in &changes[seen..] {
                    if let Some(&i) = walk.entry_of.get(id) {
                        walk.entries[i as usize].plan_rev = plan.node_revision(id);
                    }
                }
            }
            _ => {
                // Another plan: revisions are only comparable within one, so what the
                // entries kept is dropped.
                for e in &mut self.nodes.entries {
                    e.plan_rev = plan.node_revision(&e.id);
                    e.plan_view = None;
                    e.port_rev = None;
                    e.port_rev = None;
                }
            }
        }
        self.plan_sync = Some((token, changes.len()));
    }

    fn pick(&mut self, checks: &mut GroupChecks, sel: &Selection<'_>) -> Option<Candidate<'s>> {
        let Stack {
            eval,
            tally,
            nodes,
            offset,
            candidates,
            tiers,
            by_id,
            ..
        } = self;
        if nodes.is_empty() {
            return None;
        }
        if !tally.job_properties.is_empty() || !checks.properties.is_empty() {
            let lookup = eval.lookup();
            for p in tally
                .job_properties
                .iter_mut()
                .chain(&mut checks.properties)
            {
                p.populate(sel.plan, &lookup, &mut tally.scratch);
            }
        }
        // Preferred nodes first: if one is feasible, the best of them wins outright.
        if !sel.opts.preferred_nodes.is_empty() {
            let index = by_id.get_or_insert_with(|| index_by_id(&nodes.slots));
            let mut best = None;
            for id in &sel.opts.preferred_nodes {
                let Some(&idx) = index.get(id) else {
                    continue;
                };
                let entry = nodes.entry(idx, &mut tally.classes, sel.plan);
                if let Some(c) = evaluate(eval, tally, checks, entry, idx, sel) {
                    best = better(best, c);
                }
            }
            if best.is_some() {
                return best;
            }
            // None fits: the metrics describe the walk that follows.
            reset(&mut tally.metrics);
        }

        // Snapshot affinity: an idle warm node, else an idle fresh one, found by index.
        let mut best = None;
        let mut accepted = 0;
        // Nodes evaluated here are not evaluated again by the walk.
        let mut tiered = [usize::MAX; 2 * TIER_SCAN_BUDGET + 1];
        let mut tiered_len = 0;
        if let Some(snapshot) = sel.snapshot_id {
            let index = tiers.get_or_insert_with(|| TierIndex::new(&nodes.slots));
            let lists = [index.warm.get_mut(snapshot), Some(&mut index.fresh)];
            'tiers: for list in lists.into_iter().flatten() {
                let mut budget = TIER_SCAN_BUDGET;
                let mut i = list.cursor;
                while i < list.nodes.len() && budget > 0 {
                    let idx = list.nodes[i];
                    let entry = nodes.entry(idx, &mut tally.classes, sel.plan);
                    let idle = eval.view(entry, sel, &mut tally.scratch).usage.is_zero();
                    if !idle {
                        if i == list.cursor {
                            list.cursor += 1;
                        }
                    } else {
                        tiered[tiered_len] = idx;
                        tiered_len += 1;
                        let entry = nodes.visited(idx);
                        if let Some(c) = evaluate(eval, tally, checks, entry, idx, sel) {
                            accepted = 1;
                            best = Some(c);
                            break 'tiers;
                        }
                        budget -= 1;
                    }
                    i += 1;
                }
            }
        }

        // The round-robin walk, up to the candidate limit.
        let n = nodes.len();
        let limit = *candidates;
        let mut skipped: [Option<Candidate<'s>>; MAX_SKIP] = std::array::from_fn(|_| None);
        let mut skips = 0;
        let mut seen = 0;
        while seen < n && accepted < limit {
            let idx = *offset;
            *offset = (*offset + 1) % n;
            seen += 1;
            if tiered[..tiered_len].contains(&idx) {
                continue;
            }
            let entry = nodes.entry(idx, &mut tally.classes, sel.plan);
            let Some(c) = evaluate(eval, tally, checks, entry, idx, sel) else {
                continue;
            };
            if c.score < SKIP_SCORE_THRESHOLD && skips < MAX_SKIP {
                skipped[skips] = Some(c);
                skips += 1;
                continue;
            }
            accepted += 1;
            best = better(best, c);
        }
        for c in skipped.into_iter().flatten() {
            if accepted >= limit {
                break;
            }
            accepted += 1;
            best = better(best, c);
        }
        best
    }
}

fn index_by_id(nodes: &[Slot<'_>]) -> FxHashMap<NodeId, usize> {
    nodes
        .iter()
        .enumerate()
        .map(|(i, e)| (e.node.id, i))
        .collect()
}

impl TierIndex {
    fn new(nodes: &[Slot<'_>]) -> Self {
        let mut index = TierIndex::default();
        for (i, e) in nodes.iter().enumerate() {
            match &e.node.last_snapshot {
                Some(s) => index.warm.entry(s.clone()).or_default().nodes.push(i),
                None => index.fresh.nodes.push(i),
            }
        }
        index
    }
}

/// Clears the per-select metrics, keeping `nodes_available` (a property of the node set).
fn reset(m: &mut AllocMetric) {
    m.nodes_evaluated = 0;
    m.nodes_filtered = 0;
    m.class_filtered.clear();
    m.constraint_filtered.clear();
    m.nodes_exhausted = 0;
    m.class_exhausted.clear();
    m.dimension_exhausted.clear();
    m.ports_exhausted.clear();
    m.coalesced_failures = 0;
    m.score = 0.0;
}

fn bump(map: &mut BTreeMap<String, u32>, key: &str) {
    match map.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            map.insert(key.to_owned(), 1);
        }
    }
}

impl Tally {
    fn filtered(&mut self, class: usize, constraint: Option<&str>) {
        let m = &mut self.metrics;
        m.nodes_filtered += 1;
        bump(&mut m.class_filtered, &self.classes.names[class]);
        if let Some(key) = constraint {
            bump(&mut m.constraint_filtered, key);
        }
    }

    fn exhausted(&mut self, class: usize, dimension: Dimension) {
        let m = &mut self.metrics;
        m.nodes_exhausted += 1;
        bump(&mut m.class_exhausted, &self.classes.names[class]);
        *m.dimension_exhausted.entry(dimension).or_default() += 1;
    }

    /// A node that cannot give the group its ports counts as exhausted, like one without
    /// room: its class is eligible, and freed ports may let the placement in later.
    fn ports_exhausted(&mut self, class: usize, why: PortShortage) {
        let m = &mut self.metrics;
        m.nodes_exhausted += 1;
        bump(&mut m.class_exhausted, &self.classes.names[class]);
        *m.ports_exhausted.entry(why).or_default() += 1;
    }

    fn class_verdict(&mut self, class: usize, eligible: bool) {
        let slot = &mut self.classes.eligible[class];
        if eligible {
            *slot = Some(true);
        } else if slot.is_none() {
            *slot = Some(false);
        }
    }
}

/// The class-stable verdict of `checks` for computed class `cc`, evaluating it on `node`
/// the first time the class is seen.
fn stable_verdict(
    checks: &Compiled,
    verdicts: &mut Vec<Verdict>,
    cc: ComputedClass,
    node: &Node,
) -> Verdict {
    let cc = cc as usize;
    if verdicts.len() <= cc {
        verdicts.resize(cc + 1, Verdict::Unknown);
    }
    if verdicts[cc] == Verdict::Unknown {
        verdicts[cc] = match checks.first_stable_failure(node) {
            Some(i) => Verdict::Fail(i),
            None => Verdict::Pass,
        };
    }
    verdicts[cc]
}

/// A node's state once the plan so far is applied, as the checks and scores need it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct View {
    usage: Resources,
    /// Live allocations of the job on the node.
    job: u32,
    /// Live allocations of the job's group being placed on the node.
    group: u32,
}

impl<'s> Eval<'s> {
    fn lookup(&self) -> Lookup<'_, 's> {
        Lookup {
            snapshot: self.snapshot,
            job: self.job,
            footprint: &self.footprint,
        }
    }

    /// The node as the plan so far leaves it: the cached view while the plan's revision for
    /// the node has not moved, else computed from the plan's entries.
    fn view(
        &self,
        entry: &mut Entry<'s>,
        sel: &Selection<'_>,
        scratch: &mut Vec<(AllocId, u32)>,
    ) -> View {
        debug_assert_eq!(entry.plan_rev, sel.plan.node_revision(&entry.id));
        let revision = match entry.plan_rev {
            Revision::Untouched => {
                let usage = entry.snapshot_usage(self.snapshot);
                let (job, group) = self.footprint.counts(&entry.id, &sel.group.name);
                let view = View { usage, job, group };
                debug_assert_eq!(view, self.compute_view(entry, sel, scratch));
                return view;
            }
            Revision::At(r) => Some(r),
            Revision::Unknown => None,
        };
        if let (Some(r), Some(c)) = (revision, entry.plan_view)
            && c.revision == r
            && c.group == sel.group_idx
        {
            debug_assert_eq!(c.view, self.compute_view(entry, sel, scratch));
            return c.view;
        }
        let view = self.compute_view(entry, sel, scratch);
        if let Some(revision) = revision {
            entry.plan_view = Some(PlanView {
                revision,
                group: sel.group_idx,
                view,
            });
        }
        view
    }

    /// The node as the plan so far leaves it, replaying the plan's entries for it.
    fn compute_view(
        &self,
        entry: &mut Entry<'s>,
        sel: &Selection<'_>,
        scratch: &mut Vec<(AllocId, u32)>,
    ) -> View {
        let usage = entry.snapshot_usage(self.snapshot);
        let group = sel.group.name.as_str();
        let (mut job, mut grp) = self.footprint.counts(&entry.id, group);
        let part = PlanOnNode::of(sel.plan, entry.id);
        if part.is_empty() {
            return View {
                usage,
                job,
                group: grp,
            };
        }
        let in_group = |a: &Allocation| sel.only_group || a.task_group == group;
        let mut released = Resources::ZERO;
        let mut added = Resources::ZERO;
        part.for_each_touched(scratch, &self.lookup(), |before, after| {
            if let Some(b) = before {
                released += b.resources;
                if is_of_job(b, self.job) {
                    job = job.saturating_sub(1);
                    if in_group(b) {
                        grp = grp.saturating_sub(1);
                    }
                }
            }
            if let Some(a) = after {
                added += a.resources;
                if is_of_job(a, self.job) {
                    job += 1;
                    if in_group(a) {
                        grp += 1;
                    }
                }
            }
        });
        View {
            usage: usage.saturating_sub(&released) + added,
            job,
            group: grp,
        }
    }

    /// The allocations to evict from `node` so that `need` fits, and what they free; `None`
    /// when no allowed set suffices. Candidates: allocations of other jobs that use resources
    /// now, that the plan does not touch, whose job priority is at least
    /// [`PRIORITY_DELTA`](super::preempt::PRIORITY_DELTA) below this job's.
    fn preemptions(
        &self,
        node: &Node,
        need: &Resources,
        plan: &Plan,
        already: &[&'s Arc<Allocation>],
    ) -> Option<(Resources, Vec<&'s Arc<Allocation>>)> {
        let part = PlanOnNode::of(plan, node.id);
        let mut victims: Vec<&'s Arc<Allocation>> = Vec::new();
        let mut evictable = Vec::new();
        for a in self.snapshot.allocs_by_node(&node.id) {
            if !a.uses_resources()
                || is_of_job(a, self.job)
                || part.touches(&a.id)
                || already.iter().any(|v| v.id == a.id)
            {
                continue;
            }
            let Some(priority) = self.priority_of(a) else {
                continue;
            };
            if may_preempt(self.job.priority, priority) {
                victims.push(a);
                evictable.push(Evictable {
                    priority,
                    resources: a.resources,
                });
            }
        }
        let chosen = choose_evictions(&shortfall(&node.allocatable(), need), &evictable)?;
        let freed = chosen.iter().map(|&i| evictable[i].resources).sum();
        Some((freed, chosen.into_iter().map(|i| victims[i]).collect()))
    }
}

/// Runs every check on one node and scores it; `None` (with the reason in the metrics) when
/// it cannot take the allocation.
fn evaluate<'s>(
    eval: &Eval<'s>,
    tally: &mut Tally,
    checks: &mut GroupChecks,
    entry: &mut Entry<'s>,
    idx: usize,
    sel: &Selection<'_>,
) -> Option<Candidate<'s>> {
    tally.metrics.nodes_evaluated += 1;
    let class = entry.class;
    if !entry.schedulable {
        tally.filtered(class, None);
        return None;
    }

    // Class-stable constraints: once per computed class.
    if !eval.job_checks.stable.is_empty() || !checks.compiled.stable.is_empty() {
        let cc = match entry.computed {
            Some(cc) => cc,
            None => *entry
                .computed
                .insert(tally.computed.id_of(entry.node.computed_class_key())),
        };
        let node: &Node = entry.node;
        let failed = match stable_verdict(&eval.job_checks, &mut tally.job_verdicts, cc, node) {
            Verdict::Fail(i) => Some(&eval.job_checks.stable[i].key),
            _ => match stable_verdict(&checks.compiled, &mut checks.verdicts, cc, node) {
                Verdict::Fail(i) => Some(&checks.compiled.stable[i].key),
                _ => None,
            },
        };
        if let Some(key) = failed {
            tally.class_verdict(class, false);
            tally.filtered(class, Some(key));
            return None;
        }
    }
    tally.class_verdict(class, true);
    let node: &Node = entry.node;

    // Constraints on per-node targets.
    if let Some(c) = eval
        .job_checks
        .first_per_node_failure(node)
        .or_else(|| checks.compiled.first_per_node_failure(node))
    {
        tally.filtered(class, Some(&c.key));
        return None;
    }

    let view = eval.view(entry, sel, &mut tally.scratch);
    let node: &Node = entry.node;

    // distinct_hosts and distinct_property.
    let crowded = match (
        &eval.job_checks.distinct_hosts,
        &checks.compiled.distinct_hosts,
    ) {
        (Some(key), _) if view.job > 0 => Some(key),
        (_, Some(key)) if view.group > 0 => Some(key),
        _ => None,
    }
    .or_else(|| {
        tally
            .job_properties
            .iter()
            .chain(&checks.properties)
            .find(|p| !p.allows(node))
            .map(|p| &p.key)
    });
    if let Some(key) = crowded {
        let key = key.clone();
        tally.filtered(class, Some(&key));
        return None;
    }

    // Ports, evicting lower-priority holders of the static ones if allowed and needed.
    let forced = match sel.network {
        None => Vec::new(),
        Some(ask) => match eval.port_evictions(entry, sel, ask, &mut tally.scratch) {
            Ok(victims) => victims,
            Err(why) => {
                tally.ports_exhausted(class, why);
                return None;
            }
        },
    };
    let node: &Node = entry.node;

    // Resources, evicting lower-priority allocations if allowed and needed.
    let allocatable = entry.allocatable;
    let freed: Resources = forced.iter().map(|a| a.resources).sum();
    let need = (view.usage + sel.ask).saturating_sub(&freed);
    let (used, preempted) = match allocatable.exhausted_by(&need) {
        None => (need, forced),
        Some(dimension) => match sel
            .preempt
            .then(|| eval.preemptions(node, &need, sel.plan, &forced))
            .flatten()
        {
            Some((freed, mut victims)) => {
                victims.extend(forced);
                (need.saturating_sub(&freed), victims)
            }
            None => {
                tally.exhausted(class, dimension);
                return None;
            }
        },
    };

    let mut score = Score::fit(fit_score(eval.algorithm, &allocatable, &used));
    if let Some(a) = anti_affinity_score(view.group, sel.group.count) {
        score.add(a);
    }
    if !sel.opts.penalty_nodes.is_empty() && sel.opts.penalty_nodes.contains(&entry.id) {
        score.add(PENALTY_SCORE);
    }
    if !preempted.is_empty() {
        score.add(PREEMPTION_SCORE);
    }
    if let Some(s) = sel.snapshot_id {
        score.add_tier(SnapshotTier::of(node, view.usage.is_zero(), s));
    }
    Some(Candidate {
        idx,
        score: score.total(),
        preempted,
    })
}
