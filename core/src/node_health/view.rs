//! Node health as everyone outside the leader reads it, from replicated state: counts per
//! health set and, for a lost or flaky node, the time left. The server's API and metrics
//! and the console all call these, so their figures cannot drift apart.
//!
//! Time left is counted from the node's `health_since`, which the leader writes when the
//! node enters the set, plus the configured grace or cool-down. The leader's own timers
//! start at the same moment, so the two agree to within one Raft write's latency.

use super::{HealthConfig, HealthGauges};
use crate::state::StateStore;
use crate::{Node, NodeHealth, SuspendReason, Timestamp};
use std::time::Duration;

/// The periods a suspension lasts: a lost node is deleted after the grace, a flaky one is
/// checked again after the cool-down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthPeriods {
    pub lost_grace: Duration,
    pub flaky_cool_down: Duration,
}

impl From<&HealthConfig> for HealthPeriods {
    fn from(c: &HealthConfig) -> Self {
        HealthPeriods {
            lost_grace: c.lost_grace,
            flaky_cool_down: c.flaky_cool_down,
        }
    }
}

impl Default for HealthPeriods {
    fn default() -> Self {
        HealthPeriods::from(&HealthConfig::default())
    }
}

/// For a lost node, the time left in its grace before it is deleted; for a flaky node, the
/// time left in its cool-down (zero once over, while it awaits its readiness check).
/// `None` for any other health.
pub fn time_left(node: &Node, periods: &HealthPeriods, now: Timestamp) -> Option<Duration> {
    let span = match node.health {
        NodeHealth::Suspended(SuspendReason::Lost) => periods.lost_grace,
        NodeHealth::Suspended(SuspendReason::Flaky) => periods.flaky_cool_down,
        _ => return None,
    };
    Some(node.health_since.saturating_add(span).since(now))
}

/// Nodes per health set (Scoot's view): what the console's header and the API's counts
/// show. Kept incrementally by the console ([`Self::add`]) or counted at once ([`Self::of`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HealthCounts {
    pub healthy: usize,
    pub new: usize,
    pub lost: usize,
    pub flaky: usize,
    pub offlined: usize,
}

impl HealthCounts {
    pub fn of<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> Self {
        let mut c = HealthCounts::default();
        for node in nodes {
            c.add(node.health, 1);
        }
        c
    }

    /// Counts `delta` more (or fewer) nodes of `health`.
    pub fn add(&mut self, health: NodeHealth, delta: isize) {
        let slot = match health {
            NodeHealth::Healthy => &mut self.healthy,
            NodeHealth::Suspended(SuspendReason::New) => &mut self.new,
            NodeHealth::Suspended(SuspendReason::Lost) => &mut self.lost,
            NodeHealth::Suspended(SuspendReason::Flaky) => &mut self.flaky,
            NodeHealth::Offlined => &mut self.offlined,
        };
        *slot = slot.saturating_add_signed(delta);
    }

    pub fn suspended(&self) -> usize {
        self.new + self.lost + self.flaky
    }
}

/// The gauges from state: the counts per set, with healthy nodes split into free and
/// running (holding an allocation that still uses resources).
pub fn gauges_of(state: &StateStore) -> HealthGauges {
    let mut counts = HealthCounts::default();
    let mut running = 0;
    for (node, usage) in state.nodes_with_use() {
        counts.add(node.health, 1);
        if node.health == NodeHealth::Healthy && usage.is_some_and(|u| u.runs_allocations()) {
            running += 1;
        }
    }
    HealthGauges {
        healthy: counts.healthy,
        free: counts.healthy - running,
        running,
        suspended_new: counts.new,
        suspended_lost: counts.lost,
        suspended_flaky: counts.flaky,
        offlined: counts.offlined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock;

    const T0: Timestamp = Timestamp(1_700_000_000_000);

    #[test]
    fn time_left_counts_down_from_entering_the_set() {
        let periods = HealthPeriods {
            lost_grace: Duration::from_secs(60),
            flaky_cool_down: Duration::from_secs(900),
        };
        let lost = NodeHealth::Suspended(SuspendReason::Lost);
        let flaky = NodeHealth::Suspended(SuspendReason::Flaky);
        // (health, seconds since it entered the set, seconds left)
        let cases = [
            (lost, 0, Some(60)),
            (lost, 45, Some(15)),
            (lost, 90, Some(0)),
            (flaky, 300, Some(600)),
            (flaky, 1000, Some(0)),
            (NodeHealth::Healthy, 10, None),
            (NodeHealth::Offlined, 10, None),
            (NodeHealth::Suspended(SuspendReason::New), 10, None),
        ];
        for (health, ago, want) in cases {
            let mut node = mock::node(1);
            node.health = health;
            node.health_since = T0;
            let now = T0.saturating_add(Duration::from_secs(ago));
            let got = time_left(&node, &periods, now).map(|d| d.as_secs());
            assert_eq!(got, want, "{health:?} after {ago}s");
        }
    }

    #[test]
    fn counts_follow_additions_and_removals() {
        let healths = [
            NodeHealth::Healthy,
            NodeHealth::Healthy,
            NodeHealth::Suspended(SuspendReason::Lost),
            NodeHealth::Suspended(SuspendReason::Flaky),
            NodeHealth::Suspended(SuspendReason::New),
            NodeHealth::Offlined,
        ];
        let nodes: Vec<Node> = healths
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let mut n = mock::node(i as u64);
                n.health = *h;
                n
            })
            .collect();
        let mut c = HealthCounts::of(&nodes);
        assert_eq!((c.healthy, c.suspended(), c.offlined), (2, 3, 1));
        c.add(NodeHealth::Healthy, -1);
        c.add(NodeHealth::Suspended(SuspendReason::Lost), 1);
        assert_eq!((c.healthy, c.lost, c.suspended()), (1, 2, 4));
    }
}
