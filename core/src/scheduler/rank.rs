//! Ranking: how good a feasible node is for one allocation.
//!
//! A node's score is the mean of the components that apply to it, as Nomad normalizes:
//!
//! * **fit** (always): binpack or spread, from the cluster's [`SchedulerConfig`], in 0..=1;
//! * **job anti-affinity** (when allocations of the same job and group already are, or are
//!   planned to be, on the node): `-(collisions + 1) / count`, clamped to -1..=0;
//! * **penalty** (nodes the scheduler wants to avoid, e.g. where the allocation being
//!   replaced failed): -1;
//! * **preemption** (when the allocation fits only by evicting others): -1, so a node that
//!   fits without evictions wins whenever one is among the candidates.
//!
//! The mean lies in -1..=1. **Snapshot affinity** is then added on top as a tier boost of
//! [`SnapshotTier::boost`] (3 per tier, more than the whole range of the mean), so an idle
//! node that last ran the group's snapshot always beats a fresh idle node, which always beats
//! any other node, whatever their fit.
//!
//! [`SchedulerConfig`]: crate::types::SchedulerConfig

use crate::types::*;

/// Score of a node the scheduler asked to avoid.
pub const PENALTY_SCORE: f64 = -1.0;

/// Score of a node where the allocation fits only by preempting others.
pub const PREEMPTION_SCORE: f64 = -1.0;

/// How well a node's resources are used once `used` (everything on it including the new
/// allocation) is in place, from `capacity` (its allocatable resources); 0..=1, higher is
/// better.
///
/// Nomad's fit over CPU and memory: with `free_x = 1 - used_x / capacity_x`, binpack scores
/// `(20 - 10^free_cpu - 10^free_mem) / 18`, which grows as the node fills; spread scores
/// `(10^free_cpu + 10^free_mem - 2) / 18`, which grows as it empties. A dimension of zero
/// capacity counts as full.
pub fn fit_score(algorithm: SchedulerAlgorithm, capacity: &Resources, used: &Resources) -> f64 {
    fn free(used: u64, capacity: u64) -> f64 {
        if capacity == 0 {
            0.0
        } else {
            (1.0 - used as f64 / capacity as f64).clamp(0.0, 1.0)
        }
    }
    // 10^x as e^(x ln 10): the same value, and cheaper than a general power.
    let pow10 = |x: f64| (x * std::f64::consts::LN_10).exp();
    let total = pow10(free(used.cpu_mhz, capacity.cpu_mhz))
        + pow10(free(used.memory_mb, capacity.memory_mb));
    let raw = match algorithm {
        SchedulerAlgorithm::Binpack => 20.0 - total,
        SchedulerAlgorithm::Spread => total - 2.0,
    };
    raw.clamp(0.0, 18.0) / 18.0
}

/// Job anti-affinity for a node already holding `collisions` allocations of the same job and
/// group, for a group of `count`: `None` when there are none (the component does not apply).
pub fn anti_affinity_score(collisions: u32, count: u32) -> Option<f64> {
    (collisions > 0).then(|| (-f64::from(collisions + 1) / f64::from(count.max(1))).max(-1.0))
}

/// Where a node stands for a group that runs from a snapshot (an artifact), best last.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum SnapshotTier {
    /// Busy, or idle but last ran another snapshot.
    Other,
    /// Idle and has run nothing yet (`last_snapshot` unset).
    FreshIdle,
    /// Idle and last ran this very snapshot: its inputs are warm.
    WarmIdle,
}

impl SnapshotTier {
    /// The tier of `node` for `snapshot`; `idle` means nothing uses its resources once the
    /// plan so far is applied.
    pub fn of(node: &Node, idle: bool, snapshot: &str) -> SnapshotTier {
        match (idle, node.last_snapshot.as_deref()) {
            (true, Some(s)) if s == snapshot => SnapshotTier::WarmIdle,
            (true, None) => SnapshotTier::FreshIdle,
            _ => SnapshotTier::Other,
        }
    }

    /// Added to the normalized score: 3 per tier, larger than the range of the mean (2), so
    /// tiers never overlap.
    pub fn boost(self) -> f64 {
        match self {
            SnapshotTier::Other => 0.0,
            SnapshotTier::FreshIdle => 3.0,
            SnapshotTier::WarmIdle => 6.0,
        }
    }
}

