//! One node: bootstrap, writes, reads, durability, restart, snapshots, events.

use super::*;
use openraft::RaftLogReader;
use std::sync::Arc;
use tokio::sync::broadcast;

#[tokio::test]
async fn a_fresh_node_initializes_itself_and_leads() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let node = start_single(dir.path()).await;
    let m = wait_metrics(&node, "membership applied", |m| m.last_applied.is_some()).await;
    let voters: Vec<ServerId> = m.membership_config.membership().voter_ids().collect();
    assert_eq!(voters, vec![1], "a one-member cluster of this node");
    assert!(node.is_leader());
    assert!(dir.path().join(LOG_DIR).is_dir());
    assert!(dir.path().join(SNAPSHOT_DIR).is_dir());
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn writes_commit_apply_and_show_in_snapshots() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let node = start_single(dir.path()).await;
    let state = node.state();

    let i1 = write_ok(&node, register_node(1)).await;
    let i2 = write_ok(&node, register_job(1)).await;
    assert!(i2 > i1, "indexes grow: {i1} then {i2}");
    assert!(
        state.applied_index() >= i2,
        "acknowledged only once applied"
    );

    let (index, snap) = state.indexed_snapshot();
    assert!(index >= i2);
    let n = snap.node(&mock::node_id(1)).expect("node registered");
    assert_eq!(n.create_index, i1);
    let job = snap.job(&job(1).key()).expect("job registered");
    assert_eq!(job.create_index, i2);
    assert!(
        snap.eval(&mock::eval_id(1)).is_some(),
        "eval committed with its job"
    );

    // A refused command is committed, leaves the state alone and says why.
    let unknown = mock::node_id(99);
    let (i3, result) = node
        .client_write(Command::NodeOffline {
            node_id: unknown,
            now: T0,
            evals: vec![],
        })
        .await
        .unwrap();
    assert!(i3 > i2);
    assert_eq!(
        result.unwrap_err(),
        drover_core::fsm::ApplyError::NodeNotFound(unknown),
        "a typed refusal naming the node"
    );
    assert_eq!(state_bytes(&state.snapshot()), state_bytes(&snap));
    assert!(state.applied_index() >= i3);

    // Snapshots already taken do not change.
    write_ok(&node, register_node(2)).await;
    assert!(snap.node(&mock::node_id(2)).is_none());
    assert!(state.snapshot().node(&mock::node_id(2)).is_some());
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn wait_for_index_returns_once_applied_and_times_out_otherwise() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let node = start_single(dir.path()).await;
    let state = node.state();

    let now = state.applied_index();
    let snap = state.wait_for_index(now, Duration::ZERO).await.unwrap();
    assert_eq!(state_bytes(&snap), state_bytes(&state.snapshot()));

    let waiter = {
        let state = state.clone();
        tokio::spawn(async move { state.wait_for_index(now + 1, DEADLINE).await })
    };
    let index = write_ok(&node, register_node(7)).await;
    assert_eq!(index, now + 1);
    let snap = waiter.await.unwrap().expect("the write was applied");
    assert!(
        snap.node(&mock::node_id(7)).is_some(),
        "the snapshot includes it"
    );

    let far = state.applied_index() + 100;
    let err = state
        .wait_for_index(far, Duration::from_millis(30))
        .await
        .unwrap_err();
    assert_eq!(err.wanted, far);
    assert_eq!(err.applied, state.applied_index());
    assert!(err.to_string().contains(&far.to_string()), "{err}");
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn restart_recovers_every_job_node_alloc_and_eval() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let node = start_single(dir.path()).await;
    let last = populate(&node, 4, 6).await;
    let before = node.state().snapshot();
    assert_eq!(
        (
            before.node_count(),
            before.job_count(),
            before.alloc_count(),
            before.eval_count()
        ),
        (4, 6, 12, 6)
    );
    let membership_before = *node.metrics().borrow().membership_config.log_id();
    node.shutdown().await.unwrap();
    drop(node);

    let node = start_single(dir.path()).await;
    let after = node.state().wait_for_index(last, DEADLINE).await.unwrap();
    assert_eq!(
        state_bytes(&after),
        state_bytes(&before),
        "the same state, byte for byte"
    );
    let membership_after = *node.metrics().borrow().membership_config.log_id();
    assert_eq!(membership_after, membership_before, "not re-initialized");

    let next = write_ok(&node, register_node(5)).await;
    assert!(
        next > last,
        "writes continue after the recovered log: {next} > {last}"
    );
    assert_eq!(node.state().snapshot().node_count(), 5);
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_dropped_node_can_be_started_again_on_its_data_dir() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let node = start_single(dir.path()).await;
    let last = populate(&node, 2, 2).await;
    let before = node.state().snapshot();
    // No shutdown: the node's tasks release the log file on their own, and the start waits.
    drop(node);

    let node = start_single(dir.path()).await;
    let after = node.state().wait_for_index(last, DEADLINE).await.unwrap();
    assert_eq!(state_bytes(&after), state_bytes(&before));
    write_ok(&node, register_node(3)).await;
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn restart_after_snapshot_and_purge_recovers_from_both() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(1, dir.path());
    config.logs_kept_after_snapshot = 0;
    let node = RaftNode::start(config.clone()).await.unwrap();
    wait_leader(&node).await;

    let snap_at = populate(&node, 3, 3).await;
    node.trigger_snapshot().await.unwrap();
    wait_metrics(&node, "snapshot built", |m| {
        m.snapshot.is_some_and(|s| s.index >= snap_at)
    })
    .await;
    wait_metrics(&node, "log purged", |m| {
        m.purged.is_some_and(|p| p.index >= snap_at)
    })
    .await;
    assert!(dir.path().join(SNAPSHOT_DIR).join(SNAPSHOT_FILE).is_file());

    // Entries after the snapshot stay in the log only.
    write_ok(&node, register_node(4)).await;
    let last = write_ok(&node, register_job(4)).await;
    let before = node.state().snapshot();
    node.shutdown().await.unwrap();
    drop(node);

    // The purged prefix is gone from the log file.
    let mut log = LogStore::open(&dir.path().join(LOG_DIR), 1, DEADLINE).unwrap();
    let early = log.try_get_log_entries(0..=snap_at).await.unwrap();
    assert!(early.is_empty(), "purged entries remain: {:?}", early.len());
    let tail = log.try_get_log_entries(snap_at + 1..).await.unwrap();
    assert!(tail.iter().any(|e| e.log_id.index == last));
    drop(log);

    let node = RaftNode::start(config).await.unwrap();
    wait_leader(&node).await;
    let after = node.state().wait_for_index(last, DEADLINE).await.unwrap();
    assert_eq!(state_bytes(&after), state_bytes(&before));
    let m = node.metrics().borrow().clone();
    assert!(m.snapshot.is_some_and(|s| s.index >= snap_at), "{m:?}");
    write_ok(&node, register_node(5)).await;
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn snapshots_are_built_every_n_entries() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(1, dir.path());
    config.snapshot_every = 5;
    let node = RaftNode::start(config).await.unwrap();
    wait_leader(&node).await;
    let last = populate(&node, 6, 2).await;
    assert!(last > 5);
    wait_metrics(&node, "policy snapshot", |m| {
        m.snapshot.is_some_and(|s| s.index >= 5)
    })
    .await;
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_appended_entry_is_on_disk_before_the_write_is_acknowledged() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let node = start_single(dir.path()).await;
    let cmd = register_job(3);
    let index = write_ok(&node, cmd.clone()).await;

    // Copy the log as it is now, as a kill -9 would leave it, with the node still running.
    let copy = tempfile::tempdir().unwrap();
    let copied = copy.path().join(LOG_DIR);
    std::fs::create_dir(&copied).unwrap();
    for file in std::fs::read_dir(dir.path().join(LOG_DIR)).unwrap() {
        let file = file.unwrap().path();
        std::fs::copy(&file, copied.join(file.file_name().unwrap())).unwrap();
    }
    let mut log = LogStore::open(&copied, 1, Duration::ZERO).unwrap();
    let entries = log.try_get_log_entries(index..=index).await.unwrap();
    match entries.as_slice() {
        [e] => match &e.payload {
            openraft::EntryPayload::Normal(found) => assert_eq!(found, &cmd),
            other => panic!("entry {index} is not the command: {other:?}"),
        },
        other => panic!("entry {index} is not on disk: {} entries", other.len()),
    }
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn events_of_applied_entries_reach_subscribers_in_index_order() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let (tx, mut rx) = broadcast::channel::<Arc<Vec<drover_core::fsm::Event>>>(256);
    let config = test_config(1, dir.path()).with_events(Arc::new(tx));
    let node = RaftNode::start(config).await.unwrap();
    wait_leader(&node).await;

    let last = populate(&node, 2, 2).await;
    let mut seen = Vec::new();
    while seen.last().is_none_or(|&(i, _, _)| i < last) {
        let batch = tokio::time::timeout(DEADLINE, rx.recv())
            .await
            .expect("events arrive")
            .expect("no lag with a roomy channel");
        let index = batch[0].index;
        assert!(
            batch.iter().all(|e| e.index == index),
            "one batch per entry"
        );
        seen.extend(batch.iter().map(|e| (e.index, e.topic, e.key.clone())));
    }
    let indexes: Vec<Index> = seen.iter().map(|s| s.0).collect();
    assert!(indexes.is_sorted(), "index order: {indexes:?}");
    use drover_core::fsm::Topic;
    let node1 = mock::node_id(1).to_string();
    assert!(
        seen.iter()
            .any(|(_, t, k)| *t == Topic::Node && *k == node1)
    );
    assert!(seen.iter().any(|(_, t, _)| *t == Topic::Job));
    assert!(seen.iter().any(|(_, t, _)| *t == Topic::Evaluation));
    assert!(seen.iter().any(|(_, t, _)| *t == Topic::Allocation));
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_lagging_subscriber_does_not_block_writes() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let (tx, mut slow) = broadcast::channel::<Arc<Vec<drover_core::fsm::Event>>>(4);
    let config = test_config(1, dir.path()).with_events(Arc::new(tx));
    let node = RaftNode::start(config).await.unwrap();
    wait_leader(&node).await;

    // The subscriber reads nothing while 40 entries are applied.
    let writes = async {
        let mut last = 0;
        for n in 1..=40 {
            last = write_ok(&node, register_node(n)).await;
        }
        last
    };
    let last = tokio::time::timeout(DEADLINE, writes)
        .await
        .expect("writes are not held up by the subscriber");
    assert_eq!(node.state().snapshot().node_count(), 40);

    match slow.recv().await {
        Err(broadcast::error::RecvError::Lagged(missed)) => assert!(missed >= 36, "{missed}"),
        other => panic!("expected the laggard to be told it lagged, got {other:?}"),
    }
    // What is left is the newest events, up to the last write.
    let mut newest = 0;
    while let Ok(batch) = slow.try_recv() {
        newest = batch[0].index;
    }
    assert_eq!(newest, last);
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_data_dir_of_another_node_is_refused() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let node = start_single(dir.path()).await;
    node.shutdown().await.unwrap();
    drop(node);
    let err = RaftNode::start(test_config(2, dir.path()))
        .await
        .unwrap_err();
    match &err {
        RaftError::LogStore(LogStoreError::WrongNode {
            found, configured, ..
        }) => assert_eq!((*found, *configured), (1, 2)),
        other => panic!("expected WrongNode, got {other}"),
    }
    assert!(err.to_string().contains(LOG_DIR), "names the log: {err}");
}

