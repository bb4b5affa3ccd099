//! The state store: every table drover keeps, as persistent (structurally shared) maps.
//!
//! Cloning a [`StateStore`] copies a dozen root pointers, so [`StateStore::snapshot`] is O(1)
//! whatever the size, and a snapshot never changes after it is taken: writers path-copy the
//! nodes they touch. Schedulers read snapshots; only the FSM ([`crate::fsm`]) writes.
//!
//! Invariants (checked by `check_consistency`, which the property tests run):
//! - every secondary index holds exactly the keys of the primary table it indexes (and
//!   `allocs_by_job` the fields it copies out of each allocation, equal to the
//!   allocation's);
//! - `tainted_nodes` holds exactly the tainted nodes of the node table
//!   ([`Node::is_tainted`]) and, as `None`, every node id that allocations name but the node
//!   table does not;
//! - `node_usage[n]` is the sum of resources of the allocations on `n` that still use them,
//!   with the ports of exactly those allocations, once per holder, and their count;
//! - job summaries equal a recount from the alloc and eval tables;
//! - every service registration names a live (not client-terminal) allocation on its node,
//!   and the catalog's indexes hold exactly its registrations;
//! - `latest_index` is the maximum of the table indexes.

mod acl;
mod alloc_chunks;
mod alloc_index;
pub(crate) use alloc_index::{AllocChange, LentIndexes};
mod deployments;
mod helper;
mod job_allocs;
pub use job_allocs::JobAllocs;
mod packed;
mod read;
mod rebuild;
mod services;
mod summary;
mod write;

#[cfg(test)]
mod tests;

pub use acl::AclParts;
pub use deployments::DEPLOYMENTS_KEPT;
pub use helper::run_on_helper as run_on_index_helper;
pub use packed::from_sorted as ordmap_from_sorted;
pub use rebuild::StoreParts;
pub use services::{ServiceChanges, ServiceSummary, alloc_listed};
pub use summary::{GroupSummary, JobSummary, derive_job_status};

use crate::types::*;
use compact_str::CompactString;
use imbl::{OrdMap, OrdSet};
use std::sync::Arc;

/// How many versions of each job are kept for history and for allocations placed with an
/// older version (Nomad keeps six).
pub const JOB_VERSIONS_KEPT: u64 = 6;

/// The tables whose last-change index is recorded.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub enum Table {
    Jobs,
    JobVersions,
    JobSummaries,
    Nodes,
    Allocs,
    Evals,
    SchedulerConfig,
    Services,
    Deployments,
}

impl Table {
    pub const ALL: [Table; 9] = [
        Table::Jobs,
        Table::JobVersions,
        Table::JobSummaries,
        Table::Nodes,
        Table::Allocs,
        Table::Evals,
        Table::SchedulerConfig,
        Table::Services,
        Table::Deployments,
    ];
}

/// The last index at which each table changed.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TableIndexes {
    pub jobs: Index,
    pub job_versions: Index,
    pub job_summaries: Index,
    pub nodes: Index,
    pub allocs: Index,
    pub evals: Index,
    pub scheduler_config: Index,
    /// The service catalog: registrations written or removed, or listed or hidden.
    pub services: Index,
    pub deployments: Index,
}

impl TableIndexes {
    pub fn get(&self, t: Table) -> Index {
        match t {
            Table::Jobs => self.jobs,
            Table::JobVersions => self.job_versions,
            Table::JobSummaries => self.job_summaries,
            Table::Nodes => self.nodes,
            Table::Allocs => self.allocs,
            Table::Evals => self.evals,
            Table::SchedulerConfig => self.scheduler_config,
            Table::Services => self.services,
            Table::Deployments => self.deployments,
        }
    }

    /// Records a write to `t` at `index` (a table's index only grows).
    fn raise(&mut self, t: Table, index: Index) {
        let slot = self.slot(t);
        *slot = (*slot).max(index);
    }

