use super::*;
use drover_core::{ClientStatus, DesiredStatus, NodeHealth, Resources, SuspendReason, mock};
use proptest::prelude::*;

fn row(n: u64, node: u64, client: ClientStatus, modify_index: u64) -> AllocRow {
    let job = mock::service_job("web", 3);
    let mut alloc = mock::alloc(n, &job, mock::node_id(node), n as u32);
    alloc.client_status = client;
    alloc.modify_index = modify_index;
    alloc_row(&alloc)
}

/// What the incremental aggregates must always equal: a fresh count over every allocation.
fn recount(c: &Cluster) -> (HashMap<NodeId, Usage>, HashMap<JobKey, JobCounts>) {
    let mut usage: HashMap<NodeId, Usage> = HashMap::new();
    let mut jobs: HashMap<JobKey, JobCounts> = HashMap::new();
    for a in c.allocs.values() {
        if a.is_live() {
            usage.entry(a.node_id).or_default().add(&a.resources);
        }
        jobs.entry(a.job.clone()).or_default().apply(a.client, true);
    }
    (usage, jobs)
}

fn assert_aggregates(c: &Cluster) {
    assert_eq!(c.health_counts(), HealthCounts::of(c.nodes.values()));
    let (usage, jobs) = recount(c);
    for node in (0..4).map(mock::node_id) {
        assert_eq!(
            c.usage(&node),
            usage.get(&node).copied().unwrap_or_default()
        );
    }
    let web = JobKey::default_ns("web");
    assert_eq!(
        c.job_counts(&web),
        jobs.get(&web).copied().unwrap_or_default()
    );
    for job in ["web", "api"].map(JobKey::default_ns) {
        assert_eq!(
            c.job_evals(&job),
            JobEvals::recount(&job, c.evals.values()),
            "{job}"
        );
    }
}

/// Evaluation `n` of job `job`, with placement failures or not.
fn eval(n: u64, job: &str, modify_index: u64, failed: bool) -> Change {
    let mut e = mock::eval(n, &mock::service_job(job, 3));
    e.modify_index = modify_index;
    if failed {
        e.failed_tg_allocs = std::collections::BTreeMap::from([(
            "web".to_owned(),
            drover_core::AllocMetric::default(),
        )]);
        e.queued_allocations = std::collections::BTreeMap::from([("web".to_owned(), 2)]);
    }
    Change::Eval(Box::new(e))
}

#[test]
fn a_jobs_pending_reasons_follow_its_evaluations() {
    let mut c = Cluster::default();
    let web = JobKey::default_ns("web");
    let reason_id = |c: &Cluster| c.pending_reasons(&web).map(|e| e.id);
    // (change, queued after it, the eval whose failures explain it)
    let steps: Vec<(Change, u32, Option<u64>)> = vec![
        (eval(1, "web", 10, true), 2, Some(1)),
        // A newer evaluation that failed too takes over.
        (eval(2, "web", 20, true), 2, Some(2)),
        // Another job's evaluation changes nothing here.
        (eval(3, "api", 30, false), 2, Some(2)),
        // A newer one placed everything: the failures are history.
        (eval(4, "web", 40, false), 0, None),
        // It goes (garbage collected): eval 2 is the newest again.
        (Change::EvalRemoved(mock::eval_id(4)), 2, Some(2)),
        // Eval 2 is updated without failures: eval 1 holds the reasons, nothing queued.
        (eval(2, "web", 50, false), 0, None),
        (Change::EvalRemoved(mock::eval_id(2)), 2, Some(1)),
    ];
    for (change, queued, reason) in steps {
        let label = format!("{change:?}");
        c.apply(change);
        assert_eq!(c.queued(&web), queued, "{label}");
        assert_eq!(reason_id(&c), reason.map(mock::eval_id), "{label}");
        assert_aggregates(&c);
    }
}

