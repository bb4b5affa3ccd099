//! Memory of recent unblocks, for catching evals that missed one while being scheduled.
//!
//! A scheduler works from a snapshot at some index; while it runs, a node may free
//! capacity and trigger an unblock that the eval, not yet blocked, cannot see. So each
//! unblock records its Raft index per class (and per node, and overall), and an eval whose
//! snapshot is older than an unblock that could have released it is enqueued at once.
//!
//! Unblocks are forgotten after a window, so the memory stays bounded by the number of
//! classes and nodes that changed recently. The tracker reads no clock and unblocks carry
//! no time, so time is attached in epochs: every record belongs to the current epoch, and
//! `prune(now)` closes that epoch at `now`, an upper bound on when its records were made.
//! A record is dropped only once its epoch closed at least `window` ago.
//!
//! Invariant: every unblock is remembered for at least `window` after it happened. The
//! missed-unblock check is therefore exact for any eval whose time between snapshot and
//! block is shorter than the window.

use crate::{Index, NodeId, Timestamp};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// The latest unblock index of one key, and the epoch it was recorded in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Mark {
    index: Index,
    epoch: u64,
}

#[derive(Default, Debug)]
pub(super) struct UnblockIndexes {
    classes: HashMap<String, Mark>,
    nodes: HashMap<NodeId, Mark>,
    /// The latest unblock of any class: what an escaped eval compares against.
    any_class: Option<Mark>,
    /// The epoch records are made in now.
    epoch: u64,
    /// Whether anything was recorded in the current epoch (else closing it is pointless).
    epoch_used: bool,
    /// Closed epochs, oldest first: every record of epoch `e` or earlier was made by `t`.
    closed: VecDeque<(u64, Timestamp)>,
}

impl UnblockIndexes {
    pub(super) fn record_class(&mut self, class: &str, index: Index) {
        let mark = self.mark(index);
        match self.classes.get_mut(class) {
            Some(m) => raise(m, mark),
            None => {
                self.classes.insert(class.to_owned(), mark);
            }
        }
        match &mut self.any_class {
            Some(m) => raise(m, mark),
            None => self.any_class = Some(mark),
        }
    }

    pub(super) fn record_node(&mut self, node: NodeId, index: Index) {
        let mark = self.mark(index);
        raise(self.nodes.entry(node).or_insert(mark), mark);
    }

    /// The latest remembered unblock index of each class.
    pub(super) fn classes(&self) -> impl Iterator<Item = (&str, Index)> {
        self.classes.iter().map(|(c, m)| (c.as_str(), m.index))
    }

    pub(super) fn any_class(&self) -> Option<Index> {
        self.any_class.map(|m| m.index)
    }

    pub(super) fn node(&self, node: &NodeId) -> Option<Index> {
        self.nodes.get(node).map(|m| m.index)
    }

    /// Closes the current epoch at `now` and forgets records from epochs closed at least
    /// `window` before `now`. Returns how many records were forgotten.
    pub(super) fn prune(&mut self, now: Timestamp, window: Duration) -> usize {
        if self.epoch_used {
            self.closed.push_back((self.epoch, now));
            self.epoch += 1;
            self.epoch_used = false;
        }
        let cutoff = now.saturating_sub(window);
        let mut expired = None;
        while let Some(&(epoch, closed_at)) = self.closed.front() {
            if closed_at > cutoff {
                break;
            }
            expired = Some(epoch);
            self.closed.pop_front();
        }
        let Some(expired) = expired else { return 0 };
        let keep = |m: &Mark| m.epoch > expired;
        let before = self.classes.len() + self.nodes.len() + usize::from(self.any_class.is_some());
        self.classes.retain(|_, m| keep(m));
        self.nodes.retain(|_, m| keep(m));
        self.any_class = self.any_class.filter(keep);
        before - (self.classes.len() + self.nodes.len() + usize::from(self.any_class.is_some()))
    }

    pub(super) fn clear(&mut self) {
        *self = UnblockIndexes::default();
    }

    fn mark(&mut self, index: Index) -> Mark {
        self.epoch_used = true;
        Mark {
            index,
            epoch: self.epoch,
        }
    }
}

/// Keeps the higher index; a re-recorded index refreshes its epoch so it lives a full
/// window from its latest sighting.
fn raise(current: &mut Mark, new: Mark) {
    if new.index >= current.index {
        *current = new;
    }
}
