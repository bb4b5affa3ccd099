//! Heartbeats on the leader: a registration or heartbeat resets the node's timer and tells
//! it its TTL; an expired timer marks the node `down` or `disconnected` (core's
//! [`on_heartbeat_expiry`]) with one node-update eval per affected job (system and
//! sysbatch jobs follow through the coalescing of `coalesce.rs` once the write is
//! applied), and the node `suspended:lost` in the health view. Operator offline / online and
//! infrastructure failures go through the health tracker here too.

use super::evals::{node_evals, node_update_evals};
use super::health::{push_decisions, push_explained};
use super::{Action, LeaderEngine};
use crate::fsm::{Command, one_eval_per_job};
use crate::node_health::{
    ExpiryStatus, HealthDecision, NodeHealthError, Readiness, on_heartbeat_expiry,
};
use crate::plan_check::Prioritized;
use crate::state::StateSnapshot;
use crate::types::{Node, NodeHealth, NodeId, NodeStatus, SuspendReason, Timestamp};
use std::time::Duration;

/// What a heartbeat decided: the TTL to tell the node and the writes to make, in order.
#[derive(Debug, PartialEq)]
pub struct HeartbeatOutcome {
    pub ttl: Duration,
    pub commands: Vec<Command>,
    /// The heartbeat may have made the engine's [`next_deadline`](LeaderEngine::next_deadline)
    /// earlier, so the runtime's loop must recompute its sleep. `false` promises it did not:
    /// a steady heartbeat only pushes its own node's timer later, and waking the loop for
    /// it would cost a turn of the loop per heartbeat.
    pub due_earlier: bool,
}

fn writes(actions: Vec<Action>) -> impl Iterator<Item = Command> {
    actions.into_iter().filter_map(|a| match a {
        Action::Write(cmd, _) => Some(cmd),
        _ => None,
    })
}

