//! Whether the server was writing a Raft snapshot while something was measured, read from
//! the lines its log has for them. A snapshot of millions of allocations takes one of the
//! machine's cores for tens of seconds (at raised priority), so a console load measured
//! beside one says more about the snapshot than about the load.

/// The line the snapshot cadence logs when it asks for a snapshot for the log's size.
const ASKED: &str = "snapshot for the log's size";
/// The line the snapshot store logs once a snapshot is on disk.
const WRITTEN: &str = "raft snapshot written";

/// Counts of the snapshot lines in a server's log at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotLines {
    asked: u64,
    written: u64,
}

impl SnapshotLines {
    pub fn count(log: &str) -> SnapshotLines {
        let mut lines = SnapshotLines::default();
        for line in log.lines() {
            if line.contains(ASKED) {
                lines.asked += 1;
            } else if line.contains(WRITTEN) {
                lines.written += 1;
            }
        }
        lines
    }

    /// Whether a snapshot the cadence asked for is not written yet. (Openraft's own
    /// trigger, by entry count, logs no request: such a snapshot shows only once written.)
    fn pending(self) -> bool {
        self.asked > self.written
    }

    /// The snapshots being written at some point between `self` and `later`: those
    /// written in between, and one still pending at the end.
    pub fn overlapping(self, later: SnapshotLines) -> u64 {
        later.written.saturating_sub(self.written) + u64::from(later.pending())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(lines: &[&str]) -> String {
        lines
            .iter()
            .map(|l| format!("INFO x: {l} bytes=1\n"))
            .collect()
    }

    #[test]
    fn a_snapshot_pending_or_written_in_the_window_overlaps_it() {
        let quiet = log(&[ASKED, WRITTEN]);
        let asked = log(&[ASKED, WRITTEN, ASKED]);
        let done = log(&[ASKED, WRITTEN, ASKED, WRITTEN]);
        let count = |l: &str| SnapshotLines::count(l);
        assert_eq!(count(&quiet).overlapping(count(&quiet)), 0);
        // Pending from before the window to after it.
        assert_eq!(count(&asked).overlapping(count(&asked)), 1);
        // Asked for before, written during.
        assert_eq!(count(&asked).overlapping(count(&done)), 1);
        // Asked for and written during.
        assert_eq!(count(&quiet).overlapping(count(&done)), 1);
        // Openraft's own snapshot, unannounced, written during.
        assert_eq!(
            count(&quiet).overlapping(count(&log(&[ASKED, WRITTEN, WRITTEN]))),
            1
        );
        assert_eq!(count("unrelated\nlines\n"), SnapshotLines::default());
    }
}
