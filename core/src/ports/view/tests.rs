use super::*;
use crate::types::{DEFAULT_HOST_NETWORK, GroupNetwork, HostAddress, PortAsk, PortRanges};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const A: &str = "10.0.0.1";
const B: &str = "10.0.0.2";

fn ip(text: &str) -> IpAddr {
    text.parse().expect("ip")
}

/// A node with `A` on the default network, `B` on `public`, ports 22 and 8500-8600
/// reserved, and the dynamic range `lo..=hi`.
fn node(lo: u16, hi: u16) -> NodeNetworks {
    let address = |net: &str, at: &str| HostAddress {
        host_network: net.into(),
        address: ip(at),
        interface: "eth0".into(),
    };
    NodeNetworks {
        addresses: vec![address(DEFAULT_HOST_NETWORK, A), address("public", B)],
        reserved_ports: PortRanges::parse("22,8500-8600").expect("ports"),
        min_dynamic_port: lo,
        max_dynamic_port: hi,
    }
}

fn held(ports: &[(&str, u16)]) -> NodePorts {
    let mut n = NodePorts::default();
    for (at, value) in ports {
        n.add(&[port(at, *value)]);
    }
    n
}

fn port(at: &str, value: u16) -> AllocatedPort {
    AllocatedPort {
        label: "x".into(),
        value,
        to: 0,
        host_ip: ip(at),
    }
}

fn ask(ports: Vec<PortAsk>) -> PortDemand {
    PortDemand::new(&GroupNetwork { ports })
}

fn on_public(mut p: PortAsk) -> PortAsk {
    p.host_network = "public".into();
    p
}

