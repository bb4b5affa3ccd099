//! The per-node checks of one plan against one state snapshot.
//!
//! The check is exact rather than approximate: for every node it computes what that node's
//! usage will be once the FSM has applied the committed part of the plan, using the store's
//! incrementally maintained `node_usage` and only the allocations the plan touches. That is
//! O(allocations in the plan · log allocations in the store), independent of how many
//! allocations already run on each node.
//!
//! Exactness rests on one structural rule, enforced here: every allocation id the plan
//! touches is touched under exactly one node's lists, and that node is the one the
//! allocation is on (or, for a new allocation, the one it names). Then no node's part of the
//! plan can change another node's usage, so committing any subset of accepted nodes gives
//! each of them exactly the usage computed for it.

use crate::fsm::PlanApply;
use crate::state::StateSnapshot;
use crate::types::*;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

/// What the plan applier decided about one plan.
#[derive(Clone, PartialEq, Debug)]
pub struct PlanOutcome {
    /// The committed subset, the refused nodes with their reasons, and the refresh index.
    /// `alloc_index` is left at 0: the runtime fills it in once the Raft write commits.
    pub result: PlanResult,
    /// The body of the `ApplyPlan` command to commit; `None` when nothing commits.
    pub apply: Option<PlanApply>,
}

impl PlanOutcome {
    /// Whether any node's part of the plan was refused (the scheduler must refresh).
    pub fn has_refusals(&self) -> bool {
        !self.result.rejected_nodes.is_empty()
    }
}

/// Why one node's part of a plan was refused. Its text is what `PlanResult::rejected_nodes`
/// carries back to the scheduler.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum NodeRefusal {
    /// The node is not in the state and the plan does more than stop or mark allocations
    /// on it.
    #[error("node {0} not found")]
    NotFound(NodeId),
    /// The node is not `ready` and the plan does more than stop or mark allocations on it.
    #[error("node {node} is {} and the plan does more than stop or mark allocations there", status.as_str())]
    NotReady { node: NodeId, status: NodeStatus },
    /// The node is ready but not schedulable (`why`) and the plan puts new work on it.
    #[error("node {node} is not schedulable ({why}) and the plan places new allocations there")]
    NotSchedulable { node: NodeId, why: String },
    /// The node's usage after the plan would exceed its allocatable resources.
    #[error("node {node} exhausted on {dimension}")]
    Exhausted { node: NodeId, dimension: Dimension },
    /// An allocation would hold a port another allocation holds on that node address.
    #[error("port {port} on {address} of node {node} is already held")]
    PortTaken {
        node: NodeId,
        address: IpAddr,
        port: u16,
    },
    /// An allocation would hold one of the node's reserved ports.
    #[error("port {port} is reserved on node {node}")]
    PortReserved { node: NodeId, port: u16 },
    /// The plan lists an allocation under a node it is not on (or does not name).
    #[error("allocation {alloc} is on node {actual}, not on node {node}")]
    WrongNode {
        node: NodeId,
        alloc: AllocId,
        actual: NodeId,
    },
    /// The plan touches one allocation under several nodes.
    #[error("allocation {alloc} is listed under node {node} and under node {other}")]
    ListedTwice {
        node: NodeId,
        alloc: AllocId,
        other: NodeId,
    },
}

