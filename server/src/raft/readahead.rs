//! Reading the next chunk of a restart's replay while the chunk before it is applied.
//!
//! At start-up openraft applies the committed entries after the snapshot again, 64 at a
//! time: it reads a chunk, applies it, then reads the next, all on one thread. At a million
//! allocations reading (a `pread` and a decode per entry) was a sixth of that thread's time,
//! while the machine's other core sat idle once the snapshot was loaded. So a read of
//! entries that were committed when the log was opened starts reading the range that follows
//! it, as long again, on a thread of its own, and the next read takes that result if it asks
//! for exactly that range.
//!
//! Invariant: only entries committed when the log was opened are read ahead. Raft never
//! truncates a committed entry, so a chunk read early holds what a read made later would
//! find. A purge can remove them meanwhile; a read ahead that failed is therefore never
//! answered, the read is made again and answers for itself.

use super::log_store::LogStoreError;
use super::types::Entry;
use std::thread::JoinHandle;

/// A half-open range of log indexes, `[from, to)`.
pub(super) type IndexRange = (u64, u64);

type Read = Result<Vec<Entry>, LogStoreError>;

/// At most one read ahead. A clone starts empty: each reader reads ahead for itself.
#[derive(Default)]
pub(super) struct Readahead {
    /// Entries below this index were committed when the log was opened.
    committed_end: u64,
    pending: Option<(IndexRange, JoinHandle<Read>)>,
    /// Reads answered by a read ahead (for tests and the restart's log line).
    hits: u64,
}

impl Clone for Readahead {
    fn clone(&self) -> Self {
        Readahead::new(self.committed_end)
    }
}

impl Readahead {
    /// Reads ahead within the first `committed_end` entries.
    pub(super) fn new(committed_end: u64) -> Readahead {
        Readahead {
            committed_end,
            pending: None,
            hits: 0,
        }
    }

    /// Reads `range` with `read`, from a read made ahead if one covered exactly `range`, and
    /// starts reading the range that follows it with `read` on another thread when that
    /// range holds only entries committed at open. A read ahead of any other range is
    /// dropped (its thread ends on its own).
    pub(super) fn read<F>(&mut self, range: IndexRange, read: F) -> Read
    where
        F: Fn(IndexRange) -> Read + Clone + Send + 'static,
    {
        let early = match self.pending.take() {
            Some((pending, thread)) if pending == range => thread.join().ok().and_then(Result::ok),
            _ => None,
        };
        if let Some(next) = self.next(range) {
            let read = read.clone();
            let spawned = std::thread::Builder::new()
                .name("raft-log-readahead".into())
                .spawn(move || read(next));
            // A thread that cannot start only costs the overlap.
            if let Ok(thread) = spawned {
                self.pending = Some((next, thread));
            }
        }
        match early {
            Some(entries) => {
                self.hits += 1;
                Ok(entries)
            }
            None => read(range),
        }
    }

    /// Whether a read of `range` would take or start a read ahead; when not, the caller
    /// reads in place and builds nothing for another thread (the steady state, once the
    /// entries committed at open are behind).
    pub(super) fn engaged(&self, range: IndexRange) -> bool {
        self.pending.is_some() || self.next(range).is_some()
    }

    /// The range after `range`, as long again and cut at the committed end; `None` when empty.
    fn next(&self, (from, to): IndexRange) -> Option<IndexRange> {
        let end = to
            .saturating_add(to.saturating_sub(from))
            .min(self.committed_end);
        (to < end).then_some((to, end))
    }

    /// How many reads a read ahead answered.
    #[cfg(test)]
    pub(super) fn hits(&self) -> u64 {
        self.hits
    }
}

