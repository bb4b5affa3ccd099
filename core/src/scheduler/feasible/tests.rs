use super::*;
use crate::mock;
use crate::scheduler::stack::testkit::{Cluster, alloc_on, mem};

/// `mock::node(1)` with extra attributes and meta used by the tables below.
fn node() -> Node {
    let mut n = mock::node(1);
    n.node_class = "gpu".into();
    n.datacenter = "eu-west-1".into();
    for (k, v) in [
        ("kernel.version", "5.15.0"),
        ("driver.docker.version", "v24.0.7"),
        ("cpu.numcores", "16"),
        ("cpu.frequency", "2.5"),
        ("os.features", "avx, sse4,aes"),
        ("unique.network.ip-address", "10.0.0.7"),
    ] {
        n.attributes.insert(k.into(), v.into());
    }
    n.meta.insert("rack".into(), "r12".into());
    n.meta.insert("unique.serial".into(), "SN-1".into());
    n
}

fn holds(l: &str, op: Operator, r: &str, node: &Node) -> bool {
    Checker::new(&Constraint::new(l, op, r)).holds(node)
}

#[test]
fn operators_true_and_false() {
    use Operator::*;
    let n = node();
    let cases: &[(&str, Operator, &str, bool)] = &[
        ("${attr.kernel.name}", Equal, "linux", true),
        ("${attr.kernel.name}", Equal, "windows", false),
        ("${attr.kernel.name}", NotEqual, "windows", true),
        ("${attr.kernel.name}", NotEqual, "linux", false),
        // Numeric when both sides are numbers: 16 > 8 although "16" < "8" lexically.
        ("${attr.cpu.numcores}", Greater, "8", true),
        ("${attr.cpu.numcores}", Less, "8", false),
        ("${attr.cpu.numcores}", GreaterEqual, "16", true),
        ("${attr.cpu.numcores}", GreaterEqual, "17", false),
        ("${attr.cpu.numcores}", LessEqual, "16", true),
        ("${attr.cpu.numcores}", LessEqual, "15", false),
        ("${attr.cpu.frequency}", Greater, "2.25", true),
        ("${attr.cpu.frequency}", Less, "2.25", false),
        // Lexical otherwise.
        ("${attr.kernel.name}", Less, "mac", true),
        ("${attr.kernel.name}", Greater, "mac", false),
        ("${attr.cpu.numcores}", Less, "abc", true),
        ("${attr.kernel.name}", Regexp, "^lin", true),
        ("${attr.kernel.name}", Regexp, "ux$", true),
        ("${attr.kernel.name}", Regexp, "^win", false),
        ("${attr.kernel.name}", Regexp, "(", false),
        ("${attr.kernel.version}", Version, ">= 5.10, < 6", true),
        ("${attr.kernel.version}", Version, "~> 5.14", true),
        ("${attr.kernel.version}", Version, "< 5", false),
        ("${attr.driver.docker.version}", Version, ">= 24.0", true),
        ("${attr.kernel.version}", Semver, ">= 5.15.0", true),
        ("${attr.kernel.version}", Semver, "> 5.15.0", false),
        ("${attr.kernel.version}", Semver, "not a version", false),
        ("${attr.os.features}", SetContains, "avx,aes", true),
        ("${attr.os.features}", SetContains, "sse4", true),
        ("${attr.os.features}", SetContains, "avx,neon", false),
        ("${attr.os.features}", SetContainsAny, "neon, aes", true),
        ("${attr.os.features}", SetContainsAny, "neon,sve", false),
        ("${attr.kernel.name}", IsSet, "", true),
        ("${attr.no.such}", IsSet, "", false),
        ("${attr.no.such}", IsNotSet, "", true),
        ("${attr.kernel.name}", IsNotSet, "", false),
    ];
    for &(l, op, r, want) in cases {
        assert_eq!(holds(l, op, r, &n), want, "{l} {op} {r}");
    }
}

