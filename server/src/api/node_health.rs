//! The health figures the console shows, read from replicated state so any server answers
//! them: counts per health set, and for a lost or flaky node the time left before it is
//! deleted or its cool-down ends.
//!
//! Time left is counted from the node's `health_since`, which the leader writes when the
//! node enters the set, plus the configured grace or cool-down. The leader's own timers
//! start at the same moment, so the two agree to within one Raft write's latency.

use drover_core::node_health::{HealthConfig, HealthGauges};
use drover_core::state::StateSnapshot;
use drover_core::{Node, NodeHealth, SuspendReason, Timestamp};
use std::time::Duration;

/// Nodes per health set, splitting healthy nodes into free and running (holding an
/// allocation that still uses resources).
pub fn health_counts(snap: &StateSnapshot) -> HealthGauges {
    let mut g = HealthGauges::default();
    for node in snap.nodes() {
        match node.health {
            NodeHealth::Healthy => {
                g.healthy += 1;
                if snap.allocs_by_node(&node.id).any(|a| a.uses_resources()) {
                    g.running += 1;
                } else {
                    g.free += 1;
                }
            }
            NodeHealth::Suspended(SuspendReason::New) => g.suspended_new += 1,
            NodeHealth::Suspended(SuspendReason::Lost) => g.suspended_lost += 1,
            NodeHealth::Suspended(SuspendReason::Flaky) => g.suspended_flaky += 1,
            NodeHealth::Offlined => g.offlined += 1,
        }
    }
    g
}

/// For a lost node, the time left in its grace before it is deleted; for a flaky node, the
/// time left in its cool-down (zero once over, while it awaits its readiness check).
/// `None` for any other health.
pub fn health_time_left(node: &Node, config: &HealthConfig, now: Timestamp) -> Option<Duration> {
    let span = match node.health {
        NodeHealth::Suspended(SuspendReason::Lost) => config.lost_grace,
        NodeHealth::Suspended(SuspendReason::Flaky) => config.flaky_cool_down,
        _ => return None,
    };
    Some(node.health_since.saturating_add(span).since(now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::mock;

    #[test]
    fn time_left_counts_down_from_entering_the_set() {
        let config = HealthConfig {
            lost_grace: Duration::from_secs(60),
            flaky_cool_down: Duration::from_secs(900),
            ..HealthConfig::default()
        };
        let since = Timestamp::from_millis(1_000_000);
        // (health, seconds after entering it) -> expected time left in seconds
        let cases: Vec<(NodeHealth, u64, Option<u64>)> = vec![
            (NodeHealth::Suspended(SuspendReason::Lost), 0, Some(60)),
            (NodeHealth::Suspended(SuspendReason::Lost), 45, Some(15)),
            (NodeHealth::Suspended(SuspendReason::Lost), 90, Some(0)),
            (NodeHealth::Suspended(SuspendReason::Flaky), 300, Some(600)),
            (NodeHealth::Suspended(SuspendReason::Flaky), 1000, Some(0)),
            (NodeHealth::Suspended(SuspendReason::New), 10, None),
            (NodeHealth::Healthy, 10, None),
            (NodeHealth::Offlined, 10, None),
        ];
        for (health, after, want) in cases {
            let mut node = mock::node(1);
            node.health = health;
            node.health_since = since;
            let now = since.saturating_add(Duration::from_secs(after));
            let got = health_time_left(&node, &config, now).map(|d| d.as_secs());
            assert_eq!(got, want, "{} after {after}s", health.as_str());
        }
    }
}
