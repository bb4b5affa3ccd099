//! The Raft log on redb: one database file under the data dir holding the entries (index →
//! encoded entry), the vote, the committed log id, the last purged log id and the node id the
//! data dir belongs to.
//!
//! Every write that Raft's safety depends on (appended entries, the vote, truncation and
//! purge) is committed with [`Durability::Immediate`] before openraft hears of it. The committed
//! log id is only a hint that spares a restart from waiting for the leader to commit again, so
//! it is written without its own fsync: redb makes it durable with the next durable commit or
//! on close.
//!
//! redb calls block (they read and fsync the file): reads run on tokio's blocking pool,
//! and every change to the log table goes through one writer thread that commits
//! whatever queued up meanwhile in one transaction ([`log_writer`](super::log_writer)).

use super::codec::{self, RecordError};
use super::log_writer::{self, Op, Pending};
use super::types::{Entry, LogId, ServerId, StorageError, TypeConfig, Vote};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader, StorageIOError};
use redb::{Database, DatabaseError, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use std::fmt;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The log file's name inside the data dir.
pub const LOG_FILE: &str = "raft-log.redb";

const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("raft_log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("raft_meta");

const KEY_NODE_ID: &str = "node_id";
const KEY_VOTE: &str = "vote";
const KEY_COMMITTED: &str = "committed";
const KEY_PURGED: &str = "last_purged";

/// redb's page cache for the log. Entries are read back only to be applied, moments after
/// they were written, and the writer answers those reads from memory until its commit
/// lands, so the cache needs to hold only the hot tail: not redb's 1 GiB default, nor the
/// 64 MiB this once was, which a heap profile at a million allocations showed full of
/// pages no one read again.
const CACHE_BYTES: usize = 16 * 1024 * 1024;
/// How often a start retries a log file that an instance in this process is still closing.
const LOCK_RETRY: Duration = Duration::from_millis(20);

#[derive(Debug, thiserror::Error)]
pub enum LogStoreError {
    #[error("cannot open raft log {path}: {source}")]
    Open {
        path: PathBuf,
        source: DatabaseError,
    },
    #[error("raft log {path} is still open elsewhere after waiting {waited:?}")]
    Locked { path: PathBuf, waited: Duration },
    #[error("raft log {path}: {op} failed: {source}")]
    Db {
        path: PathBuf,
        op: &'static str,
        source: Box<redb::Error>,
    },
    #[error("raft log {path}: corrupt {what}: {source}")]
    Corrupt {
        path: PathBuf,
        what: String,
        source: RecordError,
    },
    #[error("raft log {path}: the entry stored under index {key} says it is index {found}")]
    Misplaced { path: PathBuf, key: u64, found: u64 },
    #[error("raft log {path}: cannot encode {what}: {source}")]
    Encode {
        path: PathBuf,
        what: String,
        source: RecordError,
    },
    #[error("raft log {path} belongs to raft node {found}, not to node {configured}")]
    WrongNode {
        path: PathBuf,
        found: ServerId,
        configured: ServerId,
    },
    #[error("raft log {path}: background task failed: {reason}")]
    Task { path: PathBuf, reason: String },
}

/// The redb-backed Raft log. Cloning shares the database (the clone is the log reader).
#[derive(Clone)]
pub struct LogStore {
    db: Arc<LogDb>,
    stats: Arc<LogStats>,
    /// Appended, not yet committed: what readers see besides the table.
    pending: Arc<Mutex<Pending>>,
    writer: Arc<log_writer::Writer>,
}

/// What the log has appended since the server started: transactions (each one fsync),
/// entries and their encoded bytes. Set against the disk's bytes written, they show the
/// storage engine's write amplification.
#[derive(Debug, Default)]
pub struct LogStats {
    appends: std::sync::atomic::AtomicU64,
    entries: std::sync::atomic::AtomicU64,
    bytes: std::sync::atomic::AtomicU64,
}

/// One reading of [`LogStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCounts {
    pub appends: u64,
    pub entries: u64,
    pub bytes: u64,
}

impl LogStats {
    /// One committed append transaction holding entries of these sizes.
    pub(crate) fn appended(&self, sizes: impl Iterator<Item = usize>) {
        use std::sync::atomic::Ordering::Relaxed;
        let (mut entries, mut bytes) = (0u64, 0u64);
        for size in sizes {
            entries += 1;
            bytes += size as u64;
        }
        self.appends.fetch_add(1, Relaxed);
        self.entries.fetch_add(entries, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }

    pub fn read(&self) -> LogCounts {
        use std::sync::atomic::Ordering::Relaxed;
        LogCounts {
            appends: self.appends.load(Relaxed),
            entries: self.entries.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
        }
    }
}

pub(crate) struct LogDb {
    db: Database,
    path: PathBuf,
}

impl fmt::Debug for LogStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogStore")
            .field("path", &self.db.path)
            .finish_non_exhaustive()
    }
}

