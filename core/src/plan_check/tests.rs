//! One test per rule of the plan applier, table-driven through [`run`]: it registers the
//! nodes and stores the existing allocations through `fsm::apply`, checks the plan, compares
//! accepted and refused nodes with the table, and commits the outcome to make sure no node
//! ends up over its allocatable resources.

use super::*;
use crate::fsm::{self, Command, PlanApply};
use crate::mock;
use crate::state::StateStore;
use crate::types::*;
use std::time::Duration;

/// The port rule's table, through the same [`run`].
mod ports;

pub(super) const T0: Timestamp = Timestamp(1_700_000_000_000);

fn job() -> Job {
    mock::service_job("web", 1)
}

fn nid(n: u64) -> NodeId {
    mock::node_id(n)
}

/// A running allocation `a` on node `n` using `res`.
fn alloc(a: u64, n: u64, res: Resources) -> Allocation {
    let mut x = mock::alloc(a, &job(), nid(n), a as u32);
    x.resources = res;
    x
}

/// `alloc` with a desired and client status.
fn alloc_in(
    a: u64,
    n: u64,
    res: Resources,
    desired: DesiredStatus,
    client: ClientStatus,
) -> Allocation {
    let mut x = alloc(a, n, res);
    x.desired_status = desired;
    x.client_status = client;
    x
}

fn mem(mb: u64) -> Resources {
    Resources::new(100, mb, 0)
}

fn cpu(mhz: u64) -> Resources {
    Resources::new(mhz, 64, 0)
}

/// `mock::node(n)` (4,000 MHz, 8,192 MB, 100 GB; ready, eligible, healthy) changed by `f`.
fn node_with(n: u64, f: impl FnOnce(&mut Node)) -> Node {
    let mut node = mock::node(n);
    f(&mut node);
    node
}

fn transition(a: u64, desired: DesiredStatus, client: Option<ClientStatus>) -> AllocTransition {
    let mut t = AllocTransition::stop(mock::alloc_id(a), "test");
    t.desired_status = desired;
    t.client_status = client;
    t
}

fn stop(a: u64) -> AllocTransition {
    AllocTransition::stop(mock::alloc_id(a), "test stop")
}

fn mark_lost(a: u64) -> AllocTransition {
    transition(a, DesiredStatus::Stop, Some(ClientStatus::Lost))
}

fn mark_unknown(a: u64) -> AllocTransition {
    transition(a, DesiredStatus::Run, Some(ClientStatus::Unknown))
}

fn reconnect(a: u64) -> AllocTransition {
    transition(a, DesiredStatus::Run, Some(ClientStatus::Running))
}

fn plan_for(eval: u64) -> Plan {
    Plan::new(mock::eval_id(eval), 50, Some(JobKey::default_ns("web")), 0)
}

/// A plan built by the closure.
fn plan(f: impl FnOnce(&mut Plan)) -> Plan {
    let mut p = plan_for(1);
    f(&mut p);
    p
}

/// Registers `nodes` one index each, then stores `existing` in one plan-apply entry.
fn store(nodes: &[Node], existing: &[Allocation]) -> StateStore {
    let mut s = StateStore::new();
    let mut index = 0;
    for n in nodes {
        index += 1;
        fsm::apply(
            &mut s,
            index,
            Command::NodeRegister {
                node: n.clone(),
                now: T0,
            },
        )
        .expect("register node");
    }
    if !existing.is_empty() {
        index += 1;
        fsm::apply(
            &mut s,
            index,
            mock::place(mock::eval_id(0), existing.to_vec(), T0),
        )
        .expect("store allocs");
    }
    s
}

/// What a table row expects for one node.
#[derive(Debug)]
enum Want {
    /// Its part commits.
    Accept,
    /// Its part is refused with a reason containing this text.
    Refuse(String),
    /// Its part is neither committed nor refused (an all-at-once plan refused elsewhere).
    Held,
}

struct Case {
    name: &'static str,
    nodes: Vec<Node>,
    existing: Vec<Allocation>,
    plan: Plan,
    want: Vec<(u64, Want)>,
}