#[test]
fn aggregates_follow_status_changes_moves_and_deletions() {
    let mut c = Cluster::default();
    let steps: Vec<(Change, bool)> = vec![
        (Change::Alloc(row(1, 0, ClientStatus::Pending, 1)), true),
        (Change::Alloc(row(2, 0, ClientStatus::Running, 2)), true),
        (Change::Alloc(row(1, 0, ClientStatus::Running, 3)), false),
        (Change::Alloc(row(2, 0, ClientStatus::Complete, 4)), false),
        (Change::Alloc(row(3, 1, ClientStatus::Running, 5)), true),
        (Change::AllocRemoved(mock::alloc_id(3)), false),
        (Change::AllocRemoved(mock::alloc_id(99)), false),
    ];
    for (change, placed) in steps {
        assert_eq!(c.apply(change.clone()), placed, "{change:?}");
        assert_aggregates(&c);
    }
    let usage = c.usage(&mock::node_id(0));
    assert_eq!(usage.live_allocs, 1);
    assert_eq!(usage.used, Resources::new(100, 256, 0));
}

#[test]
fn stale_changes_are_ignored_so_replays_are_harmless() {
    let mut c = Cluster::default();
    c.apply(Change::Alloc(row(1, 0, ClientStatus::Complete, 9)));
    // An older event for the same allocation (replayed after a snapshot) changes nothing.
    assert!(!c.apply(Change::Alloc(row(1, 0, ClientStatus::Running, 5))));
    assert_eq!(c.allocs[&mock::alloc_id(1)].client, ClientStatus::Complete);
    assert_eq!(c.usage(&mock::node_id(0)).live_allocs, 0);

    let mut node = mock::node(1);
    node.modify_index = 7;
    node.name = "new".into();
    c.apply(Change::Node(Box::new(node.clone())));
    node.modify_index = 3;
    node.name = "old".into();
    c.apply(Change::Node(Box::new(node)));
    assert_eq!(c.nodes[&mock::node_id(1)].name, "new");
}

#[test]
fn loading_a_snapshot_rebuilds_the_aggregates() {
    let mut c = Cluster::default();
    c.apply(Change::Alloc(row(50, 3, ClientStatus::Running, 1)));
    let periods = crate::fixtures::server_health_periods();
    c.load(Snapshot {
        allocs: [row(1, 0, ClientStatus::Running, 1)].into_iter().collect(),
        index: 40,
        health_periods: Some(periods),
        ..Default::default()
    });
    assert_eq!(
        c.health_periods,
        Some(periods),
        "the server's periods are kept"
    );
    assert_eq!(c.usage(&mock::node_id(3)), Usage::default());
    assert_eq!(c.usage(&mock::node_id(0)).live_allocs, 1);
    assert_eq!(c.index, 40);
    assert_aggregates(&c);
}

#[test]
fn the_event_log_is_bounded_and_numbered() {
    let mut c = Cluster::default();
    for i in 0..(EVENT_LOG_LEN as u64 + 5) {
        c.log_event(EventRow {
            seq: 0,
            index: i,
            topic: "node",
            event_type: "node-health",
            key: String::new(),
            summary: String::new(),
            received: drover_core::Timestamp::ZERO,
            payload: None,
        });
    }
    assert_eq!(c.events.len(), EVENT_LOG_LEN);
    assert_eq!(c.events.front().map(|e| e.seq), Some(6));
    assert_eq!(
        c.events.back().map(|e| e.seq),
        Some(EVENT_LOG_LEN as u64 + 5)
    );
}

