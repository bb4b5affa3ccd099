//! System and sysbatch scenarios.

use super::*;
use crate::mock;

fn counts(placed: usize, stopped: usize) -> Counts {
    Counts {
        placed,
        stopped,
        ..Counts::default()
    }
}

#[test]
fn system_job_on_10_nodes_places_one_per_node() {
    let mut w = World::with_nodes(10);
    let job = mock::system_job("sys");
    let eval = w.run_job(&job);
    assert_eq!(w.counts(), counts(10, 0));
    let nodes: std::collections::BTreeSet<_> =
        w.live(&job).values().flatten().map(|a| a.node_id).collect();
    assert_eq!(nodes.len(), 10, "one allocation on each node");
    assert_eq!(w.stored_eval(eval.id).status, EvalStatus::Complete);
}

#[test]
fn system_job_with_no_nodes_makes_no_plan_and_blocks_nothing() {
    let mut w = World::new();
    let eval = w.run_job(&mock::system_job("sys"));
    assert!(w.h.plans.is_empty());
    assert!(w.h.created.is_empty(), "nothing blocked");
    assert_eq!(w.stored_eval(eval.id).status, EvalStatus::Complete);
}

#[test]
fn system_destructive_change_with_max_parallel_5_stops_5_and_places_5() {
    let mut w = World::with_nodes(10);
    let mut job = mock::system_job("sys");
    job.update.max_parallel = 5;
    w.run_job(&job);
    w.set_client_status(&job, ClientStatus::Running);
    job.groups[0].tasks[0].config.args = vec!["7200".into()];
    w.run_job(&job);
    assert_eq!(w.counts(), counts(5, 5));
    let plan = w.h.last_plan().unwrap();
    for (node, allocs) in &plan.node_allocation {
        assert!(
            plan.node_update[node].len() == 1 && allocs.len() == 1,
            "replaced on the same node"
        );
    }
    assert!(
        w.h.state
            .evals()
            .any(|e| e.triggered_by == TriggeredBy::RollingUpdate),
        "the next round is scheduled"
    );
}

#[test]
fn system_job_deregistered_stops_every_allocation() {
    let mut w = World::with_nodes(10);
    let job = mock::system_job("sys");
    w.run_job(&job);
    w.h.apply(Command::JobDeregister {
        job: job.key(),
        purge: false,
        eval: None,
        now: NOW,
    });
    let eval = w.node_eval(&job, TriggeredBy::JobDeregister);
    w.run(&eval);
    assert_eq!(w.counts(), counts(0, 10));
    assert_eq!(w.live_count(&job), 0);
}

#[test]
fn system_node_down_or_drained_loses_its_allocation_and_gets_nothing() {
    for drained in [false, true] {
        let mut w = World::with_nodes(3);
        let job = mock::system_job("sys");
        w.run_job(&job);
        let node = mock::node_id(1);
        if drained {
            w.drain_and_mark(node);
        } else {
            w.set_node_status(node, NodeStatus::Down);
        }
        let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
        w.run(&eval);
        let c = w.counts();
        assert_eq!(c.placed, 0, "drained={drained}: nothing placed");
        assert_eq!(c.stopped + c.lost, 1, "drained={drained}");
        assert!(w.live(&job).values().flatten().all(|a| a.node_id != node));
    }
}

/// Issue 14, item 2: "no new work here" (offlined, ineligible, suspended) keeps what runs;
/// only a node that no longer matches the job loses its system allocation.
#[test]
fn system_node_changes_keep_or_stop_by_one_rule() {
    // (what happens to node 2, stopped after the node-update eval)
    let cases: Vec<(&str, fn(&mut World), usize)> = vec![
        (
            "offlined",
            |w| {
                w.h.apply(Command::NodeOffline {
                    node_id: mock::node_id(2),
                    now: NOW,
                    evals: vec![],
                })
            },
            0,
        ),
        (
            "ineligible",
            |w| {
                w.h.apply(Command::NodeEligibility {
                    node_id: mock::node_id(2),
                    eligibility: Eligibility::Ineligible,
                    now: NOW,
                    evals: vec![],
                })
            },
            0,
        ),
        (
            "suspended lost",
            |w| {
                w.h.apply(Command::NodeHealth {
                    node_id: mock::node_id(2),
                    health: NodeHealth::Suspended(SuspendReason::Lost),
                    now: NOW,
                    evals: vec![],
                })
            },
            0,
        ),
        (
            "moved to another datacenter",
            |w| {
                let mut n = mock::node(2);
                n.datacenter = "dc9".into();
                w.node(n);
            },
            1,
        ),
    ];
    for (what, change, stopped) in cases {
        let mut w = World::with_nodes(3);
        let job = mock::system_job("sys");
        w.run_job(&job);
        change(&mut w);
        let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
        w.run(&eval);
        assert_eq!(w.counts(), counts(0, stopped), "{what}");
        let on_node_2 = w
            .live(&job)
            .values()
            .flatten()
            .filter(|a| a.node_id == mock::node_id(2))
            .count();
        assert_eq!(on_node_2, 1 - stopped, "{what}");
    }
}