#[test]
fn check_names_the_first_shortage() {
    struct Case {
        name: &'static str,
        range: (u16, u16),
        held: Vec<(&'static str, u16)>,
        /// Applied to the view: ports released (-) and taken (+) by the plan so far.
        plan: Vec<(&'static str, u16, i32)>,
        ask: Vec<PortAsk>,
        want: Result<(), PortShortage>,
    }
    let cases = [
        Case {
            name: "a free static port and room for a dynamic one",
            range: (20000, 20009),
            held: vec![(A, 8080)],
            plan: vec![],
            ask: vec![PortAsk::fixed("admin", 9090), PortAsk::dynamic("http")],
            want: Ok(()),
        },
        Case {
            name: "a static port another allocation holds",
            range: (20000, 20009),
            held: vec![(A, 8080)],
            plan: vec![],
            ask: vec![PortAsk::dynamic("http"), PortAsk::fixed("admin", 8080)],
            want: Err(PortShortage::Taken(8080)),
        },
        Case {
            name: "the same static port on another address is free",
            range: (20000, 20009),
            held: vec![(A, 8080)],
            plan: vec![],
            ask: vec![on_public(PortAsk::fixed("admin", 8080))],
            want: Ok(()),
        },
        Case {
            name: "a reserved static port",
            range: (20000, 20009),
            held: vec![],
            plan: vec![],
            ask: vec![PortAsk::fixed("ssh", 22)],
            want: Err(PortShortage::Reserved(22)),
        },
        Case {
            name: "reserved ports hold on every address",
            range: (20000, 20009),
            held: vec![],
            plan: vec![],
            ask: vec![on_public(PortAsk::fixed("web", 8550))],
            want: Err(PortShortage::Reserved(8550)),
        },
        Case {
            name: "a host network the node lacks",
            range: (20000, 20009),
            held: vec![],
            plan: vec![],
            ask: vec![{
                let mut p = PortAsk::dynamic("http");
                p.host_network = "private".into();
                p
            }],
            want: Err(PortShortage::NoHostNetwork("private".into())),
        },
        Case {
            name: "a full dynamic range",
            range: (20000, 20001),
            held: vec![(A, 20000), (A, 20001)],
            plan: vec![],
            ask: vec![PortAsk::dynamic("http")],
            want: Err(PortShortage::DynamicExhausted),
        },
        Case {
            name: "a full range on another address leaves this one free",
            range: (20000, 20001),
            held: vec![(B, 20000), (B, 20001)],
            plan: vec![],
            ask: vec![PortAsk::dynamic("http")],
            want: Ok(()),
        },
        Case {
            name: "room for one dynamic port, two asked",
            range: (20000, 20002),
            held: vec![(A, 20001), (A, 20002)],
            plan: vec![],
            ask: vec![PortAsk::dynamic("a"), PortAsk::dynamic("b")],
            want: Err(PortShortage::DynamicExhausted),
        },
        Case {
            name: "a static port of the ask inside the range takes its room",
            range: (20000, 20001),
            held: vec![],
            plan: vec![],
            ask: vec![
                PortAsk::fixed("s", 20000),
                PortAsk::dynamic("a"),
                PortAsk::dynamic("b"),
            ],
            want: Err(PortShortage::DynamicExhausted),
        },
        Case {
            name: "reserved ports inside the range take its room",
            range: (8599, 8601),
            held: vec![],
            plan: vec![],
            ask: vec![PortAsk::dynamic("a"), PortAsk::dynamic("b")],
            want: Err(PortShortage::DynamicExhausted),
        },
        Case {
            name: "the plan's stop frees a static port",
            range: (20000, 20009),
            held: vec![(A, 8080)],
            plan: vec![(A, 8080, -1)],
            ask: vec![PortAsk::fixed("admin", 8080)],
            want: Ok(()),
        },
        Case {
            name: "the plan's placement takes a static port",
            range: (20000, 20009),
            held: vec![],
            plan: vec![(A, 8080, 1)],
            ask: vec![PortAsk::fixed("admin", 8080)],
            want: Err(PortShortage::Taken(8080)),
        },
        Case {
            name: "the plan's placements fill the range",
            range: (20000, 20001),
            held: vec![(A, 20000)],
            plan: vec![(A, 20001, 1)],
            ask: vec![PortAsk::dynamic("http")],
            want: Err(PortShortage::DynamicExhausted),
        },
    ];
    for c in cases {
        let networks = node(c.range.0, c.range.1);
        let held = held(&c.held);
        let mut view = PortsView::new(&networks, &held);
        for (at, value, d) in c.plan {
            if d < 0 {
                view.release(&[port(at, value)]);
            } else {
                view.take(&[port(at, value)]);
            }
        }
        let ask = ask(c.ask);
        assert_eq!(view.check(&ask), c.want, "{}", c.name);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(
            view.assign(&ask, &mut rng).map(|_| ()),
            c.want,
            "{}: assign agrees with check",
            c.name
        );
    }
}

#[test]
fn assignment_replays_with_its_seed_and_keeps_labels_and_mappings() {
    let networks = node(20000, 32000);
    let held = NodePorts::default();
    let view = PortsView::new(&networks, &held);
    let mut admin = on_public(PortAsk::fixed("admin", 8080));
    admin.to = Some(80);
    let ask = ask(vec![PortAsk::dynamic("http"), admin]);
    let draw = |seed| {
        view.assign(&ask, &mut ChaCha8Rng::seed_from_u64(seed))
            .expect("fits")
    };
    let first = draw(7);
    assert_eq!(first, draw(7), "the same seed gives the same ports");
    assert_ne!(
        first[0].value,
        draw(8)[0].value,
        "another seed, another port"
    );
    assert_eq!(first[0].label, "http");
    assert_eq!(first[0].host_ip, ip(A));
    assert!((20000..=32000).contains(&first[0].value));
    assert_eq!(
        (first[1].value, first[1].to, first[1].host_ip),
        (8080, 80, ip(B))
    );
}

#[test]
fn a_crowded_range_is_scanned_to_its_last_free_port() {
    let networks = node(20000, 20999);
    let held = held(
        &(20000..=20999)
            .filter(|p| *p != 20500)
            .map(|p| (A, p))
            .collect::<Vec<_>>(),
    );
    let view = PortsView::new(&networks, &held);
    let got = view
        .assign(
            &ask(vec![PortAsk::dynamic("http")]),
            &mut ChaCha8Rng::seed_from_u64(3),
        )
        .expect("one port is left");
    assert_eq!(got[0].value, 20500);
}

proptest! {
    /// Whatever is held, reserved or asked: an assignment gives each asked label one port,
    /// static ones as asked, dynamic ones in the range, and no port that is reserved, held,
    /// or given twice on one address.
    #[test]
    fn assigned_ports_are_free_and_distinct(
        lo in 20000u16..20100,
        span in 0u16..60,
        held_ports in proptest::collection::vec((0usize..2, 19990u16..20200), 0..80),
        dynamic in 0usize..8,
        statics in proptest::collection::btree_set(9000u16..9010, 0..3),
        seed in any::<u64>(),
    ) {
        let networks = node(lo, lo + span);
        let held = held(&held_ports.iter().map(|(a, p)| ([A, B][*a], *p)).collect::<Vec<_>>());
        let view = PortsView::new(&networks, &held);
        let mut ports: Vec<PortAsk> = statics.iter().map(|p| PortAsk::fixed(format!("s{p}"), *p)).collect();
        ports.extend((0..dynamic).map(|i| PortAsk::dynamic(format!("d{i}"))));
        let ask = ask(ports);
        match view.assign(&ask, &mut ChaCha8Rng::seed_from_u64(seed)) {
            Ok(got) => {
                prop_assert_eq!(got.len(), ask.ports().len());
                let mut seen = std::collections::HashSet::new();
                for (p, a) in ask.ports().iter().zip(&got) {
                    prop_assert_eq!(a.label.as_str(), p.label.as_str());
                    prop_assert!(seen.insert((a.host_ip, a.value)), "{} given twice", a.value);
                    prop_assert!(!networks.reserved_ports.contains(a.value));
                    prop_assert_eq!(held.count(a.host_ip, a.value), 0);
                    match p.static_port {
                        Some(s) => prop_assert_eq!(a.value, s),
                        None => prop_assert!((lo..=lo + span).contains(&a.value)),
                    }
                }
            }
            Err(e) => prop_assert_eq!(Err(e), view.check(&ask)),
        }
    }
}
