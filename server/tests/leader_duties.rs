//! The leader's background duties through a real server: the failed-eval reaper's
//! follow-ups, cancelling duplicate blocked evals, garbage collection, periodic launches,
//! dispatch, and the node health sweeps (flaky cool-down, lost-grace deletion).

use crate::common;

use common::*;
use drover_core::blocked::DUPLICATE_CANCEL_REASON;
use drover_core::fsm::AllocClientUpdate;
use drover_core::mock;
use drover_core::types::*;
use drover_proto::convert::{AllocUpdates, ClientAllocUpdate, DispatchRequest};
use drover_server::worker::WorkerPoolConfig;
use drover_server::{ServerConfig, ServerError, ServerHandle};
use std::collections::BTreeMap;
use std::time::Duration;

/// Heartbeats `agents` every 150 ms, as their agents would, until aborted.
fn keep_alive(h: &ServerHandle, agents: Vec<Agent>) -> tokio::task::JoinHandle<()> {
    let h = h.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(150));
        loop {
            tick.tick().await;
            for a in &agents {
                let _ = heartbeat_quiet(&h, a).await;
            }
        }
    })
}

async fn heartbeat_quiet(h: &ServerHandle, a: &Agent) -> Result<(), ServerError> {
    h.heartbeat(drover_proto::convert::Heartbeat {
        auth: a.creds.clone(),
        readiness: drover_core::node_health::Readiness::Ready,
        last_snapshot: None,
    })
    .await
    .map(|_| ())
}

