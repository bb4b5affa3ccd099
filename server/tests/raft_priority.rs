//! The FSM's index helper runs at Raft's priority. Raft's runtime threads ask for a higher
//! priority than the API's (`raft::runtime`); the helper, which runs half of each large
//! batch's apply while openraft's state machine worker waits for it, is a plain thread that
//! inherits the priority of whichever thread first used it. A restart that loaded its
//! snapshot on an API thread left it there, preempted by Raft's own threads while the replay
//! waited for it.
//!
//! Linux only: a thread's nice value is read from `/proc`. Where the process may not raise
//! a priority, every thread keeps the process's and the check holds trivially. One test in
//! this binary: the helper is one per process.

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
async fn the_index_helper_runs_at_rafts_priority_whoever_started_it() {
    // Started from this test's thread, at the process's priority, as a snapshot loaded
    // outside Raft's runtime would.
    assert_eq!(
        drover_core::state::run_on_index_helper(|| 7),
        Some(7),
        "the helper runs jobs"
    );
    let dir = tempfile::tempdir().unwrap();
    let (server, _h) = start(dir.path()).await;

    let raft = nice_of_threads("raft-");
    let helper = nice_of_threads("drover-index");
    assert!(!raft.is_empty(), "no raft runtime thread found");
    assert_eq!(helper.len(), 1, "one helper per process: {helper:?}");
    let raft_nice: Vec<i64> = raft.values().copied().collect();
    assert!(
        raft_nice.windows(2).all(|w| w[0] == w[1]),
        "raft's threads disagree on their priority: {raft:?}"
    );
    assert_eq!(
        helper.values().next(),
        raft_nice.first(),
        "the index helper {helper:?} does not run at raft's priority {raft:?}"
    );

    server.shutdown().await.unwrap();
}
