//! Tunables of the health tracker and the heartbeat timers. Defaults are Scoot's (lost
//! grace, flaky cool-down, readiness backoff) and Nomad's (heartbeat TTLs); tests shrink them
//! rather than wait.

use super::NodeHealthError;
use std::time::Duration;

/// Timings and thresholds of a [`NodeHealthTracker`](super::NodeHealthTracker).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthConfig {
    /// Wait between readiness checks of a node that is not ready yet (Scoot: 5 s).
    pub readiness_backoff: Duration,
    /// How long a lost node may stay lost before it is deleted (Scoot: 1 min).
    pub lost_grace: Duration,
    /// Infrastructure failures within [`flaky_window`](Self::flaky_window) that mark a
    /// node flaky.
    pub flaky_threshold: u32,
    /// The sliding window infrastructure failures are counted in.
    pub flaky_window: Duration,
    /// How long a flaky node sits out before its readiness is checked again (Scoot: 15 min).
    pub flaky_cool_down: Duration,
}

impl Default for HealthConfig {
    /// Scoot's lost grace (1 min), cool-down (15 min) and readiness backoff (5 s). Scoot
    /// flags a node flaky on a single failed run; drover counts instead, because one
    /// missing binary or full disk can be the job's fault: 3 failures in 10 minutes is
    /// rare for a sound machine, yet quick enough to stop a broken one from failing
    /// every allocation placed on it.
    fn default() -> Self {
        Self {
            readiness_backoff: Duration::from_secs(5),
            lost_grace: Duration::from_secs(60),
            flaky_threshold: 3,
            flaky_window: Duration::from_secs(10 * 60),
            flaky_cool_down: Duration::from_secs(15 * 60),
        }
    }
}

impl HealthConfig {
    /// Refuses settings the tracker cannot run with (see [`NodeHealthError`]).
    pub fn validate(&self) -> Result<(), NodeHealthError> {
        if self.readiness_backoff.as_millis() < 1 {
            return Err(NodeHealthError::ReadinessBackoffTooShort(
                self.readiness_backoff,
            ));
        }
        if self.flaky_threshold == 0 {
            return Err(NodeHealthError::FlakyThresholdZero(self.flaky_threshold));
        }
        if self.flaky_window.as_millis() < 1 {
            return Err(NodeHealthError::FlakyWindowTooShort(self.flaky_window));
        }
        Ok(())
    }
}

/// Nomad's heartbeat settings, used by [`HeartbeatTimers`](super::HeartbeatTimers).
#[derive(Clone, Debug, PartialEq)]
pub struct HeartbeatConfig {
    /// The shortest TTL handed to a node, whatever the cluster size (Nomad: 10 s).
    pub min_ttl: Duration,
    /// The heartbeat rate the leader is willing to absorb; above `min_ttl x rate` nodes,
    /// TTLs grow with the node count to keep the rate here (Nomad: 50 per second).
    pub max_heartbeats_per_second: f64,
    /// Added to the leader's timer on top of the TTL told to the node, so a heartbeat
    /// that is merely late does not mark the node down (Nomad: 10 s).
    pub grace: Duration,
    /// The one-off wait a new leader grants every node before its first heartbeat, so
    /// that an election does not mark the whole cluster down (Nomad: 5 min).
    pub failover_ttl: Duration,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        Self {
            min_ttl: Duration::from_secs(10),
            max_heartbeats_per_second: 50.0,
            grace: Duration::from_secs(10),
            failover_ttl: Duration::from_secs(5 * 60),
        }
    }
}

impl HeartbeatConfig {
    /// Refuses settings the timers cannot run with (see [`NodeHealthError`]).
    pub fn validate(&self) -> Result<(), NodeHealthError> {
        if self.min_ttl.as_millis() < 1 {
            return Err(NodeHealthError::MinTtlTooShort(self.min_ttl));
        }
        let rate = self.max_heartbeats_per_second;
        if !(rate.is_finite() && rate > 0.0) {
            return Err(NodeHealthError::InvalidHeartbeatRate(rate));
        }
        Ok(())
    }
}