#[tokio::test]
async fn corrupt_files_fail_the_start_with_what_and_where() {
    init_tracing();
    // A log whose acknowledged entry was damaged on disk.
    let dir = tempfile::tempdir().unwrap();
    let node = start_single(dir.path()).await;
    let cmd = register_job(7);
    write_ok(&node, cmd.clone()).await;
    node.shutdown().await.unwrap();
    drop(node);
    let marker = drover_core::fsm::encode_command(&cmd);
    let damaged = std::fs::read_dir(dir.path().join(LOG_DIR))
        .unwrap()
        .map(|f| f.unwrap().path())
        .find_map(|file| {
            let mut bytes = std::fs::read(&file).ok()?;
            let at = bytes
                .windows(marker.len())
                .position(|w| w == marker.as_slice())?;
            bytes[at + marker.len() / 2] ^= 0xff;
            std::fs::write(&file, &bytes).unwrap();
            Some(file)
        });
    assert!(damaged.is_some(), "the command is in a log chunk");
    let err = RaftNode::start(test_config(1, dir.path()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RaftError::LogStore(LogStoreError::Open { .. })),
        "{err}"
    );
    assert!(err.to_string().contains(LOG_DIR), "{err}");

    // A snapshot file cut short.
    let dir = tempfile::tempdir().unwrap();
    let node = start_single(dir.path()).await;
    let at = populate(&node, 1, 1).await;
    node.trigger_snapshot().await.unwrap();
    wait_metrics(&node, "snapshot", |m| {
        m.snapshot.is_some_and(|s| s.index >= at)
    })
    .await;
    node.shutdown().await.unwrap();
    drop(node);
    let path = dir.path().join(SNAPSHOT_DIR).join(SNAPSHOT_FILE);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let err = RaftNode::start(test_config(1, dir.path()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RaftError::Snapshot(SnapshotError::Corrupt { .. })),
        "{err}"
    );
    assert!(err.to_string().contains(SNAPSHOT_FILE), "{err}");
}
