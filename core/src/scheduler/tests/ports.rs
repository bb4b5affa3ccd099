//! Ports through the schedulers: dynamic ports drawn with the eval's seed, static ports
//! taken or reserved, dynamic ranges exhausted, a node without the host network, many ports
//! on one node, preemption freeing a static port, and in-place against destructive updates.
//! Every plan goes through the real plan applier and FSM (the harness).

use super::*;
use crate::mock;
use std::collections::BTreeSet;

/// `mock::service_job` whose group asks for `ports`, with small tasks so that only ports
/// limit how many fit a node.
fn job_with_ports(id: &str, count: u32, ports: Vec<PortAsk>) -> Job {
    let mut job = mock::service_job(id, count);
    job.groups[0].tasks[0].resources = Resources::new(10, 10, 0);
    job.groups[0].network = Some(GroupNetwork { ports });
    job
}

fn ports_of(w: &World, job: &Job) -> Vec<(NodeId, Vec<AllocatedPort>)> {
    w.live(job)
        .into_values()
        .flatten()
        .map(|a| (a.node_id, a.ports.to_vec()))
        .collect()
}

fn failures(w: &World, eval: &Evaluation) -> AllocMetric {
    w.stored_eval(eval.id).failed_tg_allocs["web"].clone()
}

#[test]
fn dynamic_ports_come_with_their_node_address_and_replay_with_the_seed() {
    let place = || {
        let mut w = World::with_nodes(3);
        let job = job_with_ports("api", 3, vec![PortAsk::dynamic("http")]);
        w.run_job(&job);
        ports_of(&w, &job)
    };
    let placed = place();
    assert_eq!(placed.len(), 3);
    for (node, ports) in &placed {
        let n = u64::from_be_bytes(node.0.as_bytes()[8..].try_into().expect("8 bytes"));
        assert_eq!(ports.len(), 1, "{ports:?}");
        let p = &ports[0];
        assert_eq!((p.label.as_str(), p.to), ("http", 0));
        assert_eq!(p.host_ip, mock::node_address(n), "the node's own address");
        assert!((20000..=32000).contains(&p.value), "{p:?}");
    }
    assert_eq!(placed, place(), "the same seed draws the same ports");
}

/// Rows: what a group asks, the nodes it meets, how many placements succeed and what the
/// eval says of the others.
#[test]
fn why_not_placed_counts_port_shortages() {
    struct Row {
        name: &'static str,
        nodes: fn(u64) -> Node,
        /// Another job placed first, holding ports.
        before: Option<Job>,
        job: Job,
        placed: usize,
        want: Vec<(PortShortage, u32)>,
    }
    let narrow = |n| {
        let mut node = mock::node(n);
        node.networks.min_dynamic_port = 20000;
        node.networks.max_dynamic_port = 20001;
        node
    };
    let reserving = |n| {
        let mut node = mock::node(n);
        node.networks.reserved_ports = PortRanges::parse("22,80").expect("ports");
        node
    };
    let rows = vec![
        Row {
            name: "a static port, one more allocation than nodes",
            nodes: mock::node,
            before: None,
            job: job_with_ports("web", 4, vec![PortAsk::fixed("http", 8080)]),
            placed: 3,
            want: vec![(PortShortage::Taken(8080), 3)],
        },
        Row {
            name: "a static port another job holds everywhere",
            nodes: mock::node,
            before: Some(job_with_ports("other", 3, vec![PortAsk::fixed("x", 8080)])),
            job: job_with_ports("web", 1, vec![PortAsk::fixed("http", 8080)]),
            placed: 0,
            want: vec![(PortShortage::Taken(8080), 3)],
        },
        Row {
            name: "dynamic ranges of two ports",
            nodes: narrow,
            before: None,
            job: job_with_ports("web", 7, vec![PortAsk::dynamic("http")]),
            placed: 6,
            want: vec![(PortShortage::DynamicExhausted, 3)],
        },
        Row {
            name: "a reserved static port",
            nodes: reserving,
            before: None,
            job: job_with_ports("web", 1, vec![PortAsk::fixed("ssh", 22)]),
            placed: 0,
            want: vec![(PortShortage::Reserved(22), 3)],
        },
        Row {
            name: "a host network no node has",
            nodes: mock::node,
            before: None,
            job: job_with_ports(
                "web",
                1,
                vec![{
                    let mut p = PortAsk::dynamic("http");
                    p.host_network = "public".into();
                    p
                }],
            ),
            placed: 0,
            want: vec![(PortShortage::NoHostNetwork("public".into()), 3)],
        },
    ];
    for row in rows {
        let mut w = World::new();
        for n in 0..3 {
            w.node((row.nodes)(n));
        }
        if let Some(before) = &row.before {
            w.run_job(before);
        }
        let eval = w.run_job(&row.job);
        assert_eq!(w.live_count(&row.job), row.placed, "{}", row.name);
        let m = failures(&w, &eval);
        assert_eq!(
            m.ports_exhausted,
            row.want.iter().cloned().collect(),
            "{}",
            row.name
        );
        let exhausted: u32 = row.want.iter().map(|(_, n)| n).sum();
        assert_eq!(m.nodes_exhausted, exhausted, "{}", row.name);
        let blocked = &w.h.created[0];
        assert_eq!(blocked.status, EvalStatus::Blocked, "{}", row.name);
        assert_eq!(
            blocked.class_eligibility.get("default"),
            Some(&true),
            "{}: a port shortage is no constraint",
            row.name
        );
        let held: Vec<_> = ports_of(&w, &row.job);
        let distinct: BTreeSet<_> = held
            .iter()
            .flat_map(|(n, ports)| ports.iter().map(move |p| (*n, p.host_ip, p.value)))
            .collect();
        assert_eq!(
            distinct.len(),
            row.placed,
            "{}: no port held twice",
            row.name
        );
    }
}

