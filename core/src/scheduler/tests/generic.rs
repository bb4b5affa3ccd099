//! Service and batch scenarios.

use super::*;
use crate::mock;
use std::time::Duration;

fn counts(placed: usize, stopped: usize) -> Counts {
    Counts {
        placed,
        stopped,
        ..Counts::default()
    }
}

fn names(w: &World, job: &Job) -> Vec<String> {
    w.live(job).into_keys().collect()
}

fn expected_names(job: &str, n: u32) -> Vec<String> {
    let mut v: Vec<String> = (0..n).map(|i| format!("{job}.web[{i}]")).collect();
    v.sort();
    v
}

#[test]
fn service_count_10_on_10_nodes_names_0_to_9() {
    let mut w = World::with_nodes(10);
    let job = mock::service_job("web", 10);
    let eval = w.run_job(&job);
    assert_eq!(w.counts(), counts(10, 0));
    assert_eq!(names(&w, &job), expected_names("web", 10));
    let e = w.stored_eval(eval.id);
    assert_eq!(
        (e.status, e.queued_allocations["web"]),
        (EvalStatus::Complete, 0)
    );
    assert!(w.h.created.is_empty());
}

#[test]
fn service_with_no_nodes_makes_no_plan_and_one_blocked_eval_with_coalesced_failures() {
    let mut w = World::new();
    let eval = w.run_job(&mock::service_job("web", 10));
    assert!(w.h.plans.is_empty(), "nothing to commit");
    assert_eq!(w.h.created.len(), 1);
    let blocked = &w.h.created[0];
    assert_eq!(
        (blocked.status, blocked.triggered_by),
        (EvalStatus::Blocked, TriggeredBy::QueuedAllocs)
    );
    let e = w.stored_eval(eval.id);
    assert_eq!(e.blocked_eval, Some(blocked.id));
    assert_eq!(e.queued_allocations["web"], 10);
    // Every one of the ten placements failed (issue 14: the count is all of them).
    assert_eq!(e.failed_tg_allocs["web"].coalesced_failures, 10);
}

/// A task is placed only where its driver is: nodes without it (or with it unhealthy) are
/// filtered and counted as `missing driver <name>`, class by class.
#[test]
fn tasks_land_only_on_nodes_with_their_driver() {
    let mut w = World::new();
    for n in 0..5 {
        let mut sim = mock::node(n);
        sim.node_class = "simulated".into();
        sim.attributes.retain(|k, _| !k.starts_with("driver."));
        sim.attributes.insert("driver.mock".into(), "1".into());
        w.node(sim);
    }
    let mut unhealthy = mock::node(5);
    unhealthy.node_class = "sick".into();
    unhealthy
        .attributes
        .insert("driver.raw_exec".into(), "0".into());
    w.node(unhealthy);
    let mut real = mock::node(6);
    real.node_class = "real".into();
    let real_id = real.id;
    w.node(real);
    let mut job = mock::service_job("web", 3);
    job.groups[0].tasks[0].resources = Resources::new(3000, 256, 0);
    let eval = w.run_job(&job);
    let live = w.live(&job);
    assert_eq!(
        live.len(),
        1,
        "one node has raw_exec, with room for one: {live:?}"
    );
    assert!(
        live.values().flatten().all(|a| a.node_id == real_id),
        "{live:?}"
    );
    let e = w.stored_eval(eval.id);
    let failed = &e.failed_tg_allocs["web"];
    assert_eq!(
        failed.constraint_filtered.get("missing driver raw_exec"),
        Some(&6),
        "{failed:?}"
    );
    assert_eq!(
        crate::scheduler::feasible::missing_driver("missing driver raw_exec"),
        Some("raw_exec")
    );
}

#[test]
fn blocked_eval_records_class_eligibility_without_escaping() {
    let mut w = World::new();
    let mut full = mock::node(0);
    full.node_class = "a".into();
    full.resources = Resources::new(50, 50, 0);
    w.node(full);
    let mut windows = mock::node(1);
    windows.node_class = "windows".into();
    windows
        .attributes
        .insert("kernel.name".into(), "windows".into());
    w.node(windows);
    let mut job = mock::service_job("web", 1);
    job.constraints.push(Constraint::new(
        "${attr.kernel.name}",
        Operator::Equal,
        "linux",
    ));
    w.run_job(&job);
    let blocked = &w.h.created[0];
    let want: BTreeMap<String, bool> =
        [("a".to_string(), true), ("windows".to_string(), false)].into();
    assert_eq!(blocked.class_eligibility, want);
    assert!(!blocked.escaped_computed_class);
}

