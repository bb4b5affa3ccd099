//! Counting plan rejections per node, so that a node the schedulers keep picking but the
//! applier keeps refusing (its state and the schedulers' view disagree, say because a
//! resource is held outside drover) can be marked ineligible instead of burning retries.
//!
//! Off by default, as in Nomad: a busy cluster refuses plans for honest reasons (capacity
//! raced away), and marking nodes ineligible is a strong reaction.

use crate::types::{NodeId, Timestamp};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// When a node counts as refused too often.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RejectionTrackerConfig {
    /// Off by default: `record` then always returns false and keeps nothing.
    pub enabled: bool,
    /// Rejections inside `window` that make the node cross the threshold.
    pub threshold: u32,
    /// The sliding window rejections are counted over.
    pub window: Duration,
    /// At most this many nodes are tracked; the one refused least recently is forgotten
    /// first. Bounds memory at `max_tracked_nodes · threshold` timestamps.
    pub max_tracked_nodes: usize,
}

impl Default for RejectionTrackerConfig {
    /// Nomad's defaults: off, 100 rejections in 5 minutes.
    fn default() -> Self {
        Self {
            enabled: false,
            threshold: 100,
            window: Duration::from_secs(300),
            max_tracked_nodes: 1024,
        }
    }
}

/// A configuration the tracker cannot work with.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum RejectionConfigError {
    #[error("rejection threshold must be at least 1, got {0}")]
    Threshold(u32),
    #[error("rejection window must be at least 1 ms, got {0:?}")]
    Window(Duration),
    #[error("max tracked nodes must be at least 1, got {0}")]
    MaxTrackedNodes(usize),
}

impl RejectionTrackerConfig {
    pub fn validate(&self) -> Result<(), RejectionConfigError> {
        if self.threshold == 0 {
            return Err(RejectionConfigError::Threshold(self.threshold));
        }
        if self.window.as_millis() == 0 {
            return Err(RejectionConfigError::Window(self.window));
        }
        if self.max_tracked_nodes == 0 {
            return Err(RejectionConfigError::MaxTrackedNodes(
                self.max_tracked_nodes,
            ));
        }
        Ok(())
    }
}

/// Rejections per node in a sliding window.
///
/// Invariants: at most `max_tracked_nodes` nodes are tracked, each with fewer than
/// `threshold` timestamps; a node whose newest rejection has left the window is dropped by
/// the next `record`; `by_last` holds exactly one `(newest rejection, node)` per tracked
/// node.
#[derive(Debug)]
pub struct RejectionTracker {
    config: RejectionTrackerConfig,
    /// A `BTreeMap`, not a `HashMap`: core draws no randomness, and `HashMap` seeds its
    /// hasher from the OS.
    nodes: BTreeMap<NodeId, VecDeque<Timestamp>>,
    by_last: BTreeSet<(Timestamp, NodeId)>,
}

impl RejectionTracker {
    pub fn new(config: RejectionTrackerConfig) -> Result<Self, RejectionConfigError> {
        config.validate()?;
        Ok(Self {
            config,
            nodes: BTreeMap::new(),
            by_last: BTreeSet::new(),
        })
    }

    pub fn config(&self) -> &RejectionTrackerConfig {
        &self.config
    }

    /// Records that a plan was refused on `node` at `now`. Returns true when this rejection
    /// makes the node reach the threshold within the window; the runtime then marks the node
    /// ineligible. The node's count starts again from zero after that, so it fires once per
    /// `threshold` rejections, not on every rejection after the threshold.
    pub fn record(&mut self, node: NodeId, now: Timestamp) -> bool {
        if !self.config.enabled {
            return false;
        }
        let cutoff = now.saturating_sub(self.config.window);
        self.prune(cutoff);
        if !self.nodes.contains_key(&node) && self.nodes.len() >= self.config.max_tracked_nodes {
            self.forget_least_recent();
        }
        let times = self.nodes.entry(node).or_default();
        let old_last = times.iter().max().copied();
        times.retain(|t| *t > cutoff);
        times.push_back(now);
        let crossed = times.len() >= self.config.threshold as usize;
        let new_last = old_last.map_or(now, |l| l.max(now));
        if let Some(l) = old_last {
            self.by_last.remove(&(l, node));
        }
        if crossed {
            self.nodes.remove(&node);
        } else {
            self.by_last.insert((new_last, node));
        }
        crossed
    }

    /// Rejections of `node` inside the window ending at `now`.
    pub fn count(&self, node: &NodeId, now: Timestamp) -> usize {
        let cutoff = now.saturating_sub(self.config.window);
        self.nodes
            .get(node)
            .map_or(0, |ts| ts.iter().filter(|t| **t > cutoff).count())
    }

    /// How many nodes have rejections recorded (bounded by `max_tracked_nodes`).
    pub fn tracked_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Forgets everything (leadership lost, or the feature switched off).
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.by_last.clear();
    }

    /// Drops nodes whose newest rejection is at or before `cutoff`: all their entries have
    /// left the window.
    fn prune(&mut self, cutoff: Timestamp) {
        while let Some(&(last, node)) = self.by_last.first() {
            if last > cutoff {
                break;
            }
            self.by_last.pop_first();
            self.nodes.remove(&node);
        }
    }

    fn forget_least_recent(&mut self) {
        if let Some((_, node)) = self.by_last.pop_first() {
            self.nodes.remove(&node);
        }
    }
}
