//! Heartbeats on the leader: a registration or heartbeat resets the node's timer and tells
//! it its TTL; an expired timer marks the node `down` or `disconnected` (core's
//! [`on_heartbeat_expiry`]) with one node-update eval per affected job plus the system
//! jobs, and the node `suspended:lost` in the health view.

use super::broker_loop::Action;
use super::evals::{node_evals, node_update_evals};
use super::{LeaderCore, Leadership, health};
use crate::error::ServerError;
use drover_core::fsm::Command;
use drover_core::node_health::{ExpiryStatus, HealthDecision, Readiness, on_heartbeat_expiry};
use drover_core::state::StateSnapshot;
use drover_core::{Node, NodeHealth, NodeId, NodeStatus, Timestamp};
use std::time::Duration;

/// What a heartbeat or registration decided: the TTL to tell the node and the writes to
/// make, in order.
#[derive(Debug)]
pub(crate) struct HeartbeatOutcome {
    pub ttl: Duration,
    pub commands: Vec<Command>,
}

pub(super) fn on_expired(
    core: &mut LeaderCore,
    snap: &StateSnapshot,
    node_id: NodeId,
    now: Timestamp,
    actions: &mut Vec<Action>,
) {
    match on_heartbeat_expiry(snap, node_id, now) {
        Ok(decision) => {
            let status = decision.node_status();
            let description = match decision.status {
                ExpiryStatus::Down => "heartbeat missed".to_string(),
                ExpiryStatus::Disconnected { until } => {
                    format!("heartbeat missed; disconnected until {until}")
                }
            };
            tracing::info!(%node_id, status = status.as_str(), jobs = decision.jobs.len(), "node heartbeat expired");
            let current = snap.node(&node_id).map(|n| n.status);
            if let ExpiryStatus::Disconnected { until } = decision.status {
                // Looked at again when the windows end: down then, unless it is back.
                core.heartbeats.expire_at(node_id, until);
            }
            // A node already disconnected stays so until its windows end (no new write,
            // no new evals); one already down is not written again.
            if current != Some(status) {
                let evals = node_update_evals(snap, node_id, decision.jobs, now);
                actions.push(Action::Write(
                    Command::NodeStatus {
                        node_id,
                        status,
                        description,
                        now,
                        evals,
                    },
                    "node heartbeat expired",
                ));
            }
        }
        Err(e) => tracing::debug!(%node_id, error = %e, "expired node is gone"),
    }
    match core.health.heartbeat_missed(node_id, now) {
        Ok(decisions) => health::push_decisions(snap, decisions, now, actions),
        Err(e) => tracing::debug!(%node_id, error = %e, "expired node not tracked"),
    }
}

impl Leadership {
    /// A node registered (`node` as it will be written): resets its timer and returns its
    /// TTL and the registration with the health the tracker gives it.
    pub(crate) async fn node_registered(
        &self,
        mut node: Node,
        now: Timestamp,
    ) -> Result<(Node, Duration), ServerError> {
        let mut guard = self.lock_enabled().await?;
        let core = &mut *guard;
        core.health.register(node.id, now);
        node.health = core.health.health(&node.id).unwrap_or(node.health);
        let ttl = core.heartbeats.reset(node.id, now, &mut core.rng);
        drop(guard);
        self.wake.notify_one();
        Ok((node, ttl))
    }