#[test]
fn constraint_failures_say_how_many_nodes_each_constraint_filtered() {
    let mut w = World::with_nodes(4);
    let mut job = mock::service_job("web", 1);
    job.constraints.push(Constraint::new(
        "${attr.kernel.name}",
        Operator::Equal,
        "plan9",
    ));
    let eval = w.run_job(&job);
    let m = &w.stored_eval(eval.id).failed_tg_allocs["web"];
    assert_eq!(
        m.constraint_filtered.get("${attr.kernel.name} = plan9"),
        Some(&4)
    );
    assert_eq!(m.nodes_available.get("dc1"), Some(&4));
}

#[test]
fn exhausted_resources_are_named() {
    let mut w = World::with_nodes(2);
    let mut job = mock::service_job("web", 1);
    job.groups[0].tasks[0].resources.memory_mb = 100_000;
    let eval = w.run_job(&job);
    let m = &w.stored_eval(eval.id).failed_tg_allocs["web"];
    assert_eq!(m.dimension_exhausted.get(&Dimension::Memory), Some(&2));
}

#[test]
fn rolling_update_with_max_parallel_4_stops_4_and_places_4() {
    let mut w = World::with_nodes(10);
    let mut job = mock::service_job("web", 10);
    job.update.max_parallel = 4;
    w.run_job(&job);
    w.set_client_status(&job, ClientStatus::Running);
    job.groups[0].tasks[0]
        .env
        .insert("VERSION".into(), "2".into());
    w.run_job(&job);
    assert_eq!(w.counts(), counts(4, 4));
    let plan = w.h.last_plan().unwrap();
    let ann = &plan.annotations.as_ref().unwrap().desired_tg_updates["web"];
    assert_eq!((ann.destructive_update, ann.ignore), (4, 6));
    for a in plan.node_allocation.values().flatten() {
        assert!(
            a.links.get().previous_allocation.is_some(),
            "a replacement records what it replaces"
        );
    }
    assert_eq!(
        w.live_count(&job),
        10,
        "stops and placements commit together"
    );
    assert_eq!(w.h.created.len(), 0);
    assert!(w.h.state.evals().any(
        |e| e.triggered_by == TriggeredBy::RollingUpdate && e.wait == Some(job.update.stagger)
    ));
}

#[test]
fn rolling_update_waits_while_new_allocations_are_still_starting() {
    let mut w = World::with_nodes(10);
    let mut job = mock::service_job("web", 10);
    job.update.max_parallel = 4;
    w.run_job(&job);
    w.set_client_status(&job, ClientStatus::Running);
    job.groups[0].tasks[0]
        .env
        .insert("VERSION".into(), "2".into());
    w.run_job(&job);
    let eval = w.node_eval(&job, TriggeredBy::RollingUpdate);
    w.run(&eval);
    assert_eq!(w.counts(), counts(0, 0), "the first round is still pending");
    let started: Vec<_> = w
        .live(&job)
        .into_values()
        .flatten()
        .filter(|a| a.job_version == 1)
        .collect();
    w.client_update(&started, ClientStatus::Running);
    let eval = w.node_eval(&job, TriggeredBy::RollingUpdate);
    w.run(&eval);
    assert_eq!(
        w.counts(),
        counts(4, 4),
        "the next round goes once the first runs"
    );
}

#[test]
fn in_place_update_when_only_non_destructive_fields_change() {
    let mut w = World::with_nodes(3);
    let mut job = mock::service_job("web", 3);
    w.run_job(&job);
    job.groups[0].tasks[0].kill_timeout = Duration::from_secs(20);
    job.priority = 70;
    w.run_job(&job);
    assert_eq!(
        w.counts(),
        Counts {
            in_place: 3,
            ..Counts::default()
        }
    );
    assert!(w.live(&job).values().flatten().all(|a| a.job_version == 1));
}

