use super::testkit::{Cluster, alloc_on, job_asking, mem};
use super::*;
use crate::mock;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn rng() -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(7)
}

/// A stack over every node of the store, schedulable or not, so the stack's own checks are
/// what keeps unsuitable nodes out.
fn stack<'s>(c: &'s Cluster, job: &'s Job, limit: CandidateLimit) -> Stack<'s> {
    let mut s = Stack::new(&c.store, job, limit);
    s.set_nodes(c.store.nodes().collect(), &mut rng());
    s
}

fn new_plan() -> Plan {
    Plan::new(mock::eval_id(1), 50, None, 0)
}

/// A new allocation of `job`'s group `gi` on `node`, as a scheduler would append it.
fn placement(job: &Job, gi: usize, n: u64, node: NodeId) -> Allocation {
    let g = &job.groups[gi];
    let mut a = mock::alloc(1_000_000 + n, job, node, n as u32);
    a.task_group = g.name.as_str().into();
    a.name = Allocation::name_for(job.id.as_str(), &g.name, n as u32);
    a.resources = g.resources();
    a
}

/// Selects up to `count` allocations of group `gi`, appending each to `plan`; returns the
/// nodes chosen, in order, stopping at the first failure.
fn place(
    s: &mut Stack<'_>,
    job: &Job,
    gi: usize,
    plan: &mut Plan,
    count: u32,
    opts: &SelectOptions,
) -> Vec<NodeId> {
    let mut chosen = Vec::new();
    for _ in 0..count {
        let Some(r) = s.select(&job.groups[gi], plan, opts) else {
            break;
        };
        let n = plan.node_allocation.values().map(Vec::len).sum::<usize>() as u64;
        plan.append_alloc(placement(job, gi, n, r.node.id));
        chosen.push(r.node.id);
    }
    chosen
}

fn place_all(s: &mut Stack<'_>, job: &Job, count: u32) -> Vec<NodeId> {
    place(s, job, 0, &mut new_plan(), count, &SelectOptions::default())
}

fn counts(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn draining() -> DrainStrategy {
    DrainStrategy {
        deadline: None,
        force: false,
        ignore_system_jobs: false,
        started_at: Timestamp::ZERO,
    }
}

#[test]
fn candidate_limit_resolves() {
    for (limit, nodes, want) in [
        (CandidateLimit::Log2, 0, 2),
        (CandidateLimit::Log2, 1, 2),
        (CandidateLimit::Log2, 4, 2),
        (CandidateLimit::Log2, 5, 3),
        (CandidateLimit::Log2, 100, 7),
        (CandidateLimit::Log2, 1024, 10),
        (CandidateLimit::Log2, 10_000, 14),
        (CandidateLimit::Fixed(2), 10_000, 2),
        (CandidateLimit::Fixed(0), 10, 1),
        (CandidateLimit::All, 10, usize::MAX),
    ] {
        assert_eq!(limit.resolve(nodes), want, "{limit:?} over {nodes}");
    }
}

#[test]
fn unschedulable_nodes_are_never_selected() {
    let bad: [(&str, fn(&mut Node)); 8] = [
        ("ineligible", |n| n.eligibility = Eligibility::Ineligible),
        ("draining", |n| n.drain = Some(draining())),
        ("offlined", |n| n.health = NodeHealth::Offlined),
        ("suspended new", |n| {
            n.health = NodeHealth::Suspended(SuspendReason::New)
        }),
        ("suspended lost", |n| {
            n.health = NodeHealth::Suspended(SuspendReason::Lost)
        }),
        ("suspended flaky", |n| {
            n.health = NodeHealth::Suspended(SuspendReason::Flaky)
        }),
        ("initializing", |n| n.status = NodeStatus::Initializing),
        ("down", |n| n.status = NodeStatus::Down),
    ];
    let job = mock::service_job("web", 20);
    for (name, edit) in bad {
        // Alone, the bad node takes nothing; next to a good node, everything goes there.
        let mut c = Cluster::new();
        c.node(1, edit);
        let mut s = stack(&c, &job, CandidateLimit::Fixed(2));
        assert!(place_all(&mut s, &job, 1).is_empty(), "{name}");
        assert_eq!(s.metrics().nodes_filtered, 1, "{name}");
        assert_eq!(s.metrics().nodes_evaluated, 1, "{name}");

        let good = c.node(2, |_| {});
        let mut s = stack(&c, &job, CandidateLimit::Fixed(2));
        let chosen = place_all(&mut s, &job, 20);
        assert_eq!(chosen.len(), 20, "{name}");
        assert!(chosen.iter().all(|n| *n == good), "{name}");
    }
}

#[test]
fn constraints_filter_and_are_counted_by_their_text() {
    use Operator::*;
    struct Case {
        name: &'static str,
        job: Vec<Constraint>,
        group: Vec<Constraint>,
        chosen: Option<u64>,
        filtered: &'static [(&'static str, u32)],
    }
    let cases = [
        Case {
            name: "job constraint",
            job: vec![Constraint::new("${meta.rack}", Equal, "r1")],
            group: vec![],
            chosen: Some(1),
            filtered: &[("${meta.rack} = r1", 2)],
        },
        Case {
            name: "group constraint after job constraint",
            job: vec![Constraint::new("${attr.kernel.name}", NotEqual, "windows")],
            group: vec![Constraint::new("${meta.rack}", Regexp, "^r2")],
            chosen: Some(2),
            filtered: &[
                ("${attr.kernel.name} != windows", 1),
                ("${meta.rack} regexp ^r2", 1),
            ],
        },
        Case {
            name: "per-node target",
            job: vec![],
            group: vec![Constraint::new("${node.unique.name}", Equal, "node-3")],
            chosen: Some(3),
            filtered: &[("${node.unique.name} = node-3", 2)],
        },
        Case {
            name: "nothing matches",
            job: vec![Constraint::new("${attr.cpu.arch}", Equal, "arm64")],
            group: vec![],
            chosen: None,
            filtered: &[("${attr.cpu.arch} = arm64", 3)],
        },
    ];
    let mut c = Cluster::new();
    c.node(1, |n| {
        n.meta.insert("rack".into(), "r1".into());
    });
    c.node(2, |n| {
        n.meta.insert("rack".into(), "r2".into());
    });
    c.node(3, |n| {
        n.attributes.insert("kernel.name".into(), "windows".into());
    });
    for case in cases {
        let mut job = mock::service_job("web", 1);
        job.constraints = case.job;
        job.groups[0].constraints = case.group;
        let mut s = stack(&c, &job, CandidateLimit::All);
        let got = s
            .select(&job.groups[0], &new_plan(), &SelectOptions::default())
            .map(|r| r.node.id);
        assert_eq!(got, case.chosen.map(mock::node_id), "{}", case.name);
        assert_eq!(
            s.metrics().constraint_filtered,
            counts(case.filtered),
            "{}",
            case.name
        );
        assert_eq!(s.metrics().nodes_evaluated, 3, "{}", case.name);
    }
}