/// Checks `plan` against `state` and returns what may commit.
///
/// Per node of the plan, in node-id order (nodes whose lists are all empty are skipped:
/// they have nothing to check or commit):
///
/// 1. Structure: every allocation listed under the node is on that node in `state` (or is
///    new and names that node), and no allocation is listed under two nodes
///    ([`NodeRefusal::WrongNode`], [`NodeRefusal::ListedTwice`]).
/// 2. Missing node: refused unless the plan only stops allocations there or marks them
///    lost/unknown ([`AllocTransition::is_stop_or_mark`], no `node_allocation` entries).
///    Nomad accepts such plans too: allocations of a node that was deregistered must still
///    be stoppable, or the scheduler would retry forever.
/// 3. Not `ready` (initializing, down, disconnected): refused under the same condition.
/// 4. Ready but not schedulable ([`Node::is_schedulable`]: eligibility `ineligible`, a drain
///    in progress, or health other than `healthy` — suspended or offlined): refused if the
///    plan puts *new work* there, i.e. if any allocation ends up using resources on the node
///    that did not before the plan (a new allocation, or reviving a stopped or lost one).
///    In-place updates of running allocations, stops and marks are allowed.
/// 5. Capacity: if the plan adds any allocation that uses resources on the node, then
///    `node_usage - released + added` must fit `node.allocatable()`, where `released` is the
///    resources of touched allocations that use resources on the node now and `added` those
///    of touched allocations that will use them after the plan (so stops, evictions,
///    preemptions and lost marks free capacity, and an in-place update counts as its
///    delta). A plan that only frees capacity is never refused for capacity, even on a node
///    that is already over-committed.
/// 6. Ports: every port an allocation starts holding (one it did not hold before the plan)
///    must not be among the node's reserved ports, and must have exactly one holder on its
///    address once the part commits: the state's holders (`node_ports`), less those the
///    part releases, plus those it takes ([`NodeRefusal::PortReserved`],
///    [`NodeRefusal::PortTaken`]). Of two plans racing for one port, the later is refused.
///
/// `all_at_once` plans stop at the first refusal and commit nothing. Otherwise the accepted
/// nodes commit. The plan's evals commit whenever anything else commits, and also when the
/// plan has nothing but evals; its closing evals only when nothing was refused.
/// `refresh_index` is `state.latest_index()` when any node was refused, else 0.
pub fn check_plan(state: &StateSnapshot, plan: &Plan) -> PlanOutcome {
    let mut result = PlanResult::default();
    let listed_twice = listed_under_several_nodes(plan);
    let mut scratch = Scratch::default();
    let mut accepted = Vec::new();
    let mut any_node_part = false;

    // Decide first, copy afterwards: nothing is copied for refused parts, or at all when an
    // all-at-once plan is refused.
    for part in NodePart::all(plan).filter(|p| !p.is_empty()) {
        any_node_part = true;
        match check_node(state, &part, &listed_twice, &mut scratch) {
            Ok(()) => accepted.push(part),
            Err(refusal) => {
                result.rejected_nodes.insert(part.node, refusal.to_string());
                if plan.all_at_once {
                    break;
                }
            }
        }
    }
    if !result.rejected_nodes.is_empty() {
        result.refresh_index = state.latest_index();
        if plan.all_at_once {
            accepted.clear();
        }
    }

    // Evals and deployment changes ride along with whatever commits, and commit alone in a
    // plan of only those (a deployment whose placements all failed still starts its
    // progress deadline; a newer version still cancels the older deployment).
    let ride_alone =
        !plan.evals.is_empty() || plan.deployment.is_some() || !plan.deployment_updates.is_empty();
    let commits = !accepted.is_empty() || (!any_node_part && ride_alone);
    if !commits {
        return PlanOutcome {
            result,
            apply: None,
        };
    }
    // The accepted parts come in node order, so each map is built in one sorted pass rather
    // than by one search per node.
    result.node_allocation = Arc::new(
        accepted
            .iter()
            .filter(|p| !p.allocs.is_empty())
            .map(|p| (p.node, p.allocs.to_vec()))
            .collect(),
    );
    result.node_update = Arc::new(
        accepted
            .iter()
            .filter(|p| !p.updates.is_empty())
            .map(|p| (p.node, p.updates.to_vec()))
            .collect(),
    );
    result.node_preemptions = Arc::new(
        accepted
            .iter()
            .filter(|p| !p.preemptions.is_empty())
            .map(|p| (p.node, p.preemptions.to_vec()))
            .collect(),
    );
    result.evals = committed_evals(state, plan, &result.node_preemptions);
    let mut evals = result.evals.clone();
    // The eval closes with its plan only when all of the plan commits.
    if result.rejected_nodes.is_empty() && !plan.closing.is_empty() {
        evals.extend(plan.closing.iter().cloned());
        result.closed = true;
    }
    let apply = PlanApply {
        eval_id: plan.eval_id,
        job: plan.job.clone(),
        node_allocation: result.node_allocation.clone(),
        node_update: result.node_update.clone(),
        node_preemptions: result.node_preemptions.clone(),
        evals,
        deployment: plan.deployment.clone(),
        deployment_updates: plan.deployment_updates.clone(),
    };
    PlanOutcome {
        result,
        apply: Some(apply),
    }
}