/// Rows: a change that alone would be in place, to a job whose node no longer takes it
/// (a new constraint, a driver gone from the node): the allocation is replaced, never left
/// on a node the job now forbids.
#[test]
fn an_in_place_update_rechecks_the_node() {
    let rows: Vec<(&str, fn(&mut Job), fn(&mut Node), Counts)> = vec![
        (
            "only the kill timeout",
            |j| j.groups[0].tasks[0].kill_timeout = Duration::from_secs(20),
            |_| {},
            Counts {
                in_place: 1,
                ..Counts::default()
            },
        ),
        (
            "a constraint the node now fails",
            |j| {
                j.constraints.push(Constraint::new(
                    "${node.class}",
                    Operator::NotEqual,
                    "simulated",
                ))
            },
            |_| {},
            Counts {
                placed: 1,
                stopped: 1,
                ..Counts::default()
            },
        ),
        (
            "the node lost the task's driver",
            |j| j.groups[0].tasks[0].kill_timeout = Duration::from_secs(20),
            |n| {
                n.attributes.insert("driver.raw_exec".into(), "0".into());
            },
            Counts {
                placed: 1,
                stopped: 1,
                ..Counts::default()
            },
        ),
    ];
    for (name, change, drift, want) in rows {
        let mut w = World::new();
        let mut sim = mock::node(0);
        sim.node_class = "simulated".into();
        let sim_id = w.node(sim.clone());
        let mut job = mock::service_job("web", 1);
        w.run_job(&job);
        assert!(
            w.live(&job).values().flatten().all(|a| a.node_id == sim_id),
            "{name}"
        );
        let real = w.node(mock::node(1));
        drift(&mut sim);
        w.node(sim);
        change(&mut job);
        w.run_job(&job);
        assert_eq!(w.counts(), want, "{name}");
        if want.in_place == 0 {
            let live: Vec<_> = w.live(&job).into_values().flatten().collect();
            let running: Vec<_> = live
                .iter()
                .filter(|a| a.desired_status == DesiredStatus::Run)
                .collect();
            assert_eq!(running.len(), 1, "{name}: {live:?}");
            assert_eq!(running[0].node_id, real, "{name}");
        }
    }
}

#[test]
fn scale_from_20_to_10_stops_the_highest_indexes() {
    let mut w = World::with_nodes(10);
    let mut job = mock::service_job("web", 20);
    w.run_job(&job);
    job.groups[0].count = 10;
    w.run_job(&job);
    assert_eq!(
        w.counts(),
        Counts {
            stopped: 10,
            in_place: 10,
            ..Counts::default()
        }
    );
    assert_eq!(names(&w, &job), expected_names("web", 10));
}

#[test]
fn scale_up_fills_the_lowest_free_names() {
    let mut w = World::with_nodes(5);
    let mut job = mock::service_job("web", 2);
    w.run_job(&job);
    job.groups[0].count = 5;
    w.run_job(&job);
    assert_eq!(w.counts().placed, 3);
    assert_eq!(names(&w, &job), expected_names("web", 5));
}

#[test]
fn lost_allocations_on_a_down_node_are_replaced_with_the_same_names() {
    let mut w = World::with_nodes(4);
    let job = mock::service_job("web", 4);
    w.run_job(&job);
    let down = mock::node_id(0);
    let on_down: Vec<compact_str::CompactString> = w
        .live(&job)
        .into_values()
        .flatten()
        .filter(|a| a.node_id == down)
        .map(|a| a.name.clone())
        .collect();
    assert!(!on_down.is_empty());
    w.set_node_status(down, NodeStatus::Down);
    let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
    w.run(&eval);
    let c = w.counts();
    assert_eq!((c.lost, c.placed), (on_down.len(), on_down.len()));
    for a in w.h.last_plan().unwrap().node_allocation.values().flatten() {
        assert!(on_down.contains(&a.name) && a.node_id != down);
    }
    assert_eq!(names(&w, &job), expected_names("web", 4));
}