impl Drop for Readahead {
    /// A replay's reader is dropped once the replay ends: its count says whether the reads
    /// overlapped the applies.
    fn drop(&mut self) {
        if self.hits > 0 {
            tracing::info!(
                chunks = self.hits,
                "raft log chunks read ahead of their apply"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload, LogId};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn entries((from, to): IndexRange) -> Vec<Entry> {
        (from..to)
            .map(|index| Entry {
                log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
                payload: EntryPayload::Blank,
            })
            .collect()
    }

    fn indexes(read: &Read) -> Vec<u64> {
        read.as_ref()
            .unwrap()
            .iter()
            .map(|e| e.log_id.index)
            .collect()
    }

    /// Reads `ranges` in order through one reader that reads ahead below `committed_end`;
    /// returns what each read answered, how many were answered early and how many reads
    /// the reader made in all.
    fn check(committed_end: u64, ranges: &[IndexRange]) -> (Vec<Vec<u64>>, u64, u64) {
        let made = Arc::new(AtomicU64::new(0));
        let counted = made.clone();
        let read = move |range: IndexRange| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(entries(range))
        };
        let mut ahead = Readahead::new(committed_end);
        let got = ranges
            .iter()
            .map(|&range| indexes(&ahead.read(range, read.clone())))
            .collect();
        // Let a read ahead that nobody takes finish before counting.
        if let Some((_, thread)) = ahead.pending.take() {
            let _ = thread.join();
        }
        (got, ahead.hits(), made.load(Ordering::SeqCst))
    }

    #[test]
    fn consecutive_chunks_below_the_committed_end_are_read_ahead() {
        let (got, hits, made) = check(10, &[(1, 4), (4, 7), (7, 10)]);
        assert_eq!(got, [vec![1, 2, 3], vec![4, 5, 6], vec![7, 8, 9]]);
        // The first read is made in place; the next two were read ahead; nothing past the
        // committed end was read.
        assert_eq!((hits, made), (2, 3));
    }

    #[test]
    fn a_read_ahead_stops_at_the_committed_end_and_never_answers_another_range() {
        // The second chunk is cut at the committed end (index 6), so a read of the whole
        // next chunk is made in place; so is a read that skips ahead.
        // (The dropped read of [4, 6) may still be running, so reads made are not counted.)
        let (got, hits, _) = check(6, &[(1, 4), (4, 7), (7, 9)]);
        assert_eq!(got, [vec![1, 2, 3], vec![4, 5, 6], vec![7, 8]]);
        assert_eq!(hits, 0);

        let (got, hits, _) = check(100, &[(1, 4), (10, 12), (12, 14)]);
        assert_eq!(got, [vec![1, 2, 3], vec![10, 11], vec![12, 13]]);
        assert_eq!(hits, 1);
    }

    #[test]
    fn nothing_is_read_ahead_past_a_log_committed_nowhere() {
        let (got, hits, made) = check(0, &[(1, 4), (4, 7)]);
        assert_eq!(got, [vec![1, 2, 3], vec![4, 5, 6]]);
        assert_eq!((hits, made), (0, 2));
    }

    #[test]
    fn a_failed_read_ahead_is_read_again() {
        let made = Arc::new(AtomicU64::new(0));
        let counted = made.clone();
        let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The read of [4, 7) fails the first time (a purge raced it), then succeeds. Keyed
        // on the range, not on the order of calls: the read ahead of [4, 7) runs on its own
        // thread and may start before the read of [1, 4) in place.
        let read = move |range: IndexRange| {
            counted.fetch_add(1, Ordering::SeqCst);
            if range == (4, 7) && !failed.swap(true, Ordering::SeqCst) {
                return Err(LogStoreError::Task {
                    path: "log".into(),
                    reason: "purged meanwhile".into(),
                });
            }
            Ok(entries(range))
        };
        let mut ahead = Readahead::new(7);
        assert_eq!(indexes(&ahead.read((1, 4), read.clone())), [1, 2, 3]);
        assert_eq!(indexes(&ahead.read((4, 7), read)), [4, 5, 6]);
        assert_eq!(ahead.hits(), 0);
        assert_eq!(made.load(Ordering::SeqCst), 3);
    }
}
