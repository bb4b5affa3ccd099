//! Nodes: what agents call (register, heartbeat, allocation updates, their allocations)
//! and what operators call (offline / online, drain, eligibility, purge).

use crate::clock::now;
use crate::error::ServerError;
use crate::handle::ServerHandle;
use drover_core::client_report::{self, ClientReportError};
use drover_core::fsm::{AllocServices, Command, NodeAllocUpdates};
use drover_core::state::StateSnapshot;
use drover_core::types::*;
use drover_proto::convert::{
    AllocUpdates, DrainRequest, EligibilityChange, Heartbeat, NodeCredentials, NodeRegistration,
};
use std::sync::Arc;
use std::time::Duration;

/// What a node registration returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRegistered {
    pub node_id: NodeId,
    pub secret_id: String,
    pub heartbeat_ttl: Duration,
    pub index: Index,
}

/// What a heartbeat returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatAck {
    pub heartbeat_ttl: Duration,
    pub status: NodeStatus,
    pub health: NodeHealth,
    /// The index of the last write it caused, or the state index it was handled at.
    pub index: Index,
}

/// A node's secret as presented against the digest state keeps of it.
fn check_secret(node: &Node, creds: &NodeCredentials) -> Result<(), ServerError> {
    if !crate::secrets::matches(&node.secret_id, &creds.secret_id) {
        return Err(ServerError::Unauthenticated {
            reason: format!("wrong secret for node {}", creds.node_id),
        });
    }
    Ok(())
}

impl ServerHandle {
    /// Registers a node (or re-registers it with its id and secret). It starts
    /// `initializing` and suspended until a heartbeat reports it ready. State keeps only
    /// the digest of the node's secret; the secret is answered to the agent once.
    pub async fn register_node(
        &self,
        reg: NodeRegistration,
    ) -> Result<NodeRegistered, ServerError> {
        let snap = self.snapshot();
        // The server chooses every new identity: credentials for a node state does not
        // hold (deleted after its lost grace, or never known) get a fresh id and secret,
        // so no client picks its own.
        let (node_id, secret_id) = match &reg.previous {
            Some(creds) if snap.node(&creds.node_id).is_some() => {
                if let Some(existing) = snap.node(&creds.node_id) {
                    check_secret(existing, creds)?;
                }
                (creds.node_id, creds.secret_id.clone())
            }
            Some(creds) => {
                tracing::info!(previous_node_id = %creds.node_id, "unknown node re-registering: given a new identity");
                (NodeId::random(), uuid_secret())
            }
            None => (NodeId::random(), uuid_secret()),
        };
        let mut node = reg.into_node(node_id, crate::secrets::digest(&secret_id));
        drover_core::validate::check_node(&node, &self.inner.config.node_limits)?;
        node.status = NodeStatus::Initializing;
        node.status_description = "registered; waiting for a ready heartbeat".into();
        let now = now();
        let (node, ttl) = self.inner.leadership.node_registered(node, now).await?;
        let index = self
            .inner
            .writer
            .write(Command::NodeRegister { node, now })
            .await?;
        tracing::info!(%node_id, index, ttl_ms = ttl.as_millis() as u64, "node registered");
        Ok(NodeRegistered {
            node_id,
            secret_id,
            heartbeat_ttl: ttl,
            index,
        })
    }

