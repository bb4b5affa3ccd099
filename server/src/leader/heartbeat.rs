//! Node events that reach the leader through the handle (registrations, heartbeats,
//! operator offline / online, failures that point at a node): the engine decides, under
//! the lock; this wakes the leader loop when they move its due times earlier.

use super::Leadership;
use crate::error::ServerError;
use drover_core::fsm::Command;
use drover_core::leader::HeartbeatOutcome;
use drover_core::node_health::Readiness;
use drover_core::state::StateSnapshot;
use drover_core::{Node, NodeId, Timestamp};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The smoothed time a heartbeat takes to handle (an exponentially weighted average over
/// roughly the last eight), kept lock-free because every heartbeat updates it.
///
/// The time measured is the handler's (authentication, then the leader's decision under
/// its lock), wall clock: on a loaded server it grows with the waiting for a thread or
/// the lock, which is what should lengthen the TTLs. The gRPC transport around it is not
/// counted; the default CPU share leaves room for it (see `HeartbeatConfig`). `0` until
/// the first heartbeat.
#[derive(Debug, Default)]
pub(crate) struct HeartbeatCost {
    nanos: AtomicU64,
}

impl HeartbeatCost {
    pub(crate) fn record(&self, took: Duration) {
        let sample = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX).max(1);
        let _ = self
            .nanos
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some(if old == 0 {
                    sample
                } else {
                    // old + (sample - old) / 8, in signed arithmetic.
                    (old as i128 + (sample as i128 - old as i128) / 8).max(1) as u64
                })
            });
    }

    pub(crate) fn get(&self) -> Option<Duration> {
        match self.nanos.load(Ordering::Relaxed) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }
}

fn not_leader() -> ServerError {
    ServerError::NotLeader {
        leader_id: None,
        leader_addr: None,
    }
}

impl Leadership {
    /// A node registered (`node` as it will be written): starts its timer and returns its
    /// TTL and the registration with the health the tracker gives it.
    pub(crate) async fn node_registered(
        &self,
        node: Node,
        now: Timestamp,
    ) -> Result<(Node, Duration), ServerError> {
        let decided = self.core.lock().await.node_registered(node, now);
        self.wake.notify_one();
        decided.ok_or_else(not_leader)
    }

    /// A heartbeat of `node` (as in state) reporting `readiness`. The leader loop is woken
    /// only when the heartbeat made something fall due sooner: a steady heartbeat pushes
    /// its node's timer later, which the loop finds when it next wakes anyway.
    pub(crate) async fn node_heartbeat(
        &self,
        snap: &StateSnapshot,
        node: &Node,
        readiness: Readiness,
        now: Timestamp,
    ) -> Result<HeartbeatOutcome, ServerError> {
        let decided = {
            let mut core = self.core.lock().await;
            if let Some(cost) = self.heartbeat_cost.get() {
                core.heartbeats.set_measured_cost(cost);
            }
            core.node_heartbeat(snap, node, readiness, now)
        };
        let outcome = decided.ok_or_else(not_leader)?;
        // An error may come after the tracker changed: wake to be safe.
        if !matches!(&outcome, Ok(o) if !o.due_earlier) {
            self.wake.notify_one();
        }
        Ok(outcome?)
    }

    /// Operator offline / online: the commands to write.
    pub(crate) async fn node_offline(
        &self,
        snap: &StateSnapshot,
        node_id: NodeId,
        offline: bool,
        now: Timestamp,
    ) -> Result<Vec<Command>, ServerError> {
        let decided = self
            .core
            .lock()
            .await
            .node_offline(snap, node_id, offline, now);
        self.wake.notify_one();
        Ok(decided.ok_or_else(not_leader)??)
    }

    /// Failures that point at the node, each with its reason.
    pub(crate) async fn node_failures(
        &self,
        snap: &StateSnapshot,
        node_id: NodeId,
        reasons: &[String],
        now: Timestamp,
    ) -> Vec<Command> {
        let commands = self
            .core
            .lock()
            .await
            .node_failures(snap, node_id, reasons, now);
        self.wake.notify_one();
        commands
    }
}

#[cfg(test)]
mod tests {
    use super::HeartbeatCost;
    use std::time::Duration;

    #[test]
    fn the_cost_starts_unmeasured_and_follows_samples_smoothly() {
        let cost = HeartbeatCost::default();
        assert_eq!(cost.get(), None);
        cost.record(Duration::from_micros(80));
        assert_eq!(cost.get(), Some(Duration::from_micros(80)));
        // One slow heartbeat moves it an eighth of the way.
        cost.record(Duration::from_micros(880));
        assert_eq!(cost.get(), Some(Duration::from_micros(180)));
        for _ in 0..200 {
            cost.record(Duration::from_micros(40));
        }
        let settled = cost.get().expect("measured");
        assert!(
            settled >= Duration::from_micros(40) && settled < Duration::from_micros(41),
            "{settled:?}"
        );
    }
}