#[test]
fn each_target_kind_resolves() {
    use Operator::*;
    let n = node();
    let id = n.id.to_string();
    let cases: &[(&str, &str, bool)] = &[
        ("${attr.kernel.name}", "linux", true),
        ("${meta.rack}", "r12", true),
        ("${meta.rack}", "r13", false),
        ("${node.datacenter}", "eu-west-1", true),
        ("${node.datacenter}", "dc1", false),
        ("${node.class}", "gpu", true),
        ("${node.unique.name}", "node-1", true),
        ("${node.unique.name}", "node-2", false),
        ("${node.unique.id}", &id, true),
        ("${attr.unique.network.ip-address}", "10.0.0.7", true),
        ("${meta.unique.serial}", "SN-1", true),
        // Templates and literals on either side.
        ("${node.class}-${meta.rack}", "gpu-r12", true),
        ("linux", "${attr.kernel.name}", true),
        ("literal", "literal", true),
        ("literal", "other", false),
    ];
    for &(l, r, want) in cases {
        assert_eq!(holds(l, Equal, r, &n), want, "{l} = {r}");
    }
}

/// Nomad's `!=`: a value the node lacks differs from any value it could have, so the
/// constraint holds; two missing values are the same, so it fails.
#[test]
fn not_equal_holds_where_the_node_lacks_the_value() {
    use Operator::NotEqual;
    let n = node();
    let rows = [
        ("${attr.no.such}", "x", true),
        ("${meta.no_such}", "r12", true),
        ("${attr.kernel.name}", "${meta.no_such}", true),
        ("${attr.no.such}", "${meta.no_such}", false),
        ("${meta.rack}", "r12", false),
    ];
    for (l, r, want) in rows {
        assert_eq!(holds(l, NotEqual, r, &n), want, "{l} != {r}");
    }
}

#[test]
fn missing_targets_filter_except_is_not_set() {
    use Operator::*;
    let n = node();
    for op in [
        Equal,
        Less,
        LessEqual,
        Greater,
        GreaterEqual,
        Regexp,
        Version,
        Semver,
        SetContains,
        SetContainsAny,
        IsSet,
    ] {
        let r = match op {
            Regexp => ".*",
            Version | Semver => ">= 0.0.1",
            IsSet => "",
            _ => "x",
        };
        for l in [
            "${attr.no.such}",
            "${meta.no_such}",
            "${env.HOME}",
            "${attr.a",
        ] {
            assert!(!holds(l, op, r, &n), "{l} {op} {r} must filter");
        }
        // A missing right-hand side filters too.
        if !matches!(op, Regexp | Version | Semver | IsSet) {
            assert!(
                !holds("${attr.kernel.name}", op, "${meta.no_such}", &n),
                "{op} with missing r"
            );
        }
    }
    assert!(holds("${attr.no.such}", IsNotSet, "", &n));
    assert!(holds("${meta.no_such}", IsNotSet, "", &n));
}

#[test]
fn class_stability_of_targets() {
    use Operator::*;
    for (l, op, r, stable) in [
        ("${attr.kernel.name}", Equal, "linux", true),
        ("${meta.rack}", Regexp, "r1.*", true),
        ("${node.datacenter}", Equal, "dc1", true),
        ("${node.class}", NotEqual, "x", true),
        ("${node.unique.name}", Equal, "node-1", false),
        ("${node.unique.id}", Equal, "x", false),
        ("${attr.unique.hostname}", Equal, "host-1", false),
        ("${meta.unique.serial}", IsSet, "", false),
        ("${attr.kernel.name}", Equal, "${node.unique.name}", false),
        ("${node.class}-${node.unique.name}", Equal, "x", false),
    ] {
        let c = Constraint::new(l, op, r);
        assert_eq!(Checker::new(&c).class_stable(), stable, "{c}");
        let compiled = Compiled::new(std::slice::from_ref(&c));
        assert_eq!(compiled.escapes(), !stable, "{c}");
    }
    let hosts = Compiled::new(&[Constraint::new("", DistinctHosts, "")]);
    assert!(hosts.escapes());
    assert_eq!(hosts.distinct_hosts.as_deref(), Some("distinct_hosts"));
    let off = Compiled::new(&[Constraint::new("", DistinctHosts, "false")]);
    assert!(!off.escapes());
    let prop = Compiled::new(&[Constraint::new("${meta.rack}", DistinctProperty, "")]);
    assert!(prop.escapes());
    assert_eq!(prop.distinct_property[0].limit, 1);
}

