//! The storage pieces on their own: record codecs, the append-only log and its migration
//! from redb, the snapshot file, and
//! openraft's storage test suite against both stores.

use super::*;
use crate::raft::codec;
use crate::raft::snapshot_data::SnapshotData;
use crate::raft::types::{Entry, LogId, Vote};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{CommittedLeaderId, EntryPayload, Membership, RaftLogReader, RaftSnapshotBuilder};
use std::collections::BTreeSet;

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn command_entry(term: u64, index: u64, n: u64) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(register_node(n)),
    }
}

fn membership_entry(index: u64) -> Entry {
    Entry {
        log_id: log_id(1, index),
        payload: EntryPayload::Membership(Membership::new(vec![BTreeSet::from([1, 2, 3])], None)),
    }
}

#[test]
fn log_entries_round_trip_in_drovers_format() {
    let entries = [
        Entry {
            log_id: log_id(3, 1),
            payload: EntryPayload::Blank,
        },
        command_entry(3, 2, 9),
        membership_entry(3),
    ];
    for e in entries {
        let bytes = codec::encode_entry(&e).unwrap();
        assert_eq!(&bytes[..3], b"dl\x01");
        let back = codec::decode_entry(&bytes).unwrap();
        assert_eq!(back.log_id, e.log_id);
        assert_eq!(back.payload, e.payload);
        assert_eq!(codec::decode_entry_log_id(&bytes).unwrap(), e.log_id);
        assert_eq!(codec::encode_entry(&back).unwrap(), bytes, "deterministic");
    }

    // The command inside is core's versioned encoding, verbatim.
    let e = command_entry(1, 5, 2);
    let bytes = codec::encode_entry(&e).unwrap();
    let cmd = drover_core::fsm::encode_command(&register_node(2));
    assert!(bytes.ends_with(&cmd));
}

#[test]
fn bad_log_records_are_errors_that_say_what() {
    let good = codec::encode_entry(&command_entry(1, 7, 1)).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "bad header"),
        ("bad magic", b"xx\x01rest".to_vec(), "bad header"),
        (
            "newer format",
            [b"dl\x09".as_slice(), &good[3..]].concat(),
            "version 9",
        ),
        ("cut header", good[..5].to_vec(), "malformed log entry"),
        (
            "cut command",
            good[..good.len() - 3].to_vec(),
            "log entry 7",
        ),
    ];
    for (name, bytes, want) in cases {
        let err = codec::decode_entry(&bytes).unwrap_err().to_string();
        assert!(err.contains(want), "{name}: {err}");
    }
    let mut unknown_kind = good.clone();
    // The head is varints; with these small numbers the kind is byte 3 + 4 = 7.
    unknown_kind[6] = 9;
    let err = codec::decode_entry(&unknown_kind).unwrap_err().to_string();
    assert!(err.contains("unknown payload kind 9"), "{err}");
}

#[test]
fn rpc_payloads_round_trip_including_remote_errors() {
    use openraft::error::{Fatal, RaftError};
    use openraft::raft::{VoteRequest, VoteResponse};
    let req = VoteRequest::<ServerId>::new(Vote::new(4, 2), Some(log_id(3, 10)));
    let bytes = codec::encode_rpc("vote", &req).unwrap();
    let back: VoteRequest<ServerId> = codec::decode_rpc("vote", &bytes).unwrap();
    assert_eq!(back, req);

    let reply: Result<VoteResponse<ServerId>, RaftError<ServerId>> =
        Err(RaftError::Fatal(Fatal::Stopped));
    let bytes = codec::encode_rpc("vote", &reply).unwrap();
    let back: Result<VoteResponse<ServerId>, RaftError<ServerId>> =
        codec::decode_rpc("vote", &bytes).unwrap();
    assert_eq!(back, reply);

    let err = codec::decode_rpc::<VoteRequest<ServerId>>("vote", b"dr\x02").unwrap_err();
    assert!(err.to_string().contains("vote format version 2"), "{err}");
}

/// The log's purged and last entries (term 1), its vote (term 2, node 1, committed) and
/// its committed entry (index 8), as both the reopen and the migration tests leave them.
async fn assert_kept(log: &mut LogStore, purged: u64, last: u64) {
    let st = log.get_log_state().await.unwrap();
    assert_eq!(st.last_purged_log_id, Some(log_id(1, purged)));
    assert_eq!(st.last_log_id, Some(log_id(1, last)));
    assert_eq!(
        log.read_vote().await.unwrap(),
        Some(Vote::new_committed(2, 1))
    );
    assert_eq!(log.read_committed().await.unwrap(), Some(log_id(1, 8)));
}