#[test]
fn class_cache_is_exact_for_differing_nodes_of_one_class() {
    // Both nodes have the default class, but only one runs linux: a cache keyed by class name
    // alone would wrongly filter (or admit) one of them.
    let mut c = Cluster::new();
    c.node(1, |n| {
        n.attributes.insert("kernel.name".into(), "windows".into());
    });
    let linux = c.node(2, |_| {});
    let mut job = mock::service_job("web", 3);
    job.constraints = vec![Constraint::new(
        "${attr.kernel.name}",
        Operator::Equal,
        "linux",
    )];
    let mut s = stack(&c, &job, CandidateLimit::All);
    assert_eq!(place_all(&mut s, &job, 3), vec![linux; 3]);
    assert_eq!(
        s.class_eligibility(),
        (BTreeMap::from([("default".to_string(), true)]), false)
    );
}

#[test]
fn class_eligibility_records_classes_and_escapes() {
    // BEHAVIOUR's example: a full node of class `a` and a `windows` node filtered by the
    // constraint give {a: eligible, windows: ineligible}, not escaped.
    let mut c = Cluster::new();
    c.node(1, |n| {
        n.node_class = "a".into();
        n.reserved = n.resources;
    });
    c.node(2, |n| {
        n.node_class = "windows".into();
        n.attributes.insert("kernel.name".into(), "windows".into());
    });
    let cases = [
        ("${attr.kernel.name}", "linux", false),
        ("${node.unique.name}", "node-1", true),
    ];
    for (l, r, escaped) in cases {
        let mut job = mock::service_job("web", 1);
        job.constraints = vec![Constraint::new(l, Operator::Equal, r)];
        let mut s = stack(&c, &job, CandidateLimit::Log2);
        assert!(place_all(&mut s, &job, 1).is_empty(), "{l}");
        let (classes, got_escaped) = s.class_eligibility();
        assert_eq!(got_escaped, escaped, "{l}");
        if !escaped {
            let want = BTreeMap::from([("a".to_string(), true), ("windows".to_string(), false)]);
            assert_eq!(classes, want);
            assert_eq!(s.metrics().class_exhausted, counts(&[("a", 1)]));
            assert_eq!(s.metrics().class_filtered, counts(&[("windows", 1)]));
        }
    }

    // distinct_* constraints escape too, at job or group level.
    for (job_level, op) in [
        (true, Operator::DistinctHosts),
        (false, Operator::DistinctHosts),
        (false, Operator::DistinctProperty),
    ] {
        let mut job = mock::service_job("web", 1);
        let target = if op == Operator::DistinctHosts {
            ""
        } else {
            "${meta.rack}"
        };
        let cons = vec![Constraint::new(target, op, "")];
        if job_level {
            job.constraints = cons;
        } else {
            job.groups[0].constraints = cons;
        }
        let mut s = stack(&c, &job, CandidateLimit::Log2);
        s.select(&job.groups[0], &new_plan(), &SelectOptions::default());
        assert!(s.class_eligibility().1, "{op} job-level {job_level}");
    }
}