impl<P: Prioritized> LeaderEngine<P> {
    /// A node's heartbeat timer ran out at `now`: its status write and its health write,
    /// in that order, with one node-update eval per job between them.
    pub(super) fn heartbeat_expired(
        &mut self,
        snap: &StateSnapshot,
        node_id: NodeId,
        now: Timestamp,
        actions: &mut Vec<Action>,
    ) {
        let mut commands = Vec::new();
        let mut held_until = None;
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
                    self.heartbeats.expire_at(node_id, until);
                    held_until = Some(until);
                }
                // A node already disconnected stays so until its windows end (no new write,
                // no new evals); one already down is not written again.
                if current != Some(status) {
                    let evals = node_update_evals(snap, node_id, decision.jobs, now, &mut self.rng);
                    commands.push(Command::NodeStatus {
                        node_id,
                        status,
                        description,
                        now,
                        evals,
                    });
                }
            }
            Err(e) => tracing::debug!(%node_id, error = %e, "expired node is gone"),
        }
        let mut health = Vec::new();
        match self.health.heartbeat_missed(node_id, now) {
            Ok(decisions) => push_decisions(snap, decisions, now, &mut self.rng, &mut health),
            Err(e) => tracing::debug!(%node_id, error = %e, "expired node not tracked"),
        }
        if let Some(until) = held_until
            && let Err(e) = self.health.hold_lost_until(node_id, until, now)
        {
            tracing::debug!(%node_id, error = %e, "disconnected node not tracked");
        }
        commands.extend(writes(health));
        one_eval_per_job(&mut commands);
        // In order: the evals ride on the last write, and the schedulers must see the
        // status the first one sets.
        if !commands.is_empty() {
            actions.push(Action::Sequence(commands, "node heartbeat expired"));
        }
    }

    /// A node registered (`node` as it will be written): starts its timer and returns its
    /// TTL and the registration with the health the tracker gives it. `None` while not
    /// leading.
    pub fn node_registered(&mut self, mut node: Node, now: Timestamp) -> Option<(Node, Duration)> {
        if !self.is_answering() {
            return None;
        }
        self.health.register(node.id, now);
        node.health = self.health.health(&node.id).unwrap_or(node.health);
        let ttl = self.heartbeats.reset(node.id, now, &mut self.rng);
        Some((node, ttl))
    }

    /// A heartbeat of `node` (as in `snap`) reporting `readiness`: its new TTL, and the
    /// status and health writes it calls for (a heartbeat inside the lost grace always
    /// brings the node back, and a stored health that disagrees with the tracker is
    /// repaired). `None` while not leading.
    pub fn node_heartbeat(
        &mut self,
        snap: &StateSnapshot,
        node: &Node,
        readiness: Readiness,
        now: Timestamp,
    ) -> Option<Result<HeartbeatOutcome, NodeHealthError>> {
        if !self.is_answering() {
            return None;
        }
        // A heartbeat moves only heartbeat timers and health timers: if the earliest of
        // those did not move earlier, neither did the engine's earliest due time.
        let due_before = self.node_timers_due();
        let mut outcome = self.heartbeat(snap, node, readiness, now);
        if let Ok(outcome) = &mut outcome {
            outcome.due_earlier = match (self.node_timers_due(), due_before) {
                (Some(after), Some(before)) => after < before,
                (after, _) => after.is_some(),
            };
        }
        Some(outcome)
    }

    /// The earliest heartbeat or health timer.
    fn node_timers_due(&self) -> Option<Timestamp> {
        match (self.heartbeats.next_deadline(), self.health.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn heartbeat(
        &mut self,
        snap: &StateSnapshot,
        node: &Node,
        readiness: Readiness,
        now: Timestamp,
    ) -> Result<HeartbeatOutcome, NodeHealthError> {
        let mut decisions = match self.health.heartbeat(node.id, now) {
            Ok(d) => d,
            // In state but unknown to the tracker (registered under another leader just
            // before this one took over): track it now.
            Err(_) => self.health.register(node.id, now),
        };
        decisions.extend(self.health.readiness(node.id, readiness, now)?);
        if !decisions
            .iter()
            .any(|d| matches!(d, HealthDecision::SetHealth { .. }))
        {
            // Nothing changed in the tracker: make sure state says what it says.
            decisions.extend(self.health.stored_mismatch(&node.id, node.health));
        }
        let ttl = self.heartbeats.reset(node.id, now, &mut self.rng);

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
                evals: node_evals(snap, node.id, now, &mut self.rng),
            });
        }
        let mut actions = Vec::new();
        push_decisions(snap, decisions, now, &mut self.rng, &mut actions);
        commands.extend(writes(actions));
        one_eval_per_job(&mut commands);
        Ok(HeartbeatOutcome {
            ttl,
            commands,
            due_earlier: false,
        })
    }

    /// Operator offline (`offline`) or online: the commands to write. Onlining a node that
    /// was suspended, not offlined, is the operator's override, and its event says so.
    /// `None` while not leading.
    pub fn node_offline(
        &mut self,
        snap: &StateSnapshot,
        node_id: NodeId,
        offline: bool,
        now: Timestamp,
    ) -> Option<Result<Vec<Command>, NodeHealthError>> {
        if !self.is_answering() {
            return None;
        }
        let decisions = if offline {
            self.health.offline(node_id, now)
        } else {
            self.health.online(node_id, now)
        };
        let decisions = match decisions {
            Ok(d) => d,
            Err(e) => return Some(Err(e)),
        };
        let evals = node_evals(snap, node_id, now, &mut self.rng);
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
        // (lost, flaky): the tracker's decision is written after it.
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
                        evals: node_evals(snap, node_id, now, &mut self.rng),
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
        Some(Ok(commands))
    }

    /// Failures that point at the node, each with its reason: they count towards flaky,
    /// and a node made flaky has the reasons in its health event.
    pub fn node_failures(
        &mut self,
        snap: &StateSnapshot,
        node_id: NodeId,
        reasons: &[String],
        now: Timestamp,
    ) -> Vec<Command> {
        if !self.is_answering() {
            return Vec::new();
        }
        let mut decisions = Vec::new();
        for reason in reasons {
            match self.health.infra_failure(node_id, now, reason) {
                Ok(d) => decisions.extend(d),
                Err(_) => break,
            }
        }
        let flaky_reason = self.health.flaky_reason(&node_id).map(str::to_string);
        let mut actions = Vec::new();
        push_explained(
            snap,
            decisions,
            now,
            &mut self.rng,
            &mut actions,
            |d| match d {
                HealthDecision::SetHealth {
                    to: NodeHealth::Suspended(SuspendReason::Flaky),
                    ..
                } => flaky_reason.clone(),
                _ => None,
            },
        );
        writes(actions).collect()
    }
}