    fn slot(&mut self, t: Table) -> &mut Index {
        match t {
            Table::Jobs => &mut self.jobs,
            Table::JobVersions => &mut self.job_versions,
            Table::JobSummaries => &mut self.job_summaries,
            Table::Nodes => &mut self.nodes,
            Table::Allocs => &mut self.allocs,
            Table::Evals => &mut self.evals,
            Table::SchedulerConfig => &mut self.scheduler_config,
            Table::Services => &mut self.services,
            Table::Deployments => &mut self.deployments,
        }
    }

    pub fn max(&self) -> Index {
        Table::ALL.iter().map(|t| self.get(*t)).max().unwrap_or(0)
    }
}

/// One allocation in the per-job index: what the reconciler reads of it, copied out once
/// when it is written.
///
/// The reconciler looks at every allocation of a job per eval, and almost always finds
/// nothing to do. Each `Allocation` is a separate heap object (its group name another), so
/// reading them was a chain of cache misses per allocation; these entries sit side by side in
/// the index's leaves, and the allocation itself is read by id
/// ([`StateStore::job_alloc`]) only for the few that need action.
///
/// It holds no `Arc` of the allocation. It did, and a write behind a published snapshot
/// copies the B-tree leaf and branches it lands in: each copied entry touched its
/// allocation's count (a cache miss), and the old version's drop touched it again. That was
/// the largest copy-on-write cost of a follower applying reports. Plain fields copy as
/// bytes, and a report that changes none of them (task events alone) leaves the entry as
/// it is. Invariant (checked by `check_consistency`): every entry equals what
/// [`JobAlloc::new`] derives from the allocation of its id.
#[derive(Clone, PartialEq, Debug)]
pub struct JobAlloc {
    pub id: AllocId,
    pub node_id: NodeId,
    /// The task group, inline when short (most group names are), so comparing it reads no
    /// other memory.
    pub group: CompactString,
    pub job_version: u64,
    pub create_index: Index,
    pub slot: Slot,
    pub desired_status: DesiredStatus,
    pub client_status: ClientStatus,
    /// [`Allocation::last_state`].
    pub last_state: Option<ClientStatus>,
    /// Whether a drain asked for it to move ([`Links`]' `migrate`): read for every
    /// allocation on a settled node.
    pub migrate: bool,
}

impl JobAlloc {
    pub fn new(alloc: &Allocation) -> Self {
        Self {
            id: alloc.id,
            node_id: alloc.node_id,
            group: CompactString::from(alloc.task_group.as_str()),
            job_version: alloc.job_version,
            create_index: alloc.create_index,
            slot: Slot::of(alloc.name_index()),
            desired_status: alloc.desired_status,
            client_status: alloc.client_status,
            last_state: alloc.last_state(),
            migrate: alloc.links.get().migrate,
        }
    }

    /// [`Allocation::client_terminal`].
    pub fn client_terminal(&self) -> bool {
        self.client_status.is_terminal()
    }

    /// [`Allocation::uses_resources`].
    pub fn uses_resources(&self) -> bool {
        self.desired_status == DesiredStatus::Run && !self.client_terminal()
    }
}

/// [`Allocation::name_index`] in four bytes, not an `Option<u32>`'s eight: it keeps a
/// [`JobAlloc`] at 80 bytes, and a large job's index holds sixteen of them per B-tree leaf.
/// `u32::MAX` stands for none. No slot a reconciler fills reaches it (slots are below a
/// group's count, a `u32`), so the one name that spells it, `job.group[4294967295]`, reads
/// as a name of no slot, which is how the reconciler treated it before.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Slot(u32);

impl Slot {
    pub fn of(index: Option<u32>) -> Self {
        Self(index.unwrap_or(u32::MAX))
    }

    pub fn get(self) -> Option<u32> {
        (self.0 != u32::MAX).then_some(self.0)
    }
}