#[test]
fn a_thousand_allocations_on_one_node_get_a_thousand_distinct_ports() {
    let mut w = World::new();
    let mut big = mock::node(0);
    big.resources = Resources::new(100_000, 100_000, 100_000);
    w.node(big);
    let job = job_with_ports("many", 1000, vec![PortAsk::dynamic("http")]);
    let eval = w.run_job(&job);
    assert_eq!(w.stored_eval(eval.id).status, EvalStatus::Complete);
    let ports: BTreeSet<u16> = ports_of(&w, &job)
        .into_iter()
        .map(|(_, p)| p[0].value)
        .collect();
    assert_eq!(ports.len(), 1000, "every allocation has its own port");
    assert!(ports.iter().all(|p| (20000..=32000).contains(p)));
    assert_eq!(w.h.results.len(), 1, "one plan, all of it accepted");
    assert_eq!(w.h.state.node_ports(&mock::node_id(0)).len(), 1000);
}

/// A system job of priority 80 needs static port 8080, which a service job of priority 20
/// holds on the only node: the service allocation is evicted, and the port changes hands
/// in the same commit.
#[test]
fn preemption_frees_a_static_port() {
    let mut w = World::with_nodes(1);
    let mut low = job_with_ports("low", 1, vec![PortAsk::fixed("http", 8080)]);
    low.priority = 20;
    w.run_job(&low);
    let victim = w.live(&low).into_values().flatten().next().expect("placed");
    let mut sys = mock::system_job("sys");
    sys.priority = 80;
    sys.groups[0].network = Some(GroupNetwork {
        ports: vec![PortAsk::fixed("http", 8080)],
    });
    w.run_job(&sys);
    let c = w.counts();
    assert_eq!((c.placed, c.preempted), (1, 1));
    let placed = w.live(&sys).into_values().flatten().next().expect("placed");
    assert_eq!(placed.links.get().preempted_allocations, vec![victim.id]);
    assert_eq!(placed.ports[0].value, 8080);
    assert_eq!(
        w.h.state.alloc(&victim.id).map(|a| a.desired_status),
        Some(DesiredStatus::Evict)
    );
    let node = mock::node_id(0);
    assert_eq!(
        w.h.state
            .node_ports(&node)
            .count(mock::node_address(0), 8080),
        1,
        "one holder: the new allocation"
    );

    // Within ten priority points nothing is evicted, and the port stays taken.
    let mut w = World::with_nodes(1);
    low.priority = 75;
    w.run_job(&low);
    let eval = w.run_job(&sys);
    assert_eq!(w.counts().preempted, 0);
    assert_eq!(w.live_count(&sys), 0);
    let blocked = &w.h.created[0];
    assert_eq!(blocked.node_id, Some(node));
    assert_eq!(
        w.stored_eval(eval.id).failed_tg_allocs["web"].ports_exhausted,
        [(PortShortage::Taken(8080), 1)].into()
    );
}