#[test]
fn computed_class_ignores_unique_keys_only() {
    let mut classes = ComputedClasses::default();
    let a = Arc::new(mock::node(1));
    let b = Arc::new(mock::node(2)); // differs only in unique.hostname, name and id
    assert_eq!(a.computed_class_key(), b.computed_class_key());
    assert_eq!(
        classes.id_of(a.computed_class_key()),
        classes.id_of(b.computed_class_key())
    );
    let mut c = mock::node(3);
    c.attributes.insert("kernel.name".into(), "windows".into());
    let mut d = mock::node(4);
    d.meta.insert("rack".into(), "r1".into());
    let mut e = mock::node(5);
    e.datacenter = "dc2".into();
    let mut f = mock::node(6);
    f.node_class = "big".into();
    let ids: Vec<_> = [a, Arc::new(c), Arc::new(d), Arc::new(e), Arc::new(f)]
        .iter()
        .map(|n| classes.id_of(n.computed_class_key()))
        .collect();
    let mut distinct = ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), ids.len(), "{ids:?}");
}

#[test]
fn ready_nodes_match_datacenter_globs_and_schedulability() {
    let mut c = Cluster::new();
    let dcs = ["dc1", "dc2", "eu-west-1", "eu-east-1", "us-west-1"];
    for (i, dc) in dcs.iter().enumerate() {
        c.node(i as u64, |n| n.datacenter = (*dc).into());
    }
    // Unschedulable nodes in dc1, one per reason.
    c.node(10, |n| n.eligibility = Eligibility::Ineligible);
    c.node(11, |n| {
        n.drain = Some(DrainStrategy {
            deadline: None,
            force: false,
            ignore_system_jobs: false,
            started_at: Timestamp::ZERO,
        })
    });
    c.node(12, |n| n.health = NodeHealth::Offlined);
    c.node(13, |n| {
        n.health = NodeHealth::Suspended(SuspendReason::Flaky)
    });
    c.node(14, |n| n.health = NodeHealth::Suspended(SuspendReason::New));
    c.node(15, |n| n.status = NodeStatus::Initializing);
    c.node(16, |n| n.status = NodeStatus::Down);
    c.node(17, |n| n.status = NodeStatus::Disconnected);

    let cases: &[(&[&str], &[&str])] = &[
        (&["dc1"], &["dc1"]),
        (&["dc*"], &["dc1", "dc2"]),
        (&["eu-*"], &["eu-east-1", "eu-west-1"]),
        (&["*-west-1", "dc2"], &["dc2", "eu-west-1", "us-west-1"]),
        (
            &["*"],
            &["dc1", "dc2", "eu-east-1", "eu-west-1", "us-west-1"],
        ),
        (&["dc3"], &[]),
        (&[], &[]),
    ];
    for &(globs, want) in cases {
        let mut job = mock::service_job("web", 1);
        job.datacenters = globs.iter().map(|s| s.to_string()).collect();
        let (nodes, per_dc) = ready_nodes_in_dcs(&c.store, &job);
        let mut got: Vec<&str> = nodes.iter().map(|n| n.datacenter.as_str()).collect();
        got.sort_unstable();
        assert_eq!(got, want, "{globs:?}");
        assert!(nodes.iter().all(|n| n.is_schedulable()));
        let want_dc: BTreeMap<String, u32> = want.iter().map(|d| (d.to_string(), 1)).collect();
        assert_eq!(per_dc, want_dc, "{globs:?}");
    }
}

