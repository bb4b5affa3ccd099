use super::*;
use drover_core::mock;
use proptest::prelude::*;

const NOW: u64 = 1_700_000_000_000;

fn behaviour(task_duration: Option<Duration>, failure_rate: f64) -> Behaviour {
    Behaviour {
        seed: 7,
        task_duration,
        batch_duration: None,
        failure_rate,
        register_services: false,
    }
}

fn alloc(n: u64, desired: pb::DesiredStatus, client: pb::ClientStatus) -> pb::Allocation {
    pb::Allocation {
        id: mock::alloc_id(n).to_string(),
        task_group: "web".into(),
        desired_status: desired.into(),
        client_status: client.into(),
        ..Default::default()
    }
}

/// The first message of a watch: the servers' whole view.
fn complete(view: &[pb::Allocation]) -> pb::WatchAllocationsResponse {
    pb::WatchAllocationsResponse {
        allocations: view.to_vec(),
        index: 1,
        removed: Vec::new(),
        complete: true,
        job_types: Default::default(),
    }
}

/// A later message of a watch that was at `before` and is now at `after`: what is new or
/// differs, and the ids that left.
fn delta(before: &[pb::Allocation], after: &[pb::Allocation]) -> pb::WatchAllocationsResponse {
    pb::WatchAllocationsResponse {
        allocations: after
            .iter()
            .filter(|a| !before.contains(a))
            .cloned()
            .collect(),
        index: 2,
        removed: before
            .iter()
            .filter(|b| after.iter().all(|a| a.id != b.id))
            .map(|b| b.id.clone())
            .collect(),
        complete: false,
        job_types: Default::default(),
    }
}

fn run(n: u64) -> pb::Allocation {
    alloc(n, pb::DesiredStatus::Run, pb::ClientStatus::Pending)
}

/// The statuses a node reports after it applied `views` in turn (exiting every timed task
/// between views when `exit` is set).
fn reports(
    b: Behaviour,
    infra: u32,
    exit: bool,
    views: &[Vec<pb::Allocation>],
) -> Vec<(u64, pb::ClientStatus, bool)> {
    let mut node = NodeAllocs::default();
    node.fail_next_as_infra(infra);
    let mut out = Vec::new();
    for view in views {
        let timers = node.apply_server_change(&complete(view), &b, NOW);
        if exit {
            for t in timers {
                assert!(node.task_exited(t.alloc, t.task, NOW + 1));
            }
        }
        for u in node.take_updates() {
            let n = (0..64)
                .find(|n| mock::alloc_id(*n).to_string() == u.alloc_id)
                .expect("a known alloc");
            let status = pb::ClientStatus::try_from(u.client_status).expect("a valid status");
            out.push((n, status, u.infra_failure));
        }
    }
    out
}

#[test]
fn the_node_reports_what_the_mock_driver_did() {
    use pb::ClientStatus::*;
    use pb::DesiredStatus as D;
    let forever = behaviour(None, 0.0);
    let short = behaviour(Some(Duration::from_millis(5)), 0.0);
    let failing = behaviour(Some(Duration::from_millis(5)), 1.0);
    let cases: Vec<(
        &str,
        Behaviour,
        u32,
        bool,
        Vec<Vec<pb::Allocation>>,
        Vec<(u64, pb::ClientStatus, bool)>,
    )> = vec![
        (
            "a new allocation runs",
            forever,
            0,
            false,
            vec![vec![run(1)]],
            vec![(1, Running, false)],
        ),
        (
            "nothing changes, nothing is sent twice",
            forever,
            0,
            false,
            vec![vec![run(1)], vec![alloc(1, D::Run, Running)]],
            vec![(1, Running, false)],
        ),
        (
            "a timed task completes",
            short,
            0,
            true,
            vec![vec![run(1)]],
            vec![(1, Complete, false)],
        ),
        (
            "a task fails at rate 1",
            failing,
            0,
            true,
            vec![vec![run(1)]],
            vec![(1, Failed, false)],
        ),
        (
            "zero duration ends at once",
            behaviour(Some(Duration::ZERO), 0.0),
            0,
            false,
            vec![vec![run(1)]],
            vec![(1, Complete, false)],
        ),
        (
            "stopped by the servers",
            forever,
            0,
            false,
            vec![vec![run(1)], vec![alloc(1, D::Stop, Running)]],
            vec![(1, Running, false), (1, Complete, false)],
        ),
        (
            "lost on the servers: forgotten silently",
            forever,
            0,
            false,
            vec![vec![run(1)], vec![alloc(1, D::Run, Lost)]],
            vec![(1, Running, false)],
        ),
        (
            "terminal on the servers: never started",
            forever,
            0,
            false,
            vec![vec![
                alloc(1, D::Run, Lost),
                alloc(2, D::Stop, Pending),
                alloc(3, D::Run, Complete),
            ]],
            vec![],
        ),
        (
            "infrastructure failures hit the next tasks only",
            forever,
            1,
            false,
            vec![vec![run(1)], vec![alloc(1, D::Run, Failed), run(2)]],
            vec![(1, Failed, true), (2, Running, false)],
        ),
    ];
    for (what, b, infra, exit, views, want) in cases {
        assert_eq!(reports(b, infra, exit, &views), want, "{what}");
    }
}