/// Appends through the storage API and waits for the flush callback.
async fn append(log: &mut LogStore, entries: Vec<Entry>) {
    log.blocking_append(entries).await.unwrap();
}

#[tokio::test]
async fn the_log_store_keeps_everything_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_DIR);
    {
        let mut log = LogStore::open(&path, 1, Duration::ZERO).unwrap();
        let st = log.get_log_state().await.unwrap();
        assert_eq!((st.last_purged_log_id, st.last_log_id), (None, None));
        append(&mut log, (1..=10).map(|i| command_entry(1, i, i)).collect()).await;
        log.save_vote(&Vote::new_committed(2, 1)).await.unwrap();
        log.save_committed(Some(log_id(1, 8))).await.unwrap();
        log.truncate(log_id(1, 9)).await.unwrap();
        log.purge(log_id(1, 3)).await.unwrap();
    }
    let mut log = LogStore::open(&path, 1, Duration::ZERO).unwrap();
    assert_kept(&mut log, 3, 8).await;
    let got: Vec<u64> = log
        .try_get_log_entries(0..100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.log_id.index)
        .collect();
    assert_eq!(got, (4..=8).collect::<Vec<_>>());
    let mid = log.try_get_log_entries(5..7).await.unwrap();
    assert_eq!(mid.len(), 2);
    assert_eq!(mid[0].payload, EntryPayload::Normal(register_node(5)));

    // Everything purged: the last log id is the purged one.
    log.purge(log_id(1, 8)).await.unwrap();
    let st = log.get_log_state().await.unwrap();
    assert_eq!(st.last_log_id, Some(log_id(1, 8)));
    assert!(log.try_get_log_entries(..).await.unwrap().is_empty());
}

/// A restart's replay reads the entries committed before it in openraft's chunks, each
/// chunk after the first read ahead while the one before it is applied: every chunk holds
/// exactly its entries, and entries past the committed ones are read as they are asked for.
#[tokio::test]
async fn a_replay_reads_each_committed_chunk_ahead_of_its_apply() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_DIR);
    {
        let mut log = LogStore::open(&path, 1, Duration::ZERO).unwrap();
        append(
            &mut log,
            (1..=200).map(|i| command_entry(1, i, i)).collect(),
        )
        .await;
        log.save_committed(Some(log_id(1, 150))).await.unwrap();
    }
    let mut log = LogStore::open(&path, 1, Duration::ZERO).unwrap();
    let mut reader = log.get_log_reader().await;
    let mut read = Vec::new();
    for (from, to) in [(1, 65), (65, 129), (129, 151), (151, 201)] {
        let chunk = reader.try_get_log_entries(from..to).await.unwrap();
        let indexes: Vec<u64> = chunk.iter().map(|e| e.log_id.index).collect();
        assert_eq!(
            indexes,
            (from..to).collect::<Vec<_>>(),
            "chunk [{from}, {to})"
        );
        read.extend(chunk);
    }
    assert_eq!(
        reader.readahead_hits(),
        2,
        "[65, 129) and [129, 151) were read ahead"
    );
    assert_eq!(read[99].payload, EntryPayload::Normal(register_node(100)));
    // The log and any other reader read for themselves.
    assert_eq!(log.try_get_log_entries(65..129).await.unwrap().len(), 64);
    assert_eq!(log.readahead_hits(), 0);
}

