//! Operator purge (Nomad's `nomad node purge`): a node is forgotten for good, and each job
//! that had work on it is evaluated so that the work is replaced elsewhere.
//!
//! The deregistration is written before the evals: a scheduler that runs one of them
//! always finds the node gone, so it treats the node's allocations as lost (state keeps a
//! gone node that still has allocations among the tainted nodes) rather than as running on
//! a node that is still there. The leader forgets the node's heartbeat timer and health when
//! it sees the deregistration, as it does after the lost sweep's.
//!
//! A node that is still `ready` may be purged, as in Nomad: its agent finds itself unknown
//! on its next heartbeat and registers again, with no allocations.

use crate::fsm::Command;
use crate::state::StateSnapshot;
use crate::types::{EvalId, NodeId, Timestamp};
use rand::Rng;

/// Why a purge was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodePurgeError {
    #[error("node {0} not found")]
    NotFound(NodeId),
}

/// What purging a node writes, in order, and the evals among it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePurge {
    /// The deregistration, then (when any job had work on the node) one `EvalUpsert`.
    pub commands: Vec<Command>,
    pub eval_ids: Vec<EvalId>,
}

/// Purges `node_id` as of `snap`: one node-update eval per job (of any type, system and
/// sysbatch included, since a deregistration is no change the per-node coalescing follows)
/// with an allocation on the node its client has not finished; eval ids drawn from `rng`.
pub fn node_purge(
    snap: &StateSnapshot,
    node_id: NodeId,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Result<NodePurge, NodePurgeError> {
    if snap.node(&node_id).is_none() {
        return Err(NodePurgeError::NotFound(node_id));
    }
    let jobs = super::evals::jobs_with_work_on(snap, node_id);
    let evals = super::evals::node_update_evals_where(snap, node_id, jobs, now, rng, |_| true);
    let eval_ids: Vec<EvalId> = evals.iter().map(|e| e.id).collect();
    tracing::info!(%node_id, evals = eval_ids.len(), "node purge decided");
    let mut commands = vec![Command::NodeDeregister {
        node_ids: vec![node_id],
        now,
    }];
    if !evals.is_empty() {
        commands.push(Command::EvalUpsert { evals });
    }
    Ok(NodePurge { commands, eval_ids })
}