/// Rows: a change to a running job whose allocation holds a dynamic and a static port.
/// What keeps the ports as they are is an in-place update that keeps both values; changing
/// a port (or the node taking it back) replaces the allocation.
#[test]
fn a_port_change_is_destructive_and_the_rest_keeps_the_ports() {
    let rows: Vec<(&str, fn(&mut Job), fn(&mut Node), Counts)> = vec![
        (
            "only the kill timeout",
            |j| j.groups[0].tasks[0].kill_timeout = std::time::Duration::from_secs(20),
            |_| {},
            Counts {
                in_place: 1,
                ..Counts::default()
            },
        ),
        (
            "another static port",
            |j| j.groups[0].network.as_mut().unwrap().ports[1].static_port = Some(9090),
            |_| {},
            Counts {
                placed: 1,
                stopped: 1,
                ..Counts::default()
            },
        ),
        (
            "one more port",
            |j| {
                let n = j.groups[0].network.as_mut().unwrap();
                n.ports.push(PortAsk::dynamic("metrics"));
            },
            |_| {},
            Counts {
                placed: 1,
                stopped: 1,
                ..Counts::default()
            },
        ),
        (
            "a port mapped elsewhere",
            |j| j.groups[0].network.as_mut().unwrap().ports[0].to = Some(80),
            |_| {},
            Counts {
                placed: 1,
                stopped: 1,
                ..Counts::default()
            },
        ),
        (
            "the node now reserves the static port",
            |j| j.groups[0].tasks[0].kill_timeout = std::time::Duration::from_secs(20),
            |n| n.networks.reserved_ports = PortRanges::parse("8080").expect("ports"),
            Counts {
                placed: 1,
                stopped: 1,
                ..Counts::default()
            },
        ),
    ];
    for (name, change, drift, want) in rows {
        let mut w = World::new();
        let first = mock::node(0);
        w.node(first.clone());
        let mut job = job_with_ports(
            "web",
            1,
            vec![PortAsk::dynamic("http"), PortAsk::fixed("admin", 8080)],
        );
        w.run_job(&job);
        let before = w.live(&job).into_values().flatten().next().expect("placed");
        w.node(mock::node(1));
        let mut drifted = first;
        drift(&mut drifted);
        w.node(drifted);
        change(&mut job);
        w.run_job(&job);
        assert_eq!(w.counts(), want, "{name}");
        let after: Vec<_> = w
            .live(&job)
            .into_values()
            .flatten()
            .filter(|a| a.desired_status == DesiredStatus::Run)
            .collect();
        assert_eq!(after.len(), 1, "{name}: {after:?}");
        if want.in_place == 1 {
            assert_eq!(after[0].id, before.id, "{name}");
            assert_eq!(after[0].ports, before.ports, "{name}: the ports are kept");
        } else {
            assert_ne!(after[0].id, before.id, "{name}");
            let asked = &job.groups[0].network.as_ref().unwrap().ports;
            let labels: Vec<_> = after[0].ports.iter().map(|p| p.label.as_str()).collect();
            let want_labels: Vec<_> = asked.iter().map(|p| p.label.as_str()).collect();
            assert_eq!(labels, want_labels, "{name}: the new ask's ports");
        }
    }
}

/// A system job's static port: every node gets one, except the node where another job
/// holds the port, which blocks an eval of its own.
#[test]
fn a_system_job_skips_the_node_whose_static_port_is_taken() {
    let mut w = World::with_nodes(3);
    let mut other = job_with_ports("other", 1, vec![PortAsk::fixed("dns", 53)]);
    other.priority = 80;
    w.run_job(&other);
    let taken = w
        .live(&other)
        .into_values()
        .flatten()
        .next()
        .unwrap()
        .node_id;
    let mut sys = mock::system_job("sys");
    sys.groups[0].network = Some(GroupNetwork {
        ports: vec![PortAsk::fixed("dns", 53)],
    });
    w.run_job(&sys);
    let on: BTreeSet<NodeId> = w
        .live(&sys)
        .into_values()
        .flatten()
        .map(|a| a.node_id)
        .collect();
    assert_eq!(on.len(), 2);
    assert!(!on.contains(&taken));
    assert_eq!(w.h.created.len(), 1);
    assert_eq!(w.h.created[0].node_id, Some(taken));
}
