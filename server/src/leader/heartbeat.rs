//! Node events that reach the leader through the handle (registrations, heartbeats,
//! operator offline / online, failures that point at a node): the engine decides, under
//! the lock; this wakes the leader loop, whose due times they move.

use super::Leadership;
use crate::error::ServerError;
use drover_core::fsm::Command;
use drover_core::leader::HeartbeatOutcome;
use drover_core::node_health::Readiness;
use drover_core::state::StateSnapshot;
use drover_core::{Node, NodeId, Timestamp};
use std::time::Duration;

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

    /// A heartbeat of `node` (as in state) reporting `readiness`.
    pub(crate) async fn node_heartbeat(
        &self,
        snap: &StateSnapshot,
        node: &Node,
        readiness: Readiness,
        now: Timestamp,
    ) -> Result<HeartbeatOutcome, ServerError> {
        let decided = self
            .core
            .lock()
            .await
            .node_heartbeat(snap, node, readiness, now);
        self.wake.notify_one();
        Ok(decided.ok_or_else(not_leader)??)
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