#[test]
fn exhausted_resources_name_the_dimension() {
    struct Case {
        name: &'static str,
        edit: fn(&mut Node),
        dimension: Dimension,
    }
    let cases = [
        Case {
            name: "cpu",
            edit: |n| n.resources.cpu_mhz = 50,
            dimension: Dimension::Cpu,
        },
        Case {
            name: "memory",
            edit: |n| n.resources.memory_mb = 100,
            dimension: Dimension::Memory,
        },
        Case {
            name: "disk",
            edit: |n| n.resources.disk_mb = 10,
            dimension: Dimension::Disk,
        },
        Case {
            name: "reserved counts",
            edit: |n| n.reserved.memory_mb = 8000,
            dimension: Dimension::Memory,
        },
    ];
    for case in cases {
        let mut c = Cluster::new();
        c.node(1, case.edit);
        let mut job = mock::service_job("web", 1);
        job.groups[0].tasks[0].resources.disk_mb = 20;
        let mut s = stack(&c, &job, CandidateLimit::Log2);
        assert!(place_all(&mut s, &job, 1).is_empty(), "{}", case.name);
        let m = s.metrics();
        assert_eq!(m.nodes_exhausted, 1, "{}", case.name);
        assert_eq!(
            m.dimension_exhausted,
            BTreeMap::from([(case.dimension, 1)]),
            "{}",
            case.name
        );
        assert_eq!(
            m.class_exhausted,
            counts(&[("default", 1)]),
            "{}",
            case.name
        );
        assert_eq!(m.nodes_available, counts(&[("dc1", 1)]), "{}", case.name);
    }
}

#[test]
fn plan_placements_and_stops_are_counted() {
    // One 8,192 MB node running 3,000 MB of another job; the job asks 2,500 MB.
    let mut c = Cluster::new();
    let node = c.node(1, |_| {});
    let other = mock::service_job("other", 1);
    c.job(&other);
    c.allocs(vec![alloc_on(1, &other, node, mem(3000))]);
    let job = job_asking("web", 10, 10, 2500);
    let stop_other = AllocTransition::stop(mock::alloc_id(1), "stop");
    for (placed, stop, fits) in [
        (0, false, true),
        (1, false, true),
        (2, false, false),
        (2, true, true),
        (3, true, false),
    ] {
        let mut plan = new_plan();
        for i in 0..placed {
            plan.append_alloc(placement(&job, 0, i, node));
        }
        if stop {
            plan.append_update(node, stop_other.clone());
        }
        let mut s = stack(&c, &job, CandidateLimit::Log2);
        let got = s.select(&job.groups[0], &plan, &SelectOptions::default());
        assert_eq!(got.is_some(), fits, "{placed} placed, stop {stop}");
        if !fits {
            assert_eq!(
                s.metrics().dimension_exhausted,
                BTreeMap::from([(Dimension::Memory, 1)])
            );
        }
    }
}

