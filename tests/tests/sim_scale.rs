//! 1,000 simulated nodes register with a real server and run a system batch job to
//! completion: one allocation per node, every one complete, the job dead.

use drover_agent::sim::{SimConfig, Simulator};
use drover_core::mock;
use drover_core::types::{ClientStatus, JobStatus, JobType, NodeId, NodeStatus};
use drover_tests::{TestServer, eventually};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const NODES: usize = 1_000;
/// Generous for two shared CI cores; the run takes a few seconds when the machine is idle.
const SCALE_DEADLINE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_nodes_run_a_system_batch_job_to_completion() {
    if std::env::var_os("SIM_TRACE").is_some() {
        let _ = tracing_subscriber::fmt().with_env_filter("warn").try_init();
    }
    // The production TTL rule (nodes / 50 per second) with the test minimum would give
    // 1,000 nodes 20 s; a shorter floor would only test how fast a debug build can write.
    let server = TestServer::start_with(|c| {
        c.heartbeat.min_ttl = Duration::from_secs(10);
        c.heartbeat.grace = Duration::from_secs(5);
    })
    .await;
    let started = Instant::now();
    let sim = Simulator::start(SimConfig {
        datacenters: "dc1:3,dc2:1".parse().expect("mix"),
        task_duration: Some(Duration::from_millis(300)),
        ..server.sim_config(NODES, 1000)
    })
    .await
    .expect("simulator starts");
    let registered = started.elapsed();
    let ids: BTreeSet<NodeId> = sim.node_ids().iter().copied().collect();
    assert_eq!(ids.len(), NODES);
    let snap = server.handle().snapshot();
    let statuses: Vec<NodeStatus> = snap
        .nodes()
        .filter(|n| ids.contains(&n.id))
        .map(|n| n.status)
        .collect();
    let ready = statuses.iter().filter(|s| **s == NodeStatus::Ready).count();
    assert_eq!(
        ready,
        NODES,
        "every node is ready once start returns (after {registered:?}); not ready: {:?}",
        statuses
            .iter()
            .filter(|s| **s != NodeStatus::Ready)
            .take(5)
            .collect::<Vec<_>>()
    );
    let in_dc2 = snap.nodes().filter(|n| n.datacenter == "dc2").count();
    assert_eq!(in_dc2, NODES / 4, "the datacenter mix is exact");

    let mut job = mock::job_of("everywhere", JobType::SysBatch, 1);
    job.datacenters = vec!["dc*".into()];
    let key = server.register(job).await;

    eventually(
        "every node completes its allocation",
        SCALE_DEADLINE,
        || async {
            let snap = server.handle().snapshot();
            let allocs: Vec<_> = snap.allocs_by_job(&key).cloned().collect();
            let complete = allocs
                .iter()
                .filter(|a| a.client_status == ClientStatus::Complete)
                .count();
            if std::env::var_os("SIM_TRACE").is_some() {
                let running = allocs
                    .iter()
                    .filter(|a| a.client_status == ClientStatus::Running)
                    .count();
                eprintln!(
                    "{:?}: {} allocs, {running} running, {complete} complete; {:?}",
                    started.elapsed(),
                    allocs.len(),
                    sim.stats().await
                );
            }
            (complete == NODES).then_some(())
        },
    )
    .await;
    let snap = server.handle().snapshot();
    let allocs: Vec<_> = snap.allocs_by_job(&key).cloned().collect();
    assert_eq!(allocs.len(), NODES, "exactly one allocation per node");
    let nodes: BTreeSet<NodeId> = allocs.iter().map(|a| a.node_id).collect();
    assert_eq!(nodes, ids, "every simulated node ran one");
    eventually("the job is dead", SCALE_DEADLINE, || async {
        let snap = server.handle().snapshot();
        (snap.job(&key)?.status == JobStatus::Dead).then_some(())
    })
    .await;
    let stats = sim.stats().await.expect("stats");
    assert_eq!(stats.running_allocs, 0);
    assert_eq!(stats.watching, NODES);
    eprintln!(
        "{NODES} nodes registered and ready in {registered:?}; job complete after {:?}; {stats:?}",
        started.elapsed()
    );

    sim.shutdown().await;
    server.stop().await;
}