#[test]
fn node_drain_migrates_without_counting_a_reschedule() {
    let mut w = World::with_nodes(3);
    let job = mock::service_job("web", 3);
    w.run_job(&job);
    let node = mock::node_id(1);
    w.drain_and_mark(node);
    let moving: Vec<_> = w
        .live(&job)
        .into_values()
        .flatten()
        .filter(|a| a.node_id == node)
        .collect();
    let eval = w.node_eval(&job, TriggeredBy::NodeDrain);
    w.run(&eval);
    assert_eq!(w.counts(), counts(moving.len(), moving.len()));
    let plan = w.h.last_plan().unwrap();
    assert_eq!(
        plan.annotations.as_ref().unwrap().desired_tg_updates["web"].migrate,
        moving.len() as u32
    );
    for a in plan.node_allocation.values().flatten() {
        assert_ne!(a.node_id, node);
        assert!(
            moving
                .iter()
                .any(|m| Some(m.id) == a.links.get().previous_allocation)
        );
        assert!(
            a.links.get().reschedule_tracker.is_none(),
            "a migration is not a reschedule"
        );
    }
}

#[test]
fn drain_keeps_allocations_that_cannot_be_rehomed() {
    let mut w = World::with_nodes(1);
    let job = mock::service_job("web", 1);
    w.run_job(&job);
    w.drain_and_mark(mock::node_id(0));
    let eval = w.node_eval(&job, TriggeredBy::NodeDrain);
    w.run(&eval);
    assert_eq!(w.live_count(&job), 1, "nowhere to go: it keeps running");
    assert_eq!(w.h.created.len(), 1, "and a blocked eval waits for room");
}

/// A forced drain (or one past its deadline) removes what is left even with nowhere to go.
#[test]
fn a_forced_drain_stops_what_cannot_be_rehomed() {
    let mut w = World::with_nodes(1);
    let job = mock::service_job("web", 1);
    w.run_job(&job);
    w.drain_and_mark_forced(mock::node_id(0), true);
    let eval = w.node_eval(&job, TriggeredBy::NodeDrain);
    w.run(&eval);
    assert_eq!(w.live_count(&job), 0, "forced off the node");
    assert_eq!(
        w.h.created.len(),
        1,
        "and a blocked eval waits for room elsewhere"
    );
}

fn reschedule_job(attempts: u32) -> Job {
    let mut job = mock::service_job("web", 1);
    job.groups[0].reschedule = ReschedulePolicy {
        attempts,
        interval: Duration::from_secs(3600),
        delay: Duration::ZERO,
        delay_function: DelayFunction::Constant,
        max_delay: Duration::ZERO,
        unlimited: false,
    };
    job
}

#[test]
fn reschedule_attempts_3_chains_three_replacements_and_not_a_fourth() {
    let mut w = World::with_nodes(4);
    let job = reschedule_job(3);
    w.run_job(&job);
    let first = w.live(&job).into_values().flatten().next().unwrap();
    let mut chain = vec![first.id];
    for round in 1..=4 {
        let current: Vec<_> = w.live(&job).into_values().flatten().collect();
        w.client_update(&current, ClientStatus::Failed);
        let eval = w.node_eval(&job, TriggeredBy::AllocFailure);
        w.run(&eval);
        let placed: Vec<_> =
            w.h.last_plan()
                .map(|p| p.node_allocation.values().flatten().cloned().collect())
                .unwrap_or_default();
        if round <= 3 {
            assert_eq!(placed.len(), 1, "round {round} replaces");
            let a = &placed[0];
            assert_eq!(
                a.links.get().previous_allocation,
                Some(*chain.last().unwrap())
            );
            assert_eq!(
                a.links
                    .get()
                    .reschedule_tracker
                    .as_ref()
                    .unwrap()
                    .events
                    .len(),
                round
            );
            assert_ne!(
                Some(a.node_id),
                current.first().map(|c| c.node_id),
                "the failed node is avoided"
            );
            chain.push(a.id);
        } else {
            assert!(placed.is_empty(), "the fourth failure is not replaced");
        }
    }
}