fn any_change() -> impl Strategy<Value = Change> {
    let status = prop_oneof![
        Just(ClientStatus::Pending),
        Just(ClientStatus::Running),
        Just(ClientStatus::Complete),
        Just(ClientStatus::Failed),
        Just(ClientStatus::Lost),
        Just(ClientStatus::Unknown),
    ];
    prop_oneof![
        4 => (0u64..12, 0u64..4, status, 0u64..50, any::<bool>()).prop_map(
            |(n, node, client, index, stop)| {
                let mut r = row(n, node, client, index);
                if stop {
                    r.desired = DesiredStatus::Stop;
                }
                Change::Alloc(r)
            }
        ),
        1 => (0u64..12).prop_map(|n| Change::AllocRemoved(mock::alloc_id(n))),
        2 => (0u64..4, 0usize..5, 0u64..50).prop_map(|(n, health, index)| {
            let mut node = mock::node(n);
            node.health = [
                NodeHealth::Healthy,
                NodeHealth::Suspended(SuspendReason::New),
                NodeHealth::Suspended(SuspendReason::Lost),
                NodeHealth::Suspended(SuspendReason::Flaky),
                NodeHealth::Offlined,
            ][health];
            node.modify_index = index;
            Change::Node(Box::new(node))
        }),
        1 => (0u64..4).prop_map(|n| Change::NodeRemoved(mock::node_id(n))),
        3 => (0u64..6, any::<bool>(), 0u64..50, any::<bool>()).prop_map(
            |(n, web, index, failed)| eval(n, if web { "web" } else { "api" }, index, failed)
        ),
        1 => (0u64..6).prop_map(|n| Change::EvalRemoved(mock::eval_id(n))),
    ]
}

proptest! {
    #[test]
    fn incremental_aggregates_equal_a_recount(changes in proptest::collection::vec(any_change(), 0..80)) {
        let mut c = Cluster::default();
        for change in changes {
            c.apply(change);
        }
        assert_aggregates(&c);
    }
}

#[test]
fn health_counts_cover_every_set() {
    let snapshot = crate::fixtures::snapshot(40, 0);
    let mut c = Cluster::default();
    c.load(snapshot);
    let counts = c.health_counts();
    assert_eq!(
        counts,
        HealthCounts {
            healthy: 32,
            new: 2,
            lost: 2,
            flaky: 2,
            offlined: 2,
        }
    );
}

/// A `Service` topic event as the server sends it.
fn service_event(
    event_type: drover_proto::v1::EventType,
    r: &drover_core::ServiceRegistration,
) -> Change {
    use drover_proto::v1 as pb;
    let event = pb::Event {
        topic: pb::Topic::Service as i32,
        event_type: event_type as i32,
        key: r.service_name.clone(),
        index: r.modify_index,
        payload: Some(pb::event::Payload::ServiceRegistration(r.into())),
    };
    decode_event(event, drover_core::Timestamp::ZERO)
        .expect("a well-formed service event")
        .0
}

#[test]
fn service_events_add_update_and_remove_registrations() {
    use drover_proto::v1::EventType;
    let mut c = Cluster::default();
    let mut api = crate::fixtures::services(4, 40)
        .into_iter()
        .find(|r| r.service_name == "api")
        .expect("the fixture has an api instance");
    let alloc = api.alloc_id;
    let ids =
        |c: &Cluster| -> Vec<String> { c.services.of_alloc(alloc).map(|r| r.id.clone()).collect() };

    c.apply(service_event(EventType::ServiceRegistered, &api));
    assert_eq!(c.services.get(&api.id), Some(&api));
    assert_eq!(ids(&c), [api.id.clone()]);

    // Its check fails: the same registration, critical.
    let older = api.clone();
    api.health = drover_core::ServiceHealth::Critical;
    api.modify_index += 1;
    c.apply(service_event(EventType::ServiceRegistered, &api));
    assert_eq!(c.services.get(&api.id), Some(&api));
    // A replayed older event changes nothing.
    c.apply(service_event(EventType::ServiceRegistered, &older));
    assert_eq!(c.services.get(&api.id), Some(&api));
    assert_eq!(c.services.len(), 1);

    c.apply(service_event(EventType::ServiceDeregistered, &api));
    assert!(c.services.is_empty());
    assert!(ids(&c).is_empty());
}

/// A `Deployment` topic event as the server sends it.
fn deployment_event(
    event_type: drover_proto::v1::EventType,
    d: &drover_core::Deployment,
) -> Change {
    use drover_proto::v1 as pb;
    let event = pb::Event {
        topic: pb::Topic::Deployment as i32,
        event_type: event_type as i32,
        key: d.id.to_string(),
        index: d.modify_index,
        payload: Some(pb::event::Payload::Deployment(d.into())),
    };
    decode_event(event, drover_core::Timestamp::ZERO)
        .expect("a well-formed deployment event")
        .0
}

