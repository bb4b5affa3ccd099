//! What a missed heartbeat does to a node: `disconnected` or `down` (Nomad's
//! `invalidateHeartbeat` / `disconnectState`).

use super::NodeHealthError;
use crate::state::StateSnapshot;
use crate::{
    Allocation, ClientStatus, DesiredStatus, JobKey, Node, NodeId, NodeStatus, TaskGroup, Timestamp,
};
use std::collections::BTreeSet;
use std::time::Duration;

/// The node status to write after a heartbeat expired.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ExpiryStatus {
    /// The node goes `down`: its allocations become `lost` and are replaced.
    Down,
    /// The node goes `disconnected`: allocations of groups that tolerate disconnects become
    /// `unknown` (desired status stays run). `until` is the latest end of their windows,
    /// after which whatever has not reconnected is lost.
    Disconnected { until: Timestamp },
}

/// The leader's decision for a node whose heartbeat timer fired.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ExpiryDecision {
    pub node_id: NodeId,
    pub status: ExpiryStatus,
    /// Every job with an allocation still running (not client-terminal) on the node: the
    /// runtime creates one node-update eval per job, in the same write as the status.
    pub jobs: BTreeSet<JobKey>,
}

impl ExpiryDecision {
    /// The status for `Command::NodeStatus`.
    pub fn node_status(&self) -> NodeStatus {
        match self.status {
            ExpiryStatus::Down => NodeStatus::Down,
            ExpiryStatus::Disconnected { .. } => NodeStatus::Disconnected,
        }
    }
}

/// Decides whether the node whose heartbeat expired at `now` becomes `disconnected` or
/// `down`.
///
/// `disconnected` when at least one allocation on it that is wanted running and not
/// client-terminal belongs to a group that tolerates disconnects and is still inside that
/// window; otherwise `down`. A node that is already `down`, or still `initializing`, goes
/// (stays) `down`, as in Nomad. The window of an allocation starts when it went `unknown`
/// (its newest `unknown` state entry), else when the node went `disconnected`, else now:
/// so a node that is already disconnected and expires again (a new leader's failover
/// timer) goes `down` once every window has elapsed.
///
/// The group is looked up in the job version the allocation was placed with, falling back
/// to the current job; an allocation whose group is gone tolerates nothing.
pub fn on_heartbeat_expiry(
    snapshot: &StateSnapshot,
    node_id: NodeId,
    now: Timestamp,
) -> Result<ExpiryDecision, NodeHealthError> {
    let node = snapshot
        .node(&node_id)
        .ok_or(NodeHealthError::NodeNotFound(node_id))?;
    let may_disconnect = !matches!(node.status, NodeStatus::Down | NodeStatus::Initializing);
    let mut jobs = BTreeSet::new();
    let mut until: Option<Timestamp> = None;
    for alloc in snapshot.allocs_by_node(&node_id) {
        if alloc.client_terminal() {
            continue;
        }
        let key = JobKey {
            namespace: alloc.namespace.clone(),
            id: alloc.job_id.clone(),
        };
        if may_disconnect && alloc.desired_status == DesiredStatus::Run {
            let window = snapshot
                .job_version(&key, alloc.job_version)
                .or_else(|| snapshot.job(&key))
                .and_then(|job| job.group(&alloc.task_group))
                .and_then(tolerated_disconnect);
            if let Some(window) = window {
                let end = disconnect_start(alloc, node, now).saturating_add(window);
                if end > now {
                    until = until.max(Some(end));
                }
            }
        }
        jobs.insert(key);
    }
    let status = match until {
        Some(until) => ExpiryStatus::Disconnected { until },
        None => ExpiryStatus::Down,
    };
    Ok(ExpiryDecision {
        node_id,
        status,
        jobs,
    })
}

/// How long a group keeps an allocation on a silent node rather than losing it at once: its
/// `disconnect.lost_after` (`max_client_disconnect`), or `stop_after_client_disconnect`
/// (which needs the node disconnected, not down, to stop the allocation after its delay);
/// the longer when both are set.
fn tolerated_disconnect(group: &TaskGroup) -> Option<Duration> {
    match (
        group.disconnect_window(),
        group.stop_after_client_disconnect,
    ) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// When the allocation's disconnect began (see [`on_heartbeat_expiry`]).
fn disconnect_start(alloc: &Allocation, node: &Node, now: Timestamp) -> Timestamp {
    let node_since = (node.status == NodeStatus::Disconnected).then_some(node.status_updated_at);
    if alloc.client_status == ClientStatus::Unknown {
        let unknown_since = alloc
            .state_history
            .iter()
            .rev()
            .find(|e| e.client_status == ClientStatus::Unknown)
            .map(|e| e.time);
        if let Some(t) = unknown_since.or(node_since) {
            return t;
        }
    }
    node_since.unwrap_or(now)
}
