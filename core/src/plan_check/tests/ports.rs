//! Rule 6 of the plan applier: a port is held by one allocation per node address, and never
//! while reserved. Each row goes through [`run`], which also commits what was accepted and
//! checks the committed state holds no port twice.

use super::*;
use std::net::IpAddr;

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];

/// A node with address `A` on the default network, `B` on `public`, port 22 reserved.
fn node(n: u64) -> Node {
    node_with(n, |node| {
        node.networks = NodeNetworks::single(IpAddr::from(A), "eth0");
        node.networks.addresses.push(HostAddress {
            host_network: "public".into(),
            address: IpAddr::from(B),
            interface: "eth1".into(),
        });
        node.networks.reserved_ports = PortRanges::parse("22").expect("ports");
    })
}

/// `alloc` holding `ports` on addresses.
fn holding(a: u64, n: u64, ports: &[([u8; 4], u16)]) -> Allocation {
    let mut x = alloc(a, n, mem(100));
    x.ports = ports
        .iter()
        .map(|(ip, value)| AllocatedPort {
            label: format!("p{value}").into(),
            value: *value,
            to: 0,
            host_ip: IpAddr::from(*ip),
        })
        .collect();
    x
}

fn taken(n: u64, ip: [u8; 4], port: u16) -> String {
    format!(
        "port {port} on {} of node {} is already held",
        IpAddr::from(ip),
        nid(n)
    )
}

#[test]
fn refuse_a_port_held_twice_or_reserved() {
    let cases = vec![
        Case {
            name: "a free static port",
            nodes: vec![node(1)],
            existing: vec![holding(1, 1, &[(A, 8080)])],
            plan: plan(|p| p.append_alloc(holding(2, 1, &[(A, 8081)]))),
            want: vec![(1, Want::Accept)],
        },
        Case {
            name: "a port another allocation holds",
            nodes: vec![node(1)],
            existing: vec![holding(1, 1, &[(A, 8080)])],
            plan: plan(|p| p.append_alloc(holding(2, 1, &[(A, 8080)]))),
            want: vec![(1, Want::Refuse(taken(1, A, 8080)))],
        },
        Case {
            name: "the same port on another address",
            nodes: vec![node(1)],
            existing: vec![holding(1, 1, &[(A, 8080)])],
            plan: plan(|p| p.append_alloc(holding(2, 1, &[(B, 8080)]))),
            want: vec![(1, Want::Accept)],
        },
        Case {
            name: "the same port on another node",
            nodes: vec![node(1), node(2)],
            existing: vec![holding(1, 1, &[(A, 8080)])],
            plan: plan(|p| p.append_alloc(holding(2, 2, &[(A, 8080)]))),
            want: vec![(2, Want::Accept)],
        },
        Case {
            name: "two placements of one plan on one port",
            nodes: vec![node(1)],
            existing: vec![],
            plan: plan(|p| {
                p.append_alloc(holding(2, 1, &[(A, 21000)]));
                p.append_alloc(holding(3, 1, &[(A, 21000)]));
            }),
            want: vec![(1, Want::Refuse(taken(1, A, 21000)))],
        },
        Case {
            name: "a reserved port",
            nodes: vec![node(1)],
            existing: vec![],
            plan: plan(|p| p.append_alloc(holding(2, 1, &[(B, 22)]))),
            want: vec![(
                1,
                Want::Refuse(format!("port 22 is reserved on node {}", nid(1))),
            )],
        },
        Case {
            name: "a stop in the same plan frees the port",
            nodes: vec![node(1)],
            existing: vec![holding(1, 1, &[(A, 8080)])],
            plan: plan(|p| {
                p.append_update(nid(1), stop(1));
                p.append_alloc(holding(2, 1, &[(A, 8080)]));
            }),
            want: vec![(1, Want::Accept)],
        },
        Case {
            name: "a preemption in the same plan frees the port",
            nodes: vec![node(1)],
            existing: vec![holding(1, 1, &[(A, 8080)])],
            plan: plan(|p| {
                let mut t = stop(1);
                t.desired_status = DesiredStatus::Evict;
                t.preempted_by = Some(mock::alloc_id(2));
                p.append_preemption(nid(1), t);
                p.append_alloc(holding(2, 1, &[(A, 8080)]));
            }),
            want: vec![(1, Want::Accept)],
        },
        Case {
            name: "a finished allocation holds nothing",
            nodes: vec![node(1)],
            existing: vec![{
                let mut x = holding(1, 1, &[(A, 8080)]);
                x.client_status = ClientStatus::Complete;
                x
            }],
            plan: plan(|p| p.append_alloc(holding(2, 1, &[(A, 8080)]))),
            want: vec![(1, Want::Accept)],
        },
        Case {
            name: "an in-place update keeps its own port",
            nodes: vec![node(1)],
            existing: vec![holding(1, 1, &[(A, 8080)])],
            plan: plan(|p| {
                let mut x = holding(1, 1, &[(A, 8080)]);
                x.job_version = 1;
                p.append_alloc(x);
            }),
            want: vec![(1, Want::Accept)],
        },
        Case {
            name: "an update that moves onto a held port",
            nodes: vec![node(1)],
            existing: vec![holding(1, 1, &[(A, 8080)]), holding(2, 1, &[(A, 8081)])],
            plan: plan(|p| p.append_alloc(holding(2, 1, &[(A, 8080)]))),
            want: vec![(1, Want::Refuse(taken(1, A, 8080)))],
        },
        Case {
            name: "marking an allocation lost never needs a free port",
            nodes: vec![node(1)],
            existing: vec![holding(1, 1, &[(A, 8080)])],
            plan: plan(|p| p.append_update(nid(1), mark_lost(1))),
            want: vec![(1, Want::Accept)],
        },
    ];
    for case in cases {
        run(case);
    }
}

/// Two workers plan from one snapshot, each placing an allocation on static port 8080 of
/// node 1: the plan applier lets exactly one in, whether the second is checked while the
/// first is in flight (against the overlay) or after it committed.
#[test]
fn two_plans_racing_for_one_static_port_exactly_one_wins() {
    for second_after_commit in [false, true] {
        let mut s = store(&[node(1)], &[]);
        let mut p1 = plan_for(1);
        p1.append_alloc(holding(10, 1, &[(A, 8080)]));
        let mut p2 = plan_for(2);
        p2.append_alloc(holding(11, 1, &[(A, 8080)]));
        for p in [&p1, &p2] {
            assert!(!check_plan(&s, p).has_refusals(), "each fits alone");
        }

        let mut applier = PlanApplier::default();
        let cmd = check_and_begin(&mut applier, &s, &p1);
        if second_after_commit {
            finish(&mut applier, &mut s, &cmd);
        }
        let out = applier.check(&s, &p2).expect("state is current");
        assert_eq!(
            out.result.rejected_nodes.get(&nid(1)),
            Some(&taken(1, A, 8080)),
            "after commit: {second_after_commit}"
        );
        assert!(out.apply.is_none());
        if !second_after_commit {
            finish(&mut applier, &mut s, &cmd);
        }
        assert_fits(&s);
        let holders: Vec<AllocId> = s
            .allocs_by_node(&nid(1))
            .filter(|a| a.ports.iter().any(|p| p.value == 8080))
            .map(|a| a.id)
            .collect();
        assert_eq!(holders, vec![mock::alloc_id(10)], "the first plan won");
    }
}