impl LogStore {
    /// Opens (or creates) the log at `path` for node `node_id`.
    ///
    /// If the file is held by an instance of this process that is still shutting down (a
    /// dropped node closes its files asynchronously), the open is retried for up to `wait`.
    /// A file that belongs to another node id is refused.
    pub fn open(path: &Path, node_id: ServerId, wait: Duration) -> Result<LogStore, LogStoreError> {
        let started = Instant::now();
        let db = loop {
            let opened = Database::builder()
                .set_cache_size(CACHE_BYTES)
                .set_check_integrity_on_open(true)
                .create(path);
            match opened {
                Ok(db) => break db,
                Err(DatabaseError::DatabaseAlreadyOpen) if started.elapsed() < wait => {
                    std::thread::sleep(LOCK_RETRY);
                }
                Err(DatabaseError::DatabaseAlreadyOpen) => {
                    return Err(LogStoreError::Locked {
                        path: path.to_path_buf(),
                        waited: started.elapsed(),
                    });
                }
                Err(source) => {
                    return Err(LogStoreError::Open {
                        path: path.to_path_buf(),
                        source,
                    });
                }
            }
        };
        let db = LogDb {
            db,
            path: path.to_path_buf(),
        };
        db.init(node_id)?;
        let state = db.log_state()?;
        tracing::info!(
            path = %path.display(),
            node_id,
            last_purged = ?state.last_purged_log_id.map(|l| l.index),
            last_log = ?state.last_log_id.map(|l| l.index),
            "raft log opened"
        );
        let db = Arc::new(db);
        let stats = Arc::<LogStats>::default();
        let pending = Arc::<Mutex<Pending>>::default();
        let writer =
            log_writer::spawn(db.clone(), pending.clone(), stats.clone()).map_err(|e| {
                LogStoreError::Task {
                    path: path.to_path_buf(),
                    reason: format!("cannot start the log writer: {e}"),
                }
            })?;
        Ok(LogStore {
            db,
            stats,
            pending,
            writer: Arc::new(writer),
        })
    }

    /// The counters of what this log appended (shared by its clones).
    pub fn stats(&self) -> Arc<LogStats> {
        self.stats.clone()
    }

    /// The file this log lives in.
    pub fn path(&self) -> &Path {
        &self.db.path
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn writer_gone(&self) -> LogStoreError {
        LogStoreError::Task {
            path: self.db.path.clone(),
            reason: "the log writer has stopped".into(),
        }
    }

    /// Queues `op` behind every append submitted before it and waits for its answer.
    async fn submit(
        &self,
        op: Op,
        answer: tokio::sync::oneshot::Receiver<Result<(), LogStoreError>>,
    ) -> Result<(), LogStoreError> {
        if !self.writer.send(op) {
            return Err(self.writer_gone());
        }
        answer.await.map_err(|_| self.writer_gone())?
    }

    async fn blocking<T, F>(&self, f: F) -> Result<T, LogStoreError>
    where
        T: Send + 'static,
        F: FnOnce(&LogDb) -> Result<T, LogStoreError> + Send + 'static,
    {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| LogStoreError::Task {
                path: self.db.path.clone(),
                reason: e.to_string(),
            })?
    }
}