/// Appends submitted while a commit is on disk share the next one: a hundred appends
/// issued together take far fewer than a hundred transactions, and every entry is
/// readable as soon as its append returns and durable across a reopen once answered.
#[tokio::test]
async fn appends_in_flight_together_share_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_DIR);
    {
        let log = LogStore::open(&path, 1, Duration::ZERO).unwrap();
        let appends = (1..=100).map(|i| {
            let mut log = log.clone();
            async move { log.blocking_append([command_entry(1, i, i)]).await }
        });
        for done in futures::future::join_all(appends).await {
            done.unwrap();
        }
        let counts = log.stats().read();
        assert_eq!(counts.entries, 100);
        assert!(
            counts.appends <= 50,
            "100 appends in flight at once took {} commits",
            counts.appends
        );
    }
    let mut log = LogStore::open(&path, 1, Duration::ZERO).unwrap();
    let got: Vec<u64> = log
        .try_get_log_entries(..)
        .await
        .unwrap()
        .iter()
        .map(|e| e.log_id.index)
        .collect();
    assert_eq!(got, (1..=100).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_corrupt_entry_is_a_storage_error_naming_its_index() {
    use crate::raft::log_records::{Payload, WalLogId, WalTypes, sync_blocking};
    use raft_log::api::raft_log_writer::RaftLogWriter;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_DIR);
    {
        // Entry 2 is stored with bytes that are not an entry, behind the store's back.
        std::fs::create_dir_all(&path).unwrap();
        let config = crate::raft::log_store::wal_config(&path);
        let mut wal = raft_log::RaftLog::<WalTypes>::open(Arc::new(config)).unwrap();
        wal.save_user_data(Some(1)).unwrap();
        let rows = (1..=3).map(|i| {
            let bytes = match i {
                2 => b"dl\x01garbage".to_vec(),
                _ => codec::encode_entry(&command_entry(1, i, i)).unwrap(),
            };
            (WalLogId::from(log_id(1, i)), Payload(bytes.into()))
        });
        wal.append(rows).unwrap();
        sync_blocking(&mut wal).unwrap();
    }
    let mut log = LogStore::open(&path, 1, Duration::ZERO).unwrap();
    let err = log
        .try_get_log_entries(1..=3)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("log entry at index 2"), "{err}");
    assert!(err.contains(LOG_DIR), "{err}");
    assert_eq!(log.try_get_log_entries(3..=3).await.unwrap().len(), 1);
}

/// The chunk files of the log in `dir`, oldest first.
fn chunk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    files.sort();
    files
}

/// Every file of the log is 0600, whatever the umask the log library created it under.
#[cfg(unix)]
#[tokio::test]
async fn the_log_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_DIR);
    std::fs::create_dir_all(&path).unwrap();
    let stray = path.join("older.wal");
    std::fs::write(&stray, b"").unwrap();
    std::fs::set_permissions(&stray, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut log = LogStore::open(&path, 1, Duration::ZERO).unwrap();
    append(&mut log, (1..=3).map(|i| command_entry(1, i, i)).collect()).await;
    let files: Vec<_> = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    assert!(files.len() >= 2, "{files:?}");
    for f in files {
        let mode = f.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.path().display());
    }
}

/// A flipped byte inside an acknowledged entry fails the open, naming the log; it is never
/// taken for a write cut short and dropped.
#[tokio::test]
async fn a_damaged_log_file_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_DIR);
    let marker = {
        let mut log = LogStore::open(&path, 1, Duration::ZERO).unwrap();
        append(&mut log, (1..=3).map(|i| command_entry(1, i, i)).collect()).await;
        codec::encode_entry(&command_entry(1, 2, 2)).unwrap()
    };
    let files = chunk_files(&path);
    let file = files.last().unwrap();
    let mut bytes = std::fs::read(file).unwrap();
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker.as_slice())
        .expect("entry 2 is in the chunk file");
    bytes[at + marker.len() / 2] ^= 0xff;
    std::fs::write(file, &bytes).unwrap();
    let err = LogStore::open(&path, 1, Duration::ZERO).unwrap_err();
    assert!(matches!(err, LogStoreError::Open { .. }), "{err}");
    assert!(err.to_string().contains(LOG_DIR), "{err}");
}