/// The components of one node's score, summed as they are found.
#[derive(Clone, Copy, Debug, Default)]
pub struct Score {
    sum: f64,
    components: u32,
    boost: f64,
}

impl Score {
    /// Starts from the fit component, which always applies.
    pub fn fit(fit: f64) -> Score {
        Score {
            sum: fit,
            components: 1,
            boost: 0.0,
        }
    }

    /// Adds a component that applies to this node.
    pub fn add(&mut self, component: f64) {
        self.sum += component;
        self.components += 1;
    }

    /// Adds the snapshot-affinity boost (outside the mean; see the module docs).
    pub fn add_tier(&mut self, tier: SnapshotTier) {
        self.boost += tier.boost();
    }

    /// The mean of the components plus the tier boost.
    pub fn total(&self) -> f64 {
        self.sum / f64::from(self.components.max(1)) + self.boost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: Resources = Resources {
        cpu_mhz: 4000,
        memory_mb: 8000,
        disk_mb: 0,
    };

    #[test]
    fn fit_binpack_rises_and_spread_falls_with_use() {
        let empty = Resources::new(0, 0, 0);
        let half = Resources::new(2000, 4000, 0);
        let full = CAP;
        let bp = |u| fit_score(SchedulerAlgorithm::Binpack, &CAP, &u);
        let sp = |u| fit_score(SchedulerAlgorithm::Spread, &CAP, &u);
        assert!(bp(empty) < bp(half) && bp(half) < bp(full));
        assert!(sp(empty) > sp(half) && sp(half) > sp(full));
        assert_eq!(bp(empty), 0.0);
        assert_eq!(bp(full), 1.0);
        assert_eq!(sp(empty), 1.0);
        assert_eq!(sp(full), 0.0);
        // Over-use and zero capacity stay in range.
        let over = Resources::new(8000, 16000, 0);
        assert_eq!(bp(over), 1.0);
        assert_eq!(
            fit_score(SchedulerAlgorithm::Binpack, &Resources::ZERO, &half),
            1.0
        );
    }

    #[test]
    fn anti_affinity_applies_only_with_collisions() {
        for (collisions, count, want) in [
            (0, 3, None),
            (1, 3, Some(-2.0 / 3.0)),
            (2, 3, Some(-1.0)),
            (5, 3, Some(-1.0)),
            (1, 0, Some(-1.0)),
            (1, 10, Some(-0.2)),
        ] {
            assert_eq!(
                anti_affinity_score(collisions, count),
                want,
                "{collisions}/{count}"
            );
        }
    }

    #[test]
    fn snapshot_tiers_dominate_any_mean() {
        let mut node = Node::new(NodeId::MIN, "n", CAP);
        assert_eq!(SnapshotTier::of(&node, true, "s"), SnapshotTier::FreshIdle);
        assert_eq!(SnapshotTier::of(&node, false, "s"), SnapshotTier::Other);
        node.last_snapshot = Some("s".into());
        assert_eq!(SnapshotTier::of(&node, true, "s"), SnapshotTier::WarmIdle);
        assert_eq!(SnapshotTier::of(&node, true, "t"), SnapshotTier::Other);
        assert_eq!(SnapshotTier::of(&node, false, "s"), SnapshotTier::Other);

        let mut worst_warm = Score::fit(0.0);
        worst_warm.add(PENALTY_SCORE);
        worst_warm.add(PREEMPTION_SCORE);
        worst_warm.add_tier(SnapshotTier::WarmIdle);
        let mut best_fresh = Score::fit(1.0);
        best_fresh.add_tier(SnapshotTier::FreshIdle);
        let mut worst_fresh = Score::fit(0.0);
        worst_fresh.add(PENALTY_SCORE);
        worst_fresh.add_tier(SnapshotTier::FreshIdle);
        let best_other = Score::fit(1.0);
        assert!(worst_warm.total() > best_fresh.total());
        assert!(worst_fresh.total() > best_other.total());
    }

    #[test]
    fn score_is_mean_of_components() {
        let mut s = Score::fit(0.5);
        assert_eq!(s.total(), 0.5);
        s.add(PENALTY_SCORE);
        assert_eq!(s.total(), -0.25);
        s.add(-0.25);
        assert_eq!(s.total(), -0.25);
    }
}