#[test]
fn system_new_node_gets_one() {
    let mut w = World::with_nodes(3);
    let job = mock::system_job("sys");
    w.run_job(&job);
    w.node(mock::node(3));
    let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
    w.run(&eval);
    assert_eq!(w.counts(), counts(1, 0));
    assert_eq!(
        w.h.last_plan().unwrap().node_allocation.keys().next(),
        Some(&mock::node_id(3))
    );
}

#[test]
fn system_in_place_update_when_only_kill_timeout_changed() {
    let mut w = World::with_nodes(4);
    let mut job = mock::system_job("sys");
    w.run_job(&job);
    job.groups[0].tasks[0].kill_timeout = std::time::Duration::from_secs(30);
    w.run_job(&job);
    assert_eq!(
        w.counts(),
        Counts {
            in_place: 4,
            ..Counts::default()
        }
    );
    assert!(w.live(&job).values().flatten().all(|a| a.job_version == 1));
}

#[test]
fn system_full_node_blocks_an_eval_for_that_node_only() {
    let mut w = World::with_nodes(2);
    let mut small = mock::node(2);
    small.resources = Resources::new(50, 64, 1000);
    w.node(small);
    let eval = w.run_job(&mock::system_job("sys"));
    assert_eq!(w.counts().placed, 2);
    assert_eq!(w.h.created.len(), 1);
    let blocked = &w.h.created[0];
    assert_eq!(
        (blocked.status, blocked.node_id),
        (EvalStatus::Blocked, Some(mock::node_id(2)))
    );
    let m = &blocked.failed_tg_allocs["web"];
    assert_eq!(m.dimension_exhausted.get(&Dimension::Cpu), Some(&1));
    assert_eq!(w.stored_eval(eval.id).queued_allocations["web"], 1);
}

#[test]
fn system_preempts_lower_priority_allocations_when_a_node_is_full() {
    let mut w = World::with_nodes(1);
    let mut low = mock::service_job("low", 1);
    low.priority = 20;
    low.groups[0].tasks[0].resources = Resources::new(3950, 512, 0);
    w.run_job(&low);
    assert_eq!(w.live_count(&low), 1);
    let mut sys = mock::system_job("sys");
    sys.priority = 80;
    w.run_job(&sys);
    let c = w.counts();
    assert_eq!((c.placed, c.preempted), (1, 1));
    let placed = w.live(&sys).into_values().flatten().next().unwrap();
    assert_eq!(placed.links.get().preempted_allocations.len(), 1);
    let victim =
        w.h.state
            .alloc(&placed.links.get().preempted_allocations[0])
            .unwrap();
    assert_eq!(
        (victim.desired_status, victim.links.get().preempted_by),
        (DesiredStatus::Evict, Some(placed.id))
    );
    // Issue 14, item 13: the preempted job is re-evaluated, in the same commit.
    let plan = w.h.last_plan().unwrap();
    let again: Vec<_> = plan
        .evals
        .iter()
        .filter(|e| e.triggered_by == TriggeredBy::Preemption)
        .map(|e| e.job_id.to_string())
        .collect();
    assert_eq!(again, ["low"]);
    let stored: Vec<_> =
        w.h.state
            .evals_by_job(&low.key())
            .filter(|e| e.triggered_by == TriggeredBy::Preemption)
            .collect();
    assert_eq!(stored.len(), 1, "committed with the plan");
    // Run it: the node is full of higher-priority work, so the low job waits blocked.
    let eval = (**stored[0]).clone();
    w.run(&eval);
    assert!(
        w.h.created
            .iter()
            .any(|e| e.job_id.as_str() == "low" && e.status == EvalStatus::Blocked),
        "the preempted job waits for capacity in a blocked eval"
    );
}

#[test]
fn system_does_not_preempt_within_ten_priority_points() {
    let mut w = World::with_nodes(1);
    let mut low = mock::service_job("low", 1);
    low.priority = 75;
    low.groups[0].tasks[0].resources = Resources::new(3950, 512, 0);
    w.run_job(&low);
    let mut sys = mock::system_job("sys");
    sys.priority = 80;
    w.run_job(&sys);
    assert_eq!(w.counts().preempted, 0);
    assert_eq!(w.live_count(&sys), 0);
    assert_eq!(w.live_count(&low), 1);
}