/// A data dir from before the append-only log: its redb log moves over whole, and the old
/// file is kept aside, not deleted.
#[tokio::test]
async fn a_redb_log_is_moved_to_the_append_only_log() {
    use crate::raft::legacy_log::{LEGACY_FILE, MIGRATED_FILE, migrate};
    let dir = tempfile::tempdir().unwrap();
    {
        let db = redb::Database::create(dir.path().join(LEGACY_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let log: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("raft_log");
            let meta: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("raft_meta");
            let mut t = txn.open_table(log).unwrap();
            for i in 4..=9 {
                let bytes = codec::encode_entry(&command_entry(1, i, i)).unwrap();
                t.insert(i, bytes.as_slice()).unwrap();
            }
            let mut m = txn.open_table(meta).unwrap();
            let rows: [(&str, Vec<u8>); 4] = [
                ("node_id", codec::encode_meta("node_id", &1u64).unwrap()),
                (
                    "vote",
                    codec::encode_meta("vote", &Vote::new_committed(2, 1)).unwrap(),
                ),
                (
                    "committed",
                    codec::encode_meta("committed", &Some(log_id(1, 8))).unwrap(),
                ),
                (
                    "last_purged",
                    codec::encode_meta("last_purged", &log_id(1, 3)).unwrap(),
                ),
            ];
            for (k, v) in rows {
                m.insert(k, v.as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    // Another node's data dir is refused and left as it was.
    let err = migrate(dir.path(), 2).unwrap_err();
    assert!(
        matches!(
            err,
            LogStoreError::WrongNode {
                found: 1,
                configured: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(dir.path().join(LEGACY_FILE).is_file());

    let moved = migrate(dir.path(), 1).unwrap();
    assert_eq!(moved, Some(dir.path().join(MIGRATED_FILE)));
    assert!(!dir.path().join(LEGACY_FILE).exists());
    assert_eq!(migrate(dir.path(), 1).unwrap(), None, "once only");

    let mut log = LogStore::open(&dir.path().join(LOG_DIR), 1, Duration::ZERO).unwrap();
    assert_kept(&mut log, 3, 9).await;
    let entries = log.try_get_log_entries(..).await.unwrap();
    let want: Vec<Entry> = (4..=9).map(|i| command_entry(1, i, i)).collect();
    assert_eq!(entries, want);
}

#[test]
fn the_snapshot_file_is_replaced_atomically_and_never_by_an_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let (store, current) = SnapshotStore::open(dir.path()).unwrap();
    assert!(current.is_none());
    let meta = |index: u64| crate::raft::types::SnapshotMeta {
        last_log_id: Some(log_id(1, index)),
        last_membership: Default::default(),
        snapshot_id: format!("s{index}"),
    };
    assert!(store.write(&meta(10), b"ten").unwrap());
    assert!(!store.write(&meta(5), b"five").unwrap(), "older is refused");
    assert!(store.write(&meta(12), b"twelve").unwrap());
    std::fs::write(dir.path().join("snapshot.bin.tmp"), b"half a write").unwrap();
    drop(store);

    let (store, current) = SnapshotStore::open(dir.path()).unwrap();
    let (m, data) = current.unwrap();
    assert_eq!((m, data.as_slice()), (meta(12), b"twelve".as_slice()));
    assert_eq!(store.current_meta(), Some(meta(12)));
    assert!(
        !dir.path().join("snapshot.bin.tmp").exists(),
        "stale temp removed"
    );

    let path = dir.path().join(SNAPSHOT_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[6] = 7;
    std::fs::write(&path, &bytes).unwrap();
    let err = store.read().unwrap_err().to_string();
    assert!(
        err.contains("format version 7") && err.contains(SNAPSHOT_FILE),
        "{err}"
    );
    bytes[6] = SNAPSHOT_FILE_FORMAT_FOR_TESTS;
    bytes.push(0);
    std::fs::write(&path, &bytes).unwrap();
    let err = store.read().unwrap_err().to_string();
    assert!(err.contains("1 trailing bytes"), "{err}");
}

const SNAPSHOT_FILE_FORMAT_FOR_TESTS: u8 = crate::raft::snapshot_store::SNAPSHOT_FILE_FORMAT;

#[tokio::test]
async fn the_state_machine_applies_batches_and_snapshots_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = StateMachine::open(1, dir.path(), None).unwrap();
    let handle = sm.handle();
    let mut batch = vec![membership_entry(1)];
    batch.extend((2..=4).map(|i| command_entry(1, i, i)));
    batch.push(Entry {
        log_id: log_id(1, 5),
        payload: EntryPayload::Normal(Command::NodeOffline {
            node_id: mock::node_id(42),
            now: T0,
            evals: vec![],
        }),
    });
    let replies = sm.apply(batch).await.unwrap();
    let indexes: Vec<Index> = replies.iter().map(|r| r.index).collect();
    assert_eq!(
        indexes,
        vec![1, 2, 3, 4, 5],
        "one reply per entry, in order"
    );
    assert!(replies[..4].iter().all(|r| r.result.is_ok()));
    assert_eq!(
        replies[4].result,
        Err(drover_core::fsm::ApplyError::NodeNotFound(mock::node_id(
            42
        )))
    );
    assert_eq!(handle.applied_index(), 5);
    assert_eq!(handle.snapshot().node_count(), 3);

    let (applied, membership) = sm.applied_state().await.unwrap();
    assert_eq!(applied, Some(log_id(1, 5)));
    assert_eq!(membership.log_id(), &Some(log_id(1, 1)));

    let mut builder = sm.get_snapshot_builder().await;
    let snap = builder.build_snapshot().await.unwrap();
    assert_eq!(snap.meta.last_log_id, Some(log_id(1, 5)));
    // Built straight to disk, the snapshot reads back as exactly the state's bytes, from
    // where it is handed over as from its start.
    let mut built = Vec::new();
    let mut data = snap.snapshot;
    tokio::io::AsyncReadExt::read_to_end(&mut *data, &mut built)
        .await
        .unwrap();
    assert_eq!(built, state_bytes(&handle.snapshot()));
    assert_eq!(data.into_bytes().await.unwrap(), built);

    // A fresh machine on another dir installs it and matches.
    let other = tempfile::tempdir().unwrap();
    let mut sm2 = StateMachine::open(2, other.path(), None).unwrap();
    let data = sm.get_current_snapshot().await.unwrap().unwrap();
    // The file is handed over positioned at the data: a reader that never seeks reads the
    // state, not the header.
    let mut from_here = Vec::new();
    let mut unseeked = sm.get_current_snapshot().await.unwrap().unwrap().snapshot;
    tokio::io::AsyncReadExt::read_to_end(&mut *unseeked, &mut from_here)
        .await
        .unwrap();
    assert_eq!(from_here, state_bytes(&handle.snapshot()));
    let mut installs = sm2.handle().watch_installs();
    assert!(!installs.has_changed().unwrap(), "nothing installed yet");
    sm2.install_snapshot(&data.meta, data.snapshot)
        .await
        .unwrap();
    assert!(installs.has_changed().unwrap(), "the install is signalled");
    assert_eq!(*installs.borrow_and_update(), 1);
    assert_eq!(sm2.handle().applied_index(), 5);
    assert_eq!(
        state_bytes(&sm2.handle().snapshot()),
        state_bytes(&handle.snapshot())
    );
    // And a restart of either loads it back.
    drop(sm2);
    let sm3 = StateMachine::open(2, other.path(), None).unwrap();
    assert_eq!(sm3.handle().applied_index(), 5);
    assert_eq!(sm3.handle().snapshot().node_count(), 3);

    // A snapshot whose data is not a drover state is refused and changes nothing.
    let mut bad = sm3;
    let installs = bad.handle().watch_installs();
    let meta = crate::raft::types::SnapshotMeta {
        last_log_id: Some(log_id(2, 9)),
        last_membership: Default::default(),
        snapshot_id: "bad".into(),
    };
    let err = bad
        .install_snapshot(
            &meta,
            Box::new(SnapshotData::Memory(std::io::Cursor::new(
                b"nonsense".to_vec(),
            ))),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("bad"), "{err}");
    assert_eq!(bad.handle().applied_index(), 5);
    assert!(
        !installs.has_changed().unwrap(),
        "a refused snapshot is no install"
    );
}

/// Builds a fresh log store and state machine in a temp dir for each suite case.
struct SuiteBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for SuiteBuilder {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachine), crate::raft::types::StorageError> {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(&dir.path().join(LOG_DIR), 0, Duration::ZERO).unwrap();
        let sm = StateMachine::open(0, &dir.path().join(SNAPSHOT_DIR), None).unwrap();
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(SuiteBuilder).unwrap();
}

/// The committed entries after a snapshot are applied again at start-up before anyone reads:
/// nothing is published until the committed index is, then every batch is as before.
#[tokio::test]
async fn a_replay_publishes_once_the_committed_index_is_applied_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = StateMachine::open_replaying(1, dir.path(), None, Some(4)).unwrap();
    let handle = sm.handle();
    sm.apply(vec![membership_entry(1), command_entry(1, 2, 2)])
        .await
        .unwrap();
    assert_eq!(sm.applied_index(), 2);
    assert_eq!(
        handle.applied_index(),
        0,
        "mid-replay state is not published"
    );
    assert_eq!(handle.snapshot().node_count(), 0);

    sm.apply(vec![command_entry(1, 3, 3), command_entry(1, 4, 4)])
        .await
        .unwrap();
    assert_eq!(handle.applied_index(), 4);
    assert_eq!(handle.snapshot().node_count(), 3);

    sm.apply(vec![command_entry(1, 5, 5)]).await.unwrap();
    assert_eq!(
        handle.applied_index(),
        5,
        "after the replay each batch publishes"
    );
    assert_eq!(handle.snapshot().node_count(), 4);

    // A committed index the snapshot already covers holds nothing back.
    let mut builder = sm.get_snapshot_builder().await;
    builder.build_snapshot().await.unwrap();
    let reopened = StateMachine::open_replaying(1, dir.path(), None, Some(5)).unwrap();
    assert_eq!(reopened.handle().applied_index(), 5);
    assert_eq!(reopened.handle().snapshot().node_count(), 4);
}