/// The plan's evals that commit with what was accepted: all of them, except a preemption
/// eval whose job lost nothing to this plan (every node that would have preempted it was
/// refused), which would only run the job again for nothing.
fn committed_evals(
    state: &StateSnapshot,
    plan: &Plan,
    preempted: &CommittedByNode<AllocTransition>,
) -> Vec<Evaluation> {
    if !plan
        .evals
        .iter()
        .any(|e| e.triggered_by == TriggeredBy::Preemption)
    {
        return plan.evals.clone();
    }
    let losers: BTreeSet<JobKey> = preempted
        .values()
        .flatten()
        .filter_map(|t| state.alloc(&t.alloc_id))
        .map(|a| JobKey {
            namespace: a.namespace.clone(),
            id: a.job_id.clone(),
        })
        .collect();
    plan.evals
        .iter()
        .filter(|e| e.triggered_by != TriggeredBy::Preemption || losers.contains(&e.job_key()))
        .cloned()
        .collect()
}

/// One node's share of a plan.
struct NodePart<'p> {
    node: NodeId,
    allocs: &'p [Arc<Allocation>],
    updates: &'p [AllocTransition],
    preemptions: &'p [AllocTransition],
}

impl<'p> NodePart<'p> {
    /// Every node's part, in node-id order: the same nodes as [`Plan::nodes`], found by
    /// merging the three sorted maps instead of looking each node up in each of them.
    fn all(plan: &'p Plan) -> impl Iterator<Item = NodePart<'p>> + use<'p> {
        let mut allocs = plan.node_allocation.iter().peekable();
        let mut updates = plan.node_update.iter().peekable();
        let mut preemptions = plan.node_preemptions.iter().peekable();
        std::iter::from_fn(move || {
            let node = [
                allocs.peek().map(|e| *e.0),
                updates.peek().map(|e| *e.0),
                preemptions.peek().map(|e| *e.0),
            ]
            .into_iter()
            .flatten()
            .min()?;
            Some(NodePart {
                node,
                allocs: allocs
                    .next_if(|e| *e.0 == node)
                    .map_or(&[], |e| e.1.as_slice()),
                updates: updates
                    .next_if(|e| *e.0 == node)
                    .map_or(&[], |e| e.1.as_slice()),
                preemptions: preemptions
                    .next_if(|e| *e.0 == node)
                    .map_or(&[], |e| e.1.as_slice()),
            })
        })
    }

    fn is_empty(&self) -> bool {
        self.allocs.is_empty() && self.updates.is_empty() && self.preemptions.is_empty()
    }

    fn transitions(&self) -> impl Iterator<Item = &'p AllocTransition> + use<'p> {
        self.updates.iter().chain(self.preemptions)
    }

    /// Whether the part only stops allocations or marks them lost/unknown: the only changes
    /// allowed on nodes that are missing or not ready.
    fn only_stops_or_marks(&self) -> bool {
        self.allocs.is_empty() && self.transitions().all(AllocTransition::is_stop_or_mark)
    }
}