#[test]
fn distinct_hosts_at_job_and_group_level() {
    use Operator::DistinctHosts;
    let mut c = Cluster::new();
    let nodes: Vec<NodeId> = (1..=3).map(|n| c.node(n, |_| {})).collect();
    // Job-level: one allocation of the job per node, whatever the group.
    let mut job = mock::service_job("web", 5);
    job.constraints = vec![Constraint::new("", DistinctHosts, "")];
    let mut s = stack(&c, &job, CandidateLimit::Log2);
    let mut chosen = place_all(&mut s, &job, 5);
    assert_eq!(chosen.len(), 3);
    chosen.sort_unstable();
    chosen.dedup();
    assert_eq!(chosen.len(), 3);
    assert_eq!(
        s.metrics().constraint_filtered,
        counts(&[("distinct_hosts", 3)])
    );

    // An existing allocation of the job counts; a stopped one does not.
    let mut with_existing = Cluster::new();
    for n in 1..=3 {
        with_existing.node(n, |_| {});
    }
    with_existing.job(&job);
    let mut stopped = alloc_on(2, &job, nodes[1], mem(10));
    stopped.desired_status = DesiredStatus::Stop;
    with_existing.allocs(vec![alloc_on(1, &job, nodes[0], mem(10)), stopped]);
    let mut s = stack(&with_existing, &job, CandidateLimit::Log2);
    let chosen = place_all(&mut s, &job, 5);
    assert_eq!(chosen.len(), 2);
    assert!(!chosen.contains(&nodes[0]));

    // Group-level: two groups, each spread over both nodes, sharing them.
    let mut c = Cluster::new();
    c.node(1, |_| {});
    c.node(2, |_| {});
    let mut job = mock::service_job("web", 3);
    let mut db = job.groups[0].clone();
    db.name = "db".into();
    job.groups.push(db);
    for g in &mut job.groups {
        g.constraints = vec![Constraint::new("", DistinctHosts, "true")];
    }
    let mut s = stack(&c, &job, CandidateLimit::Log2);
    let mut plan = new_plan();
    let opts = SelectOptions::default();
    assert_eq!(place(&mut s, &job, 0, &mut plan, 3, &opts).len(), 2);
    assert_eq!(place(&mut s, &job, 1, &mut plan, 3, &opts).len(), 2);
    // With the constraint at job level instead, the two groups exclude each other.
    job.constraints = vec![Constraint::new("", DistinctHosts, "")];
    for g in &mut job.groups {
        g.constraints.clear();
    }
    let mut s = stack(&c, &job, CandidateLimit::Log2);
    let mut plan = new_plan();
    assert_eq!(place(&mut s, &job, 0, &mut plan, 3, &opts).len(), 2);
    assert_eq!(place(&mut s, &job, 1, &mut plan, 3, &opts).len(), 0);
}

#[test]
fn distinct_property_allows_limit_per_value() {
    let mut c = Cluster::new();
    for n in 1..=6 {
        c.node(n, |node| {
            let rack = if n <= 3 { "r1" } else { "r2" };
            node.meta.insert("rack".into(), rack.into());
        });
    }
    let no_rack = c.node(7, |_| {});
    let rack_of = |id: &NodeId| c.store.node(id).unwrap().meta.get("rack").cloned();

    let mut job = mock::service_job("web", 6);
    job.groups[0].constraints = vec![Constraint::new(
        "${meta.rack}",
        Operator::DistinctProperty,
        "2",
    )];
    let mut s = stack(&c, &job, CandidateLimit::All);
    let chosen = place_all(&mut s, &job, 6);
    assert_eq!(chosen.len(), 4);
    assert!(!chosen.contains(&no_rack));
    for rack in ["r1", "r2"] {
        let n = chosen
            .iter()
            .filter(|id| rack_of(id).as_deref() == Some(rack))
            .count();
        assert_eq!(n, 2, "{rack}");
    }
    assert_eq!(
        s.metrics().constraint_filtered,
        counts(&[("${meta.rack} distinct_property 2", 7)])
    );

    // An existing allocation on an r1 node leaves room for one more there.
    let mut c2 = Cluster::new();
    for n in 1..=6 {
        c2.node(n, |node| {
            let rack = if n <= 3 { "r1" } else { "r2" };
            node.meta.insert("rack".into(), rack.into());
        });
    }
    c2.job(&job);
    c2.allocs(vec![alloc_on(1, &job, mock::node_id(1), mem(10))]);
    let mut s = stack(&c2, &job, CandidateLimit::All);
    let chosen = place_all(&mut s, &job, 6);
    assert_eq!(chosen.len(), 3);
    let r1 = chosen
        .iter()
        .filter(|id| id.0 <= mock::node_id(3).0)
        .count();
    assert_eq!(r1, 1);
}