#[test]
fn reschedule_later_writes_a_follow_up_eval_and_its_id_on_the_allocation() {
    let mut w = World::with_nodes(2);
    let mut job = reschedule_job(2);
    job.groups[0].reschedule.delay = Duration::from_secs(30);
    w.run_job(&job);
    w.set_client_status(&job, ClientStatus::Failed);
    let eval = w.node_eval(&job, TriggeredBy::AllocFailure);
    w.run(&eval);
    let plan = w.h.last_plan().unwrap().clone();
    assert!(plan.node_allocation.is_empty(), "not yet");
    assert_eq!(plan.evals.len(), 1);
    let follow = &plan.evals[0];
    assert_eq!(
        follow.wait_until,
        Some(NOW.saturating_add(Duration::from_secs(30)))
    );
    let failed = w.h.state.allocs_by_job(&job.key()).next().unwrap().clone();
    assert_eq!(failed.links.get().follow_up_eval_id, Some(follow.id));

    // Running the same failure again does not write a second follow-up.
    let again = w.node_eval(&job, TriggeredBy::AllocFailure);
    w.run(&again);
    assert!(w.h.plans.is_empty());

    // The follow-up itself replaces it.
    w.advance(Duration::from_secs(30));
    let follow = w.stored_eval(follow.id);
    w.run(&follow);
    assert_eq!(w.counts(), counts(1, 1));
}

#[test]
fn batch_never_reruns_a_complete_allocation() {
    let mut w = World::with_nodes(3);
    let job = mock::batch_job("b", 3);
    w.run_job(&job);
    w.set_client_status(&job, ClientStatus::Complete);
    let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
    w.run(&eval);
    assert!(w.h.plans.is_empty());
    assert_eq!(w.h.state.job(&job.key()).unwrap().status, JobStatus::Dead);
}

#[test]
fn batch_reregistered_with_a_new_version_after_completion_places_anew() {
    let mut w = World::with_nodes(5);
    let mut job = mock::batch_job("b", 10);
    w.run_job(&job);
    w.set_client_status(&job, ClientStatus::Complete);
    job.groups[0].tasks[0].config.args = vec!["1".into()];
    w.run_job(&job);
    assert_eq!(w.counts(), counts(10, 0));
}

#[test]
fn batch_failure_is_rescheduled_per_the_batch_policy() {
    let mut w = World::with_nodes(3);
    let job = mock::batch_job("b", 1);
    w.run_job(&job);
    w.set_client_status(&job, ClientStatus::Failed);
    w.advance(Duration::from_secs(5));
    let eval = w.node_eval(&job, TriggeredBy::AllocFailure);
    w.run(&eval);
    assert_eq!(w.counts(), counts(1, 1), "one attempt after 5 s");
    let current: Vec<_> = w.live(&job).into_values().flatten().collect();
    w.client_update(&current, ClientStatus::Failed);
    w.advance(Duration::from_secs(5));
    let eval = w.node_eval(&job, TriggeredBy::AllocFailure);
    w.run(&eval);
    assert!(w.h.plans.is_empty(), "the batch default allows one attempt");
}

#[test]
fn service_replaces_an_allocation_that_exited() {
    let mut w = World::with_nodes(2);
    let job = mock::service_job("web", 1);
    w.run_job(&job);
    w.set_client_status(&job, ClientStatus::Complete);
    let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
    w.run(&eval);
    assert_eq!(w.counts(), counts(1, 0));
}

#[test]
fn stopping_or_purging_a_job_stops_everything() {
    for purge in [false, true] {
        let mut w = World::with_nodes(3);
        let job = mock::service_job("web", 6);
        w.run_job(&job);
        w.h.apply(Command::JobDeregister {
            job: job.key(),
            purge,
            eval: None,
            now: NOW,
        });
        let mut e = Evaluation::new(mock::eval_id(77), &job, TriggeredBy::JobDeregister, NOW);
        e.status = EvalStatus::Pending;
        w.h.apply(Command::EvalUpsert {
            evals: vec![e.clone()],
        });
        w.run(&e);
        assert_eq!(w.counts(), counts(0, 6), "purge={purge}");
        assert_eq!(w.live_count(&job), 0);
    }
}

#[test]
fn a_group_removed_from_the_job_loses_its_allocations() {
    let mut w = World::with_nodes(2);
    let mut job = mock::service_job("web", 2);
    let mut api = job.groups[0].clone();
    api.name = "api".into();
    job.groups.push(api);
    w.run_job(&job);
    job.groups.truncate(1);
    w.run_job(&job);
    let c = w.counts();
    assert_eq!((c.stopped, c.placed), (2, 0));
}