#[test]
fn reconnect_reports_everything_again_and_refusals_are_retried() {
    let b = behaviour(None, 0.0);
    let mut node = NodeAllocs::default();
    node.apply_server_change(&complete(&[run(1), run(2)]), &b, NOW);
    assert_eq!(node.take_updates().len(), 2);
    assert!(!node.has_dirty());
    node.redirty(&[mock::alloc_id(2)]);
    let again = node.take_updates();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].alloc_id, mock::alloc_id(2).to_string());
    node.mark_all_dirty();
    assert_eq!(node.take_updates().len(), 2);
    assert_eq!(node.running(), 2);
}

#[test]
fn task_events_tell_the_story() {
    let b = behaviour(Some(Duration::from_millis(5)), 1.0);
    let mut node = NodeAllocs::default();
    let timers = node.apply_server_change(&complete(&[run(1)]), &b, NOW);
    assert_eq!(
        timers,
        vec![ExitTimer {
            alloc: mock::alloc_id(1),
            task: 0,
            after: Duration::from_millis(5)
        }]
    );
    assert!(node.task_exited(mock::alloc_id(1), 0, NOW + 5));
    assert!(
        !node.task_exited(mock::alloc_id(1), 0, NOW + 6),
        "a task exits once"
    );
    let update = node.take_updates().remove(0);
    let state = &update.task_states["web"];
    let kinds: Vec<&str> = state.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["Received", "Started", "Terminated"]);
    assert_eq!(state.events[2].exit_code, Some(1));
    assert!(state.failed);
    assert_eq!(state.finished_at_unix_ms, Some(NOW + 5));
}

/// A view as the servers send it: each allocation once, from (number, desired, client).
fn server_view(view: Vec<(u64, i32, i32)>) -> Vec<pb::Allocation> {
    let view: std::collections::BTreeMap<u64, (i32, i32)> =
        view.into_iter().map(|(n, d, c)| (n, (d, c))).collect();
    view.into_iter()
        .map(|(n, (d, c))| pb::Allocation {
            desired_status: d,
            client_status: c,
            ..alloc(n, pb::DesiredStatus::Run, pb::ClientStatus::Pending)
        })
        .collect()
}

#[test]
fn a_delta_leaves_unnamed_allocations_and_forgets_removed_ones() {
    let b = behaviour(None, 0.0);
    let mut node = NodeAllocs::default();
    node.apply_server_change(&complete(&[run(1), run(2), run(3)]), &b, NOW);
    assert_eq!(node.running(), 3);
    let stop_2 = alloc(2, pb::DesiredStatus::Stop, pb::ClientStatus::Running);
    let change = pb::WatchAllocationsResponse {
        allocations: vec![stop_2, run(4)],
        index: 2,
        removed: vec![mock::alloc_id(3).to_string()],
        complete: false,
        job_types: Default::default(),
    };
    node.take_updates();
    node.apply_server_change(&change, &b, NOW);
    // 1 untouched and running, 2 killed, 3 forgotten, 4 started.
    assert_eq!(node.running(), 2);
    let mut reported: Vec<(String, i32)> = node
        .take_updates()
        .into_iter()
        .map(|u| (u.alloc_id, u.client_status))
        .collect();
    reported.sort();
    let mut want = vec![
        (
            mock::alloc_id(2).to_string(),
            i32::from(pb::ClientStatus::Complete),
        ),
        (
            mock::alloc_id(4).to_string(),
            i32::from(pb::ClientStatus::Running),
        ),
    ];
    want.sort();
    assert_eq!(reported, want);
}