#[test]
fn binpack_prefers_fuller_and_spread_emptier() {
    for (algorithm, want) in [
        (SchedulerAlgorithm::Binpack, 1),
        (SchedulerAlgorithm::Spread, 2),
    ] {
        let mut c = Cluster::new();
        let full = c.node(1, |_| {});
        c.node(2, |_| {});
        c.config(SchedulerConfig {
            algorithm,
            ..SchedulerConfig::default()
        });
        let other = mock::service_job("other", 1);
        c.job(&other);
        c.allocs(vec![alloc_on(
            1,
            &other,
            full,
            Resources::new(2000, 4000, 0),
        )]);
        let job = mock::service_job("web", 1);
        let mut s = stack(&c, &job, CandidateLimit::All);
        let r = s
            .select(&job.groups[0], &new_plan(), &SelectOptions::default())
            .expect("fits");
        assert_eq!(r.node.id, mock::node_id(want), "{algorithm:?}");
        assert_eq!(s.metrics().score, r.score);
        assert!(r.score > 0.0 && r.score <= 1.0);
    }
}

#[test]
fn job_anti_affinity_spreads_over_equal_nodes() {
    let mut c = Cluster::new();
    let nodes: Vec<NodeId> = (1..=3).map(|n| c.node(n, |_| {})).collect();
    let job = mock::service_job("web", 3);
    let mut s = stack(&c, &job, CandidateLimit::All);
    let mut chosen = place_all(&mut s, &job, 3);
    chosen.sort_unstable();
    assert_eq!(chosen, nodes);
}

#[test]
fn snapshot_affinity_prefers_warm_then_fresh_idle_nodes() {
    // 100 nodes, all busy and last running another snapshot except: node 40 idle and warm,
    // node 41 idle and fresh, node 42 warm but busy, node 43 idle but of another snapshot.
    let mut c = Cluster::new();
    let other = mock::service_job("other", 1);
    c.job(&other);
    let mut busy = Vec::new();
    for n in 0..100 {
        let snapshot = match n {
            40 | 42 => Some("s1"),
            41 => None,
            _ => Some("s0"),
        };
        let id = c.node(n, |node| node.last_snapshot = snapshot.map(str::to_owned));
        if !matches!(n, 40 | 41 | 43) {
            busy.push(alloc_on(n, &other, id, Resources::new(1000, 2000, 0)));
        }
    }
    c.allocs(busy);
    let mut job = mock::service_job("web", 3);
    job.groups[0].tasks[0].snapshot = Some("s1".into());
    let mut s = stack(&c, &job, CandidateLimit::Fixed(2));
    let mut plan = new_plan();
    let opts = SelectOptions::default();
    let first = s.select(&job.groups[0], &plan, &opts).expect("fits");
    assert_eq!(first.node.id, mock::node_id(40));
    assert!(first.score >= SnapshotTier::WarmIdle.boost() - 1.0);
    plan.append_alloc(placement(&job, 0, 0, first.node.id));
    let second = s.select(&job.groups[0], &plan, &opts).expect("fits");
    assert_eq!(second.node.id, mock::node_id(41));
    plan.append_alloc(placement(&job, 0, 1, second.node.id));
    let third = s.select(&job.groups[0], &plan, &opts).expect("fits");
    assert!(third.score < SnapshotTier::FreshIdle.boost() - 1.0);
    // Few nodes are evaluated even so: the tier index finds the idle ones directly.
    assert!(s.metrics().nodes_evaluated <= 2 + MAX_SKIP as u32);

    // A warm idle node the group's constraints exclude is passed over for a fresh one.
    let mut picky = job.clone();
    picky.groups[0].constraints = vec![Constraint::new(
        "${node.unique.name}",
        Operator::NotEqual,
        "node-40",
    )];
    let mut s = stack(&c, &picky, CandidateLimit::Fixed(2));
    let r = s
        .select(&picky.groups[0], &new_plan(), &opts)
        .expect("fits");
    assert_eq!(r.node.id, mock::node_id(41));
    assert_eq!(
        s.metrics().constraint_filtered,
        counts(&[("${node.unique.name} != node-40", 1)])
    );

    // Without the snapshot the same stack is indifferent to it.
    job.groups[0].tasks[0].snapshot = None;
    let mut s = stack(&c, &job, CandidateLimit::Fixed(2));
    let r = s.select(&job.groups[0], &new_plan(), &opts).expect("fits");
    assert!(r.score < 1.0);
}

#[test]
fn candidate_limit_bounds_nodes_evaluated() {
    let mut c = Cluster::new();
    for n in 0..100 {
        c.node(n, |_| {});
    }
    let job = mock::service_job("web", 10);
    for (limit, evaluated) in [
        (CandidateLimit::Fixed(2), 2),
        (CandidateLimit::Log2, 7),
        (CandidateLimit::All, 100),
    ] {
        let mut s = stack(&c, &job, limit);
        let mut plan = new_plan();
        for i in 0..10 {
            let r = s
                .select(&job.groups[0], &plan, &SelectOptions::default())
                .expect("fits");
            // Equal nodes crowded by the job score below zero and are skipped (up to
            // MAX_SKIP per select), so a select may look a little further.
            let m = s.metrics().nodes_evaluated;
            assert!(
                m >= evaluated.min(100) && m <= (evaluated + MAX_SKIP as u32).min(100),
                "{limit:?}: {m} evaluated"
            );
            plan.append_alloc(placement(&job, 0, i, r.node.id));
        }
    }
}