#[test]
fn deployment_events_create_update_and_keep_the_newest() {
    use drover_core::DeploymentStatus;
    use drover_proto::v1::EventType;
    let mut c = Cluster::default();
    let mut d = crate::fixtures::deployments().swap_remove(1);
    let key = d.job_key();
    c.apply(deployment_event(EventType::DeploymentStatusUpdate, &d));
    assert_eq!(c.deployments.get(&d.id), Some(&d));
    assert_eq!(c.deployments.latest_of(&key), Some(&d));

    // Its second canary turns healthy, then an operator promotes it.
    let older = d.clone();
    if let Some(web) = d.groups.get_mut("web") {
        web.healthy = 2;
    }
    d.modify_index += 1;
    c.apply(deployment_event(EventType::DeploymentAllocHealth, &d));
    assert_eq!(c.deployments.get(&d.id), Some(&d));
    if let Some(web) = d.groups.get_mut("web") {
        web.promoted = true;
    }
    d.description = drover_core::deployment_describe::PROMOTED.into();
    d.modify_index += 1;
    c.apply(deployment_event(EventType::DeploymentPromotion, &d));
    assert_eq!(c.deployments.get(&d.id), Some(&d));
    // A replayed older event changes nothing.
    c.apply(deployment_event(EventType::DeploymentAllocHealth, &older));
    assert_eq!(c.deployments.get(&d.id), Some(&d));

    // The job's next version: the newer deployment is the job's latest, the old one is
    // cancelled and kept.
    let mut next = d.clone();
    next.id = crate::fixtures::deployment_id(9);
    next.job_version += 1;
    next.create_index = d.modify_index + 1;
    next.modify_index = next.create_index;
    d.status = DeploymentStatus::Cancelled;
    d.modify_index = next.create_index;
    c.apply(deployment_event(EventType::DeploymentStatusUpdate, &d));
    c.apply(deployment_event(EventType::DeploymentStatusUpdate, &next));
    assert_eq!(c.deployments.len(), 2);
    assert_eq!(c.deployments.latest_of(&key), Some(&next));

    // Purging the job takes its deployments with it, as on the servers.
    c.apply(Change::JobRemoved(key.clone()));
    assert!(c.deployments.is_empty());
    assert_eq!(c.deployments.latest_of(&key), None);
}

/// The servers keep a job's newest few deployments and drop older finished ones without
/// an event: the console does the same, and never drops an active one.
#[test]
fn only_a_jobs_newest_finished_deployments_are_kept() {
    use drover_core::DeploymentStatus;
    use drover_core::state::DEPLOYMENTS_KEPT;
    let template = crate::fixtures::deployments().swap_remove(0);
    let version = |n: u64, status| drover_core::Deployment {
        id: crate::fixtures::deployment_id(100 + n),
        job_version: n,
        status,
        create_index: 10 + n,
        modify_index: 10 + n,
        ..template.clone()
    };
    let mut c = Cluster::default();
    // The oldest is still running (paused): it stays whatever comes after it.
    c.apply(Change::Deployment(Box::new(version(
        0,
        DeploymentStatus::Paused,
    ))));
    let total = DEPLOYMENTS_KEPT as u64 + 3;
    for n in 1..total {
        c.apply(Change::Deployment(Box::new(version(
            n,
            DeploymentStatus::Successful,
        ))));
    }
    assert_eq!(c.deployments.len(), DEPLOYMENTS_KEPT);
    let mut kept: Vec<u64> = c.deployments.iter().map(|d| d.job_version).collect();
    kept.sort_unstable();
    let newest = (total - DEPLOYMENTS_KEPT as u64 + 1)..total;
    assert_eq!(kept, std::iter::once(0).chain(newest).collect::<Vec<_>>());
}

fn with_deployment(mut r: AllocRow, deployment: Option<u64>) -> AllocRow {
    r.deployment = deployment.map(|n| DeploymentPart {
        id: crate::fixtures::deployment_id(n),
        canary: n == 0,
        healthy: None,
    });
    r
}

