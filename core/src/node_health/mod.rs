//! Node health (leader only): Scoot's health sets, Nomad's heartbeat timers, and what a
//! missed heartbeat does to a node.
//!
//! Three pieces the leader's runtime drives, all pure (time is passed in, randomness comes
//! from a generator passed in, changes come back as decisions to write):
//!
//! - [`HeartbeatTimers`]: each heartbeat resets the node's timer and returns the TTL to
//!   tell it; the runtime polls [`HeartbeatTimers::expired`].
//! - [`on_heartbeat_expiry`]: for an expired node, `disconnected` or `down`, and the jobs
//!   that need a node-update eval.
//! - [`NodeHealthTracker`]: the health sets operators see (healthy, suspended new / lost /
//!   flaky, offlined), with readiness checks, the lost sweep and the flaky cool-down.
//!
//! ```text
//!  (none)           ── register ─────────────────────────► suspended:new
//!  suspended:new    ── readiness passes ─────────────────► healthy
//!  not offlined     ── heartbeat missed ─────────────────► suspended:lost
//!  suspended:lost   ── heartbeat within the grace ───────► healthy (or back to new / flaky)
//!  suspended:lost   ── grace over ───────────────────────► deleted
//!  healthy or new   ── failures reach the threshold ─────► suspended:flaky
//!  suspended:flaky  ── cool-down over, readiness passes ─► healthy, snapshot association reset
//!  any              ── offline ──────────────────────────► offlined (never deleted)
//!  offlined         ── online ───────────────────────────► healthy, or suspended as it stands
//! ```

mod config;
mod error;
mod expiry;
mod heartbeat;
mod tracker;
mod view;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod timer_proptests;

pub use config::{HealthConfig, HeartbeatConfig};
pub use error::NodeHealthError;
pub use expiry::{ExpiryDecision, ExpiryStatus, on_heartbeat_expiry};
pub use heartbeat::HeartbeatTimers;
pub use tracker::{HealthDecision, HealthGauges, HealthTick, NodeHealthTracker, Readiness};
pub use view::{HealthCounts, HealthPeriods, gauges_of, time_left};
