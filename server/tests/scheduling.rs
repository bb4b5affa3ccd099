//! Scheduling through the server handle: system and service placements, blocked evals,
//! restarts, invalid jobs.

use crate::common;

use common::*;
use drover_core::mock;
use drover_core::types::*;
use drover_proto::convert::JobRegistration;
use drover_server::ServerError;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_job_places_one_allocation_per_node() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    let agents = join_many(&h, 10).await;
    let reg = register(&h, mock::system_job("sys")).await;
    assert!(reg.eval_id.is_some());
    let snap = wait_until(&h, "10 system allocations", |s| {
        live_allocs(s, "sys").len() == 10
    })
    .await;
    let mut nodes: Vec<NodeId> = live_allocs(&snap, "sys")
        .iter()
        .map(|a| a.node_id)
        .collect();
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 10, "one allocation per node");
    for a in &agents {
        assert!(nodes.contains(&a.creds.node_id));
    }
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_job_of_count_20_is_fully_placed() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    join_many(&h, 10).await;
    let reg = register(&h, mock::service_job("web", 20)).await;
    let snap = wait_until(&h, "20 service allocations", |s| {
        live_allocs(s, "web").len() == 20
    })
    .await;
    let eval = snap.eval(&reg.eval_id.unwrap()).unwrap();
    wait_until(&h, "registration eval complete", |s| {
        s.eval(&eval.id)
            .is_some_and(|e| e.status == EvalStatus::Complete)
    })
    .await;
    let mut names: Vec<String> = live_allocs(&snap, "web")
        .into_iter()
        .map(|a| a.name.to_string())
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 20, "every slot placed once");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_that_cannot_fit_blocks_and_unblocks_when_a_node_joins() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    join_many(&h, 1).await;
    register(&h, big_service_job("big", 3)).await;
    let snap = wait_until(&h, "a blocked eval", |s| {
        s.evals_by_job(&JobKey::default_ns("big"))
            .any(|e| e.status == EvalStatus::Blocked)
    })
    .await;
    assert_eq!(
        live_allocs(&snap, "big").len(),
        1,
        "only one fits on one node"
    );
    eventually(&h, "the leader tracks the blocked eval", || async {
        h.blocked_evals().await.unwrap().len() == 1
    })
    .await;

    join(&h, 2, "").await;
    join(&h, 3, "").await;
    wait_until(&h, "all three placed after nodes joined", |s| {
        live_allocs(s, "big").len() == 3
    })
    .await;
    wait_until(&h, "no blocked eval left", |s| {
        !s.evals_by_job(&JobKey::default_ns("big"))
            .any(|e| e.status == EvalStatus::Blocked)
    })
    .await;
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_on_the_same_data_dir_keeps_everything_and_keeps_scheduling() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    let agents = join_many(&h, 3).await;
    register(&h, mock::service_job("before", 4)).await;
    let before = wait_until(&h, "4 placed", |s| live_allocs(s, "before").len() == 4).await;
    let (jobs, nodes, allocs, evals) = (
        before.job_count(),
        before.node_count(),
        before.alloc_count(),
        before.eval_count(),
    );
    server.shutdown().await.unwrap();

    let mut config = drover_server::ServerConfig::for_tests(dir.path());
    // The test's agents heartbeat again right away; a long failover TTL keeps the nodes
    // up meanwhile.
    config.heartbeat.failover_ttl = std::time::Duration::from_secs(60);
    let (server, h) = start_with(config).await;
    let after = h.snapshot();
    assert_eq!(after.job_count(), jobs);
    assert_eq!(after.node_count(), nodes);
    assert!(after.alloc_count() >= allocs);
    assert!(after.eval_count() >= evals);
    assert_eq!(live_allocs(&after, "before").len(), 4);
    for a in &agents {
        heartbeat(&h, a).await;
    }
    register(&h, mock::service_job("after", 3)).await;
    wait_until(&h, "scheduling continues after restart", |s| {
        live_allocs(s, "after").len() == 3
    })
    .await;
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_job_lists_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    let mut job = mock::service_job("bad", 1);
    job.priority = 0;
    job.groups[0].tasks[0].resources.cpu_mhz = 0;
    job.groups[0].tasks[0].resources.memory_mb = 0;
    let err = h
        .register_job(JobRegistration {
            job,
            enforce_index: None,
        })
        .await
        .unwrap_err();
    let ServerError::InvalidJob(v) = &err else {
        panic!("expected a validation error, got {err:?}");
    };
    assert!(v.len() >= 3, "every problem listed: {v}");
    let paths: Vec<&str> = v.errors.iter().map(|e| e.path.as_str()).collect();
    assert!(paths.iter().any(|p| p.contains("priority")), "{paths:?}");
    assert!(paths.iter().any(|p| p.ends_with("cpu")), "{paths:?}");
    assert!(paths.iter().any(|p| p.ends_with("memory")), "{paths:?}");
    assert_eq!(
        tonic::Status::from(err).code(),
        tonic::Code::InvalidArgument
    );
    assert_eq!(h.snapshot().job_count(), 0, "nothing written");
    server.shutdown().await.unwrap();
}

/// Eight jobs, each wanting static port 8080, registered at once on a server with two
/// workers (one on a one-CPU machine) and one node: whichever plans race to the plan
/// applier, exactly one allocation holds the port, and every other job's eval says the port
/// is taken and blocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_racing_for_one_static_port_place_exactly_one() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    join_many(&h, 1).await;
    let ids: Vec<String> = (0..8).map(|i| format!("port-{i}")).collect();
    let registrations = ids.iter().map(|id| {
        let mut job = mock::service_job(id, 1);
        job.groups[0].network = Some(GroupNetwork {
            ports: vec![PortAsk::fixed("http", 8080)],
        });
        register(&h, job)
    });
    futures::future::join_all(registrations).await;
    // Each job ends placed, or with an eval that failed because the port is taken and a
    // blocked eval that waits for it.
    let told = |s: &drover_core::state::StateSnapshot, id: &str| {
        s.evals_by_job(&JobKey::default_ns(id)).any(|e| {
            e.failed_tg_allocs
                .get("web")
                .is_some_and(|m| m.ports_exhausted.get(&PortShortage::Taken(8080)) == Some(&1))
        })
    };
    let snap = wait_until(&h, "every job placed or told the port is taken", |s| {
        ids.iter().all(|id| {
            let blocked = s
                .evals_by_job(&JobKey::default_ns(id))
                .any(|e| e.status == EvalStatus::Blocked);
            !live_allocs(s, id).is_empty() || (told(s, id) && blocked)
        })
    })
    .await;
    let holders: Vec<Allocation> = ids.iter().flat_map(|id| live_allocs(&snap, id)).collect();
    assert_eq!(
        holders.len(),
        1,
        "one allocation holds the port: {holders:?}"
    );
    assert_eq!(holders[0].ports[0].value, 8080);
    server.shutdown().await.unwrap();
}
