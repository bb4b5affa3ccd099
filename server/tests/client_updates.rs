//! Nodes' allocation reports under load: a burst of reports from many nodes at once is
//! written in a few Raft entries (the server's write coalescer), and every report still
//! lands and is answered.

use crate::common;

use common::*;
use drover_core::fsm::AllocClientUpdate;
use drover_core::mock;
use drover_core::types::*;
use drover_proto::convert::{AllocUpdates, ClientAllocUpdate};
use drover_server::ServerConfig;
use std::time::Duration;

const NODES: u64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_reports_from_many_nodes_shares_a_few_entries() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::for_tests(dir.path());
    // No node may expire while the test runs.
    config.heartbeat.min_ttl = Duration::from_secs(300);
    let (server, h) = start_with(config).await;
    let agents = join_many(&h, NODES).await;
    let job = mock::system_job("everywhere");
    let key = job.key();
    register(&h, job).await;
    let snap = wait_until(&h, "an allocation on every node", |s| {
        s.allocs_by_job(&key).filter(|a| !a.is_terminal()).count() as u64 == NODES
    })
    .await;

    let before = h.raft_log_counts();
    let reports: Vec<_> = agents
        .into_iter()
        .map(|agent| {
            let alloc = snap
                .allocs_by_job(&key)
                .find(|a| a.node_id == agent.creds.node_id)
                .expect("each node has one")
                .clone();
            let h = h.clone();
            tokio::spawn(async move {
                h.update_allocs(AllocUpdates {
                    auth: agent.creds,
                    updates: vec![ClientAllocUpdate {
                        update: AllocClientUpdate {
                            deployment_health: None,
                            alloc_id: alloc.id,
                            client_status: ClientStatus::Running,
                            client_description: "started".into(),
                            task_states: Default::default(),
                        },
                        infra_failure: false,
                        services: None,
                    }],
                })
                .await
            })
        })
        .collect();
    let mut indexes = Vec::new();
    for report in reports {
        indexes.push(report.await.expect("report task").expect("report accepted"));
    }
    let written = h.raft_log_counts().entries - before.entries;

    let snap = h.snapshot();
    for a in snap.allocs_by_job(&key) {
        assert_eq!(a.client_status, ClientStatus::Running, "{}", a.id);
        assert_eq!(a.client_description, "started");
    }
    // Each answer names the entry that holds its report.
    for (index, a) in indexes.iter().zip(snap.allocs_by_job(&key)) {
        assert!(*index >= a.create_index, "answered at {index}");
    }
    assert!(
        written < NODES / 2,
        "{NODES} reports at once took {written} raft entries"
    );
    server.shutdown().await.unwrap();
}