fn committed_nodes(r: &PlanResult) -> Vec<NodeId> {
    let mut v: Vec<NodeId> = r
        .node_allocation
        .keys()
        .chain(r.node_update.keys())
        .chain(r.node_preemptions.keys())
        .copied()
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Applies `apply` to a copy of `s` and asserts that no node exceeds its allocatable
/// resources (and that `node_usage` matches a recount).
fn commit(s: &StateStore, apply: &PlanApply) -> StateStore {
    let mut next = s.clone();
    let index = next.latest_index() + 1;
    fsm::apply(
        &mut next,
        index,
        Command::ApplyPlan {
            plan: apply.clone(),
            now: T0,
        },
    )
    .expect("apply plan");
    assert_fits(&next);
    next
}

/// No node is over its allocatable resources, and no port of a node is held twice on one
/// address or held while reserved (with `node_usage` and `node_ports` recounts).
pub(super) fn assert_fits(s: &StateStore) {
    for node in s.nodes() {
        let mut ports: Vec<(std::net::IpAddr, u16)> = s
            .allocs_by_node(&node.id)
            .filter(|a| a.uses_resources())
            .flat_map(|a| a.ports.iter().map(|p| (p.host_ip, p.value)))
            .collect();
        ports.sort_unstable();
        assert_eq!(
            s.node_ports(&node.id).iter().collect::<Vec<_>>(),
            ports,
            "ports of {} are not a recount",
            node.name
        );
        for w in ports.windows(2) {
            assert_ne!(w[0], w[1], "{} holds port {:?} twice", node.name, w[0]);
        }
        for (_, port) in &ports {
            assert!(
                !node.networks.reserved_ports.contains(*port),
                "{} holds its reserved port {port}",
                node.name
            );
        }
        let recount: Resources = s
            .allocs_by_node(&node.id)
            .filter(|a| a.uses_resources())
            .map(|a| a.resources)
            .sum();
        assert_eq!(
            s.node_usage(&node.id),
            recount,
            "usage of {} is not a recount",
            node.name
        );
        assert!(
            node.allocatable().covers(&recount),
            "{} over-committed: uses {recount:?} of {:?}",
            node.name,
            node.allocatable()
        );
    }
}

/// Runs one table row: builds the store, checks the plan, compares every node with the
/// table (which must name every node of the plan), and commits the outcome.
fn run(case: Case) -> (StateStore, PlanOutcome) {
    let s = store(&case.nodes, &case.existing);
    let out = check_plan(&s.snapshot(), &case.plan);
    let name = case.name;
    let committed = committed_nodes(&out.result);
    let mut named: Vec<NodeId> = case.want.iter().map(|(n, _)| nid(*n)).collect();
    named.sort_unstable();
    assert_eq!(
        named,
        case.plan.nodes().collect::<Vec<_>>(),
        "{name}: the table must name every node of the plan"
    );
    for (n, want) in &case.want {
        let id = nid(*n);
        let refused = out.result.rejected_nodes.get(&id);
        let is_committed = committed.contains(&id);
        match want {
            Want::Accept => {
                assert!(refused.is_none(), "{name}: node {n} refused: {refused:?}");
                assert!(is_committed, "{name}: node {n} not committed");
            }
            Want::Refuse(text) => {
                let reason =
                    refused.unwrap_or_else(|| panic!("{name}: node {n} accepted, wanted {text:?}"));
                assert!(
                    reason.contains(text.as_str()),
                    "{name}: node {n} refused with {reason:?}, wanted {text:?}"
                );
                assert!(!is_committed, "{name}: refused node {n} committed");
            }
            Want::Held => {
                assert!(
                    refused.is_none() && !is_committed,
                    "{name}: node {n} should be held back"
                );
            }
        }
    }
    match &out.apply {
        Some(apply) => {
            assert_eq!(apply.eval_id, case.plan.eval_id, "{name}");
            assert_eq!(apply.node_allocation, out.result.node_allocation, "{name}");
            assert_eq!(apply.node_update, out.result.node_update, "{name}");
            assert_eq!(
                apply.node_preemptions, out.result.node_preemptions,
                "{name}"
            );
            assert_eq!(apply.evals, out.result.evals, "{name}");
            commit(&s, apply);
        }
        None => assert!(
            out.result.is_no_op(),
            "{name}: nothing to apply but the result commits"
        ),
    }
    (s, out)
}

fn not_found(n: u64) -> String {
    format!("node {} not found", nid(n))
}

fn exhausted(n: u64, dim: &str) -> String {
    format!("node {} exhausted on {dim}", nid(n))
}

#[test]
fn refuse_missing_node() {
    run(Case {
        name: "placement on a missing node",
        nodes: vec![mock::node(1)],
        existing: vec![],
        plan: plan(|p| {
            p.append_alloc(alloc(10, 1, mem(256)));
            p.append_alloc(alloc(11, 2, mem(256)));
        }),
        want: vec![(1, Want::Accept), (2, Want::Refuse(not_found(2)))],
    });
    run(Case {
        name: "reconnect on a missing node",
        nodes: vec![],
        existing: vec![alloc(20, 3, mem(256))],
        plan: plan(|p| p.append_update(nid(3), reconnect(20))),
        want: vec![(3, Want::Refuse(not_found(3)))],
    });
    // Like Nomad: allocations of a deregistered node must still be stoppable, or the
    // scheduler would retry that plan forever.
    run(Case {
        name: "stop and lost mark on a missing node",
        nodes: vec![],
        existing: vec![alloc(20, 3, mem(256)), alloc(21, 3, mem(256))],
        plan: plan(|p| {
            p.append_update(nid(3), stop(20));
            p.append_update(nid(3), mark_lost(21));
        }),
        want: vec![(3, Want::Accept)],
    });
}

#[test]
fn refuse_not_ready_node_unless_only_stops() {
    for status in [
        NodeStatus::Initializing,
        NodeStatus::Down,
        NodeStatus::Disconnected,
    ] {
        let nodes = vec![node_with(1, |n| n.status = status)];
        let existing = vec![alloc(10, 1, mem(256))];
        let refused = || Want::Refuse(format!("node {} is {}", nid(1), status.as_str()));
        run(Case {
            name: "new placement",
            nodes: nodes.clone(),
            existing: existing.clone(),
            plan: plan(|p| p.append_alloc(alloc(11, 1, mem(256)))),
            want: vec![(1, refused())],
        });
        run(Case {
            name: "in-place update",
            nodes: nodes.clone(),
            existing: existing.clone(),
            plan: plan(|p| p.append_alloc(alloc(10, 1, mem(512)))),
            want: vec![(1, refused())],
        });
        run(Case {
            name: "reconnect",
            nodes: nodes.clone(),
            existing: existing.clone(),
            plan: plan(|p| p.append_update(nid(1), reconnect(10))),
            want: vec![(1, refused())],
        });
        run(Case {
            name: "stop and evict",
            nodes: nodes.clone(),
            existing: vec![alloc(10, 1, mem(256)), alloc(11, 1, mem(256))],
            plan: plan(|p| {
                p.append_update(nid(1), stop(10));
                p.append_preemption(nid(1), transition(11, DesiredStatus::Evict, None));
            }),
            want: vec![(1, Want::Accept)],
        });
    }
}

#[test]
fn allow_lost_unknown_marks_on_down_node() {
    let (s, out) = run(Case {
        name: "marks on down and disconnected nodes",
        nodes: vec![
            node_with(1, |n| n.status = NodeStatus::Down),
            node_with(2, |n| n.status = NodeStatus::Disconnected),
        ],
        existing: vec![
            alloc(10, 1, mem(256)),
            alloc(11, 1, mem(256)),
            alloc(12, 2, mem(256)),
        ],
        plan: plan(|p| {
            p.append_update(nid(1), mark_lost(10));
            p.append_update(
                nid(1),
                transition(11, DesiredStatus::Run, Some(ClientStatus::Lost)),
            );
            p.append_update(nid(2), mark_unknown(12));
        }),
        want: vec![(1, Want::Accept), (2, Want::Accept)],
    });
    let after = commit(&s, out.apply.as_ref().expect("marks commit"));
    let status = |a: u64| after.alloc(&mock::alloc_id(a)).map(|a| a.client_status);
    assert_eq!(status(10), Some(ClientStatus::Lost));
    assert_eq!(status(11), Some(ClientStatus::Lost));
    assert_eq!(status(12), Some(ClientStatus::Unknown));
    assert_eq!(
        after.node_usage(&nid(1)),
        Resources::ZERO,
        "lost allocations free the down node"
    );
    assert_eq!(
        after.node_usage(&nid(2)),
        mem(256),
        "unknown allocations may still run"
    );
}

#[test]
fn refuse_ineligible_node_unless_only_existing_allocs() {
    let variants: [(&str, fn(&mut Node)); 5] = [
        ("ineligible", |n| n.eligibility = Eligibility::Ineligible),
        ("draining", |n| {
            n.drain = Some(DrainStrategy {
                deadline: None,
                force: false,
                ignore_system_jobs: false,
                started_at: T0,
            })
        }),
        ("health offlined", |n| n.health = NodeHealth::Offlined),
        ("health suspended:flaky", |n| {
            n.health = NodeHealth::Suspended(SuspendReason::Flaky)
        }),
        ("health suspended:lost", |n| {
            n.health = NodeHealth::Suspended(SuspendReason::Lost)
        }),
    ];
    for (why, change) in variants {
        let nodes = vec![node_with(1, change)];
        assert!(!nodes[0].is_schedulable());
        let existing = vec![
            alloc(10, 1, mem(256)),
            alloc_in(11, 1, mem(256), DesiredStatus::Stop, ClientStatus::Complete),
            alloc_in(12, 1, mem(256), DesiredStatus::Stop, ClientStatus::Running),
        ];
        let refused = || Want::Refuse(format!("node {} is not schedulable ({why})", nid(1)));
        run(Case {
            name: "new placement",
            nodes: nodes.clone(),
            existing: existing.clone(),
            plan: plan(|p| p.append_alloc(alloc(13, 1, mem(256)))),
            want: vec![(1, refused())],
        });
        run(Case {
            name: "in-place update of a running allocation",
            nodes: nodes.clone(),
            existing: existing.clone(),
            plan: plan(|p| p.append_alloc(alloc(10, 1, mem(1024)))),
            want: vec![(1, Want::Accept)],
        });
        run(Case {
            name: "stop, evict, mark",
            nodes: nodes.clone(),
            existing: vec![
                alloc(10, 1, mem(256)),
                alloc(14, 1, mem(256)),
                alloc(15, 1, mem(256)),
            ],
            plan: plan(|p| {
                p.append_update(nid(1), stop(10));
                p.append_preemption(nid(1), transition(14, DesiredStatus::Evict, None));
                p.append_update(nid(1), mark_unknown(15));
            }),
            want: vec![(1, Want::Accept)],
        });
        // Reviving a stopped allocation puts new work on the node, whatever its id.
        run(Case {
            name: "in-place update reviving a stopped allocation",
            nodes: nodes.clone(),
            existing: existing.clone(),
            plan: plan(|p| p.append_alloc(alloc(12, 1, mem(256)))),
            want: vec![(1, refused())],
        });
        // A client-terminal allocation stays terminal through an in-place update.
        run(Case {
            name: "in-place update of a completed allocation",
            nodes: nodes.clone(),
            existing: existing.clone(),
            plan: plan(|p| p.append_alloc(alloc(11, 1, mem(256)))),
            want: vec![(1, Want::Accept)],
        });
    }
}

#[test]
fn refuse_over_capacity_names_dimension() {
    let nodes = || vec![mock::node(1)];
    let existing = || vec![alloc(10, 1, Resources::new(1000, 4096, 0))];
    let rows: [(&str, Vec<Resources>, Want); 5] = [
        (
            "cpu",
            vec![Resources::new(3001, 1, 0)],
            Want::Refuse(exhausted(1, "cpu")),
        ),
        (
            "memory",
            vec![Resources::new(1, 4097, 0)],
            Want::Refuse(exhausted(1, "memory")),
        ),
        (
            "disk",
            vec![Resources::new(1, 1, 100_001)],
            Want::Refuse(exhausted(1, "disk")),
        ),
        (
            "exact fit",
            vec![Resources::new(3000, 4096, 100_000)],
            Want::Accept,
        ),
        (
            "two that fit alone",
            vec![mem(2048), mem(2049)],
            Want::Refuse(exhausted(1, "memory")),
        ),
    ];
    for (name, placements, want) in rows {
        let p = plan(|p| {
            for (i, r) in (11..).zip(placements) {
                p.append_alloc(alloc(i, 1, r));
            }
        });
        run(Case {
            name,
            nodes: nodes(),
            existing: existing(),
            plan: p,
            want: vec![(1, want)],
        });
    }
    run(Case {
        name: "reserved resources are not allocatable",
        nodes: vec![node_with(1, |n| n.reserved = Resources::new(0, 1000, 0))],
        existing: existing(),
        plan: plan(|p| p.append_alloc(alloc(11, 1, mem(4000)))),
        want: vec![(1, Want::Refuse(exhausted(1, "memory")))],
    });
}

#[test]
fn stops_free_capacity_for_new_placements() {
    let nodes = || vec![mock::node(1)];
    let full = || {
        vec![
            alloc(10, 1, Resources::new(1000, 8192, 0)),
            alloc_in(
                12,
                1,
                Resources::new(1000, 8192, 0),
                DesiredStatus::Stop,
                ClientStatus::Running,
            ),
        ]
    };
    let placing = |t: Option<(bool, AllocTransition)>| {
        plan(move |p| {
            p.append_alloc(alloc(11, 1, mem(1024)));
            match t {
                Some((false, t)) => p.append_update(nid(1), t),
                Some((true, t)) => p.append_preemption(nid(1), t),
                None => {}
            }
        })
    };
    let mut evict = transition(10, DesiredStatus::Evict, None);
    evict.preempted_by = Some(mock::alloc_id(11));
    let rows: [(&str, Option<(bool, AllocTransition)>, Want); 6] = [
        ("no stop", None, Want::Refuse(exhausted(1, "memory"))),
        ("stop", Some((false, stop(10))), Want::Accept),
        ("preemption", Some((true, evict)), Want::Accept),
        ("lost mark", Some((false, mark_lost(10))), Want::Accept),
        (
            "unknown mark keeps the allocation's resources",
            Some((false, mark_unknown(10))),
            Want::Refuse(exhausted(1, "memory")),
        ),
        (
            "stopping a stopped allocation frees nothing",
            Some((false, stop(12))),
            Want::Refuse(exhausted(1, "memory")),
        ),
    ];
    for (name, t, want) in rows {
        run(Case {
            name,
            nodes: nodes(),
            existing: full(),
            plan: placing(t),
            want: vec![(1, want)],
        });
    }
}

#[test]
fn in_place_update_counts_delta() {
    let nodes = || vec![mock::node(1)];
    let existing = || vec![alloc(10, 1, mem(6000))];
    let (s, out) = run(Case {
        name: "grow within capacity",
        nodes: nodes(),
        existing: existing(),
        plan: plan(|p| p.append_alloc(alloc(10, 1, mem(8000)))),
        want: vec![(1, Want::Accept)],
    });
    let after = commit(&s, out.apply.as_ref().expect("update commits"));
    assert_eq!(
        after.node_usage(&nid(1)),
        mem(8000),
        "the update replaced the old resources"
    );
    run(Case {
        name: "grow past capacity",
        nodes: nodes(),
        existing: existing(),
        plan: plan(|p| p.append_alloc(alloc(10, 1, mem(8193)))),
        want: vec![(1, Want::Refuse(exhausted(1, "memory")))],
    });
    run(Case {
        name: "shrink makes room",
        nodes: nodes(),
        existing: existing(),
        plan: plan(|p| {
            p.append_alloc(alloc(10, 1, mem(1000)));
            p.append_alloc(alloc(11, 1, mem(7000)));
        }),
        want: vec![(1, Want::Accept)],
    });
}

#[test]
fn refuse_allocs_listed_under_wrong_or_several_nodes() {
    let nodes = || vec![mock::node(1), mock::node(2)];
    run(Case {
        name: "stop listed under another node",
        nodes: nodes(),
        existing: vec![alloc(10, 1, mem(256))],
        plan: plan(|p| p.append_update(nid(2), stop(10))),
        want: vec![(
            2,
            Want::Refuse(format!(
                "allocation {} is on node {}, not on node {}",
                mock::alloc_id(10),
                nid(1),
                nid(2)
            )),
        )],
    });
    run(Case {
        name: "placement naming another node",
        nodes: nodes(),
        existing: vec![],
        plan: plan(|p| {
            p.node_allocation
                .entry(nid(2))
                .or_default()
                .push(alloc(11, 1, mem(256)).into());
        }),
        want: vec![(
            2,
            Want::Refuse(format!("is on node {}, not on node {}", nid(1), nid(2))),
        )],
    });
    run(Case {
        name: "existing allocation moved to another node",
        nodes: nodes(),
        existing: vec![alloc(10, 1, mem(256))],
        plan: plan(|p| p.append_alloc(alloc(10, 2, mem(256)))),
        want: vec![(
            2,
            Want::Refuse(format!("is on node {}, not on node {}", nid(1), nid(2))),
        )],
    });
    run(Case {
        name: "one new allocation on two nodes",
        nodes: nodes(),
        existing: vec![],
        plan: plan(|p| {
            p.append_alloc(alloc(11, 1, mem(256)));
            p.append_alloc(alloc(11, 2, mem(256)));
        }),
        want: vec![
            (1, Want::Refuse("is listed under node".into())),
            (2, Want::Refuse("is listed under node".into())),
        ],
    });
}

#[test]
fn all_at_once_commits_nothing_when_one_refused() {
    let make = |all_at_once: bool| {
        plan(|p| {
            p.all_at_once = all_at_once;
            p.append_alloc(alloc(10, 1, mem(256)));
            p.append_alloc(alloc(11, 2, mem(9000)));
            p.append_alloc(alloc(12, 3, mem(256)));
            p.evals.push(mock::eval(5, &job()));
        })
    };
    let nodes = || vec![mock::node(1), mock::node(2), mock::node(3)];
    let (s, out) = run(Case {
        name: "all at once",
        nodes: nodes(),
        existing: vec![],
        plan: make(true),
        want: vec![
            (1, Want::Held),
            (2, Want::Refuse(exhausted(2, "memory"))),
            (3, Want::Held),
        ],
    });
    assert!(out.apply.is_none());
    assert!(
        out.result.evals.is_empty(),
        "evals do not commit when nothing else does"
    );
    assert_eq!(out.result.refresh_index, s.latest_index());
    run(Case {
        name: "partial",
        nodes: nodes(),
        existing: vec![],
        plan: make(false),
        want: vec![
            (1, Want::Accept),
            (2, Want::Refuse(exhausted(2, "memory"))),
            (3, Want::Accept),
        ],
    });
}

#[test]
fn refresh_index_set_only_when_refused() {
    let nodes = || vec![mock::node(1), mock::node(2)];
    let (_, out) = run(Case {
        name: "all accepted",
        nodes: nodes(),
        existing: vec![],
        plan: plan(|p| p.append_alloc(alloc(10, 1, mem(256)))),
        want: vec![(1, Want::Accept)],
    });
    assert_eq!(out.result.refresh_index, 0);
    let (s, out) = run(Case {
        name: "one refused",
        nodes: nodes(),
        existing: vec![alloc(20, 2, mem(256))],
        plan: plan(|p| {
            p.append_alloc(alloc(10, 1, mem(256)));
            p.append_alloc(alloc(11, 2, mem(8000)));
        }),
        want: vec![(1, Want::Accept), (2, Want::Refuse(exhausted(2, "memory")))],
    });
    assert!(s.latest_index() > 0);
    assert_eq!(out.result.refresh_index, s.latest_index());
}

#[test]
fn evals_commit_with_plan() {
    let e = mock::eval(7, &job());
    let with_evals = |place_mb: u64| {
        let e = e.clone();
        plan(move |p| {
            p.append_alloc(alloc(10, 1, mem(place_mb)));
            p.evals.push(e);
        })
    };
    let (s, out) = run(Case {
        name: "accepted plan",
        nodes: vec![mock::node(1)],
        existing: vec![],
        plan: with_evals(256),
        want: vec![(1, Want::Accept)],
    });
    let after = commit(&s, out.apply.as_ref().expect("plan commits"));
    assert!(
        after.eval(&e.id).is_some(),
        "the eval was written with the plan"
    );

    let (s, out) = run(Case {
        name: "only evals",
        nodes: vec![],
        existing: vec![],
        plan: plan(|p| p.evals.push(e.clone())),
        want: vec![],
    });
    assert_eq!(out.result.evals, vec![e.clone()]);
    assert!(
        commit(&s, out.apply.as_ref().expect("evals alone commit"))
            .eval(&e.id)
            .is_some()
    );

    let (_, out) = run(Case {
        name: "everything refused",
        nodes: vec![mock::node(1)],
        existing: vec![],
        plan: with_evals(9000),
        want: vec![(1, Want::Refuse(exhausted(1, "memory")))],
    });
    assert!(out.apply.is_none() && out.result.evals.is_empty());
}

#[test]
fn empty_node_lists_are_skipped() {
    let (_, out) = run(Case {
        name: "empty lists for a missing node",
        nodes: vec![],
        existing: vec![],
        plan: plan(|p| {
            p.node_allocation.insert(nid(1), vec![]);
            p.node_update.insert(nid(1), vec![]);
        }),
        want: vec![(1, Want::Held)],
    });
    assert!(out.apply.is_none() && out.result.rejected_nodes.is_empty());
}

/// Two plans that each fit node 1 alone but not together.
fn two_plans() -> (StateStore, Plan, Plan) {
    let s = store(&[mock::node(1)], &[]);
    let mut p1 = plan_for(1);
    p1.append_alloc(alloc(10, 1, cpu(3000)));
    let mut p2 = plan_for(2);
    p2.append_alloc(alloc(11, 1, cpu(3000)));
    (s, p1, p2)
}

/// Checks and begins the commit of `plan`, returning the command to write.
fn check_and_begin(applier: &mut PlanApplier, latest: &StateStore, plan: &Plan) -> Command {
    let out = applier.check(latest, plan).expect("state is current");
    assert!(!out.has_refusals(), "{:?}", out.result.rejected_nodes);
    let apply = out.apply.expect("plan commits");
    applier
        .begin_commit(apply, T0)
        .expect("nothing in flight")
        .clone()
}

/// What the runtime does when a write commits: apply it and tell the applier.
fn finish(applier: &mut PlanApplier, s: &mut StateStore, cmd: &Command) -> Index {
    let index = s.latest_index() + 1;
    fsm::apply(s, index, cmd.clone()).expect("apply");
    applier.committed(index).expect("in flight");
    index
}

#[test]
fn overlay_sees_inflight_plan() {
    let (mut s, p1, p2) = two_plans();
    assert!(
        !check_plan(&s, &p2).has_refusals(),
        "the second plan fits alone"
    );

    let mut applier = PlanApplier::default();
    let cmd = check_and_begin(&mut applier, &s, &p1);
    assert!(applier.in_flight());
    let out = applier.check(&s, &p2).expect("state is current");
    assert_eq!(
        out.result.rejected_nodes.get(&nid(1)),
        Some(&exhausted(1, "cpu"))
    );
    assert!(out.apply.is_none());
    assert_eq!(
        out.result.refresh_index,
        s.latest_index() + 1,
        "refresh at the in-flight write"
    );
    assert_eq!(
        applier.begin_commit(apply_of(&cmd), T0),
        Err(ApplierError::CommitInFlight(p1.eval_id))
    );

    let index = finish(&mut applier, &mut s, &cmd);
    assert_eq!(applier.last_committed(), index);
    assert!(!applier.in_flight());
    let out = applier.check(&s, &p2).expect("state is current");
    assert!(
        out.result.rejected_nodes.contains_key(&nid(1)),
        "committed state refuses it too"
    );
    assert_fits(&s);
    assert_eq!(
        applier.committed(index),
        Err(ApplierError::NoCommitInFlight)
    );
}

fn apply_of(cmd: &Command) -> PlanApply {
    match cmd {
        Command::ApplyPlan { plan, .. } => plan.clone(),
        other => panic!("expected a plan apply, got {}", other.kind()),
    }
}

#[test]
fn overlay_dropped_on_commit_failure() {
    // A refusal caused only by the in-flight plan goes away when that plan fails.
    let (s, p1, p2) = two_plans();
    let mut applier = PlanApplier::default();
    check_and_begin(&mut applier, &s, &p1);
    assert!(applier.check(&s, &p2).expect("current").has_refusals());
    applier.commit_failed().expect("in flight");
    assert!(!applier.in_flight());
    let out = applier.check(&s, &p2).expect("current");
    assert!(
        !out.has_refusals(),
        "checked against the latest state alone"
    );
    applier
        .begin_commit(out.apply.expect("commits"), T0)
        .expect("valid check");

    // An acceptance that relied on the failed plan's stop cannot be committed.
    let s = store(&[mock::node(1)], &[alloc(20, 1, cpu(4000))]);
    let mut p_stop = plan_for(3);
    p_stop.append_update(nid(1), stop(20));
    let mut p_place = plan_for(4);
    p_place.append_alloc(alloc(21, 1, cpu(3000)));
    let mut applier = PlanApplier::default();
    check_and_begin(&mut applier, &s, &p_stop);
    let relied = applier.check(&s, &p_place).expect("current");
    assert!(!relied.has_refusals(), "the in-flight stop makes room");
    applier.commit_failed().expect("in flight");
    let apply = relied.apply.expect("commits");
    assert_eq!(
        applier.begin_commit(apply, T0),
        Err(ApplierError::NotChecked(p_place.eval_id))
    );
    let out = applier.check(&s, &p_place).expect("current");
    assert_eq!(
        out.result.rejected_nodes.get(&nid(1)),
        Some(&exhausted(1, "cpu"))
    );
    assert_eq!(applier.commit_failed(), Err(ApplierError::NoCommitInFlight));
}

#[test]
fn waits_when_state_behind_snapshot_index() {
    let (mut s, p1, _) = two_plans();
    let latest = s.latest_index();
    let mut applier = PlanApplier::default();

    let mut ahead = p1.clone();
    ahead.snapshot_index = latest + 3;
    let err = applier
        .check(&s, &ahead)
        .expect_err("state is behind the plan");
    assert_eq!(
        err,
        ApplierError::StateBehind {
            latest,
            required: latest + 3
        }
    );
    assert_eq!(err.wait_index(), Some(latest + 3));
    assert_eq!(
        err.to_string(),
        format!(
            "state at index {latest} is behind index {}: wait for it and check again",
            latest + 3
        )
    );

    ahead.snapshot_index = latest;
    let cmd = check_and_begin(&mut applier, &s, &ahead);
    let stale = s.clone();
    let index = finish(&mut applier, &mut s, &cmd);
    let mut p2 = plan_for(2);
    p2.append_alloc(alloc(12, 1, cpu(500)));
    assert_eq!(
        applier.check(&stale, &p2),
        Err(ApplierError::StateBehind {
            latest: stale.latest_index(),
            required: index
        }),
        "never older than the last committed plan"
    );
    assert!(!applier.check(&s, &p2).expect("current").has_refusals());

    let mut floored = PlanApplier::new(latest + 10);
    assert_eq!(
        floored.check(&s, &p2).map_err(|e| e.wait_index()),
        Err(Some(latest + 10))
    );
}

#[test]
fn plan_queue_priority_then_arrival() {
    let mut q = PlanQueue::new();
    for (eval, priority) in [(1, 50), (2, 70), (3, 50), (4, 100), (5, 70)] {
        let mut p = plan_for(eval);
        p.priority = priority;
        q.push(p);
    }
    assert_eq!(q.len(), 5);
    let order = |q: &mut PlanQueue, n: usize| -> Vec<EvalId> {
        (0..n).filter_map(|_| q.pop()).map(|p| p.eval_id).collect()
    };
    assert_eq!(order(&mut q, 2), vec![mock::eval_id(4), mock::eval_id(2)]);
    let mut late = plan_for(6);
    late.priority = 70;
    q.push(late);
    assert_eq!(q.peek().map(|p| p.eval_id), Some(mock::eval_id(5)));
    assert_eq!(
        q.drain().into_iter().map(|p| p.eval_id).collect::<Vec<_>>(),
        vec![
            mock::eval_id(5),
            mock::eval_id(6),
            mock::eval_id(1),
            mock::eval_id(3)
        ]
    );
    assert!(q.is_empty() && q.pop().is_none());
    assert_eq!(
        q.stats(),
        PlanQueueStats {
            depth: 0,
            peak_depth: 5,
            enqueued: 6,
            dequeued: 6
        }
    );
}

#[test]
fn rejection_tracker_threshold_window_and_off_by_default() {
    let at = |s: u64| T0.saturating_add(Duration::from_secs(s));
    let (a, b, c) = (nid(1), nid(2), nid(3));

    let defaults = RejectionTrackerConfig::default();
    assert!(!defaults.enabled);
    let mut off = RejectionTracker::new(defaults).expect("valid");
    assert!(
        (0..1000).all(|i| !off.record(a, at(i % 10))),
        "off by default"
    );
    assert_eq!(off.tracked_nodes(), 0);

    let config = RejectionTrackerConfig {
        enabled: true,
        threshold: 3,
        window: Duration::from_secs(10),
        max_tracked_nodes: 2,
    };
    let mut t = RejectionTracker::new(config.clone()).expect("valid");
    assert_eq!(
        [t.record(a, at(0)), t.record(a, at(1)), t.record(a, at(2))],
        [false, false, true]
    );
    assert_eq!(
        t.count(&a, at(2)),
        0,
        "the count starts over once the node crossed"
    );
    assert!(!t.record(a, at(3)));

    // Only rejections inside the window count: (now - window, now].
    let mut t = RejectionTracker::new(config.clone()).expect("valid");
    assert!(!t.record(b, at(0)) && !t.record(b, at(5)));
    assert!(!t.record(b, at(11)), "the rejection at 0 s left the window");
    assert_eq!(t.count(&b, at(11)), 2);
    assert!(t.record(b, at(12)));

    // Expired nodes are pruned and the number of tracked nodes is bounded.
    let mut t = RejectionTracker::new(config.clone()).expect("valid");
    t.record(a, at(0));
    t.record(b, at(100));
    assert_eq!(t.tracked_nodes(), 1, "node a expired");
    t.record(a, at(101));
    t.record(c, at(102));
    assert_eq!(t.tracked_nodes(), 2);
    assert_eq!(
        t.count(&b, at(102)),
        0,
        "the least recently refused node was forgotten"
    );
    assert_eq!(t.count(&a, at(102)), 1);

    let bad = RejectionTrackerConfig {
        threshold: 0,
        ..config
    };
    assert_eq!(
        RejectionTracker::new(bad).map(|_| ()),
        Err(RejectionConfigError::Threshold(0))
    );
    assert_eq!(
        RejectionConfigError::Threshold(0).to_string(),
        "rejection threshold must be at least 1, got 0"
    );
}

/// The eval's closing writes go into the plan's entry only when nothing is refused; a plan
/// refused in part commits the rest without them, and the scheduler closes the eval itself.
#[test]
fn closing_evals_commit_only_with_the_whole_plan() {
    let s = store(&[mock::node(1), mock::node(2)], &[]);
    let mut done = mock::eval(1, &job());
    done.status = EvalStatus::Complete;
    for (what, second_mb, want_closed) in
        [("all fits", 1_024, true), ("node 2 refused", 9_000, false)]
    {
        let p = plan(|p| {
            p.append_alloc(alloc(1, 1, mem(1_024)));
            p.append_alloc(alloc(2, 2, mem(second_mb)));
            p.closing = vec![done.clone()];
        });
        let outcome = check_plan(&s.snapshot(), &p);
        assert_eq!(outcome.result.closed, want_closed, "{what}: closed");
        let apply = outcome.apply.expect("node 1 commits");
        let closes = apply.evals.iter().any(|e| e.id == done.id);
        assert_eq!(closes, want_closed, "{what}: in the entry");
    }
}