fn storage_error(
    subject: ErrorSubject<ServerId>,
    verb: ErrorVerb,
    e: LogStoreError,
) -> StorageError {
    tracing::error!(error = %e, "raft log storage failed");
    StorageIOError::new(subject, verb, AnyError::new(&e)).into()
}

impl LogDb {
    fn db_err<E: Into<redb::Error>>(&self, op: &'static str) -> impl FnOnce(E) -> LogStoreError {
        let path = self.path.clone();
        move |e| LogStoreError::Db {
            path,
            op,
            source: Box::new(e.into()),
        }
    }

    /// Creates the tables and records (or checks) the node id.
    fn init(&self, node_id: ServerId) -> Result<(), LogStoreError> {
        let txn = self.db.begin_write().map_err(self.db_err("begin write"))?;
        {
            txn.open_table(LOG).map_err(self.db_err("open log table"))?;
            let mut meta = txn
                .open_table(META)
                .map_err(self.db_err("open meta table"))?;
            let found = meta
                .get(KEY_NODE_ID)
                .map_err(self.db_err("read node id"))?
                .map(|v| self.decode_meta::<ServerId>(KEY_NODE_ID, v.value()))
                .transpose()?;
            match found {
                Some(found) if found != node_id => {
                    return Err(LogStoreError::WrongNode {
                        path: self.path.clone(),
                        found,
                        configured: node_id,
                    });
                }
                Some(_) => {}
                None => {
                    let bytes = self.encode_meta(KEY_NODE_ID, &node_id)?;
                    meta.insert(KEY_NODE_ID, bytes.as_slice())
                        .map_err(self.db_err("write node id"))?;
                }
            }
        }
        txn.commit().map_err(self.db_err("commit"))
    }

    fn encode_meta<T: serde::Serialize>(
        &self,
        what: &'static str,
        value: &T,
    ) -> Result<Vec<u8>, LogStoreError> {
        codec::encode_meta(what, value).map_err(|source| LogStoreError::Encode {
            path: self.path.clone(),
            what: what.to_string(),
            source,
        })
    }

    fn decode_meta<T: serde::de::DeserializeOwned>(
        &self,
        what: &'static str,
        bytes: &[u8],
    ) -> Result<T, LogStoreError> {
        codec::decode_meta(what, bytes).map_err(|source| LogStoreError::Corrupt {
            path: self.path.clone(),
            what: what.to_string(),
            source,
        })
    }

    fn read_meta<T: serde::de::DeserializeOwned>(
        &self,
        key: &'static str,
    ) -> Result<Option<T>, LogStoreError> {
        let txn = self.db.begin_read().map_err(self.db_err("begin read"))?;
        let meta = txn
            .open_table(META)
            .map_err(self.db_err("open meta table"))?;
        let value = meta.get(key).map_err(self.db_err("read meta"))?;
        value.map(|v| self.decode_meta(key, v.value())).transpose()
    }

    fn write_meta<T: serde::Serialize>(
        &self,
        key: &'static str,
        value: &T,
        durability: Durability,
    ) -> Result<(), LogStoreError> {
        let bytes = self.encode_meta(key, value)?;
        let mut txn = self.db.begin_write().map_err(self.db_err("begin write"))?;
        txn.set_durability(durability)
            .map_err(|e| self.db_err("set durability")(redb::Error::from(e)))?;
        {
            let mut meta = txn
                .open_table(META)
                .map_err(self.db_err("open meta table"))?;
            meta.insert(key, bytes.as_slice())
                .map_err(self.db_err("write meta"))?;
        }
        txn.commit().map_err(self.db_err("commit"))
    }