#[test]
fn penalty_nodes_are_avoided_when_another_fits() {
    let mut c = Cluster::new();
    let fuller = c.node(1, |_| {});
    let emptier = c.node(2, |_| {});
    let other = mock::service_job("other", 1);
    c.job(&other);
    c.allocs(vec![alloc_on(1, &other, fuller, mem(4000))]);
    let job = job_asking("web", 1, 100, 3000);
    let opts = SelectOptions {
        penalty_nodes: BTreeSet::from([fuller]),
        ..SelectOptions::default()
    };
    for limit in [
        CandidateLimit::Fixed(1),
        CandidateLimit::Fixed(2),
        CandidateLimit::All,
    ] {
        let mut s = stack(&c, &job, limit);
        let r = s.select(&job.groups[0], &new_plan(), &opts).expect("fits");
        assert_eq!(r.node.id, emptier, "{limit:?}");
        // Without the penalty, binpack picks the fuller node.
        let mut s = stack(&c, &job, CandidateLimit::All);
        let r = s
            .select(&job.groups[0], &new_plan(), &SelectOptions::default())
            .expect("fits");
        assert_eq!(r.node.id, fuller);
    }
    // When only the penalised node fits, it is still used.
    let mut plan = new_plan();
    plan.append_alloc(placement(&job_asking("web", 1, 100, 8000), 0, 0, emptier));
    let mut s = stack(&c, &job, CandidateLimit::Fixed(2));
    let r = s.select(&job.groups[0], &plan, &opts).expect("fits");
    assert_eq!(r.node.id, fuller);
    assert!(r.score < 0.0);
}

#[test]
fn preferred_nodes_win_when_feasible() {
    let mut c = Cluster::new();
    let fuller = c.node(1, |_| {});
    let sticky = c.node(2, |_| {});
    let gone = c.node(3, |n| n.eligibility = Eligibility::Ineligible);
    let other = mock::service_job("other", 1);
    c.job(&other);
    c.allocs(vec![alloc_on(1, &other, fuller, mem(4000))]);
    let job = mock::service_job("web", 1);
    for (preferred, want) in [
        (vec![sticky], sticky),
        (vec![gone, sticky], sticky),
        (vec![gone], fuller),
        (vec![], fuller),
    ] {
        let opts = SelectOptions {
            preferred_nodes: preferred.clone(),
            ..SelectOptions::default()
        };
        let mut s = stack(&c, &job, CandidateLimit::All);
        let r = s.select(&job.groups[0], &new_plan(), &opts).expect("fits");
        assert_eq!(r.node.id, want, "{preferred:?}");
        // When no preferred node fits, the metrics describe the full walk only.
        if want == fuller {
            assert_eq!(s.metrics().nodes_evaluated, 3, "{preferred:?}");
            assert_eq!(s.metrics().nodes_filtered, 1, "{preferred:?}");
        }
    }
}