#[test]
fn usage_after_plan_counts_stops_placements_and_updates() {
    let mut c = Cluster::new();
    let n1 = c.node(1, |_| {});
    let n2 = c.node(2, |_| {});
    let job = mock::service_job("web", 3);
    c.job(&job);
    c.allocs(vec![
        alloc_on(1, &job, n1, mem(1000)),
        alloc_on(2, &job, n1, mem(2000)),
        alloc_on(3, &job, n2, mem(500)),
    ]);
    assert_eq!(c.store.node_usage(&n1), mem(3000));
    let existing = |a: u64| (**c.store.alloc(&mock::alloc_id(a)).unwrap()).clone();
    fn stop(a: u64) -> AllocTransition {
        AllocTransition::stop(mock::alloc_id(a), "stop")
    }
    fn mark(a: u64, status: ClientStatus) -> AllocTransition {
        AllocTransition {
            client_status: Some(status),
            ..AllocTransition::stop(mock::alloc_id(a), "mark")
        }
    }
    fn unknown(a: u64) -> AllocTransition {
        AllocTransition {
            desired_status: DesiredStatus::Run,
            ..mark(a, ClientStatus::Unknown)
        }
    }

    struct Case {
        name: &'static str,
        edit: Box<dyn Fn(&mut Plan)>,
        n1: Resources,
    }
    let cases = vec![
        Case {
            name: "empty plan",
            edit: Box::new(|_| {}),
            n1: mem(3000),
        },
        Case {
            name: "new placement adds",
            edit: Box::new({
                let job = job.clone();
                move |p| p.append_alloc(alloc_on(10, &job, n1, mem(100)))
            }),
            n1: mem(3100),
        },
        Case {
            name: "stop frees",
            edit: Box::new(move |p| p.append_update(n1, stop(1))),
            n1: mem(2000),
        },
        Case {
            name: "stop listed twice frees once",
            edit: Box::new(move |p| {
                p.append_update(n1, stop(1));
                p.append_preemption(n1, stop(1));
            }),
            n1: mem(2000),
        },
        Case {
            name: "lost frees, unknown keeps",
            edit: Box::new(move |p| {
                p.append_update(n1, mark(1, ClientStatus::Lost));
                p.append_update(n1, unknown(2));
            }),
            n1: mem(2000),
        },
        Case {
            name: "in-place update counts its delta",
            edit: Box::new({
                let mut a = existing(2);
                a.resources = mem(2500);
                move |p| p.append_alloc(a.clone())
            }),
            n1: mem(3500),
        },
        Case {
            name: "stop of another node's allocation does not free here",
            edit: Box::new(move |p| p.append_update(n1, stop(3))),
            n1: mem(3000),
        },
        Case {
            name: "stop and replace",
            edit: Box::new(move |p| {
                p.append_update(n1, stop(2));
                p.append_alloc(alloc_on(11, &mock::service_job("web", 3), n1, mem(700)));
            }),
            n1: mem(1700),
        },
    ];
    for case in cases {
        let mut plan = Plan::new(mock::eval_id(1), 50, None, 0);
        (case.edit)(&mut plan);
        assert_eq!(
            usage_after_plan(&c.store, &plan, n1),
            case.n1,
            "{}",
            case.name
        );
        assert_eq!(
            usage_after_plan(&c.store, &plan, n2),
            mem(500),
            "{}",
            case.name
        );
    }
}

/// Nomad's spellings of the set operators: `set_contains_all` is `set_contains`.
#[test]
fn set_contains_all_is_set_contains() {
    let n = node();
    let op = Operator::parse("set_contains_all").expect("accepted");
    assert_eq!(op, Operator::SetContains);
    assert!(holds("${attr.os.features}", op, "avx,aes", &n));
    assert!(!holds("${attr.os.features}", op, "avx,neon", &n));
}
