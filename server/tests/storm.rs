//! A registration storm against a real server: many nodes register and report ready at
//! once while system jobs exist. Every node gets one allocation of every job, and while
//! the storm runs no job has more than two evals pending or blocked in state (one running,
//! one waiting: node changes join the waiting one), sampled on every applied entry.

use crate::common;

use common::*;
use drover_core::mock;
use drover_core::types::*;
use drover_server::ServerConfig;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::sync::watch;

const NODES: u64 = 150;
const JOBS: usize = 3;

/// The most evals one of `jobs` had pending or blocked in any state seen, looking at every
/// applied entry (while it keeps up) until `stop` turns true.
async fn sample_outstanding(
    h: drover_server::ServerHandle,
    jobs: Vec<JobKey>,
    mut stop: watch::Receiver<bool>,
) -> usize {
    let mut applied = h.state().watch_applied();
    let mut peak = 0;
    loop {
        let snap = h.snapshot();
        for key in &jobs {
            let outstanding = snap
                .evals_by_job(key)
                .filter(|e| matches!(e.status, EvalStatus::Pending | EvalStatus::Blocked))
                .count();
            peak = peak.max(outstanding);
        }
        if *stop.borrow() {
            return peak;
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() { return peak },
            _ = stop.changed() => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_storm_places_every_node_with_two_evals_per_system_job_at_most() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::for_tests(dir.path());
    // Each node heartbeats once (ready); none may expire while the storm settles.
    config.heartbeat.min_ttl = Duration::from_secs(300);
    let (server, h) = start_with(config).await;

    let keys: Vec<JobKey> = (0..JOBS)
        .map(|j| mock::system_job(&format!("sys-{j}")).key())
        .collect();
    for j in 0..JOBS {
        register(&h, mock::system_job(&format!("sys-{j}"))).await;
    }
    wait_until(&h, "the registration evals ran", |s| {
        keys.iter()
            .all(|k| s.evals_by_job(k).all(|e| e.is_terminal()))
    })
    .await;

    let (stop, stop_rx) = watch::channel(false);
    let sampler = tokio::spawn(sample_outstanding(h.clone(), keys.clone(), stop_rx));

    // The storm: every node registers and reports ready at once.
    let joins: Vec<_> = (1..=NODES)
        .map(|n| {
            let h = h.clone();
            tokio::spawn(async move { join(&h, n, "").await })
        })
        .collect();
    let mut nodes = BTreeSet::new();
    for j in joins {
        nodes.insert(j.await.expect("node task").creds.node_id);
    }
    assert_eq!(nodes.len() as u64, NODES);

    let snap = wait_until(&h, "every node runs every system job", |s| {
        keys.iter().all(|k| {
            s.allocs_by_job(k)
                .filter(|a| !a.is_terminal())
                .map(|a| a.node_id)
                .collect::<BTreeSet<_>>()
                == nodes
        })
    })
    .await;
    stop.send_replace(true);
    let peak = sampler.await.expect("sampler");

    for key in &keys {
        let mut per_node: BTreeMap<NodeId, usize> = BTreeMap::new();
        for a in snap.allocs_by_job(key).filter(|a| !a.is_terminal()) {
            *per_node.entry(a.node_id).or_default() += 1;
        }
        assert!(
            per_node.values().all(|&n| n == 1),
            "{key}: one allocation per node"
        );
    }
    assert!(
        peak <= 2,
        "a system job had {peak} evals pending or blocked at once during the storm"
    );
    let broker_peak = h.broker_stats().await.unwrap().broker.peak_job_evals;
    assert!(
        broker_peak <= 2,
        "the broker held {broker_peak} evals of one job"
    );
    eprintln!("{NODES} nodes x {JOBS} system jobs placed; at most {peak} evals per job at once");
    server.shutdown().await.unwrap();
}