    /// The heartbeat: resets the node's timer, brings a down or disconnected node back,
    /// and reports its readiness.
    pub async fn heartbeat(&self, hb: Heartbeat) -> Result<HeartbeatAck, ServerError> {
        let started = std::time::Instant::now();
        let snap = self.snapshot();
        let node = self.authenticated(&snap, &hb.auth)?;
        if let Some(s) = &hb.last_snapshot {
            drover_core::validate::check_snapshot_id(s, &self.inner.config.node_limits)?;
        }
        self.inner.metrics.heartbeat();
        let now = now();
        let outcome = self
            .inner
            .leadership
            .node_heartbeat(&snap, &node, hb.readiness, now)
            .await?;
        let mut index = snap.latest_index();
        let mut commands = outcome.commands;
        if let Some(s) = hb.last_snapshot
            && node.last_snapshot.as_deref() != Some(s.as_str())
        {
            commands.push(Command::NodeSnapshot {
                node_id: node.id,
                snapshot: Some(s),
                now,
            });
        }
        let wrote = !commands.is_empty();
        for cmd in commands {
            index = self.inner.writer.write(cmd).await?;
        }
        // A heartbeat that wrote nothing answers from the snapshot it was decided on (at
        // the index it answers), with no second snapshot; one that wrote reads its writes.
        let (status, health) = if wrote {
            self.snapshot()
                .node(&node.id)
                .map_or((node.status, node.health), |n| (n.status, n.health))
        } else {
            (node.status, node.health)
        };
        // Only a heartbeat that wrote nothing is a sample of the steady cost: one that
        // waited for a Raft commit (a node coming back) measures the disk.
        if !wrote {
            self.inner
                .leadership
                .heartbeat_cost
                .record(started.elapsed());
        }
        Ok(HeartbeatAck {
            heartbeat_ttl: outcome.ttl,
            status,
            health,
            index,
        })
    }

    /// Client-side allocation updates from a node. Refused while the node is not ready
    /// (it must heartbeat first after a disconnect); a node can only update its own
    /// allocations. What the updates mean (which jobs need an eval, which failures count
    /// against the node) is core's [`client_report`].
    pub async fn update_allocs(&self, req: AllocUpdates) -> Result<Index, ServerError> {
        let snap = self.snapshot();
        let node = self.authenticated(&snap, &req.auth)?;
        if node.status != NodeStatus::Ready {
            return Err(ServerError::precondition(format!(
                "node {} is {}: heartbeat first, then send allocation updates again",
                node.id,
                node.status.as_str()
            )));
        }
        // The registrations ride with their allocations' updates, which `assess` checks are
        // the node's; the FSM checks it again at apply time.
        let mut updates = req.updates;
        let services: Vec<AllocServices> = updates
            .iter_mut()
            .filter_map(|u| {
                u.services.take().map(|registrations| AllocServices {
                    alloc_id: u.update.alloc_id,
                    registrations,
                })
            })
            .collect();
        let report = client_report::assess(&snap, &node, updates).map_err(|e| match e {
            ClientReportError::UnknownAlloc(id) => ServerError::not_found("allocation", id),
            ClientReportError::NotOnNode { .. } => ServerError::PermissionDenied {
                reason: e.to_string(),
            },
        })?;
        let now = now();
        let evals = report.evals(&snap, now, &mut rand::rng());
        let index = self
            .inner
            .client_updates
            .write(
                NodeAllocUpdates {
                    node_id: node.id,
                    updates: report.updates,
                    evals,
                    services,
                },
                now,
            )
            .await?;
        if !report.node_failures.is_empty() {
            tracing::info!(node_id = %node.id, failures = report.node_failures.len(), "failures counted against the node");
            let cmds = self
                .inner
                .leadership
                .node_failures(&snap, node.id, &report.node_failures, now)
                .await;
            for cmd in cmds {
                self.inner.writer.write(cmd).await?;
            }
        }
        Ok(index)
    }

    /// The state now, once `creds` prove to be the node's: for reading its allocations
    /// straight from the snapshot ([`StateSnapshot::allocs_by_node`]) without copying them.
    pub fn node_snapshot(
        &self,
        creds: &NodeCredentials,
    ) -> Result<(StateSnapshot, NodeId), ServerError> {
        let snap = self.snapshot();
        let node_id = self.authenticated(&snap, creds)?.id;
        Ok((snap, node_id))
    }

    fn authenticated(
        &self,
        snap: &StateSnapshot,
        creds: &NodeCredentials,
    ) -> Result<Arc<Node>, ServerError> {
        let node = snap
            .node(&creds.node_id)
            .ok_or_else(|| ServerError::not_found("node", creds.node_id))?;
        check_secret(node, creds)?;
        Ok(node.clone())
    }