#[test]
fn sysbatch_on_10_nodes_places_10_and_never_reruns_complete() {
    let mut w = World::with_nodes(10);
    let job = mock::job_of("once", JobType::SysBatch, 1);
    w.run_job(&job);
    assert_eq!(w.counts(), counts(10, 0));
    assert!(
        w.h.state
            .evals()
            .all(|e| e.triggered_by != TriggeredBy::RollingUpdate),
        "no deployment"
    );
    w.set_client_status(&job, ClientStatus::Complete);
    let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
    w.run(&eval);
    assert!(w.h.plans.is_empty(), "complete work is not re-run");
    assert_eq!(
        w.h.state.job(&job.key()).unwrap().status,
        JobStatus::Dead,
        "dead once every node ran it"
    );
}

#[test]
fn sysbatch_new_node_gets_one() {
    let mut w = World::with_nodes(2);
    let job = mock::job_of("once", JobType::SysBatch, 1);
    w.run_job(&job);
    w.set_client_status(&job, ClientStatus::Complete);
    w.node(mock::node(7));
    let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
    w.run(&eval);
    assert_eq!(w.counts(), counts(1, 0));
}

#[test]
fn system_places_only_on_healthy_nodes_in_its_datacenters() {
    let mut w = World::with_nodes(2);
    let mut other_dc = mock::node(2);
    other_dc.datacenter = "dc2".into();
    w.node(other_dc);
    let mut new = mock::node(3);
    new.health = NodeHealth::Suspended(SuspendReason::New);
    w.node(new);
    let mut ineligible = mock::node(4);
    ineligible.eligibility = Eligibility::Ineligible;
    w.node(ineligible);
    w.run_job(&mock::system_job("sys"));
    let nodes: Vec<_> =
        w.h.last_plan()
            .unwrap()
            .node_allocation
            .keys()
            .copied()
            .collect();
    assert_eq!(nodes, vec![mock::node_id(0), mock::node_id(1)]);
}

#[test]
fn system_disconnected_node_marks_allocation_unknown_inside_window() {
    let mut w = World::with_nodes(2);
    let mut job = mock::system_job("sys");
    job.groups[0].disconnect = Some(DisconnectPolicy {
        lost_after: Some(mock::SEC * 300),
        ..Default::default()
    });
    w.run_job(&job);
    w.set_node_status(mock::node_id(0), NodeStatus::Disconnected);
    let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
    w.run(&eval);
    assert_eq!(
        w.counts(),
        Counts {
            unknown: 1,
            ..Counts::default()
        }
    );
}

/// Issue 14, item 10: nodes a system job's constraints filter out are not its nodes, so
/// an eval that placed on every matching node reports no placement failure; nodes without
/// room are counted once each (the count is every failed placement).
#[test]
fn system_failures_count_only_nodes_that_match() {
    let mut w = World::new();
    for i in 0..4 {
        let mut n = mock::node(i);
        n.node_class = if i < 2 { "gpu".into() } else { "cpu".into() };
        w.node(n);
    }
    let mut job = mock::system_job("sys");
    job.constraints = vec![Constraint::new("${node.class}", Operator::Equal, "gpu")];
    let eval = w.run_job(&job);
    assert_eq!(w.counts(), counts(2, 0));
    let stored = w.stored_eval(eval.id);
    assert!(
        stored.failed_tg_allocs.is_empty(),
        "filtered nodes are no failures: {:?}",
        stored.failed_tg_allocs
    );

    // A group too big for any node: both matching nodes fail, and the count says two.
    let mut big = mock::system_job("big");
    big.constraints = job.constraints.clone();
    big.groups[0].tasks[0].resources.cpu_mhz = 1_000_000;
    let eval = w.run_job(&big);
    let stored = w.stored_eval(eval.id);
    let m = &stored.failed_tg_allocs[&big.groups[0].name];
    assert_eq!(m.coalesced_failures, 2, "{m:?}");
}

/// A system eval closes in its plan's entry when nothing needs a blocked eval per node;
/// one that blocks a full node's share writes those evals first, then closes itself.
#[test]
fn system_eval_closes_with_its_plan_unless_it_blocks_per_node() {
    for (what, full_node, want_closed) in [
        ("every node fits", false, true),
        ("one node full", true, false),
    ] {
        let mut w = World::with_nodes(2);
        if full_node {
            let mut small = mock::node(2);
            small.resources = Resources::new(50, 64, 1000);
            w.node(small);
        }
        let eval = w.run_job(&mock::system_job("sys"));
        let [result] = &w.h.results[..] else {
            panic!("{what}: one plan, got {}", w.h.results.len());
        };
        assert_eq!(result.closed, want_closed, "{what}");
        let done = w.stored_eval(eval.id);
        assert_eq!(done.status, EvalStatus::Complete, "{what}");
        assert_eq!(
            done.modify_index == result.alloc_index,
            want_closed,
            "{what}: closed in the plan's entry"
        );
    }
}