    fn decode_stored(&self, key: u64, bytes: &[u8]) -> Result<Entry, LogStoreError> {
        let entry = codec::decode_entry(bytes).map_err(|source| LogStoreError::Corrupt {
            path: self.path.clone(),
            what: format!("log entry at index {key}"),
            source,
        })?;
        if entry.log_id.index != key {
            return Err(LogStoreError::Misplaced {
                path: self.path.clone(),
                key,
                found: entry.log_id.index,
            });
        }
        Ok(entry)
    }

    /// The committed entries in `range`, with `pending` (appended, not yet committed)
    /// laid over them.
    fn entries(
        &self,
        range: (Bound<u64>, Bound<u64>),
        pending: Vec<(u64, Arc<[u8]>)>,
    ) -> Result<Vec<Entry>, LogStoreError> {
        let txn = self.db.begin_read().map_err(self.db_err("begin read"))?;
        let log = txn.open_table(LOG).map_err(self.db_err("open log table"))?;
        let first_pending = pending.first().map_or(u64::MAX, |(i, _)| *i);
        let mut out = Vec::new();
        for row in log
            .range::<u64>(range)
            .map_err(self.db_err("read log range"))?
        {
            let (k, v) = row.map_err(self.db_err("read log entry"))?;
            if k.value() >= first_pending {
                break;
            }
            out.push(self.decode_stored(k.value(), v.value())?);
        }
        for (index, bytes) in pending {
            out.push(self.decode_stored(index, &bytes)?);
        }
        Ok(out)
    }

    fn log_state(&self) -> Result<LogState<TypeConfig>, LogStoreError> {
        let last_purged: Option<LogId> = self.read_meta(KEY_PURGED)?;
        let txn = self.db.begin_read().map_err(self.db_err("begin read"))?;
        let log = txn.open_table(LOG).map_err(self.db_err("open log table"))?;
        let last = match log.last().map_err(self.db_err("read last log entry"))? {
            Some((k, v)) => {
                let key = k.value();
                let id = codec::decode_entry_log_id(v.value()).map_err(|source| {
                    LogStoreError::Corrupt {
                        path: self.path.clone(),
                        what: format!("log entry at index {key}"),
                        source,
                    }
                })?;
                if id.index != key {
                    return Err(LogStoreError::Misplaced {
                        path: self.path.clone(),
                        key,
                        found: id.index,
                    });
                }
                Some(id)
            }
            None => None,
        };
        Ok(LogState {
            last_log_id: last.or(last_purged),
            last_purged_log_id: last_purged,
        })
    }

    /// Writes `rows` in one durable transaction.
    pub(crate) fn append<'a>(
        &self,
        rows: impl Iterator<Item = &'a (u64, Arc<[u8]>)>,
    ) -> Result<(), LogStoreError> {
        let mut txn = self.db.begin_write().map_err(self.db_err("begin write"))?;
        txn.set_durability(Durability::Immediate)
            .map_err(|e| self.db_err("set durability")(redb::Error::from(e)))?;
        {
            let mut log = txn.open_table(LOG).map_err(self.db_err("open log table"))?;
            for (index, bytes) in rows {
                log.insert(*index, &**bytes)
                    .map_err(self.db_err("append log entry"))?;
            }
        }
        txn.commit().map_err(self.db_err("commit append"))
    }

    /// Removes every entry at or after `from`.
    pub(crate) fn truncate(&self, from: u64) -> Result<(), LogStoreError> {
        let txn = self.db.begin_write().map_err(self.db_err("begin write"))?;
        {
            let mut log = txn.open_table(LOG).map_err(self.db_err("open log table"))?;
            log.retain_in(from.., |_, _| false)
                .map_err(self.db_err("truncate log"))?;
        }
        txn.commit().map_err(self.db_err("commit truncate"))
    }

    /// Records `upto` as purged and removes every entry up to it, in one transaction.
    pub(crate) fn purge(&self, upto: LogId) -> Result<(), LogStoreError> {
        let bytes = self.encode_meta(KEY_PURGED, &upto)?;
        let txn = self.db.begin_write().map_err(self.db_err("begin write"))?;
        {
            let mut meta = txn
                .open_table(META)
                .map_err(self.db_err("open meta table"))?;
            meta.insert(KEY_PURGED, bytes.as_slice())
                .map_err(self.db_err("write last purged"))?;
            let mut log = txn.open_table(LOG).map_err(self.db_err("open log table"))?;
            log.retain_in(..=upto.index, |_, _| false)
                .map_err(self.db_err("purge log"))?;
        }
        txn.commit().map_err(self.db_err("commit purge"))
    }
}

