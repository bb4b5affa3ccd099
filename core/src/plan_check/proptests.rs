//! Property test: whatever plans the schedulers send, and however the writes of those plans
//! interleave with other writes and with failures, no node's usage ever exceeds its
//! allocatable resources in the committed state, and no port of a node is held twice (or
//! held while reserved).
//!
//! Random nodes (some not ready, ineligible or missing) start with random allocations that
//! fit. Then a random sequence of steps runs the runtime's loop: plans checked through the
//! [`PlanApplier`] (against the overlay while a write is in flight), in-flight writes that
//! commit or fail, and other writes landing between check and commit (clients finishing
//! allocations, node status changes). Plans mix placements, in-place updates, stops,
//! evictions, lost/unknown marks and reconnects over a small pool of allocation ids, so ids
//! collide, land on the wrong node and revive stopped allocations.

use super::tests::{T0, assert_fits};
use super::*;
use crate::fsm::{self, AllocClientUpdate, Command};
use crate::mock;
use crate::state::StateStore;
use crate::types::*;
use proptest::prelude::*;

/// Nodes 0..NODES are registered; node NODES never is.
const NODES: u64 = 4;
const ALLOC_IDS: u64 = 24;
/// Allocations hold one of a few ports (so they collide), on the one address every node
/// has; the last is reserved on every node.
const PORTS: [u16; 4] = [8080, 8081, 8082, 8083];
const RESERVED: &str = "8083";

#[derive(Clone, Debug)]
struct NodeSpec {
    cpu: u64,
    mem: u64,
    status: u8,
    eligible: bool,
}

#[derive(Clone, Debug)]
enum PlanOp {
    /// A new allocation or an in-place update of `alloc`.
    Place {
        alloc: u64,
        node: u64,
        cpu: u64,
        mem: u64,
        desired: u8,
        client: u8,
        /// 0: no port; else `PORTS[port - 1]`.
        port: u8,
    },
    /// A transition of `alloc`: 0 stop, 1 evict (as preemption), 2 lost, 3 unknown, 4 reconnect.
    Transition { alloc: u64, node: u64, kind: u8 },
}

#[derive(Clone, Debug)]
struct PlanSpec {
    ops: Vec<PlanOp>,
    all_at_once: bool,
    /// How far the plan's snapshot index trails the state (0: current; the top value puts
    /// it one ahead, so the applier must say wait).
    lag: u8,
    /// List each allocation under the node it is on when it exists (as schedulers do).
    own_node: bool,
    /// Whether the write still in flight when this plan is ready to commit fails.
    prev_fails: bool,
}

#[derive(Clone, Debug)]
enum Step {
    Plan(PlanSpec),
    /// The in-flight write commits (`true`) or fails.
    Finish(bool),
    /// The client of `alloc` reports it complete or failed.
    ClientDone(u64, bool),
    NodeStatus(u64, u8),
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        1000..4000u64,
        1000..8000u64,
        prop_oneof![6 => Just(1u8), 1 => 0..4u8],
        prop::bool::weighted(0.85),
    )
        .prop_map(|(cpu, mem, status, eligible)| NodeSpec {
            cpu,
            mem,
            status,
            eligible,
        })
}

/// Mostly the first two nodes, so that plans in flight and the plans checked against them
/// compete for the same capacity.
fn op_node() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0..2u64, 1 => 0..=NODES]
}