#[test]
fn every_plan_refused_fails_the_eval_after_the_attempt_limit() {
    for (job, attempts) in [(mock::service_job("s", 2), 5), (mock::batch_job("b", 2), 2)] {
        let mut w = World::with_nodes(2);
        w.h.refuse_all = true;
        let eval = w.run_job(&job);
        assert_eq!(w.h.plans.len(), attempts, "{}", job.id);
        let e = w.stored_eval(eval.id);
        assert_eq!(e.status, EvalStatus::Failed);
        assert_eq!(
            e.status_description,
            format!("maximum attempts reached ({attempts})")
        );
        let blocked =
            w.h.created
                .iter()
                .find(|b| Some(b.id) == e.blocked_eval)
                .unwrap();
        assert_eq!(
            (blocked.triggered_by, blocked.status),
            (TriggeredBy::MaxPlanAttempts, EvalStatus::Blocked)
        );
    }
}

#[test]
fn an_unblocked_eval_that_still_cannot_place_is_reblocked_not_duplicated() {
    let mut w = World::new();
    w.run_job(&mock::service_job("web", 1));
    let blocked = w.h.created[0].clone();
    w.run(&blocked);
    assert!(w.h.created.is_empty());
    assert_eq!(w.h.reblocked.len(), 1);
    assert_eq!(w.h.reblocked[0].id, blocked.id);
}

#[test]
fn a_blocked_eval_places_once_a_node_joins() {
    let mut w = World::new();
    let job = mock::service_job("web", 2);
    w.run_job(&job);
    let blocked = w.stored_eval(w.h.created[0].id);
    w.node(mock::node(0));
    w.run(&blocked);
    assert_eq!(w.counts(), counts(2, 0));
    assert_eq!(w.stored_eval(blocked.id).status, EvalStatus::Complete);
}

#[test]
fn only_healthy_schedulable_nodes_receive_placements() {
    let mut w = World::new();
    let mut nodes = Vec::new();
    for (i, health) in [
        NodeHealth::Suspended(SuspendReason::New),
        NodeHealth::Suspended(SuspendReason::Lost),
        NodeHealth::Suspended(SuspendReason::Flaky),
        NodeHealth::Offlined,
    ]
    .into_iter()
    .enumerate()
    {
        let mut n = mock::node(i as u64);
        n.health = health;
        nodes.push(w.node(n));
    }
    let healthy = w.node(mock::node(9));
    let job = mock::service_job("web", 3);
    w.run_job(&job);
    assert!(
        w.live(&job)
            .values()
            .flatten()
            .all(|a| a.node_id == healthy)
    );
}

#[test]
fn binpack_fills_one_node_and_spread_uses_both() {
    for (algorithm, want_nodes) in [
        (SchedulerAlgorithm::Binpack, 1),
        (SchedulerAlgorithm::Spread, 2),
    ] {
        let mut w = World::with_nodes(2);
        let config = SchedulerConfig {
            algorithm,
            ..Default::default()
        };
        w.h.apply(Command::SchedulerConfig {
            config,
            cas_index: None,
        });
        let mut busy = mock::service_job("busy", 1);
        busy.groups[0].tasks[0].resources = Resources::new(2000, 4096, 0);
        w.run_job(&busy);
        let busy_node = w
            .live(&busy)
            .into_values()
            .flatten()
            .next()
            .unwrap()
            .node_id;
        let job = mock::batch_job("b", 1);
        w.run_job(&job);
        let placed = w.live(&job).into_values().flatten().next().unwrap().node_id;
        let used: std::collections::BTreeSet<_> = [busy_node, placed].into();
        assert_eq!(used.len(), want_nodes, "{algorithm:?}");
    }
}

#[test]
fn snapshot_affinity_prefers_an_idle_node_that_last_ran_the_snapshot() {
    let mut w = World::with_nodes(50);
    let mut warm = mock::node(50);
    warm.last_snapshot = Some("snap-42".into());
    let warm = w.node(warm);
    let mut job = mock::batch_job("b", 1);
    job.groups[0].tasks[0].snapshot = Some("snap-42".into());
    w.run_job(&job);
    assert_eq!(
        w.live(&job).into_values().flatten().next().unwrap().node_id,
        warm
    );
}