#[test]
fn batch_tasks_end_after_the_batch_duration_and_the_rest_run_on() {
    let secs = Duration::from_secs;
    let view = [run(1), run(2), run(3), run(4), run(5)];
    let mut change = complete(&view);
    for (n, t) in [
        (1, pb::JobType::Service),
        (2, pb::JobType::Batch),
        (3, pb::JobType::Sysbatch),
        (4, pb::JobType::System),
    ] {
        change
            .job_types
            .insert(mock::alloc_id(n).to_string(), t.into());
    }
    // (task_duration, batch_duration, allocations with an exit timer and its delay)
    let cases: &[(Option<Duration>, Option<Duration>, &[(u64, Duration)])] = &[
        (None, None, &[]),
        (None, Some(secs(10)), &[(2, secs(10)), (3, secs(10))]),
        (
            Some(secs(3)),
            Some(secs(10)),
            &[
                (1, secs(3)),
                (2, secs(3)),
                (3, secs(3)),
                (4, secs(3)),
                (5, secs(3)),
            ],
        ),
    ];
    for (task_duration, batch_duration, want) in cases {
        let b = Behaviour {
            seed: 7,
            task_duration: *task_duration,
            batch_duration: *batch_duration,
            failure_rate: 0.0,
            register_services: false,
        };
        let mut node = NodeAllocs::default();
        let mut timers: Vec<(AllocId, Duration)> = node
            .apply_server_change(&change, &b, NOW)
            .into_iter()
            .map(|t| (t.alloc, t.after))
            .collect();
        timers.sort();
        let want: Vec<(AllocId, Duration)> =
            want.iter().map(|(n, d)| (mock::alloc_id(*n), *d)).collect();
        assert_eq!(
            timers, want,
            "task_duration {task_duration:?} batch_duration {batch_duration:?}"
        );
    }
}

proptest! {
    /// Following a watch by its deltas leaves the node exactly where following the whole
    /// view every time would: same reports, same running count.
    #[test]
    fn deltas_equal_whole_views(
        views in proptest::collection::vec(
            proptest::collection::vec((0u64..8, 1i32..4, 1i32..7), 0..8), 1..6),
        seed in any::<u64>(),
    ) {
        let b = Behaviour { seed, task_duration: None, batch_duration: None, failure_rate: 0.5, register_services: false };
        let mut whole = NodeAllocs::default();
        let mut by_delta = NodeAllocs::default();
        let mut before: Vec<pb::Allocation> = Vec::new();
        for (i, view) in views.into_iter().enumerate() {
            let view = server_view(view);
            whole.apply_server_change(&complete(&view), &b, NOW);
            let change = if i == 0 { complete(&view) } else { delta(&before, &view) };
            by_delta.apply_server_change(&change, &b, NOW);
            prop_assert_eq!(whole.running(), by_delta.running());
            let report = |n: &mut NodeAllocs| {
                let mut u: Vec<(String, i32)> =
                    n.take_updates().into_iter().map(|u| (u.alloc_id, u.client_status)).collect();
                u.sort();
                u
            };
            prop_assert_eq!(report(&mut whole), report(&mut by_delta));
            before = view;
        }
    }

    /// Whatever the servers say, the node keeps only allocations the servers still hold as
    /// live, and runs at most those the servers want running.
    #[test]
    fn the_node_follows_the_servers(
        views in proptest::collection::vec(
            proptest::collection::vec((0u64..8, 1i32..4, 1i32..7), 0..8), 1..6),
        infra in 0u32..3,
        seed in any::<u64>(),
    ) {
        let b = Behaviour { seed, task_duration: None, batch_duration: None, failure_rate: 0.5, register_services: false };
        let mut node = NodeAllocs::default();
        node.fail_next_as_infra(infra);
        for view in views {
            let view = server_view(view);
            node.apply_server_change(&complete(&view), &b, NOW);
            let wanted = view.iter().filter(|a| desired_run(a) && !server_terminal(a)).map(|a| a.id.clone()).collect::<std::collections::BTreeSet<_>>();
            prop_assert!(node.running() <= wanted.len());
            for u in node.take_updates() {
                let held = view.iter().find(|a| a.id == u.alloc_id);
                prop_assert!(held.is_some_and(|a| !server_terminal(a)), "reported {} the servers hold as terminal or absent", u.alloc_id);
            }
        }
    }
}

/// Job `shop` of one group `web` offering `shop-web` on port `http`, with one tcp check.
fn job_with_a_service(services: bool) -> Arc<Job> {
    use drover_core::types::{Task, TaskGroup};
    let mut group = TaskGroup::new("web", 1, vec![Task::raw_exec("web", "/bin/true")]);
    if services {
        group.services.push(drover_core::mock::tcp_service(
            "${NOMAD_JOB_NAME}-web",
            "http",
            "bench",
        ));
    }
    Arc::new(Job::new(
        "shop",
        drover_core::types::JobType::Service,
        vec![group],
    ))
}

