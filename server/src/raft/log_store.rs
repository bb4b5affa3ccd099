//! The Raft log: an append-only write-ahead log in chunk files under `raft-log/` in the data
//! dir, written by `raft-log` (by openraft's author; Databend's meta service runs on it).
//! It holds the entries, the vote, the committed log id, the last purged log id and, as its
//! user data, the node id the data dir belongs to.
//!
//! Why not a B-tree: every redb commit rewrote the tree's path and bookkeeping pages, which
//! at a million placements wrote about 1.8 times the log's own bytes again, and a purge
//! rewrote the pages it freed. Here an append writes the entry once, sequentially; a purge
//! deletes whole chunk files; a truncate is one small record.
//!
//! Every write that Raft's safety depends on (appended entries, the vote, truncation and
//! purge) is fsynced before openraft hears of it. `raft-log`'s flush worker syncs whatever
//! queued while the previous sync ran in one batch, so one fsync covers many appends (group
//! commit). The committed log id is only a hint that spares a restart from waiting for the
//! leader to commit again: it is written without its own fsync.

use super::codec::{self, RecordError};
use super::log_records::{Flushed, Payload, WalLogId, WalTypes, WalVote, sync_blocking};
use super::readahead::Readahead;
use super::types::{Entry, LogId, ServerId, StorageError, TypeConfig, Vote};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader, StorageIOError};
use raft_log::RaftLog;
use raft_log::api::raft_log_writer::RaftLogWriter;
use std::fmt;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

/// The log directory's name inside the data dir.
pub const LOG_DIR: &str = "raft-log";

/// A chunk file's size before the next one starts. Purging deletes whole chunks, and the
/// entries of the chunk being written stay in memory until it closes, so chunks are kept
/// small.
const CHUNK_BYTES: usize = 8 * 1024 * 1024;
/// How many bytes may be appended between two passes that make the log's files private:
/// the log library creates a chunk file with the process's umask, and one chunk in this
/// many bytes is new.
const SWEEP_EVERY_BYTES: u64 = CHUNK_BYTES as u64 / 2;

/// Entries kept in memory beyond the open chunk's. Entries are read back only to be applied,
/// moments after they were written; a follower far behind is sent a snapshot instead.
const CACHE_BYTES: usize = 8 * 1024 * 1024;
/// The read buffer for replaying a chunk at start-up.
const REPLAY_BUFFER_BYTES: usize = 4 * 1024 * 1024;
/// How long the flush worker waits for more writes before it syncs: long enough to take
/// whatever is already queued, short enough to add nothing a client could notice.
const GROUP_WAIT: Duration = Duration::from_micros(20);
/// How often a start retries a log that an instance in this process is still closing.
const LOCK_RETRY: Duration = Duration::from_millis(20);

#[derive(Debug, thiserror::Error)]
pub enum LogStoreError {
    #[error("cannot open raft log {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("raft log {path} is still open elsewhere after waiting {waited:?}")]
    Locked { path: PathBuf, waited: Duration },
    #[error("raft log {path}: {op} failed: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        source: io::Error,
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
    #[error("cannot move the raft log from {path} to the append-only log: {reason}")]
    Migrate { path: PathBuf, reason: String },
}

type Wal = RaftLog<WalTypes>;

/// The Raft log. Cloning shares it (the clone is the log reader, which reads ahead for
/// itself).
#[derive(Clone)]
pub struct LogStore {
    wal: Arc<Mutex<Wal>>,
    path: Arc<PathBuf>,
    stats: Arc<LogStats>,
    readahead: Readahead,
}

/// What the log has appended since the server started: fsyncs, entries and their encoded
/// bytes. Set against the disk's bytes written, they show the storage engine's write
/// amplification.
#[derive(Debug, Default)]
pub struct LogStats {
    entries: AtomicU64,
    bytes: AtomicU64,
    /// `bytes / SWEEP_EVERY_BYTES` when the chunk files were last made private.
    swept: AtomicU64,
    /// The log whose flush worker counts the fsyncs; read at each reading.
    wal: OnceLock<Weak<Mutex<Wal>>>,
}

