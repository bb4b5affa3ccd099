//! A registration storm: 1,000 simulated nodes join a server that already runs 5 system
//! jobs. Every job ends with exactly one allocation per node, no job ever holds more than
//! two evals in the broker (one running, one pending: later arrivals supersede the pending
//! one), and each node's joining makes at most one eval per system job.

use drover_agent::sim::{SimConfig, Simulator};
use drover_core::mock;
use drover_core::types::{JobKey, JobType, NodeId, TriggeredBy};
use drover_proto::v1 as pb;
use drover_proto::v1::eval_service_client::EvalServiceClient;
use drover_tests::{TestServer, eventually};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const NODES: usize = 1_000;
const JOBS: usize = 5;
/// Generous for two shared CI cores; the storm settles in seconds on an idle machine.
const STORM_DEADLINE: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_storm_keeps_two_evals_per_system_job() {
    let server = TestServer::start_with(|c| {
        c.heartbeat.min_ttl = Duration::from_secs(10);
        c.heartbeat.grace = Duration::from_secs(5);
    })
    .await;
    let mut keys: Vec<JobKey> = Vec::new();
    for j in 0..JOBS {
        let mut job = mock::job_of(&format!("sys-{j}"), JobType::System, 1);
        job.datacenters = vec!["dc*".into()];
        keys.push(server.register(job).await);
    }

    let sim = Simulator::start(SimConfig {
        datacenters: "dc1:1".parse().expect("mix"),
        ..server.sim_config(NODES, 77)
    })
    .await
    .expect("simulator starts");
    let ids: BTreeSet<NodeId> = sim.node_ids().iter().copied().collect();
    assert_eq!(ids.len(), NODES);

    eventually(
        "every system job runs on every node",
        STORM_DEADLINE,
        || async {
            let snap = server.handle().snapshot();
            keys.iter()
                .all(|k| snap.allocs_by_job(k).filter(|a| !a.is_terminal()).count() >= NODES)
                .then_some(())
        },
    )
    .await;

    // Placed once: one live allocation per (job, node), none stopped as a duplicate.
    let snap = server.handle().snapshot();
    for key in &keys {
        let mut per_node: BTreeMap<NodeId, usize> = BTreeMap::new();
        for a in snap.allocs_by_job(key) {
            *per_node.entry(a.node_id).or_default() += 1;
        }
        assert_eq!(
            per_node.keys().copied().collect::<BTreeSet<_>>(),
            ids,
            "{key}: one allocation on every node"
        );
        let twice: Vec<_> = per_node.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            twice.is_empty(),
            "{key}: placed more than once on {twice:?}"
        );
        let node_evals = snap
            .evals_by_job(key)
            .filter(|e| e.triggered_by == TriggeredBy::NodeUpdate)
            .count();
        assert!(
            node_evals <= NODES,
            "{key}: {node_evals} node-update evals for {NODES} nodes joining"
        );
    }

    // The bound as the broker saw it, read over the API.
    let mut evals = EvalServiceClient::connect(server.url())
        .await
        .expect("client connects");
    let stats = evals
        .broker_stats(pb::BrokerStatsRequest {})
        .await
        .expect("broker stats")
        .into_inner();
    let peak = stats.stats.expect("stats").peak_job_evals;
    assert!(
        (1..=2).contains(&peak),
        "at most one running and one pending eval per job; the peak was {peak}"
    );
    eprintln!("{NODES} nodes x {JOBS} system jobs placed; broker peak {peak} evals per job");

    sim.shutdown().await;
    server.stop().await;
}
