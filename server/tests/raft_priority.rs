//! The threads a commit waits for run at Raft's priority. Raft's runtime threads ask for a
//! higher priority than the API's (`raft::runtime`); the log's flush worker, whose fsync
//! every commit waits for, is a plain thread that inherits the priority of the thread that
//! opened the log. Opened from an API thread, it competed with the API's workers at their
//! priority, and a commit's fsync waited behind them under load.
//!
//! Linux only: a thread's nice value is read from `/proc`. Where the process may not raise
//! a priority, every thread keeps the process's and the check holds trivially.

mod common;

use common::*;
use std::collections::BTreeMap;

/// Each of this process's threads whose name starts with `prefix`, with its nice value.
fn nice_of_threads(prefix: &str) -> BTreeMap<u32, i64> {
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = entry.expect("a task entry").path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        if !comm.trim_end().starts_with(prefix) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        // The fields after the parenthesised name start at the state (field 3); nice is
        // field 19.
        let after_name = &stat[stat.rfind(')').expect("stat names the thread") + 2..];
        let nice = after_name
            .split(' ')
            .nth(19 - 3)
            .and_then(|f| f.parse().ok())
            .expect("stat has a nice value");
        let tid = dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse().ok())
            .expect("a task is named by its id");
        found.insert(tid, nice);
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn the_logs_flush_worker_runs_at_rafts_priority() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _h) = start(dir.path()).await;

    let raft = nice_of_threads("raft-");
    let flush = nice_of_threads("chunked_wal");
    assert!(!raft.is_empty(), "no raft runtime thread found");
    assert_eq!(flush.len(), 1, "one log, one flush worker: {flush:?}");
    let raft_nice: Vec<i64> = raft.values().copied().collect();
    assert!(
        raft_nice.windows(2).all(|w| w[0] == w[1]),
        "raft's threads disagree on their priority: {raft:?}"
    );
    assert_eq!(
        flush.values().next(),
        raft_nice.first(),
        "the flush worker {flush:?} does not run at raft's priority {raft:?}"
    );

    server.shutdown().await.unwrap();
}