fn plan_op() -> impl Strategy<Value = PlanOp> {
    prop_oneof![
        3 => (0..ALLOC_IDS, op_node(), 0..1500u64, 0..2000u64, prop_oneof![5 => Just(0u8), 1 => 1..3u8], 0..6u8, 0..=PORTS.len() as u8)
            .prop_map(|(alloc, node, cpu, mem, desired, client, port)| PlanOp::Place { alloc, node, cpu, mem, desired, client, port }),
        2 => (0..ALLOC_IDS, op_node(), 0..5u8).prop_map(|(alloc, node, kind)| PlanOp::Transition { alloc, node, kind }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (
            prop::collection::vec(plan_op(), 0..6),
            prop::bool::weighted(0.2),
            0..4u8,
            prop::bool::weighted(0.8),
            prop::bool::weighted(0.3),
        )
            .prop_map(|(ops, all_at_once, lag, own_node, prev_fails)| {
                Step::Plan(PlanSpec { ops, all_at_once, lag, own_node, prev_fails })
            }),
        3 => prop::bool::weighted(0.75).prop_map(Step::Finish),
        1 => (0..ALLOC_IDS, any::<bool>()).prop_map(|(a, ok)| Step::ClientDone(a, ok)),
        1 => (0..NODES, 0..4u8).prop_map(|(n, s)| Step::NodeStatus(n, s)),
    ]
}

const STATUSES: [NodeStatus; 4] = [
    NodeStatus::Initializing,
    NodeStatus::Ready,
    NodeStatus::Down,
    NodeStatus::Disconnected,
];
const DESIRED: [DesiredStatus; 3] = [
    DesiredStatus::Run,
    DesiredStatus::Stop,
    DesiredStatus::Evict,
];

fn alloc(a: u64, node: u64, cpu: u64, mem: u64, port: u8) -> Allocation {
    let mut x = mock::alloc(
        a,
        &mock::service_job("web", 1),
        mock::node_id(node),
        a as u32,
    );
    x.resources = Resources::new(cpu, mem, 0);
    if port > 0 {
        x.ports = thin_vec::thin_vec![AllocatedPort {
            label: "p".into(),
            value: PORTS[usize::from(port - 1)],
            to: 0,
            host_ip: address(),
        }];
    }
    x
}

fn address() -> std::net::IpAddr {
    std::net::IpAddr::from([10, 0, 0, 1])
}

/// Applies `cmd` at the next index.
fn write(s: &mut StateStore, cmd: &Command) -> Index {
    let index = s.latest_index() + 1;
    fsm::apply(s, index, cmd.clone()).expect("the fsm accepts the command");
    index
}

fn initial_state(nodes: &[NodeSpec], existing: &[(u64, u64, u64, u64, u8)]) -> StateStore {
    let mut s = StateStore::new();
    for (n, spec) in (0..).zip(nodes) {
        let mut node = mock::node(n);
        node.resources = Resources::new(spec.cpu, spec.mem, 100_000);
        node.networks = NodeNetworks::single(address(), "eth0");
        node.networks.reserved_ports = PortRanges::parse(RESERVED).expect("ports");
        node.status = STATUSES[spec.status as usize];
        if !spec.eligible {
            node.eligibility = Eligibility::Ineligible;
        }
        write(&mut s, &Command::NodeRegister { node, now: T0 });
    }
    // Keep only the allocations that fit, recounting usage independently of the checker.
    for &(a, n, cpu, mem, port) in existing {
        let x = alloc(a, n, cpu, mem, port);
        let fits = s.node(&x.node_id).is_some_and(|node| {
            node.allocatable()
                .covers(&(s.node_usage(&node.id) + x.resources))
                && x.ports.iter().all(|p| {
                    !node.networks.reserved_ports.contains(p.value)
                        && !s
                            .allocs_by_node(&node.id)
                            .any(|o| o.uses_resources() && o.ports.contains(p))
                })
        });
        if fits && s.alloc(&x.id).is_none() {
            write(&mut s, &mock::place(mock::eval_id(0), vec![x], T0));
        }
    }
    s
}

fn build_plan(s: &StateStore, eval: u64, spec: &PlanSpec) -> Plan {
    let mut plan = Plan::new(mock::eval_id(eval), 50, None, 0);
    plan.all_at_once = spec.all_at_once;
    plan.snapshot_index = match spec.lag {
        3 => s.latest_index() + 1,
        lag => s.latest_index().saturating_sub(u64::from(lag)),
    };
    let node_of = |alloc: u64, node: u64| match s.alloc(&mock::alloc_id(alloc)) {
        Some(a) if spec.own_node => a.node_id,
        _ => mock::node_id(node),
    };
    for op in &spec.ops {
        match *op {
            PlanOp::Place {
                alloc: a,
                node,
                cpu,
                mem,
                desired,
                client,
                port,
            } => {
                let node_id = node_of(a, node);
                let mut x = alloc(a, 0, cpu, mem, port);
                x.node_id = node_id;
                x.desired_status = DESIRED[desired as usize];
                x.client_status = ClientStatus::ALL[client as usize];
                plan.append_alloc(x);
            }
            PlanOp::Transition {
                alloc: a,
                node,
                kind,
            } => {
                let node_id = node_of(a, node);
                let mut t = AllocTransition::stop(mock::alloc_id(a), "prop");
                match kind {
                    0 => plan.append_update(node_id, t),
                    1 => {
                        t.desired_status = DesiredStatus::Evict;
                        plan.append_preemption(node_id, t);
                    }
                    _ => {
                        let (desired, client) = match kind {
                            2 => (DesiredStatus::Stop, ClientStatus::Lost),
                            3 => (DesiredStatus::Run, ClientStatus::Unknown),
                            _ => (DesiredStatus::Run, ClientStatus::Running),
                        };
                        t.desired_status = desired;
                        t.client_status = Some(client);
                        plan.append_update(node_id, t);
                    }
                }
            }
        }
    }
    plan
}

/// The outcome is self-consistent: refused and committed nodes are disjoint, all-at-once
/// plans commit all or nothing, and the command body mirrors the result.
fn assert_outcome(plan: &Plan, out: &PlanOutcome) {
    let r = &out.result;
    for n in r
        .node_allocation
        .keys()
        .chain(r.node_update.keys())
        .chain(r.node_preemptions.keys())
    {
        assert!(
            !r.rejected_nodes.contains_key(n),
            "node {n} both committed and refused"
        );
    }
    assert_eq!(r.refresh_index == 0, r.rejected_nodes.is_empty());
    let committed = |n: &NodeId| {
        r.node_allocation.contains_key(n)
            || r.node_update.contains_key(n)
            || r.node_preemptions.contains_key(n)
    };
    if !plan.all_at_once || r.rejected_nodes.is_empty() {
        for n in plan.nodes() {
            assert!(
                committed(&n) || r.rejected_nodes.contains_key(&n),
                "node {n} neither committed nor refused"
            );
        }
    }
    if plan.all_at_once && !r.rejected_nodes.is_empty() {
        assert!(
            out.apply.is_none(),
            "an all-at-once plan with refusals committed something"
        );
    }
    if let Some(apply) = &out.apply {
        assert_eq!(apply.node_allocation, r.node_allocation);
        assert_eq!(apply.node_update, r.node_update);
        assert_eq!(apply.node_preemptions, r.node_preemptions);
    }
}

fn run(nodes: &[NodeSpec], existing: &[(u64, u64, u64, u64, u8)], steps: &[Step]) {
    let mut s = initial_state(nodes, existing);
    assert_fits(&s);
    let mut applier = PlanApplier::default();
    let mut in_flight: Option<Command> = None;
    for (eval, step) in (1..).zip(steps) {
        match step {
            Step::Plan(spec) => {
                let plan = build_plan(&s, eval, spec);
                let out = match applier.check(&s, &plan) {
                    Ok(out) => out,
                    Err(ApplierError::StateBehind { required, .. }) => {
                        assert!(required > s.latest_index());
                        continue;
                    }
                    Err(e) => panic!("check failed: {e}"),
                };
                assert_outcome(&plan, &out);
                let Some(apply) = out.apply else { continue };
                if let Some(cmd) = in_flight.take() {
                    // The runtime awaits the previous write before starting the next.
                    finish(&mut s, &mut applier, &cmd, !spec.prev_fails);
                    assert_fits(&s);
                }
                match applier.begin_commit(apply, T0) {
                    Ok(cmd) => in_flight = Some(cmd.clone()),
                    Err(ApplierError::NotChecked(_)) => {}
                    Err(e) => panic!("begin_commit failed: {e}"),
                }
            }
            Step::Finish(ok) => {
                if let Some(cmd) = in_flight.take() {
                    finish(&mut s, &mut applier, &cmd, *ok);
                }
            }
            Step::ClientDone(a, ok) => {
                if let Some(x) = s.alloc(&mock::alloc_id(*a)).cloned() {
                    let status = if *ok {
                        ClientStatus::Complete
                    } else {
                        ClientStatus::Failed
                    };
                    let update = AllocClientUpdate {
                        deployment_health: None,
                        alloc_id: x.id,
                        client_status: status,
                        client_description: Default::default(),
                        task_states: Default::default(),
                    };
                    let cmd = Command::AllocClientUpdate {
                        node_id: x.node_id,
                        updates: vec![update],
                        evals: vec![],
                        now: T0,
                    };
                    if s.node(&x.node_id).is_some() {
                        write(&mut s, &cmd);
                    }
                }
            }
            Step::NodeStatus(n, st) => {
                let cmd = Command::NodeStatus {
                    node_id: mock::node_id(*n),
                    status: STATUSES[*st as usize],
                    description: String::new(),
                    now: T0,
                    evals: vec![],
                };
                if s.node(&mock::node_id(*n)).is_some() {
                    write(&mut s, &cmd);
                }
            }
        }
        assert_fits(&s);
    }
    if let Some(cmd) = in_flight {
        finish(&mut s, &mut applier, &cmd, true);
        assert_fits(&s);
    }
}

/// The in-flight write `cmd` commits (applied at the next index) or fails.
fn finish(s: &mut StateStore, applier: &mut PlanApplier, cmd: &Command, ok: bool) {
    if ok {
        let index = write(s, cmd);
        applier.committed(index).expect("a write was in flight");
    } else {
        applier.commit_failed().expect("a write was in flight");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn committed_usage_never_exceeds_allocatable(
        nodes in prop::collection::vec(node_spec(), NODES as usize),
        existing in prop::collection::vec((0..ALLOC_IDS, 0..NODES, 0..1500u64, 0..2000u64, 0..=PORTS.len() as u8), 0..16),
        steps in prop::collection::vec(step(), 1..40),
    ) {
        run(&nodes, &existing, &steps);
    }
}
