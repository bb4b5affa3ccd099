//! Cluster status: node counts per health set.

use super::count;
use crate::v1 as pb;
use drover_core::node_health::HealthGauges;

impl From<&HealthGauges> for pb::NodeHealthCounts {
    fn from(g: &HealthGauges) -> Self {
        pb::NodeHealthCounts {
            healthy: count(g.healthy),
            free: count(g.free),
            running: count(g.running),
            suspended_new: count(g.suspended_new),
            suspended_lost: count(g.suspended_lost),
            suspended_flaky: count(g.suspended_flaky),
            offlined: count(g.offlined),
        }
    }
}