#[test]
fn distinct_hosts_never_puts_two_allocations_on_one_node() {
    let mut w = World::with_nodes(3);
    let mut job = mock::service_job("web", 5);
    job.constraints
        .push(Constraint::new("", Operator::DistinctHosts, "true"));
    let eval = w.run_job(&job);
    assert_eq!(w.counts().placed, 3);
    assert_eq!(w.stored_eval(eval.id).queued_allocations["web"], 2);
}

#[test]
fn job_anti_affinity_spreads_a_small_job_over_equal_nodes() {
    let mut w = World::with_nodes(3);
    let job = mock::service_job("web", 3);
    w.run_job(&job);
    let nodes: std::collections::BTreeSet<_> =
        w.live(&job).values().flatten().map(|a| a.node_id).collect();
    assert_eq!(nodes.len(), 3);
}

#[test]
fn dry_run_reports_changes_without_committing() {
    let mut w = World::with_nodes(3);
    let mut job = mock::service_job("web", 3);
    w.run_job(&job);
    let before = crate::fsm::encode_snapshot(&w.h.state);
    let env = crate::scheduler::Env { now: NOW, seed: 1 };
    let same =
        crate::scheduler::annotate::dry_run(&w.h.state, &job, env, mock::eval_id(900)).unwrap();
    assert!(!same.has_changes(), "{same:?}");
    job.groups[0].count = 5;
    let more =
        crate::scheduler::annotate::dry_run(&w.h.state, &job, env, mock::eval_id(901)).unwrap();
    assert!(more.has_changes());
    assert_eq!(more.desired["web"].place, 2);
    assert_eq!(more.job_version, 1);
    assert_eq!(
        crate::fsm::encode_snapshot(&w.h.state),
        before,
        "a dry run commits nothing"
    );
}

/// `alloc stop` stops one allocation and its eval places a replacement of the same name
/// that follows it (`previous_allocation`), on any node.
#[test]
fn an_operator_stopped_allocation_is_replaced_by_one_that_follows_it() {
    let mut w = World::with_nodes(3);
    let job = mock::service_job("web", 3);
    w.run_job(&job);
    let stopped = w
        .live(&job)
        .into_values()
        .flatten()
        .next()
        .expect("a live allocation");
    let key = job.key();
    let stored = (**w.h.state.job(&key).unwrap()).clone();
    let mut eval = Evaluation::new(mock::eval_id(4242), &stored, TriggeredBy::AllocStop, NOW);
    eval.related_alloc = Some(stopped.id);
    w.h.apply(Command::AllocStop {
        alloc_id: stopped.id,
        eval: eval.clone(),
        now: NOW,
    });
    let eval = w.stored_eval(eval.id);
    w.run(&eval);
    let placed: Vec<_> =
        w.h.last_plan()
            .expect("a plan")
            .node_allocation
            .values()
            .flatten()
            .cloned()
            .collect();
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_eq!(placed[0].name, stopped.name);
    assert_eq!(placed[0].links.get().previous_allocation, Some(stopped.id));
    assert_eq!(w.live_count(&job), 3);
}

/// A plan that commits in full closes its eval in the plan's own entry: the eval complete
/// and, for what did not fit, the blocked eval, at the plan's index, with no write after
/// it. What the eval records is the same as when it closes with writes of its own.
#[test]
fn an_eval_closes_in_the_entry_of_a_plan_committed_in_full() {
    let mut w = World::with_nodes(2);
    let mut job = mock::service_job("web", 3);
    job.groups[0].tasks[0].resources.memory_mb = 5_000;
    let eval = w.run_job(&job);
    assert_eq!(w.counts(), counts(2, 0));
    let [result] = &w.h.results[..] else {
        panic!("one plan, got {}", w.h.results.len());
    };
    assert!(result.closed, "closed with the plan");
    let done = w.stored_eval(eval.id);
    let blocked = w.stored_eval(done.blocked_eval.expect("a blocked eval for the third"));
    assert_eq!(
        (
            done.status,
            done.queued_allocations["web"],
            done.modify_index
        ),
        (EvalStatus::Complete, 1, result.alloc_index)
    );
    assert_eq!(
        (blocked.status, blocked.create_index),
        (EvalStatus::Blocked, result.alloc_index)
    );
    assert_eq!(
        w.h.updated.len(),
        1,
        "the closing is reported as the eval's update"
    );
    assert_eq!(w.h.created.len(), 1);
}