/// Allocation ids listed under more than one node, with two of those nodes. Usually empty;
/// ids are sorted as `u128`s, which compare much faster than UUID byte slices.
fn listed_under_several_nodes(plan: &Plan) -> BTreeMap<AllocId, (NodeId, NodeId)> {
    let key = |a: AllocId, n: NodeId| (a.0.as_u128(), n.0.as_u128());
    let transitions = plan.node_update.iter().chain(&plan.node_preemptions);
    let mut pairs: Vec<(u128, u128)> = transitions
        .flat_map(|(n, ts)| ts.iter().map(move |t| key(t.alloc_id, *n)))
        .chain(
            plan.node_allocation
                .iter()
                .flat_map(|(n, allocs)| allocs.iter().map(move |a| key(a.id, *n))),
        )
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let id = |x: u128| uuid::Uuid::from_u128(x);
    pairs
        .windows(2)
        .filter(|w| w[0].0 == w[1].0)
        .map(|w| {
            (
                AllocId(id(w[0].0)),
                (NodeId(id(w[0].1)), NodeId(id(w[1].1))),
            )
        })
        .collect()
}

/// Buffers one plan's node checks reuse, so a node's check allocates nothing after the
/// first ones.
#[derive(Default)]
struct Scratch {
    touches: Vec<Touch>,
    ports: PortDelta,
}

fn check_node(
    state: &StateSnapshot,
    part: &NodePart<'_>,
    listed_twice: &BTreeMap<AllocId, (NodeId, NodeId)>,
    scratch: &mut Scratch,
) -> Result<(), NodeRefusal> {
    let node_id = part.node;
    let Some(node) = state.node(&node_id) else {
        return if part.only_stops_or_marks() {
            node_delta(state, part, listed_twice, scratch).map(|_| ())
        } else {
            Err(NodeRefusal::NotFound(node_id))
        };
    };
    if node.status != NodeStatus::Ready && !part.only_stops_or_marks() {
        return Err(NodeRefusal::NotReady {
            node: node_id,
            status: node.status,
        });
    }
    let delta = node_delta(state, part, listed_twice, scratch)?;
    if delta.new_work
        && let Some(why) = unschedulable_reason(node)
    {
        return Err(NodeRefusal::NotSchedulable { node: node_id, why });
    }
    let used = state.node_use(&node_id);
    if delta.adds {
        let usage = used.map_or(Resources::ZERO, |u| u.resources);
        let after = usage.saturating_sub(&delta.released) + delta.added;
        if let Some(dimension) = node.allocatable().exhausted_by(&after) {
            return Err(NodeRefusal::Exhausted {
                node: node_id,
                dimension,
            });
        }
    }
    let held = used.and_then(|u| u.ports.as_deref());
    check_ports(node, held, &mut scratch.ports)
}

/// Rule 6 of [`check_plan`] for one node's part; `held` is the state's ports of the node.
fn check_ports(
    node: &Node,
    held: Option<&crate::ports::NodePorts>,
    ports: &mut PortDelta,
) -> Result<(), NodeRefusal> {
    if ports.new.is_empty() {
        return Ok(());
    }
    ports.released.sort_unstable();
    ports.taken.sort_unstable();
    let held = held.unwrap_or(&crate::ports::NO_PORTS);
    let count = |list: &[(IpAddr, u16)], key: (IpAddr, u16)| {
        (list.partition_point(|k| *k <= key) - list.partition_point(|k| *k < key)) as i64
    };
    for &(address, port) in &ports.new {
        if node.networks.reserved_ports.contains(port) {
            return Err(NodeRefusal::PortReserved {
                node: node.id,
                port,
            });
        }
        let holders = held.count(address, port) as i64 - count(&ports.released, (address, port))
            + count(&ports.taken, (address, port));
        if holders > 1 {
            return Err(NodeRefusal::PortTaken {
                node: node.id,
                address,
                port,
            });
        }
    }
    Ok(())
}