#[test]
fn preemption_picks_lowest_priority_smallest_set() {
    struct Case {
        name: &'static str,
        /// (job priority, MB) of the allocations already on the 8,192 MB node.
        existing: &'static [(u8, u64)],
        ask: u64,
        /// Indexes into `existing`; `None`: nothing may be preempted, the node is exhausted.
        evicted: Option<&'static [usize]>,
    }
    let cases = [
        Case {
            name: "fits without preemption",
            existing: &[(20, 4000)],
            ask: 1000,
            evicted: Some(&[]),
        },
        Case {
            name: "lowest priority first, even if it takes more allocations",
            existing: &[(20, 1000), (20, 1000), (20, 1000), (30, 4000)],
            ask: 4000,
            evicted: Some(&[0, 1, 2]),
        },
        Case {
            name: "fewest allocations within the priority, the smaller on ties",
            existing: &[(20, 1000), (20, 3000), (20, 4000)],
            ask: 3000,
            evicted: Some(&[1]),
        },
        Case {
            name: "exactly ten below may be preempted",
            existing: &[(40, 8000)],
            ask: 1000,
            evicted: Some(&[0]),
        },
        Case {
            name: "within ten is refused",
            existing: &[(45, 8000)],
            ask: 1000,
            evicted: None,
        },
        Case {
            name: "same job is never preempted",
            existing: &[(0, 8000)],
            ask: 1000,
            evicted: None,
        },
    ];
    for case in cases {
        let mut c = Cluster::new();
        let node = c.node(1, |_| {});
        c.config(SchedulerConfig {
            preemption: PreemptionConfig {
                service: true,
                ..PreemptionConfig::default()
            },
            ..SchedulerConfig::default()
        });
        let job = job_asking("web", 1, 100, case.ask);
        c.job(&job);
        let mut allocs = Vec::new();
        for (i, &(priority, mb)) in case.existing.iter().enumerate() {
            let victim = if priority == 0 {
                job.clone()
            } else {
                let mut j = mock::service_job(&format!("p{priority}-{i}"), 1);
                j.priority = priority;
                c.job(&j);
                j
            };
            allocs.push(alloc_on(i as u64, &victim, node, mem(mb)));
        }
        c.allocs(allocs);
        let opts = SelectOptions {
            allow_preemption: true,
            ..SelectOptions::default()
        };
        let mut s = stack(&c, &job, CandidateLimit::Log2);
        let got = s.select(&job.groups[0], &new_plan(), &opts);
        match case.evicted {
            None => {
                assert!(got.is_none(), "{}", case.name);
                assert_eq!(s.metrics().nodes_exhausted, 1, "{}", case.name);
            }
            Some(want) => {
                let r = got.expect(case.name);
                let mut ids: Vec<AllocId> = r.preempted.iter().map(|a| a.id).collect();
                ids.sort_unstable();
                let want: Vec<AllocId> = want.iter().map(|&i| mock::alloc_id(i as u64)).collect();
                assert_eq!(ids, want, "{}", case.name);
            }
        }
        // Without permission (from the options or the cluster config) nothing is evicted.
        let mut s = stack(&c, &job, CandidateLimit::Log2);
        let plain = s.select(&job.groups[0], &new_plan(), &SelectOptions::default());
        assert!(
            plain.is_none_or(|r| r.preempted.is_empty()),
            "{}",
            case.name
        );
    }
}

#[test]
fn preemption_only_when_the_cluster_allows_it_and_no_free_node_fits() {
    let mut c = Cluster::new();
    let full = c.node(1, |_| {});
    let low = {
        let mut j = mock::service_job("low", 1);
        j.priority = 10;
        j
    };
    c.job(&low);
    c.allocs(vec![alloc_on(1, &low, full, mem(8000))]);
    let job = job_asking("web", 1, 100, 1000);
    let opts = SelectOptions {
        allow_preemption: true,
        ..SelectOptions::default()
    };
    // Service preemption is off by default.
    let mut s = stack(&c, &job, CandidateLimit::All);
    assert!(s.select(&job.groups[0], &new_plan(), &opts).is_none());

    c.config(SchedulerConfig {
        preemption: PreemptionConfig {
            service: true,
            ..PreemptionConfig::default()
        },
        ..SchedulerConfig::default()
    });
    let mut s = stack(&c, &job, CandidateLimit::All);
    let r = s.select(&job.groups[0], &new_plan(), &opts).expect("fits");
    assert_eq!(r.node.id, full);
    assert_eq!(r.preempted.len(), 1);

    // A node with room wins over one that needs evictions.
    let free = c.node(2, |_| {});
    let mut s = stack(&c, &job, CandidateLimit::All);
    let r = s.select(&job.groups[0], &new_plan(), &opts).expect("fits");
    assert_eq!(r.node.id, free);
    assert!(r.preempted.is_empty());

    // Preemptions already in the plan free their resources and are not chosen twice.
    let mut plan = new_plan();
    plan.append_preemption(full, AllocTransition::stop(mock::alloc_id(1), "preempted"));
    plan.append_alloc(placement(&job_asking("web", 1, 100, 7000), 0, 0, full));
    plan.append_alloc(placement(&job_asking("web", 1, 100, 8000), 0, 1, free));
    let mut s = stack(&c, &job, CandidateLimit::All);
    let r = s.select(&job.groups[0], &plan, &opts).expect("fits");
    assert_eq!(r.node.id, full);
    assert!(r.preempted.is_empty());
}