fn bounds<RB: RangeBounds<u64>>(range: &RB) -> (Bound<u64>, Bound<u64>) {
    (range.start_bound().cloned(), range.end_bound().cloned())
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + fmt::Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let range = bounds(&range);
        let pending = self.pending().range(range);
        self.blocking(move |db| db.entries(range, pending))
            .await
            .map_err(|e| storage_error(ErrorSubject::Logs, ErrorVerb::Read, e))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let pending_last = self.pending().last();
        self.blocking(move |db| {
            let mut state = db.log_state()?;
            if let Some((index, bytes)) = pending_last {
                state.last_log_id = Some(db.decode_stored(index, &bytes)?.log_id);
            }
            Ok(state)
        })
        .await
        .map_err(|e| storage_error(ErrorSubject::Logs, ErrorVerb::Read, e))
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let vote = *vote;
        self.blocking(move |db| db.write_meta(KEY_VOTE, &vote, Durability::Immediate))
            .await
            .map_err(|e| storage_error(ErrorSubject::Vote, ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.blocking(|db| db.read_meta(KEY_VOTE))
            .await
            .map_err(|e| storage_error(ErrorSubject::Vote, ErrorVerb::Read, e))
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.blocking(move |db| db.write_meta(KEY_COMMITTED, &committed, Durability::None))
            .await
            .map_err(|e| storage_error(ErrorSubject::Store, ErrorVerb::Write, e))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        self.blocking(|db| db.read_meta::<Option<LogId>>(KEY_COMMITTED))
            .await
            .map(Option::flatten)
            .map_err(|e| storage_error(ErrorSubject::Store, ErrorVerb::Read, e))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut rows: Vec<(u64, Arc<[u8]>)> = Vec::new();
        for entry in entries {
            let bytes = codec::encode_entry(&entry).map_err(|source| {
                storage_error(
                    ErrorSubject::Log(entry.log_id),
                    ErrorVerb::Write,
                    LogStoreError::Encode {
                        path: self.db.path.clone(),
                        what: format!("log entry {}", entry.log_id),
                        source,
                    },
                )
            })?;
            rows.push((entry.log_id.index, Arc::from(bytes)));
        }
        if rows.is_empty() {
            callback.log_io_completed(Ok(()));
            return Ok(());
        }
        // Readable from here on; durable when the writer calls back.
        let seq = self.pending().add(&rows);
        let sent = self.writer.send(Op::Append {
            rows,
            seq,
            done: callback,
        });
        if !sent {
            return Err(storage_error(
                ErrorSubject::Logs,
                ErrorVerb::Write,
                self.writer_gone(),
            ));
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(from = log_id.index, "truncating raft log");
        self.pending().truncate(log_id.index);
        let (done, answer) = tokio::sync::oneshot::channel();
        self.submit(
            Op::Truncate {
                from: log_id.index,
                done,
            },
            answer,
        )
        .await
        .map_err(|e| storage_error(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(upto = log_id.index, "purging raft log");
        let (done, answer) = tokio::sync::oneshot::channel();
        self.submit(Op::Purge { upto: log_id, done }, answer)
            .await
            .map_err(|e| storage_error(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }
}