/// Why a node takes no new work, or `None` if it is schedulable. Mirrors
/// [`Node::is_schedulable`] condition by condition so the refusal names the cause.
fn unschedulable_reason(node: &Node) -> Option<String> {
    if node.status != NodeStatus::Ready {
        Some(format!("status {}", node.status.as_str()))
    } else if node.eligibility == Eligibility::Ineligible {
        Some("ineligible".into())
    } else if node.drain.is_some() {
        Some("draining".into())
    } else if node.health != NodeHealth::Healthy {
        Some(format!("health {}", node.health.as_str()))
    } else {
        debug_assert!(node.is_schedulable());
        None
    }
}

/// How one node's usage changes if its part of the plan commits.
#[derive(Default)]
struct Delta {
    /// Resources of touched allocations that use resources on the node now.
    released: Resources,
    /// Resources of touched allocations that will use resources on the node afterwards.
    added: Resources,
    /// Whether any allocation will use resources on the node afterwards (even zero-sized).
    adds: bool,
    /// Whether any allocation will use resources on the node that does not now.
    new_work: bool,
}

/// How one node's held ports change if its part of the plan commits; all empty when no
/// touched allocation has ports. Filled by [`node_delta`] into reused buffers.
#[derive(Default)]
struct PortDelta {
    /// Ports of touched allocations that hold them now.
    released: Vec<(IpAddr, u16)>,
    /// Ports of touched allocations that will hold them afterwards.
    taken: Vec<(IpAddr, u16)>,
    /// Of `taken`, those their allocation did not hold before.
    new: Vec<(IpAddr, u16)>,
}

fn keys(ports: &[AllocatedPort]) -> impl Iterator<Item = (IpAddr, u16)> + '_ {
    ports.iter().map(|p| (p.host_ip, p.value))
}

/// One operation of the plan on one allocation, with its position in FSM order.
#[derive(Clone, Copy)]
struct Touch {
    alloc: AllocId,
    seq: u32,
    op: Op,
}

/// Where the operation is in the node part: an index into its transitions (node updates
/// then preemptions) or into its placements. Indices keep `Touch` small and `Copy`.
#[derive(Clone, Copy)]
enum Op {
    Transition(usize),
    Place(usize),
}

/// The fields of an allocation that decide whether (and where, and how much) it uses
/// resources, and which ports it holds, as the FSM would leave them.
#[derive(Clone, Copy)]
struct Sim<'a> {
    node: NodeId,
    desired: DesiredStatus,
    client: ClientStatus,
    resources: Resources,
    ports: &'a [AllocatedPort],
}

impl<'a> Sim<'a> {
    fn of(a: &'a Allocation) -> Self {
        Self {
            node: a.node_id,
            desired: a.desired_status,
            client: a.client_status,
            resources: a.resources,
            ports: &a.ports,
        }
    }

    /// Same rule as [`Allocation::uses_resources`].
    fn uses_resources(&self) -> bool {
        self.desired == DesiredStatus::Run && !self.client.is_terminal()
    }

    /// What `fsm` `transition` does to these fields.
    fn transition(self, t: &AllocTransition) -> Self {
        Self {
            desired: t.desired_status,
            client: t.client_status.unwrap_or(self.client),
            ..self
        }
    }

    /// What `fsm` `place` does: an existing allocation keeps its client status unless the
    /// placement marks it lost or unknown.
    fn place(current: Option<Self>, a: &'a Allocation) -> Self {
        let client = match current {
            Some(c) if !matches!(a.client_status, ClientStatus::Lost | ClientStatus::Unknown) => {
                c.client
            }
            _ => a.client_status,
        };
        Self {
            node: a.node_id,
            desired: a.desired_status,
            client,
            resources: a.resources,
            ports: &a.ports,
        }
    }
}

