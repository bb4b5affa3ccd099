//! Node health on the leader: the tracker's decisions become Raft writes, and its readiness
//! checks are answered from state (a node is ready when its status is `ready`).

use super::evals::node_evals;
use super::{Action, LeaderEngine};
use crate::fsm::Command;
use crate::node_health::{HealthDecision, Readiness};
use crate::plan_check::Prioritized;
use crate::state::StateSnapshot;
use crate::types::{NodeHealth, NodeId, NodeStatus, Timestamp};
use rand::Rng;

/// Turns tracker decisions into writes. A node entering or leaving `healthy` gets the
/// node-update evals its change calls for; a first health goes into the registration, not
/// a write of its own.
pub(super) fn push_decisions(
    snap: &StateSnapshot,
    decisions: Vec<HealthDecision>,
    now: Timestamp,
    rng: &mut impl Rng,
    actions: &mut Vec<Action>,
) {
    push_explained(snap, decisions, now, rng, actions, |_| None);
}

/// [`push_decisions`], with `explain` giving the reason a health change is written with
/// (it shows in the node's events), where there is one.
pub(super) fn push_explained(
    snap: &StateSnapshot,
    decisions: Vec<HealthDecision>,
    now: Timestamp,
    rng: &mut impl Rng,
    actions: &mut Vec<Action>,
    explain: impl Fn(&HealthDecision) -> Option<String>,
) {
    for d in decisions {
        let reason = explain(&d);
        let node_id = d.node_id();
        match d {
            HealthDecision::SetHealth { from: None, .. } => {}
            HealthDecision::SetHealth {
                from: Some(from),
                to,
                ..
            } => {
                tracing::info!(%node_id, from = from.as_str(), to = to.as_str(), "node health changed");
                let crosses = (from == NodeHealth::Healthy) != (to == NodeHealth::Healthy);
                let evals = if crosses {
                    node_evals(snap, node_id, now, rng)
                } else {
                    Vec::new()
                };
                let command = match reason {
                    Some(reason) => Command::NodeHealthExplained {
                        node_id,
                        health: to,
                        reason,
                        now,
                        evals,
                    },
                    None => Command::NodeHealth {
                        node_id,
                        health: to,
                        now,
                        evals,
                    },
                };
                actions.push(Action::Write(command, "node health"));
            }
            HealthDecision::ResetSnapshot { .. } => {
                actions.push(Action::Write(d.command(now), "node snapshot reset"));
            }
            HealthDecision::Delete { .. } => {
                tracing::info!(%node_id, "lost node past its grace: deleting it");
                actions.push(Action::Write(d.command(now), "lost node deleted"));
            }
        }
    }
}

impl<P: Prioritized> LeaderEngine<P> {
    /// A readiness check the tracker asked for, answered from the node's status in state.
    pub(super) fn check_readiness(
        &mut self,
        snap: &StateSnapshot,
        node_id: NodeId,
        now: Timestamp,
        actions: &mut Vec<Action>,
    ) {
        // A node not in state yet (its registration is still being written) is not ready.
        let ready = snap
            .node(&node_id)
            .is_some_and(|n| n.status == NodeStatus::Ready);
        let result = if ready {
            Readiness::Ready
        } else {
            Readiness::NotYet
        };
        match self.health.readiness(node_id, result, now) {
            Ok(decisions) => push_decisions(snap, decisions, now, &mut self.rng, actions),
            Err(e) => tracing::debug!(%node_id, error = %e, "readiness result not taken"),
        }
    }
}