#[test]
fn walk_is_deterministic_and_system_keeps_order() {
    let mut c = Cluster::new();
    for n in 0..50 {
        c.node(n, |_| {});
    }
    let job = mock::service_job("web", 20);
    let run = || {
        let mut s = stack(&c, &job, CandidateLimit::Fixed(2));
        place_all(&mut s, &job, 20)
    };
    let first = run();
    assert_eq!(first.len(), 20);
    assert_eq!(first, run());

    // A system job is placed node by node: the stack keeps the single node it is given.
    let sys = mock::system_job("sys");
    let mut s = Stack::new(&c.store, &sys, CandidateLimit::All);
    for node in c.store.nodes() {
        s.set_nodes(vec![node], &mut rng());
        let r = s
            .select(&sys.groups[0], &new_plan(), &SelectOptions::default())
            .expect("fits");
        assert_eq!(r.node.id, node.id);
        assert_eq!(s.metrics().nodes_evaluated, 1);
    }
    let (nodes, per_dc) = crate::scheduler::feasible::ready_nodes_in_dcs(&c.store, &sys);
    s.set_nodes(nodes, &mut rng());
    assert_eq!(s.metrics().nodes_available, per_dc);
    let order: Vec<NodeId> = s.nodes.slots.iter().map(|e| e.node.id).collect();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(order, sorted, "system keeps the given order");
}

/// The stack keeps each node's view of the plan between selects; these check that what it
/// keeps never differs from reading the plan afresh, whatever plan object it is given.
#[test]
fn plan_views_follow_untracked_and_swapped_plans() {
    let mut c = Cluster::new();
    for n in 0..3 {
        c.node(n, |_| {});
    }
    // Two fit per node by memory (8,192 MB each).
    let job = job_asking("web", 6, 100, 3_000);
    c.job(&job);
    let opts = SelectOptions::default();

    let mut tracked = new_plan();
    let expected = place(
        &mut stack(&c, &job, CandidateLimit::Log2),
        &job,
        0,
        &mut tracked,
        7,
        &opts,
    );
    assert_eq!(expected.len(), 6, "two per node, then full: {expected:?}");

    // A plan that came through serde carries no change record: every view is recomputed.
    let mut untracked: Plan =
        serde_json::from_str(&serde_json::to_string(&new_plan()).unwrap()).unwrap();
    assert!(untracked.changed_nodes().is_none());
    let got = place(
        &mut stack(&c, &job, CandidateLimit::Log2),
        &job,
        0,
        &mut untracked,
        7,
        &opts,
    );
    assert_eq!(got, expected);

    // Halfway, the same stack is handed a copy of its plan (a different change record).
    let mut s = stack(&c, &job, CandidateLimit::Log2);
    let mut first = new_plan();
    let mut got = place(&mut s, &job, 0, &mut first, 3, &opts);
    let mut second = first.clone();
    got.extend(place(&mut s, &job, 0, &mut second, 4, &opts));
    assert_eq!(got, expected);
}

/// A stack handed a different plan whose revisions happen to equal the first's must not
/// reuse what it kept from the first.
#[test]
fn plan_views_are_not_reused_across_plans_with_equal_revisions() {
    let mut c = Cluster::new();
    let n0 = c.node(0, |_| {});
    let job = job_asking("web", 2, 100, 5_000);
    c.job(&job);
    let opts = SelectOptions::default();
    let mut s = stack(&c, &job, CandidateLimit::All);

    // Plan A: one small allocation on the node; the stack sees it (revision 1).
    let mut a = new_plan();
    let mut small = placement(&job, 0, 1, n0);
    small.resources = mem(1);
    a.append_alloc(small);
    assert!(s.select(&job.groups[0], &a, &opts).is_some());

    // Plan B: one allocation as big as the job asks (also revision 1): now nothing fits.
    let mut b = new_plan();
    b.append_alloc(placement(&job, 0, 2, n0));
    assert_eq!(b.node_revision(&n0), a.node_revision(&n0));
    assert!(s.select(&job.groups[0], &b, &opts).is_none());
}

/// A select reads only the nodes it walks past: on 1,000 nodes, ten placements with a
/// limit of log2 build entries for about ten times the limit (and the few the walk reads
/// ahead), not one per node.
#[test]
fn selects_build_entries_only_for_the_nodes_they_walk() {
    let mut c = Cluster::new();
    for n in 0..1_000 {
        c.node(n, |_| {});
    }
    let job = job_asking("web", 10, 10, 10);
    let mut s = stack(&c, &job, CandidateLimit::Log2);
    assert_eq!(s.nodes.entries.len(), 0, "set_nodes builds no entry");
    let chosen = place_all(&mut s, &job, 10);
    assert_eq!(chosen.len(), 10);
    let walked = 10 * CandidateLimit::Log2.resolve(1_000);
    let built = s.nodes.entries.len();
    assert!(
        (walked..=walked + BUILD_AHEAD).contains(&built),
        "{built} entries for {walked} nodes walked"
    );
}