/// What the live allocations of one node hold: their resources, summed, and their ports.
/// One entry of one map, so that placing an allocation is one write to the store.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct NodeUse {
    pub resources: Resources,
    /// `None` while they hold no port. Behind an `Arc`: a path copy of the map clones a
    /// pointer, and a write copies one node's ports only when a snapshot shares them.
    pub ports: Option<Arc<crate::ports::NodePorts>>,
    /// `ports`' [`len`](crate::ports::NodePorts::len), kept beside the resources: the
    /// scheduler reads it on every visit to a node, and bounds the free dynamic ports by it
    /// without following the pointer (see [`NodeUse::port_holds`]).
    port_holds: u32,
    /// How many live allocations (those that use resources) the node has: an entry exists
    /// exactly while this is above zero, so whether a node runs anything is one lookup (or
    /// one step of a walk beside the node table) rather than a walk of the by-node index.
    live: u32,
}

impl NodeUse {
    fn is_empty(&self) -> bool {
        self.live == 0 && self.resources.is_zero() && self.ports.is_none()
    }

    /// Whether any live allocation is on the node.
    pub fn runs_allocations(&self) -> bool {
        self.live > 0
    }

    /// How many `(address, port)` holds `ports` has, each once per holder.
    pub fn port_holds(&self) -> usize {
        self.port_holds as usize
    }

    /// Counts what live allocation `a` holds on its node (`sign` 1) or stops counting it
    /// (`sign` -1): its resources and its ports. The one place that says what a placement
    /// takes from a node, for a write and for a snapshot's restore alike.
    fn count(&mut self, a: &Allocation, sign: i8) {
        if sign > 0 {
            self.resources += a.resources;
            self.live += 1;
        } else {
            self.resources = self.resources - a.resources;
            self.live = self.live.saturating_sub(1);
        }
        if !a.ports.is_empty() {
            self.change_ports(|p| match sign > 0 {
                true => p.add(&a.ports),
                false => p.remove(&a.ports),
            });
        }
    }

    /// Changes the ports in place (copying them first if a snapshot shares them).
    fn change_ports(&mut self, f: impl FnOnce(&mut crate::ports::NodePorts)) {
        let ports = Arc::make_mut(self.ports.get_or_insert_with(Default::default));
        f(ports);
        // A node's holds are bounded by its addresses (at most 65,536 each) times its ports.
        self.port_holds = u32::try_from(ports.len()).unwrap_or(u32::MAX);
        if ports.is_empty() {
            self.ports = None;
        }
    }
}

/// What a node means for the allocations that name it; see [`StateStore::node_taint`].
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum NodeTaint<'a> {
    /// In the node table, ready or initializing, and not draining.
    Settled,
    /// Down, disconnected or draining ([`Node::is_tainted`]).
    Tainted(&'a Arc<Node>),
    /// Not in the node table.
    Gone,
}