    /// Takes a node out of scheduling (no new placements; spared by the lost sweep).
    /// Idempotent.
    pub async fn node_offline(&self, node_id: NodeId) -> Result<Index, ServerError> {
        self.offline_online(node_id, true).await
    }

    /// Puts an offlined node back. Idempotent.
    pub async fn node_online(&self, node_id: NodeId) -> Result<Index, ServerError> {
        self.offline_online(node_id, false).await
    }

    async fn offline_online(&self, node_id: NodeId, offline: bool) -> Result<Index, ServerError> {
        let snap = self.snapshot();
        if snap.node(&node_id).is_none() {
            return Err(ServerError::not_found("node", node_id));
        }
        let cmds = self
            .inner
            .leadership
            .node_offline(&snap, node_id, offline, now())
            .await?;
        let mut index = snap.latest_index();
        for cmd in cmds {
            index = self.inner.writer.write(cmd).await?;
        }
        tracing::info!(%node_id, offline, index, "node offline state set");
        Ok(index)
    }

    /// Starts (or replaces) or ends a node's drain.
    pub async fn node_drain(&self, req: DrainRequest) -> Result<Index, ServerError> {
        let snap = self.snapshot();
        if snap.node(&req.node_id).is_none() {
            return Err(ServerError::not_found("node", req.node_id));
        }
        let now = now();
        let evals = drover_core::leader::node_evals(&snap, req.node_id, now, &mut rand::rng());
        let mut index = self
            .inner
            .writer
            .write(Command::NodeDrain {
                node_id: req.node_id,
                drain: req.drain.as_ref().map(|d| d.start(now)),
                now,
                evals,
            })
            .await?;
        if req.drain.is_none() {
            // Ending a running drain makes the node eligible in the FSM; one that already
            // ended by itself left the node ineligible. Either way, leave it as asked.
            let wanted = if req.mark_eligible {
                Eligibility::Eligible
            } else {
                Eligibility::Ineligible
            };
            let snap = self.snapshot();
            let now_is = snap.node(&req.node_id).map(|n| n.eligibility);
            if now_is.is_some_and(|e| e != wanted) {
                // Eligible again: the node's jobs and blocked work may place there.
                let evals = match wanted {
                    Eligibility::Eligible => {
                        drover_core::leader::node_evals(&snap, req.node_id, now, &mut rand::rng())
                    }
                    _ => Vec::new(),
                };
                index = self
                    .inner
                    .writer
                    .write(Command::NodeEligibility {
                        node_id: req.node_id,
                        eligibility: wanted,
                        now,
                        evals,
                    })
                    .await?;
            }
        }
        Ok(index)
    }

    /// Forgets a node for good (core's [`drover_core::leader::node_purge`]): its
    /// deregistration, then the evals of the jobs that had work on it, in that order. The
    /// eval ids created, and the index of the last write.
    pub async fn node_purge(&self, node_id: NodeId) -> Result<(Vec<EvalId>, Index), ServerError> {
        let snap = self.snapshot();
        let purge = drover_core::leader::node_purge(&snap, node_id, now(), &mut rand::rng())
            .map_err(|drover_core::leader::NodePurgeError::NotFound(id)| {
                ServerError::not_found("node", id)
            })?;
        let mut index = snap.latest_index();
        for cmd in purge.commands {
            index = self.inner.writer.write(cmd).await?;
        }
        tracing::info!(%node_id, evals = purge.eval_ids.len(), index, "node purged");
        Ok((purge.eval_ids, index))
    }

    /// Marks a node eligible or ineligible for new placements.
    pub async fn node_eligibility(&self, req: EligibilityChange) -> Result<Index, ServerError> {
        let snap = self.snapshot();
        if snap.node(&req.node_id).is_none() {
            return Err(ServerError::not_found("node", req.node_id));
        }
        let now = now();
        let evals = drover_core::leader::node_evals(&snap, req.node_id, now, &mut rand::rng());
        self.inner
            .writer
            .write(Command::NodeEligibility {
                node_id: req.node_id,
                eligibility: req.eligibility,
                now,
                evals,
            })
            .await
    }
}

fn uuid_secret() -> String {
    EvalId::random().to_string()
}