/// One reading of [`LogStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCounts {
    /// Batches the log's flush worker synced to disk (each one fsync).
    pub appends: u64,
    pub entries: u64,
    pub bytes: u64,
}

impl LogStats {
    fn appended(&self, entries: usize, bytes: usize) {
        self.entries.fetch_add(entries as u64, Relaxed);
        self.bytes.fetch_add(bytes as u64, Relaxed);
    }

    /// Encoded bytes of the entries appended so far (without taking the log's lock).
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }

    pub fn read(&self) -> LogCounts {
        let appends = self
            .wal
            .get()
            .and_then(Weak::upgrade)
            .map_or(0, |wal| lock(&wal).stat().flush_metrics.sync_batch_count);
        LogCounts {
            appends,
            entries: self.entries.load(Relaxed),
            bytes: self.bytes(),
        }
    }
}

fn lock(wal: &Mutex<Wal>) -> MutexGuard<'_, Wal> {
    // A panic while holding the lock leaves `raft-log` as consistent as its own checks keep
    // it, so a poisoned lock is still usable.
    wal.lock().unwrap_or_else(|p| p.into_inner())
}

impl fmt::Debug for LogStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Makes every file in `dir` readable and writable by its owner only (0600), as every
/// other file of the data dir is: the log library creates its chunk files with the
/// process's umask.
pub(crate) fn make_private(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
                super::private::private_file(&entry.path())?;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// How drover's log is laid out and flushed (also used to migrate an old log).
pub(crate) fn wal_config(dir: &Path) -> raft_log::Config {
    let mut config = raft_log::Config::new(dir.to_string_lossy());
    config.wal.chunk_max_size = Some(CHUNK_BYTES);
    config.wal.read_buffer_size = Some(REPLAY_BUFFER_BYTES);
    // A write cut short by a crash was never acknowledged: drop it and go on.
    config.wal.truncate_incomplete_record = Some(true);
    config.wal.flush_batch_wait = Some(GROUP_WAIT);
    config.log_cache_capacity = Some(CACHE_BYTES);
    config
}

impl LogStore {
    /// Opens (or creates) the log in directory `dir` for node `node_id`.
    ///
    /// If the directory is held by an instance of this process that is still shutting down
    /// (a dropped node closes its files asynchronously), the open is retried for up to
    /// `wait`. A log that belongs to another node id is refused.
    pub fn open(dir: &Path, node_id: ServerId, wait: Duration) -> Result<LogStore, LogStoreError> {
        let open_err = |source| LogStoreError::Open {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(open_err)?;
        let config = Arc::new(wal_config(dir));
        let started = Instant::now();
        let mut wal = loop {
            match Wal::open(config.clone()) {
                Ok(wal) => break wal,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if started.elapsed() >= wait {
                        return Err(LogStoreError::Locked {
                            path: dir.to_path_buf(),
                            waited: started.elapsed(),
                        });
                    }
                    std::thread::sleep(LOCK_RETRY);
                }
                Err(e) => return Err(open_err(e)),
            }
        };
        match wal.log_state().user_data {
            Some(found) if found != node_id => {
                return Err(LogStoreError::WrongNode {
                    path: dir.to_path_buf(),
                    found,
                    configured: node_id,
                });
            }
            Some(_) => {}
            None => {
                let io = |source| LogStoreError::Io {
                    path: dir.to_path_buf(),
                    op: "record the node id",
                    source,
                };
                wal.save_user_data(Some(node_id)).map_err(io)?;
                sync_blocking(&mut wal).map_err(io)?;
            }
        }
        make_private(dir).map_err(|source| LogStoreError::Io {
            path: dir.to_path_buf(),
            op: "make the log's files private",
            source,
        })?;
        let state = wal.log_state();
        tracing::info!(
            path = %dir.display(),
            node_id,
            last_purged = ?state.purged().map(|l| l.index()),
            last_log = ?state.last().map(|l| l.index()),
            "raft log opened"
        );
        let committed_end = state
            .committed()
            .map_or(0, |c| LogId::from(*c).index.saturating_add(1));
        let wal = Arc::new(Mutex::new(wal));
        let stats = Arc::new(LogStats::default());
        let _ = stats.wal.set(Arc::downgrade(&wal));
        Ok(LogStore {
            wal,
            path: Arc::new(dir.to_path_buf()),
            stats,
            readahead: Readahead::new(committed_end),
        })
    }

    /// The counters of what this log appended (shared by its clones).
    /// The committed index recorded last (a hint, see the module docs): what openraft applies
    /// again at start-up before the node serves.
    pub fn committed_hint(&self) -> Option<u64> {
        self.lock()
            .log_state()
            .committed()
            .map(|c| LogId::from(*c).index)
    }

    pub fn stats(&self) -> Arc<LogStats> {
        self.stats.clone()
    }

    /// How many of this reader's reads were answered by a read ahead.
    #[cfg(test)]
    pub(crate) fn readahead_hits(&self) -> u64 {
        self.readahead.hits()
    }

    /// The directory this log lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Wal> {
        lock(&self.wal)
    }

    fn io_error(&self, op: &'static str) -> impl FnOnce(io::Error) -> LogStoreError + use<> {
        let path = self.path.to_path_buf();
        move |source| LogStoreError::Io { path, op, source }
    }

    /// Runs `change` and waits until it (and everything before it) is on disk.
    async fn durable(
        &self,
        op: &'static str,
        change: impl FnOnce(&mut Wal) -> io::Result<raft_log::Segment>,
    ) -> Result<(), LogStoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        {
            let mut wal = self.lock();
            change(&mut wal).map_err(self.io_error(op))?;
            wal.flush(true, Some(Flushed::Done(tx)))
                .map_err(self.io_error(op))?;
        }
        rx.await
            .unwrap_or_else(|_| Err(io::Error::other("the flush worker stopped")))
            .map_err(self.io_error(op))
    }

    /// The entries of `[from, to)`, decoded.
    fn entries(&self, from: u64, to: u64) -> Result<Vec<Entry>, LogStoreError> {
        if from >= to {
            return Ok(Vec::new());
        }
        let stored: Vec<(WalLogId, Payload)> = {
            let wal = self.lock();
            wal.read(from, to)
                .collect::<io::Result<_>>()
                .map_err(self.io_error("read log entries"))?
        };
        stored
            .iter()
            .map(|(id, payload)| self.decode_stored(id.index(), &payload.0))
            .collect()
    }

    fn decode_stored(&self, key: u64, bytes: &[u8]) -> Result<Entry, LogStoreError> {
        let entry = codec::decode_entry(bytes).map_err(|source| LogStoreError::Corrupt {
            path: self.path.to_path_buf(),
            what: format!("log entry at index {key}"),
            source,
        })?;
        if entry.log_id.index != key {
            return Err(LogStoreError::Misplaced {
                path: self.path.to_path_buf(),
                key,
                found: entry.log_id.index,
            });
        }
        Ok(entry)
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

/// `range` as the half-open `[from, to)` of log indexes it covers.
fn index_range<RB: RangeBounds<u64>>(range: &RB) -> (u64, u64) {
    let from = match range.start_bound() {
        Bound::Included(&i) => i,
        Bound::Excluded(&i) => i.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let to = match range.end_bound() {
        Bound::Included(&i) => i.saturating_add(1),
        Bound::Excluded(&i) => i,
        Bound::Unbounded => u64::MAX,
    };
    (from, to)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + fmt::Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        // Read in place: openraft reads entries to apply them moments after appending
        // them, so they are in memory, and a hop to the blocking pool cost more than the
        // read. Entries no longer cached (a restart's replay, a follower far behind) are
        // read from their chunk file by `pread` under the log's lock, the next chunk of
        // those committed at open on another thread meanwhile (see `readahead`).
        let (from, to) = index_range(&range);
        let read = if self.readahead.engaged((from, to)) {
            let reader = LogStore {
                wal: self.wal.clone(),
                path: self.path.clone(),
                stats: self.stats.clone(),
                readahead: Readahead::default(),
            };
            self.readahead
                .read((from, to), move |(from, to)| reader.entries(from, to))
        } else {
            self.entries(from, to)
        };
        read.map_err(|e| storage_error(ErrorSubject::Logs, ErrorVerb::Read, e))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let wal = self.lock();
        let state = wal.log_state();
        let purged = state.purged().copied().map(LogId::from);
        let last = state.last().copied().map(LogId::from);
        // A purge may reach past the last entry (after a snapshot was installed).
        let last = match (last, purged) {
            (Some(l), Some(p)) if p.index > l.index => Some(p),
            (l, p) => l.or(p),
        };
        Ok(LogState {
            last_log_id: last,
            last_purged_log_id: purged,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let vote = WalVote(*vote);
        self.durable("save the vote", |wal| wal.save_vote(vote))
            .await
            .map_err(|e| storage_error(ErrorSubject::Vote, ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.lock().log_state().vote().map(|v| v.0))
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let Some(committed) = committed else {
            return Ok(());
        };
        let mut wal = self.lock();
        // A hint: buffered, written with the next flush, never waited for. `raft-log`
        // refuses a committed id beyond its last entry (after a snapshot install the log
        // may hold none); the hint is then skipped, as losing it is harmless.
        if let Err(e) = wal.commit(committed.into()) {
            tracing::debug!(error = %e, index = committed.index, "committed hint not recorded");
            return Ok(());
        }
        wal.flush(false, None)
            .map_err(self.io_error("record the committed log id"))
            .map_err(|e| storage_error(ErrorSubject::Store, ErrorVerb::Write, e))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self
            .lock()
            .log_state()
            .committed()
            .copied()
            .map(LogId::from))
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
        let mut rows = Vec::new();
        let mut bytes = 0;
        // Entries at or below the purged index are in the state machine already (openraft
        // purges up to what a snapshot or the state machine covers when it starts with the
        // state machine ahead of the log); the log keeps only what follows them.
        let purged = self.lock().log_state().purged().map(WalLogId::index);
        for entry in entries {
            if purged.is_some_and(|p| entry.log_id.index <= p) {
                continue;
            }
            let encoded = codec::encode_entry(&entry).map_err(|source| {
                storage_error(
                    ErrorSubject::Log(entry.log_id),
                    ErrorVerb::Write,
                    LogStoreError::Encode {
                        path: self.path.to_path_buf(),
                        what: format!("log entry {}", entry.log_id),
                        source,
                    },
                )
            })?;
            bytes += encoded.len();
            rows.push((WalLogId::from(entry.log_id), Payload(encoded.into())));
        }
        if rows.is_empty() {
            callback.log_io_completed(Ok(()));
            return Ok(());
        }
        let count = rows.len();
        let write = |e| storage_error(ErrorSubject::Logs, ErrorVerb::Write, e);
        {
            // Readable from here on; durable when the flush worker calls back.
            let mut wal = self.lock();
            wal.append(rows)
                .map_err(self.io_error("append log entries"))
                .map_err(write)?;
            wal.flush(true, Some(Flushed::Log(callback)))
                .map_err(self.io_error("flush log entries"))
                .map_err(write)?;
        }
        self.stats.appended(count, bytes);
        let bucket = self.stats.bytes() / SWEEP_EVERY_BYTES;
        if self.stats.swept.swap(bucket, Relaxed) != bucket
            && let Err(e) = make_private(&self.path)
        {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot make the raft log's files private");
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(from = log_id.index, "truncating raft log");
        self.durable("truncate the log", |wal| wal.truncate(log_id.index))
            .await
            .map_err(|e| storage_error(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }

    /// Records the purge and asks for a sync, without waiting for it: openraft calls this
    /// from its core task, which would otherwise answer nothing (heartbeats included) for
    /// as long as the disk takes, and a snapshot just written can make that seconds. A
    /// purge lost to a crash leaves the purged entries in the log, below a snapshot that
    /// covers them, and never a hole; the chunk files go only after the purge record is
    /// synced (`raft-log` removes them after the next flush).
    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(upto = log_id.index, "purging raft log");
        let mut wal = self.lock();
        wal.purge(log_id.into())
            .and_then(|_| wal.flush(true, None))
            .map_err(self.io_error("purge the log"))
            .map_err(|e| storage_error(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }
}