/// All of drover's replicated state. See the module docs for the invariants.
#[derive(Clone, Debug, Default)]
pub struct StateStore {
    jobs: OrdMap<JobKey, Arc<Job>>,
    job_versions: OrdMap<(JobKey, u64), Arc<Job>>,
    summaries: OrdMap<JobKey, Arc<JobSummary>>,
    nodes: OrdMap<NodeId, Arc<Node>>,
    /// Every node by name (names are not unique: a down node's name may be taken again),
    /// so a registration checks its name in a range scan, not a pass over every node.
    nodes_by_name: OrdSet<(String, NodeId)>,
    /// The schedulable nodes ([`Node::is_schedulable`]) of each datacenter, in id order, so
    /// a scheduler lists a job's candidates without reading every node: at 50,000 nodes,
    /// reading each node's status and datacenter once per eval cost more than placing.
    schedulable: OrdMap<String, OrdMap<NodeId, Arc<Node>>>,
    /// The nodes whose allocations the reconciler must look at because of the node: tainted
    /// ones, and (as `None`) ones that are gone while allocations still name them. On a
    /// healthy cluster it is empty, so a reconcile finds every allocation's node settled
    /// without reading the node table at all.
    tainted_nodes: OrdMap<NodeId, Option<Arc<Node>>>,
    allocs: OrdMap<AllocId, Arc<Allocation>>,
    /// Every allocation's keys by node; [`StateStore::allocs_by_node`] reads each from
    /// `allocs`. See [`ByNode`] for why it holds no allocation.
    allocs_by_node: ByNode,
    /// Holds what the reconciler reads of each allocation, not only its id: it reads every
    /// allocation of a job per eval, and a lookup into `allocs` per allocation was most of
    /// its cost. See [`JobAlloc`] for why it holds no `Arc` of the allocation. One
    /// [`JobAllocs`] per job, absent once the job has no allocation.
    allocs_by_job: OrdMap<JobKey, JobAllocs>,
    /// What each node's live allocations hold (nodes holding nothing are absent).
    node_usage: OrdMap<NodeId, NodeUse>,
    evals: OrdMap<EvalId, Arc<Evaluation>>,
    evals_by_job: OrdSet<(JobKey, EvalId)>,
    scheduler_config: Arc<SchedulerConfig>,
    /// Service registrations by id (see [`services`]).
    services: OrdMap<services::RegId, Arc<ServiceRegistration>>,
    services_by_name: OrdSet<services::ByName>,
    services_by_alloc: OrdSet<(AllocId, services::RegId)>,
    /// The index at which each service's listed instances last changed (see
    /// [`StateStore::service_index`]). Derived, not in snapshots: a restored store starts
    /// every present service at the catalog's table index.
    services_changed: OrdMap<services::NameKey, Index>,
    deployments: OrdMap<DeploymentId, Arc<Deployment>>,
    deployments_by_job: OrdSet<(JobKey, DeploymentId)>,
    indexes: TableIndexes,
    acl: acl::AclTables,
    /// Whether a batch's allocation indexes are lent to the helper thread
    /// ([`alloc_index::LentIndexes`]): the by-node index, node usage, tainted nodes and
    /// by-job index are then empty here.
    indexes_lent: bool,
}

/// The by-node index: each allocation's `(node, id)`, with its `alloc_modify_index`.
///
/// It held each allocation's `Arc`, as `allocs_by_job`'s entries did. But every write of an
/// allocation (a node's report of it too) then wrote a new value into this index, and a
/// write behind a published snapshot copies the B-tree leaf it lands in and the branches
/// above it: cloning each copied leaf's sixteen `Arc`s touched sixteen allocations' counts
/// (a cache miss each), and dropping the old version later touched them again. Holding a
/// plain index, a report leaves this index alone (a node's report is not a server change,
/// so its `alloc_modify_index` stays), and a placement copies plain bytes. The allocation
/// watch compares what it sent with these indexes alone and reads by id only what changed;
/// [`StateStore::allocs_by_node`] reads each allocation from the by-id table.
pub(crate) type ByNode = OrdMap<(NodeId, AllocId), Index>;

/// A point-in-time view of the store. It is a `StateStore` clone: O(1) to take, immutable.
pub type StateSnapshot = StateStore;

impl StateStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// An O(1), immutable view of the state as it is now.
    pub fn snapshot(&self) -> StateSnapshot {
        self.assert_indexes_home();
        self.clone()
    }

    /// The highest index of any change in the store.
    pub fn latest_index(&self) -> Index {
        self.indexes.max().max(self.acl_index())
    }

    pub fn table_index(&self, t: Table) -> Index {
        self.indexes.get(t)
    }

    pub fn table_indexes(&self) -> TableIndexes {
        self.indexes
    }

    fn touch(&mut self, t: Table, index: Index) {
        self.indexes.raise(t, index);
    }
}
