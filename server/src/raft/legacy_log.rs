//! Moving a data dir's Raft log from redb (`raft-log.redb`, drover's log until the
//! append-only log replaced it) into the append-only log, once, at start-up.
//!
//! The old file is read in full (node id, vote, committed and purged log ids, every entry
//! as stored), written into a fresh log directory and synced; only then is the old file
//! renamed to `raft-log.redb.migrated`. A start cut short anywhere before the rename finds
//! the old file still in place and migrates again from scratch, so nothing is lost
//! whichever step a crash interrupts.

use super::codec;
use super::log_records::{Payload, WalLogId, WalTypes, WalVote, sync_blocking};
use super::log_store::{LOG_DIR, LogStoreError, wal_config};
use super::types::{LogId, ServerId, Vote};
use raft_log::RaftLog;
use raft_log::api::raft_log_writer::RaftLogWriter;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The redb log's file name inside the data dir.
pub const LEGACY_FILE: &str = "raft-log.redb";
/// What the redb log is renamed to once migrated.
pub const MIGRATED_FILE: &str = "raft-log.redb.migrated";

const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("raft_log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("raft_meta");

/// Everything the redb log held.
#[derive(Debug, Default)]
struct Legacy {
    node_id: Option<ServerId>,
    vote: Option<Vote>,
    committed: Option<LogId>,
    purged: Option<LogId>,
    /// Each entry's log id and its bytes as stored (the entry format is unchanged).
    entries: Vec<(LogId, Vec<u8>)>,
}

fn failed(path: &Path, reason: impl std::fmt::Display) -> LogStoreError {
    LogStoreError::Migrate {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn decode_meta<T: serde::de::DeserializeOwned>(
    path: &Path,
    key: &'static str,
    bytes: &[u8],
) -> Result<T, LogStoreError> {
    codec::decode_meta(key, bytes).map_err(|source| LogStoreError::Corrupt {
        path: path.to_path_buf(),
        what: key.to_string(),
        source,
    })
}

fn read(path: &Path) -> Result<Legacy, LogStoreError> {
    let db = Database::open(path).map_err(|e| failed(path, format!("open: {e}")))?;
    let txn = db
        .begin_read()
        .map_err(|e| failed(path, format!("read: {e}")))?;
    let mut out = Legacy::default();
    let meta = txn
        .open_table(META)
        .map_err(|e| failed(path, format!("open meta table: {e}")))?;
    let get = |key: &'static str| -> Result<Option<Vec<u8>>, LogStoreError> {
        let value = meta
            .get(key)
            .map_err(|e| failed(path, format!("read {key}: {e}")))?;
        Ok(value.map(|v| v.value().to_vec()))
    };
    if let Some(b) = get("node_id")? {
        out.node_id = Some(decode_meta(path, "node_id", &b)?);
    }
    if let Some(b) = get("vote")? {
        out.vote = Some(decode_meta(path, "vote", &b)?);
    }
    if let Some(b) = get("committed")? {
        out.committed = decode_meta::<Option<LogId>>(path, "committed", &b)?;
    }
    if let Some(b) = get("last_purged")? {
        out.purged = Some(decode_meta(path, "last_purged", &b)?);
    }
    let log = txn
        .open_table(LOG)
        .map_err(|e| failed(path, format!("open log table: {e}")))?;
    let rows = log
        .iter()
        .map_err(|e| failed(path, format!("read log: {e}")))?;
    for row in rows {
        let (k, v) = row.map_err(|e| failed(path, format!("read log entry: {e}")))?;
        let index = k.value();
        let id =
            codec::decode_entry_log_id(v.value()).map_err(|source| LogStoreError::Corrupt {
                path: path.to_path_buf(),
                what: format!("log entry at index {index}"),
                source,
            })?;
        if id.index != index {
            return Err(LogStoreError::Misplaced {
                path: path.to_path_buf(),
                key: index,
                found: id.index,
            });
        }
        out.entries.push((id, v.value().to_vec()));
    }
    Ok(out)
}

/// Writes `old` into a fresh log in `dir` and syncs it.
fn write(dir: &Path, node_id: ServerId, old: Legacy) -> Result<(), LogStoreError> {
    let io = |step: &'static str| {
        let dir = dir.to_path_buf();
        move |e: std::io::Error| failed(&dir, format!("{step}: {e}"))
    };
    std::fs::create_dir_all(dir).map_err(io("create"))?;
    let mut wal = RaftLog::<WalTypes>::open(Arc::new(wal_config(dir))).map_err(io("open"))?;
    wal.save_user_data(Some(node_id))
        .map_err(io("record the node id"))?;
    if let Some(vote) = old.vote {
        wal.save_vote(WalVote(vote)).map_err(io("save the vote"))?;
    }
    if let Some(purged) = old.purged {
        wal.purge(WalLogId::from(purged))
            .map_err(io("record the purged log id"))?;
    }
    // Handed to the writer in pieces, so a big log is never all buffered at once.
    let mut entries = old.entries.into_iter().peekable();
    while entries.peek().is_some() {
        let piece = entries
            .by_ref()
            .take(1024)
            .map(|(id, bytes)| (WalLogId::from(id), Payload(bytes.into())));
        wal.append(piece).map_err(io("append the entries"))?;
        wal.flush(false, None).map_err(io("write the entries"))?;
    }
    if let Some(committed) = old.committed
        && Some(&WalLogId::from(committed)) <= wal.log_state().last()
    {
        wal.commit(committed.into())
            .map_err(io("record the committed log id"))?;
    }
    sync_blocking(&mut wal).map_err(io("sync"))
}

/// Migrates the redb log in `data_dir`, if there is one, into the append-only log.
/// Returns the path the old file was moved to.
pub fn migrate(data_dir: &Path, node_id: ServerId) -> Result<Option<PathBuf>, LogStoreError> {
    let old_path = data_dir.join(LEGACY_FILE);
    if !old_path.is_file() {
        return Ok(None);
    }
    let old = read(&old_path)?;
    if let Some(found) = old.node_id
        && found != node_id
    {
        return Err(LogStoreError::WrongNode {
            path: old_path,
            found,
            configured: node_id,
        });
    }
    let dir = data_dir.join(LOG_DIR);
    // The old file still being here means no migration finished: whatever is in the new
    // directory is from one that was cut short.
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| failed(&dir, format!("clear: {e}")))?;
    }
    let entries = old.entries.len();
    write(&dir, node_id, old)?;
    let moved = data_dir.join(MIGRATED_FILE);
    std::fs::rename(&old_path, &moved).map_err(|e| failed(&old_path, format!("rename: {e}")))?;
    std::fs::File::open(data_dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| failed(data_dir, format!("sync the rename: {e}")))?;
    tracing::info!(
        from = %old_path.display(),
        to = %dir.display(),
        entries,
        "raft log moved to the append-only log"
    );
    Ok(Some(moved))
}