fn client_update(alloc: &Allocation, status: ClientStatus, infra: bool) -> ClientAllocUpdate {
    ClientAllocUpdate {
        update: AllocClientUpdate {
            deployment_health: None,
            alloc_id: alloc.id,
            client_status: status,
            client_description: Default::default(),
            task_states: Default::default(),
        },
        infra_failure: infra,
        services: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eval_nacked_past_the_delivery_limit_fails_and_its_follow_up_is_scheduled() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::for_tests(dir.path());
    config.workers.count = Some(0);
    let (server, h) = start_with(config).await;
    join_many(&h, 2).await;
    let first = register(&h, mock::service_job("flaps", 1))
        .await
        .eval_id
        .expect("an eval");

    // Act as a worker that fails every delivery.
    let source = h.eval_source();
    let limit = h.config().broker.delivery_limit;
    for delivery in 1..=limit {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        let d = loop {
            let got = source
                .dequeue(&[SchedulerType::Service], Duration::from_millis(200))
                .await
                .expect("dequeue");
            if let Some(d) = got {
                break d;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "delivery {delivery} never came"
            );
        };
        assert_eq!(d.eval.id, first, "delivery {delivery} is the same eval");
        source.nack(d.eval.id, d.token).await.expect("nack");
    }

    let snap = wait_until(&h, "the eval failed with a follow-up", |s| {
        s.eval(&first)
            .is_some_and(|e| e.status == EvalStatus::Failed)
            && s.evals_by_job(&JobKey::default_ns("flaps"))
                .any(|e| e.triggered_by == TriggeredBy::FailedFollowUp)
    })
    .await;
    let follow_up = snap
        .evals_by_job(&JobKey::default_ns("flaps"))
        .find(|e| e.triggered_by == TriggeredBy::FailedFollowUp)
        .map(|e| (**e).clone())
        .unwrap();
    assert!(
        follow_up.wait_until.is_some() || follow_up.wait.is_some_and(|w| !w.is_zero()),
        "the follow-up waits before it runs: {follow_up:?}"
    );

    // Real workers now pick the follow-up up once its wait is over and place the job.
    h.set_worker_config(WorkerPoolConfig {
        count: 1,
        enabled: [SchedulerType::Service].into_iter().collect(),
    })
    .await
    .expect("workers start");
    wait_until(&h, "the follow-up placed the job", |s| {
        live_allocs(s, "flaps").len() == 1
            && s.eval(&follow_up.id)
                .is_some_and(|e| e.status == EvalStatus::Complete)
    })
    .await;
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_blocked_eval_of_a_job_is_cancelled_as_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    // No node: every eval blocks.
    let first = register(&h, big_service_job("waits", 2))
        .await
        .eval_id
        .unwrap();
    wait_until(&h, "the first eval blocked", |s| {
        evals_of_snap(s, "waits")
            .iter()
            .any(|e| e.status == EvalStatus::Blocked)
    })
    .await;
    let mut changed = big_service_job("waits", 3);
    changed.meta.insert("rev".into(), "2".into());
    register(&h, changed).await;

    let snap = wait_until(&h, "the older blocked eval cancelled", |s| {
        let evals = evals_of_snap(s, "waits");
        evals.iter().any(|e| e.status == EvalStatus::Canceled)
            && evals
                .iter()
                .filter(|e| e.status == EvalStatus::Blocked)
                .count()
                == 1
    })
    .await;
    let cancelled: Vec<Evaluation> = evals_of_snap(&snap, "waits")
        .into_iter()
        .filter(|e| e.status == EvalStatus::Canceled)
        .collect();
    assert!(
        cancelled
            .iter()
            .all(|e| e.status_description == DUPLICATE_CANCEL_REASON),
        "{cancelled:?}"
    );
    let blocked = evals_of_snap(&snap, "waits")
        .into_iter()
        .find(|e| e.status == EvalStatus::Blocked)
        .unwrap();
    assert_ne!(blocked.id, first, "the newer blocked eval is kept");
    // It still unblocks when capacity arrives.
    join_many(&h, 3).await;
    wait_until(&h, "placed after nodes joined", |s| {
        live_allocs(s, "waits").len() == 3
    })
    .await;
    server.shutdown().await.unwrap();
}

fn evals_of_snap(s: &drover_core::state::StateSnapshot, job: &str) -> Vec<Evaluation> {
    s.evals_by_job(&JobKey::default_ns(job))
        .map(|e| (**e).clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_evals_and_allocations_are_garbage_collected_after_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::for_tests(dir.path());
    config.gc.threshold = Duration::from_millis(500);
    config.gc.interval = Duration::from_millis(300);
    let (server, h) = start_with(config).await;
    let agents = join_many(&h, 2).await;
    let alive = keep_alive(&h, agents.clone());
    let eval = register(&h, mock::batch_job("once", 2))
        .await
        .eval_id
        .unwrap();
    let snap = wait_until(&h, "2 placed", |s| live_allocs(s, "once").len() == 2).await;
    let placed = live_allocs(&snap, "once");
    for agent in &agents {
        let updates: Vec<ClientAllocUpdate> = placed
            .iter()
            .filter(|a| a.node_id == agent.creds.node_id)
            .map(|a| client_update(a, ClientStatus::Complete, false))
            .collect();
        if updates.is_empty() {
            continue;
        }
        h.update_allocs(AllocUpdates {
            auth: agent.creds.clone(),
            updates,
        })
        .await
        .expect("completion accepted");
    }
    wait_until(&h, "the eval and both allocations collected", |s| {
        s.eval(&eval).is_none() && placed.iter().all(|a| s.alloc(&a.id).is_none())
    })
    .await;
    // The job itself is not garbage: only its terminal history is.
    assert!(h.snapshot().job(&JobKey::default_ns("once")).is_some());
    alive.abort();
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_periodic_job_launches_children_that_get_placed() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    let agents = join_many(&h, 1).await;
    let alive = keep_alive(&h, agents);
    let mut job = mock::batch_job("nightly", 1);
    job.periodic = Some(PeriodicConfig {
        cron: "* * * * * *".into(),
        prohibit_overlap: false,
        time_zone: String::new(),
        enabled: true,
    });
    let reg = register(&h, job).await;
    assert_eq!(
        reg.eval_id, None,
        "a periodic parent gets no eval of its own"
    );
    let snap = wait_until(&h, "a launched child placed", |s| {
        s.jobs().any(|j| {
            j.parent_id
                .as_ref()
                .is_some_and(|p| p.to_string() == "nightly")
                && s.allocs_by_job(&j.key()).next().is_some()
        })
    })
    .await;
    let child = snap
        .jobs()
        .find(|j| j.parent_id.is_some())
        .map(|j| j.id.to_string())
        .unwrap();
    assert!(child.starts_with("nightly/periodic-"), "child id {child:?}");
    assert!(
        snap.allocs_by_job(&JobKey::default_ns("nightly"))
            .next()
            .is_none(),
        "the parent itself is never placed"
    );
    alive.abort();
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_registers_a_child_with_its_meta_and_refuses_bad_requests() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    let agents = join_many(&h, 1).await;
    let alive = keep_alive(&h, agents);
    let mut job = mock::batch_job("render", 1);
    job.parameterized = Some(ParameterizedConfig {
        payload: PayloadRequirement::Optional,
        meta_required: vec!["frame".into()],
        meta_optional: vec![],
    });
    register(&h, job).await;
    let parent = JobKey::default_ns("render");
    let meta = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };

    let d = h
        .dispatch_job(DispatchRequest {
            parent: parent.clone(),
            payload: b"scene".to_vec(),
            meta: meta(&[("frame", "7")]),
        })
        .await
        .expect("dispatched");
    let snap = wait_until(&h, "the child placed", |s| {
        live_allocs(s, &d.job_id.to_string()).len() == 1
    })
    .await;
    let child = snap.job(&JobKey::default_ns(d.job_id.to_string())).unwrap();
    assert_eq!(
        child.parent_id.as_ref().map(|p| p.to_string()),
        Some("render".into())
    );
    assert_eq!(child.meta.get("frame").map(String::as_str), Some("7"));
    assert_eq!(child.payload, b"scene");
    assert!(snap.eval(&d.eval_id).is_some());

    // (request, what the error must be)
    let cases: Vec<(DispatchRequest, fn(&ServerError) -> bool, &str)> = vec![
        (
            DispatchRequest {
                parent: parent.clone(),
                payload: Vec::new(),
                meta: BTreeMap::new(),
            },
            |e| matches!(e, ServerError::InvalidArgument { reason } if reason.contains("frame")),
            "missing required meta",
        ),
        (
            DispatchRequest {
                parent: parent.clone(),
                payload: Vec::new(),
                meta: meta(&[("frame", "1"), ("colour", "red")]),
            },
            |e| matches!(e, ServerError::InvalidArgument { reason } if reason.contains("colour")),
            "meta key not allowed",
        ),
        (
            DispatchRequest {
                parent: JobKey::default_ns("nope"),
                payload: Vec::new(),
                meta: BTreeMap::new(),
            },
            |e| matches!(e, ServerError::NotFound { .. }),
            "unknown parent",
        ),
        (
            DispatchRequest {
                parent: JobKey::default_ns(d.job_id.to_string()),
                payload: Vec::new(),
                meta: BTreeMap::new(),
            },
            |e| matches!(e, ServerError::FailedPrecondition { .. }),
            "not parameterized",
        ),
    ];
    for (req, is_expected, what) in cases {
        let err = h.dispatch_job(req).await.expect_err(what);
        assert!(is_expected(&err), "{what}: {err:?}");
    }
    alive.abort();
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flaky_node_sits_out_its_cool_down_then_rejoins() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::for_tests(dir.path());
    config.health.flaky_threshold = 2;
    config.health.flaky_cool_down = Duration::from_secs(2);
    let (server, h) = start_with(config).await;
    let agents = join_many(&h, 1).await;
    let agent = agents[0].clone();
    let alive = keep_alive(&h, agents);
    register(&h, mock::batch_job("breaks", 2)).await;
    let snap = wait_until(&h, "2 placed", |s| live_allocs(s, "breaks").len() == 2).await;
    let updates = live_allocs(&snap, "breaks")
        .iter()
        .map(|a| client_update(a, ClientStatus::Failed, true))
        .collect();
    h.update_allocs(AllocUpdates {
        auth: agent.creds.clone(),
        updates,
    })
    .await
    .expect("failures accepted");
    let node = agent.creds.node_id;
    let flaky = NodeHealth::Suspended(SuspendReason::Flaky);
    wait_until(&h, "the node flaky", |s| {
        s.node(&node).is_some_and(|n| n.health == flaky)
    })
    .await;
    wait_until(&h, "the node healthy again after its cool-down", |s| {
        s.node(&node)
            .is_some_and(|n| n.health == NodeHealth::Healthy)
    })
    .await;
    alive.abort();
    server.shutdown().await.unwrap();
}

/// Issue 14, item 4: the health event of a node made flaky names the failures' reasons,
/// and `node online` on it is the operator's override: healthy at once, with an event that
/// says so, long before the cool-down ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flaky_node_says_why_and_online_overrides_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::for_tests(dir.path());
    config.health.flaky_threshold = 2;
    config.health.flaky_cool_down = Duration::from_secs(3600);
    let (server, h) = start_with(config).await;
    let agents = join_many(&h, 1).await;
    let agent = agents[0].clone();
    let alive = keep_alive(&h, agents);
    register(&h, mock::batch_job("breaks", 2)).await;
    let snap = wait_until(&h, "2 placed", |s| live_allocs(s, "breaks").len() == 2).await;
    let updates = live_allocs(&snap, "breaks")
        .iter()
        .map(|a| {
            let mut u = client_update(a, ClientStatus::Failed, true);
            u.update.task_states.insert(
                "t",
                TaskState {
                    events: vec![
                        TaskEvent::new(
                            Timestamp::from_millis(1),
                            "Setup Failure",
                            "cannot create alloc dir: No space left on device",
                        )
                        .with_infra_failure(true),
                    ],
                    ..TaskState::default()
                },
            );
            u
        })
        .collect();
    h.update_allocs(AllocUpdates {
        auth: agent.creds.clone(),
        updates,
    })
    .await
    .expect("failures accepted");
    let node = agent.creds.node_id;
    let flaky = NodeHealth::Suspended(SuspendReason::Flaky);
    let snap = wait_until(&h, "the node flaky", |s| {
        s.node(&node).is_some_and(|n| n.health == flaky)
    })
    .await;
    let events: Vec<String> = snap
        .node(&node)
        .unwrap()
        .events
        .iter()
        .map(|e| e.message.clone())
        .collect();
    assert!(
        events
            .iter()
            .any(|m| m.contains("2 infrastructure failures")
                && m.contains("No space left on device")),
        "the health event gives the reasons: {events:?}"
    );

    h.node_online(node).await.expect("online");
    let snap = wait_until(&h, "healthy at once, not after the cool-down", |s| {
        s.node(&node)
            .is_some_and(|n| n.health == NodeHealth::Healthy)
    })
    .await;
    let events: Vec<String> = snap
        .node(&node)
        .unwrap()
        .events
        .iter()
        .map(|e| e.message.clone())
        .collect();
    assert!(
        events.iter().any(|m| m.contains("operator override")),
        "the event names the operator's action: {events:?}"
    );
    alive.abort();
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_node_is_deleted_after_the_grace_unless_offlined() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::for_tests(dir.path());
    config.heartbeat.min_ttl = Duration::from_millis(500);
    config.heartbeat.grace = Duration::from_millis(200);
    config.health.lost_grace = Duration::from_secs(1);
    let (server, h) = start_with(config).await;
    let agents = join_many(&h, 2).await;
    let (gone, kept) = (agents[0].creds.node_id, agents[1].creds.node_id);
    h.node_offline(kept).await.expect("offline");
    // Neither heartbeats again.
    let lost = NodeHealth::Suspended(SuspendReason::Lost);
    wait_until(&h, "the silent node lost", |s| {
        s.node(&gone).is_some_and(|n| n.health == lost)
    })
    .await;
    wait_until(&h, "the lost node deleted after its grace", |s| {
        s.node(&gone).is_none()
    })
    .await;
    let snap = h.snapshot();
    let offlined = snap
        .node(&kept)
        .expect("the offlined node is never deleted");
    assert_eq!(offlined.health, NodeHealth::Offlined);
    server.shutdown().await.unwrap();
}