/// Computes the node's usage change, refusing plans that break the structural rule (see the
/// module docs). FSM order is kept per allocation: node updates, then preemptions, then
/// placements.
fn node_delta(
    state: &StateSnapshot,
    part: &NodePart<'_>,
    listed_twice: &BTreeMap<AllocId, (NodeId, NodeId)>,
    scratch: &mut Scratch,
) -> Result<Delta, NodeRefusal> {
    let node = part.node;
    let Scratch {
        touches: scratch,
        ports,
    } = scratch;
    scratch.clear();
    ports.released.clear();
    ports.taken.clear();
    ports.new.clear();
    let transitions = part
        .transitions()
        .enumerate()
        .map(|(i, t)| (t.alloc_id, Op::Transition(i)));
    let places = part
        .allocs
        .iter()
        .enumerate()
        .map(|(i, a)| (a.id, Op::Place(i)));
    for (seq, (alloc, op)) in (0u32..).zip(transitions.chain(places)) {
        scratch.push(Touch { alloc, seq, op });
    }
    scratch.sort_unstable_by_key(|t| (t.alloc.0.as_u128(), t.seq));

    let transition_at = |i: usize| {
        let n = part.updates.len();
        if i < n {
            &part.updates[i]
        } else {
            &part.preemptions[i - n]
        }
    };
    let mut delta = Delta::default();
    for group in scratch.chunk_by(|a, b| a.alloc == b.alloc) {
        let alloc = group[0].alloc;
        if let Some(&(a, b)) = listed_twice.get(&alloc) {
            return Err(NodeRefusal::ListedTwice {
                node,
                alloc,
                other: if a == node { b } else { a },
            });
        }
        let existing = state.alloc(&alloc);
        if let Some(e) = existing
            && e.node_id != node
        {
            return Err(NodeRefusal::WrongNode {
                node,
                alloc,
                actual: e.node_id,
            });
        }
        let before = existing.filter(|e| e.uses_resources()).map(|e| &**e);
        let mut sim = existing.map(|e| Sim::of(e));
        for touch in group {
            sim = match touch.op {
                Op::Transition(i) => sim.map(|s| s.transition(transition_at(i))),
                Op::Place(i) => {
                    let a = &*part.allocs[i];
                    if a.node_id != node {
                        return Err(NodeRefusal::WrongNode {
                            node,
                            alloc,
                            actual: a.node_id,
                        });
                    }
                    Some(Sim::place(sim, a))
                }
            };
        }
        // The structural checks above already keep `sim` on this node; the filter restates it.
        let after = sim.filter(|s| s.node == node && s.uses_resources());
        if let Some(b) = before {
            delta.released += b.resources;
            ports.released.extend(keys(&b.ports));
        }
        if let Some(a) = after {
            delta.added += a.resources;
            delta.adds = true;
            delta.new_work |= before.is_none();
            ports.taken.extend(keys(a.ports));
            let held_before = before.map_or(&[][..], |b| &b.ports[..]);
            ports
                .new
                .extend(keys(a.ports).filter(|k| !keys(held_before).any(|h| h == *k)));
        }
    }
    Ok(delta)
}

#[cfg(test)]
mod fsm_agreement {
    //! The check predicts usage without applying the plan; these tests pin that prediction
    //! to what the FSM really does, for every combination of statuses.

    use super::*;
    use crate::fsm::{self, Command};
    use crate::mock;
    use crate::state::StateStore;

    const T0: Timestamp = Timestamp(1_700_000_000_000);
    const DESIRED: [DesiredStatus; 3] = [
        DesiredStatus::Run,
        DesiredStatus::Stop,
        DesiredStatus::Evict,
    ];

    fn alloc(desired: DesiredStatus, client: ClientStatus, mb: u64) -> Allocation {
        let mut a = mock::alloc(1, &mock::service_job("web", 1), mock::node_id(1), 0);
        a.desired_status = desired;
        a.client_status = client;
        a.resources = Resources::new(10, mb, 0);
        a
    }

