//! Why a node-health call was refused. Messages are lowercase and name the offending value.

use crate::NodeId;
use std::time::Duration;
use thiserror::Error;

#[derive(Clone, Debug, PartialEq, Error)]
pub enum NodeHealthError {
    /// The tracker holds no such node: never registered, or already deleted by the lost
    /// sweep or removed. A heartbeat refused for this reason tells the agent to register
    /// again.
    #[error("node {0} is not tracked by the health tracker")]
    NotTracked(NodeId),
    /// The state snapshot has no such node (deregistered since its timer was set).
    #[error("node {0} not found in state")]
    NodeNotFound(NodeId),
    /// A zero backoff would re-check readiness in a tight loop (times are whole
    /// milliseconds, so anything under one rounds to zero).
    #[error("readiness backoff must be at least 1ms, got {0:?}")]
    ReadinessBackoffTooShort(Duration),
    /// A threshold of zero would flag every node flaky before any failure.
    #[error("flaky threshold must be at least 1, got {0}")]
    FlakyThresholdZero(u32),
    /// A window shorter than a millisecond forgets every failure at once.
    #[error("flaky window must be at least 1ms, got {0:?}")]
    FlakyWindowTooShort(Duration),
    /// A zero minimum TTL would let a small cluster's nodes heartbeat continuously.
    #[error("minimum heartbeat ttl must be at least 1ms, got {0:?}")]
    MinTtlTooShort(Duration),
    /// The rate divides the node count; it must be a positive, finite number.
    #[error("max heartbeats per second must be positive and finite, got {0}")]
    InvalidHeartbeatRate(f64),
    /// The share of a core heartbeats may take, when the rate is derived from their cost.
    #[error("heartbeat cpu share must be above 0 and at most 1, got {0}")]
    InvalidCpuShare(f64),
}
