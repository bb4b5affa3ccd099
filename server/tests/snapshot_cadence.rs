//! Snapshots follow the log's bytes: with an entry count far out of reach, a server whose
//! log outgrows the byte threshold still takes a snapshot. (That a log below it takes
//! none is `snapshot_cadence::due`'s unit test: proving an absence here would mean
//! sleeping a fixed time.)

use crate::common;

use common::*;
use drover_core::mock;
use drover_server::ServerConfig;
use std::time::Duration;

async fn snapshot_after_jobs(min_log_bytes: u64, jobs: usize) -> Option<u64> {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::for_tests(dir.path());
    config.raft.snapshot_every = 1_000_000;
    config.raft.snapshot_min_log_bytes = min_log_bytes;
    let (server, h) = start_with(config).await;
    for j in 0..jobs {
        register(&h, mock::service_job(&format!("job-{j}"), 1)).await;
    }
    let written = h.raft_log_counts().bytes;
    // The check runs every second: wait a few of them for a snapshot to be asked for
    // and built.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    assert!(
        written >= min_log_bytes,
        "the jobs wrote {written} log bytes, under the {min_log_bytes} the test needs"
    );
    let snapshot = loop {
        let snapshot = h.raft_metrics().snapshot.map(|s| s.index);
        if snapshot.is_some() || tokio::time::Instant::now() >= deadline {
            break snapshot;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    server.shutdown().await.unwrap();
    snapshot
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_that_outgrows_the_threshold_is_snapshotted_without_the_entry_count() {
    let index = snapshot_after_jobs(8 * 1024, 40).await;
    assert!(index.is_some_and(|i| i > 0), "no snapshot: {index:?}");
}