    #[test]
    fn sim_uses_resources_like_allocation() {
        for desired in DESIRED {
            for client in ClientStatus::ALL {
                let a = alloc(desired, client, 1);
                assert_eq!(
                    Sim::of(&a).uses_resources(),
                    a.uses_resources(),
                    "{desired:?} {client:?}"
                );
            }
        }
    }

    /// Every existing state (or none) × every transition (or none) × every placement (or
    /// none): the predicted usage equals the usage after `fsm::apply`.
    #[test]
    fn predicted_usage_matches_fsm() {
        let statuses = DESIRED
            .iter()
            .flat_map(|d| ClientStatus::ALL.map(|c| (*d, c)));
        let existing: Vec<Option<Allocation>> = std::iter::once(None)
            .chain(statuses.clone().map(|(d, c)| Some(alloc(d, c, 100))))
            .collect();
        let transitions: Vec<Option<AllocTransition>> = std::iter::once(None)
            .chain(DESIRED.iter().flat_map(|d| {
                std::iter::once(None)
                    .chain(ClientStatus::ALL.map(Some))
                    .map(move |c| {
                        let mut t = AllocTransition::stop(mock::alloc_id(1), "t");
                        t.desired_status = *d;
                        t.client_status = c;
                        Some(t)
                    })
            }))
            .collect();
        let placements: Vec<Option<Allocation>> = std::iter::once(None)
            .chain(statuses.map(|(d, c)| Some(alloc(d, c, 1000))))
            .collect();

        let mut base = StateStore::new();
        fsm::apply(
            &mut base,
            1,
            Command::NodeRegister {
                node: mock::node(1),
                now: T0,
            },
        )
        .expect("register");
        let mut scratch = Scratch::default();
        let mut checked = 0;
        for old in &existing {
            let mut s = base.clone();
            if let Some(a) = old {
                fsm::apply(
                    &mut s,
                    2,
                    mock::place(mock::eval_id(0), vec![a.clone()], T0),
                )
                .expect("place");
            }
            for t in &transitions {
                for p in &placements {
                    let mut plan = Plan::new(mock::eval_id(1), 50, None, 0);
                    if let Some(t) = t {
                        plan.append_update(mock::node_id(1), t.clone());
                    }
                    if let Some(p) = p {
                        plan.append_alloc(p.clone());
                    }
                    let Some(part) = NodePart::all(&plan).next() else {
                        continue;
                    };
                    let delta =
                        node_delta(&s, &part, &BTreeMap::new(), &mut scratch).expect("well formed");
                    let predicted =
                        s.node_usage(&part.node).saturating_sub(&delta.released) + delta.added;

                    let mut after = s.clone();
                    let apply = PlanApply {
                        deployment: None,
                        deployment_updates: Vec::new(),
                        eval_id: plan.eval_id,
                        job: None,
                        node_allocation: Arc::new(plan.node_allocation.clone()),
                        node_update: Arc::new(plan.node_update.clone()),
                        node_preemptions: Arc::new(plan.node_preemptions.clone()),
                        evals: vec![],
                    };
                    fsm::apply(
                        &mut after,
                        3,
                        Command::ApplyPlan {
                            plan: apply,
                            now: T0,
                        },
                    )
                    .expect("apply");
                    assert_eq!(
                        predicted,
                        after.node_usage(&part.node),
                        "existing {old:?}, transition {t:?}, placement {p:?}"
                    );
                    let was_using = s.node_usage(&part.node) != Resources::ZERO;
                    let is_using = after.node_usage(&part.node) != Resources::ZERO;
                    assert_eq!(
                        delta.new_work,
                        is_using && !was_using,
                        "new work: {old:?} {t:?} {p:?}"
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(
            checked,
            existing.len() * transitions.len() * placements.len() - existing.len()
        );
    }
}
