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

/// Heartbeat settings, used by [`HeartbeatTimers`](super::HeartbeatTimers).
///
/// Nomad caps the leader at a fixed 50 heartbeats a second, so its TTL grows with the
/// cluster (200 s at 10,000 nodes) and a dead node goes unnoticed for minutes. drover
/// derives the rate from what a heartbeat measurably costs the leader: at most
/// [`cpu_share`](Self::cpu_share) of one core, so a fast server hands out short TTLs
/// (and notices a dead node in seconds) while a slow or overloaded one, whose
/// heartbeats take longer, lengthens them to protect itself. An operator who wants
/// Nomad's fixed cap sets [`max_heartbeats_per_second`](Self::max_heartbeats_per_second).
#[derive(Clone, Debug, PartialEq)]
pub struct HeartbeatConfig {
    /// The shortest TTL handed to a node, whatever the cluster size.
    pub min_ttl: Duration,
    /// A fixed cap on the rate the leader absorbs; above `min_ttl x rate` nodes, TTLs grow
    /// with the node count to keep the rate here. `None`: the rate is derived from the
    /// measured cost of a heartbeat and [`cpu_share`](Self::cpu_share).
    pub max_heartbeats_per_second: Option<f64>,
    /// The share of one core heartbeats may take when the rate is derived.
    pub cpu_share: f64,
    /// Added to the leader's timer on top of the TTL told to the node, so a heartbeat
    /// that is merely late does not mark the node down.
    pub grace: Duration,
    /// The one-off wait a new leader grants every node before its first heartbeat, so
    /// that an election does not mark the whole cluster down (Nomad: 5 min).
    pub failover_ttl: Duration,
}

/// The cost assumed until a heartbeat has been measured: high, so a leader that just took
/// office errs towards longer TTLs.
pub const ASSUMED_HEARTBEAT_COST: Duration = Duration::from_micros(200);
/// The derived rate never drops below Nomad's fixed cap, so a leader whose heartbeats
/// look slow (a stall, a loaded machine) still never waits longer than Nomad would.
pub const MIN_DERIVED_RATE: f64 = 50.0;

impl Default for HeartbeatConfig {
    /// 5 s minimum TTL and 5 s grace: a node missing for 15 s at most (at most twice the
    /// TTL with its jitter, plus the grace) is noticed, against Nomad's 10 s and 10 s.
    /// A tenth of a core for heartbeats: at the measured cost of this server (about 50
    /// µs each, see BENCHMARKS.md) that is 2,000 a second, so up to 10,000 nodes keep the
    /// minimum TTL.
    fn default() -> Self {
        Self {
            min_ttl: Duration::from_secs(5),
            max_heartbeats_per_second: None,
            cpu_share: 0.1,
            grace: Duration::from_secs(5),
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
        if let Some(rate) = self.max_heartbeats_per_second
            && !(rate.is_finite() && rate > 0.0)
        {
            return Err(NodeHealthError::InvalidHeartbeatRate(rate));
        }
        let share = self.cpu_share;
        if !(share.is_finite() && share > 0.0 && share <= 1.0) {
            return Err(NodeHealthError::InvalidCpuShare(share));
        }
        Ok(())
    }
}
