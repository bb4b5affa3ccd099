//! Group commit for the Raft log: one thread owns every change to the log table and
//! commits whatever has queued up while the previous commit was on disk in one redb
//! transaction, so one fsync covers many entries.
//!
//! Why: openraft appends one client write at a time, and a redb commit rewrites several
//! B-tree pages however small the change, so committing each entry alone wrote about 20
//! times the log's own bytes and paid one fsync per entry. openraft's contract allows
//! the batching: `append` must make the entries readable before it returns and call the
//! callback once they are durable, so appends are answered from memory ([`Pending`])
//! until their transaction commits.
//!
//! Invariants: operations reach the disk in the order they were submitted (a truncate or
//! purge never overtakes an append queued before it); a callback is called only after
//! the transaction holding its entries committed with `Durability::Immediate`; an entry
//! is in [`Pending`] from its `append` until its commit, unless a later truncate removed
//! it first.

use super::log_store::{LogDb, LogStats, LogStoreError};
use super::types::{LogId, TypeConfig};
use openraft::storage::LogFlushed;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// The most operations one transaction takes, so a long queue still commits in pieces.
const MAX_OPS_PER_COMMIT: usize = 4_096;

/// One queued change.
pub(crate) enum Op {
    Append {
        rows: Vec<(u64, Arc<[u8]>)>,
        seq: u64,
        done: LogFlushed<TypeConfig>,
    },
    Truncate {
        from: u64,
        done: tokio::sync::oneshot::Sender<Result<(), LogStoreError>>,
    },
    Purge {
        upto: LogId,
        done: tokio::sync::oneshot::Sender<Result<(), LogStoreError>>,
    },
}

/// Entries appended but not yet committed, by index, each tagged with the append that
/// wrote it (a truncate and a new append may reuse an index while the old one waits).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    rows: BTreeMap<u64, (u64, Arc<[u8]>)>,
    next_seq: u64,
}

impl Pending {
    /// Makes `rows` readable and returns the tag of their append.
    pub(crate) fn add(&mut self, rows: &[(u64, Arc<[u8]>)]) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        for (index, bytes) in rows {
            self.rows.insert(*index, (seq, bytes.clone()));
        }
        seq
    }

    /// Forgets every entry at or after `from` (a truncate).
    pub(crate) fn truncate(&mut self, from: u64) {
        self.rows.split_off(&from);
    }

    /// The pending rows in `range`.
    pub(crate) fn range(&self, range: (Bound<u64>, Bound<u64>)) -> Vec<(u64, Arc<[u8]>)> {
        self.rows
            .range(range)
            .map(|(i, (_, b))| (*i, b.clone()))
            .collect()
    }

    pub(crate) fn last(&self) -> Option<(u64, Arc<[u8]>)> {
        self.rows
            .last_key_value()
            .map(|(i, (_, b))| (*i, b.clone()))
    }

    /// Drops the committed rows of append `seq` (not rows a later append put there).
    fn committed(&mut self, seq: u64, rows: &[(u64, Arc<[u8]>)]) {
        for (index, _) in rows {
            if self.rows.get(index).is_some_and(|(s, _)| *s == seq) {
                self.rows.remove(index);
            }
        }
    }
}

/// The writer thread's queue. Dropping it lets the thread finish the queue and waits for
/// it, so the database is closed when the last handle to the log is gone (a restart in
/// the same process can open it again at once).
#[derive(Debug)]
pub(crate) struct Writer {
    queue: Option<mpsc::Sender<Op>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    /// Queues `op`; `false` if the thread is gone.
    pub(crate) fn send(&self, op: Op) -> bool {
        self.queue.as_ref().is_some_and(|q| q.send(op).is_ok())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.queue.take();
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("raft log writer panicked");
        }
    }
}

/// Starts the writer thread; it ends when the [`Writer`] is dropped, after the queue.
pub(crate) fn spawn(
    db: Arc<LogDb>,
    pending: Arc<Mutex<Pending>>,
    stats: Arc<LogStats>,
) -> std::io::Result<Writer> {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("raft-log-writer".into())
        .spawn(move || run(&db, &pending, &stats, &rx))?;
    Ok(Writer {
        queue: Some(tx),
        thread: Some(thread),
    })
}

fn run(db: &LogDb, pending: &Mutex<Pending>, stats: &LogStats, rx: &mpsc::Receiver<Op>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_OPS_PER_COMMIT {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        let mut appends = Vec::new();
        for op in batch {
            match op {
                Op::Append { rows, seq, done } => appends.push((rows, seq, done)),
                Op::Truncate { from, done } => {
                    commit_appends(db, pending, stats, &mut appends);
                    let _ = done.send(db.truncate(from));
                }
                Op::Purge { upto, done } => {
                    commit_appends(db, pending, stats, &mut appends);
                    let _ = done.send(db.purge(upto));
                }
            }
        }
        commit_appends(db, pending, stats, &mut appends);
    }
}

type QueuedAppend = (Vec<(u64, Arc<[u8]>)>, u64, LogFlushed<TypeConfig>);

/// Commits the queued appends in one transaction, then answers each.
fn commit_appends(
    db: &LogDb,
    pending: &Mutex<Pending>,
    stats: &LogStats,
    appends: &mut Vec<QueuedAppend>,
) {
    if appends.is_empty() {
        return;
    }
    let rows = appends.iter().flat_map(|(rows, _, _)| rows.iter());
    let result = db.append(rows.clone());
    if result.is_ok() {
        stats.appended(rows.map(|(_, b)| b.len()));
        let mut pending = pending.lock().unwrap_or_else(|p| p.into_inner());
        for (rows, seq, _) in appends.iter() {
            pending.committed(*seq, rows);
        }
    }
    for (rows, _, done) in appends.drain(..) {
        let first = rows.first().map(|(i, _)| *i);
        match &result {
            Ok(()) => {
                tracing::trace!(first, count = rows.len(), "raft log entries durable");
                done.log_io_completed(Ok(()));
            }
            Err(e) => done.log_io_completed(Err(std::io::Error::other(e.to_string()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Pending;
    use std::ops::Bound;
    use std::sync::Arc;

    fn rows(indexes: std::ops::RangeInclusive<u64>, tag: u8) -> Vec<(u64, Arc<[u8]>)> {
        indexes.map(|i| (i, Arc::from(vec![tag]))).collect()
    }

    fn tags(p: &Pending) -> Vec<(u64, u8)> {
        p.range((Bound::Unbounded, Bound::Unbounded))
            .into_iter()
            .map(|(i, b)| (i, b[0]))
            .collect()
    }

    #[test]
    fn a_commit_never_drops_rows_a_later_append_wrote() {
        let mut p = Pending::default();
        let old = rows(1..=3, b'a');
        let first = p.add(&old);
        // Entries 2 and 3 are truncated and written again while the first append waits.
        p.truncate(2);
        let second = p.add(&rows(2..=3, b'b'));
        p.committed(first, &old);
        assert_eq!(tags(&p), vec![(2, b'b'), (3, b'b')]);
        p.committed(second, &rows(2..=3, b'b'));
        assert!(tags(&p).is_empty());
        assert!(p.last().is_none());
    }
}