    /// A heartbeat of `node` (as in state) reporting `readiness`.
    pub(crate) async fn node_heartbeat(
        &self,
        snap: &StateSnapshot,
        node: &Node,
        readiness: Readiness,
        now: Timestamp,
    ) -> Result<HeartbeatOutcome, ServerError> {
        let mut guard = self.lock_enabled().await?;
        let core = &mut *guard;
        let mut decisions = match core.health.heartbeat(node.id, now) {
            Ok(d) => d,
            // In state but unknown to the tracker (registered under another leader just
            // before this one took over): track it now.
            Err(_) => core.health.register(node.id, now),
        };
        decisions.extend(core.health.readiness(node.id, readiness, now)?);
        if !decisions
            .iter()
            .any(|d| matches!(d, HealthDecision::SetHealth { .. }))
        {
            // Nothing changed in the tracker: make sure state says what it says.
            decisions.extend(core.health.stored_mismatch(&node.id, node.health));
        }
        let ttl = core.heartbeats.reset(node.id, now, &mut core.rng);
        drop(guard);
        self.wake.notify_one();

        let mut commands = Vec::new();
        let status = match readiness {
            Readiness::Ready => NodeStatus::Ready,
            Readiness::NotYet | Readiness::Never => NodeStatus::Initializing,
        };
        let back = matches!(node.status, NodeStatus::Down | NodeStatus::Disconnected);
        if node.status != status && (status == NodeStatus::Ready || back) {
            tracing::info!(node_id = %node.id, from = node.status.as_str(), to = status.as_str(), "node status changed by heartbeat");
            commands.push(Command::NodeStatus {
                node_id: node.id,
                status,
                description: "heartbeat received".into(),
                now,
                evals: node_evals(snap, node.id, now),
            });
        }
        let mut actions = Vec::new();
        health::push_decisions(snap, decisions, now, &mut actions);
        commands.extend(actions.into_iter().filter_map(|a| match a {
            Action::Write(cmd, _) => Some(cmd),
            _ => None,
        }));
        drover_core::fsm::one_eval_per_job(&mut commands);
        Ok(HeartbeatOutcome { ttl, commands })
    }

    /// Operator offline / online: the command, and the tracker's view of the node after it.
    pub(crate) async fn node_offline(
        &self,
        snap: &StateSnapshot,
        node_id: NodeId,
        offline: bool,
        now: Timestamp,
    ) -> Result<Vec<Command>, ServerError> {
        let mut guard = self.lock_enabled().await?;
        let decisions = if offline {
            guard.health.offline(node_id, now)?
        } else {
            guard.health.online(node_id, now)?
        };
        drop(guard);
        self.wake.notify_one();
        let evals = node_evals(snap, node_id, now);
        let mut commands = vec![if offline {
            Command::NodeOffline {
                node_id,
                now,
                evals,
            }
        } else {
            Command::NodeOnline {
                node_id,
                now,
                evals,
            }
        }];
        // The FSM's own view of online (healthy if ready) may differ from the tracker's
        // (lost, flaky): the tracker's decision is written after it. Onlining a node that
        // was suspended, not offlined, is the operator's override, and its event says so.
        for d in decisions {
            if let HealthDecision::SetHealth { from, to, .. } = d
                && to != NodeHealth::Offlined
            {
                commands.push(match from {
                    Some(from) if from != NodeHealth::Offlined => Command::NodeHealthExplained {
                        node_id,
                        health: to,
                        reason: format!("operator override of {}: node online", from.as_str()),
                        now,
                        evals: node_evals(snap, node_id, now),
                    },
                    _ => Command::NodeHealth {
                        node_id,
                        health: to,
                        now,
                        evals: Vec::new(),
                    },
                });
            }
        }
        Ok(commands)
    }

    /// Infrastructure failures a node's agent reported, each with its reason: they count
    /// towards flaky, and a node made flaky has the reasons in its health event.
    pub(crate) async fn infra_failures(
        &self,
        snap: &StateSnapshot,
        node_id: NodeId,
        reasons: &[String],
        now: Timestamp,
    ) -> Vec<Command> {
        let Ok(mut core) = self.lock_enabled().await else {
            return Vec::new();
        };
        let mut decisions = Vec::new();
        for reason in reasons {
            match core.health.infra_failure(node_id, now, reason) {
                Ok(d) => decisions.extend(d),
                Err(_) => break,
            }
        }
        let flaky_reason = core.health.flaky_reason(&node_id).map(str::to_string);
        drop(core);
        let mut actions = Vec::new();
        health::push_explained(snap, decisions, now, &mut actions, |d| match d {
            HealthDecision::SetHealth {
                to: NodeHealth::Suspended(drover_core::SuspendReason::Flaky),
                ..
            } => flaky_reason.clone(),
            _ => None,
        });
        actions
            .into_iter()
            .filter_map(|a| match a {
                Action::Write(cmd, _) => Some(cmd),
                _ => None,
            })
            .collect()
    }
}