fn service_alloc(n: u64) -> pb::Allocation {
    pb::Allocation {
        namespace: "default".into(),
        job_id: "shop".into(),
        job_version: 3,
        name: "shop.web[0]".into(),
        ports: vec![pb::AllocatedPort {
            label: "http".into(),
            value: 25_001,
            to: 0,
            host_ip: "10.128.0.1".into(),
        }],
        ..run(n)
    }
}

#[test]
fn an_allocation_registers_its_services_once_its_job_is_known_and_drops_them_when_it_stops() {
    let b = Behaviour {
        register_services: true,
        ..behaviour(None, 0.0)
    };
    let mut node = NodeAllocs::default();
    node.apply_server_change(&complete(&[service_alloc(1)]), &b, NOW);
    let awaiting = node.take_awaiting_jobs();
    assert_eq!(
        awaiting,
        [(
            mock::alloc_id(1),
            JobKey {
                namespace: "default".into(),
                job_id: "shop".into(),
                version: 3,
            }
        )]
    );
    assert!(
        !node.has_dirty() && node.take_updates().is_empty(),
        "nothing is reported before the job is known"
    );
    assert!(node.job_known(mock::alloc_id(1), Some(&job_with_a_service(true))));
    let update = node.take_updates().remove(0);
    let set = update.services.expect("a running allocation registers");
    assert_eq!(set.registrations.len(), 1);
    let r = &set.registrations[0];
    assert_eq!(
        (r.service_name.as_str(), r.address.as_str(), r.port),
        ("shop-web", "10.128.0.1", 25_001)
    );
    assert_eq!(r.alloc_id, mock::alloc_id(1).to_string());
    assert_eq!(r.health, i32::from(pb::ServiceHealth::Passing));
    // The servers stop it: its update takes every registration out.
    let stopped = alloc(1, pb::DesiredStatus::Stop, pb::ClientStatus::Running);
    let stopped = pb::Allocation {
        desired_status: stopped.desired_status,
        ..service_alloc(1)
    };
    node.apply_server_change(&complete(&[stopped]), &b, NOW + 1);
    let update = node.take_updates().remove(0);
    assert_eq!(update.services, Some(pb::ServiceSet::default()));
}

#[test]
fn an_allocation_without_services_or_whose_job_cannot_be_read_reports_no_set() {
    let b = Behaviour {
        register_services: true,
        ..behaviour(None, 0.0)
    };
    let cases = [
        ("a job without services", Some(job_with_a_service(false))),
        ("a job that could not be read", None),
    ];
    for (name, job) in cases {
        let mut node = NodeAllocs::default();
        node.apply_server_change(&complete(&[service_alloc(1)]), &b, NOW);
        assert_eq!(node.take_awaiting_jobs().len(), 1, "{name}");
        assert!(node.job_known(mock::alloc_id(1), job.as_ref()), "{name}");
        let updates = node.take_updates();
        assert_eq!(updates.len(), 1, "{name}");
        assert_eq!(updates[0].services, None, "{name}");
    }
    // Services off: no job to read, no set.
    let mut node = NodeAllocs::default();
    node.apply_server_change(&complete(&[service_alloc(1)]), &behaviour(None, 0.0), NOW);
    assert!(node.take_awaiting_jobs().is_empty());
    assert_eq!(node.take_updates()[0].services, None);
}

#[test]
fn an_allocation_updated_in_place_registers_what_its_new_version_offers() {
    let b = Behaviour {
        register_services: true,
        ..behaviour(None, 0.0)
    };
    let mut node = NodeAllocs::default();
    let v3 = service_alloc(1);
    node.apply_server_change(&complete(std::slice::from_ref(&v3)), &b, NOW);
    let first = node.take_awaiting_jobs();
    assert!(node.job_known(mock::alloc_id(1), Some(&job_with_a_service(false))));
    assert_eq!(
        node.take_updates()[0].services,
        None,
        "version 3 offers none"
    );
    // Version 4 adds the service, in place: the same allocation at a new version.
    let v4 = pb::Allocation {
        job_version: 4,
        alloc_modify_index: 9,
        ..v3.clone()
    };
    node.apply_server_change(&delta(&[v3], &[v4]), &b, NOW + 1);
    let again = node.take_awaiting_jobs();
    assert_eq!(again.len(), 1);
    assert_eq!(
        again[0].1,
        JobKey {
            version: 4,
            ..first[0].1.clone()
        }
    );
    assert!(
        node.take_updates().is_empty(),
        "held until version 4 is read"
    );
    assert!(node.job_known(mock::alloc_id(1), Some(&job_with_a_service(true))));
    let set = node.take_updates().remove(0).services.expect("a set");
    assert_eq!(set.registrations.len(), 1);
}