fn any_deployment_change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => (0u64..8, 0u64..20, proptest::option::of(0u64..3)).prop_map(|(n, index, d)| {
            Change::Alloc(with_deployment(row(n, n % 3, ClientStatus::Running, index), d))
        }),
        1 => (0u64..8).prop_map(|n| Change::AllocRemoved(mock::alloc_id(n))),
    ]
}

proptest! {
    /// Whatever the order of allocation changes, each deployment lists exactly the
    /// allocations whose row names it.
    #[test]
    fn each_deployments_allocations_equal_a_recount(
        changes in proptest::collection::vec(any_deployment_change(), 0..60)
    ) {
        let mut c = Cluster::default();
        for change in changes {
            c.apply(change);
        }
        for n in 0..3 {
            let id = crate::fixtures::deployment_id(n);
            let listed: Vec<_> = c.deployments.allocs_of(&id).copied().collect();
            let mut expected: Vec<_> = c
                .allocs
                .values()
                .filter(|a| a.deployment.is_some_and(|p| p.id == id))
                .map(|a| a.id)
                .collect();
            expected.sort_unstable();
            prop_assert_eq!(listed, expected);
        }
    }
}

#[test]
fn a_load_indexes_the_allocations_of_each_deployment() {
    let mut c = Cluster::default();
    c.load(crate::fixtures::snapshot(40, 200));
    let canaries: Vec<_> = c
        .deployments
        .allocs_of(&crate::fixtures::deployment_id(1))
        .copied()
        .collect();
    let mut expected = vec![crate::fixtures::alloc_id(3), crate::fixtures::alloc_id(12)];
    expected.sort_unstable();
    assert_eq!(canaries, expected);
    assert_eq!(c.deployments.len(), crate::fixtures::deployments().len());
}

fn any_deployment_table_change() -> impl Strategy<Value = Change> {
    use drover_core::DeploymentStatus;
    let template = crate::fixtures::deployments().swap_remove(0);
    prop_oneof![
        6 => (0u64..2, 0u64..12, 0u64..40, any::<bool>()).prop_map(
            move |(job, n, index, active)| {
                Change::Deployment(Box::new(drover_core::Deployment {
                    id: crate::fixtures::deployment_id(job * 100 + n),
                    job_id: format!("job-{job}").as_str().into(),
                    job_version: n,
                    status: if active {
                        DeploymentStatus::Running
                    } else {
                        DeploymentStatus::Successful
                    },
                    create_index: n,
                    modify_index: index,
                    ..template.clone()
                }))
            }
        ),
        1 => (0u64..2).prop_map(|job| {
            Change::JobRemoved(JobKey::default_ns(format!("job-{job}").as_str()))
        }),
    ]
}

proptest! {
    /// Whatever the order of deployment events and purges, each job's deployments are
    /// those held for it, its latest is the newest created, and beyond the number the
    /// servers keep only active ones are held.
    #[test]
    fn each_jobs_deployments_equal_a_recount(
        changes in proptest::collection::vec(any_deployment_table_change(), 0..80)
    ) {
        let mut c = Cluster::default();
        for change in changes {
            c.apply(change);
        }
        let mut counted = 0;
        for job in 0..2u64 {
            let key = JobKey::default_ns(format!("job-{job}").as_str());
            let mut held: Vec<_> = c
                .deployments
                .iter()
                .filter(|d| d.job_key() == key)
                .map(|d| (d.create_index, d.id))
                .collect();
            held.sort_unstable();
            let listed: Vec<_> = c
                .deployments
                .of_job(&key)
                .map(|d| (d.create_index, d.id))
                .collect();
            prop_assert_eq!(&listed, &held);
            prop_assert_eq!(
                c.deployments.latest_of(&key).map(|d| d.id),
                held.last().map(|(_, id)| *id)
            );
            let finished = c.deployments.of_job(&key).filter(|d| !d.is_active()).count();
            prop_assert!(
                held.len() <= drover_core::state::DEPLOYMENTS_KEPT || finished <= 1,
                "{} held, {} finished", held.len(), finished
            );
            counted += held.len();
        }
        prop_assert_eq!(counted, c.deployments.len());
    }
}
