//! Snapshots by the log's bytes, beside openraft's count of entries.
//!
//! A count of entries fits neither end: 10,000 small heartbeat-era entries are a few
//! megabytes, while 10,000 coalesced entries of allocation reports can be gigabytes that a
//! restart must replay. So a snapshot is also taken once the log appended since the last
//! one holds at least half as many bytes as that snapshot (and at least
//! [`MIN_LOG_BYTES`]): a restart then replays at most about half a snapshot's worth of log
//! after loading the snapshot (at a million allocations, 4 s to load the snapshot and as
//! much again to replay a whole snapshot's worth of log), and snapshot writes stay within
//! about twice the log's own bytes (a snapshot grows by at most the log written since the
//! last one). A quarter was measured (2026-11-28, c1m and restart at a million
//! allocations): the replay shrank from 5 s to 1 s, but the snapshot load grew by 2-3 s
//! (the later snapshot holds more), and each extra snapshot's writes queued the log's
//! fsyncs, so placement took 15-20 % longer.

use super::log_store::LogStats;
use super::types::ServerId;
use openraft::Raft;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Below this much log since the last snapshot, none is taken for bytes' sake.
pub const MIN_LOG_BYTES: u64 = 64 * 1024 * 1024;
/// How often the log's bytes are compared.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// `value` scaled by this server's place in the cluster: 1, 1.15, 1.3 or 1.45 times for
/// server ids 1, 2, 3, 4 (then again from 1). Every server applies the same entries, so
/// one cadence would have them all write a snapshot of the same size at the same index:
/// each snapshot floods its disk with dirty pages that the next log fsync waits behind,
/// and three at once stall every follower's acknowledgements together, which loses the
/// leader its quorum. Staggered, at most one server of a quorum is snapshotting at a time.
pub fn staggered(value: u64, node_id: ServerId) -> u64 {
    let step = node_id.saturating_sub(1) % 4;
    value.saturating_add(value / 100 * 15 * step)
}

/// Whether a snapshot is due: `since` log bytes appended after the last snapshot, whose
/// file holds `last` bytes.
pub fn due(since: u64, last: u64, min: u64) -> bool {
    since >= min.max(last / 2)
}

/// The watching task; dropping it stops the task, so it never keeps a dropped Raft node
/// (and its open log) alive.
#[derive(Debug)]
pub(crate) struct Cadence(tokio::task::JoinHandle<()>);

impl Drop for Cadence {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Watches the log's bytes and asks openraft for a snapshot when [`due`]; ends when the
/// Raft node stops or the returned [`Cadence`] is dropped.
pub(crate) fn spawn(
    raft: Raft<super::types::TypeConfig>,
    stats: Arc<LogStats>,
    snapshot_file: PathBuf,
    min_log_bytes: u64,
    node_id: ServerId,
) -> Cadence {
    Cadence(tokio::spawn(async move {
        let mut last_snapshot = raft.metrics().borrow().snapshot;
        let mut mark = stats.bytes();
        let mut asked = false;
        loop {
            tokio::time::sleep(CHECK_EVERY).await;
            let metrics = raft.metrics().borrow().clone();
            if metrics.running_state.is_err() {
                return;
            }
            if metrics.snapshot != last_snapshot {
                last_snapshot = metrics.snapshot;
                mark = stats.bytes();
                asked = false;
            }
            let since = stats.bytes().saturating_sub(mark);
            let last = std::fs::metadata(&snapshot_file).map_or(0, |m| m.len());
            let (last_scaled, min_scaled) =
                (staggered(last, node_id), staggered(min_log_bytes, node_id));
            if !asked && due(since, last_scaled, min_scaled) {
                tracing::info!(
                    node_id,
                    log_bytes = since,
                    snapshot_bytes = last,
                    "snapshot for the log's size"
                );
                if raft.trigger().snapshot().await.is_err() {
                    return;
                }
                asked = true;
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::{due, staggered};

    #[test]
    fn servers_of_one_cluster_snapshot_at_different_points() {
        let at: Vec<u64> = (1..=5).map(|id| staggered(10_000, id)).collect();
        assert_eq!(at, [10_000, 11_500, 13_000, 14_500, 10_000]);
        assert_eq!(staggered(u64::MAX, 3), u64::MAX);
    }

    #[test]
    fn a_snapshot_is_due_once_the_log_outgrows_the_last_one() {
        const MIB: u64 = 1024 * 1024;
        let min = 64 * MIB;
        let cases: &[(u64, u64, bool)] = &[
            // Small state: the minimum rules.
            (10 * MIB, 0, false),
            (64 * MIB, 0, true),
            (64 * MIB, 5 * MIB, true),
            // Big state: half as many log bytes as the snapshot holds.
            (100 * MIB, 300 * MIB, false),
            (150 * MIB, 300 * MIB, true),
        ];
        for &(since, last, want) in cases {
            assert_eq!(due(since, last, min), want, "{since} since, last {last}");
        }
    }
}
