//! A running server: the Raft node, the leader duties (run while it leads) and the worker
//! pool, with the [`ServerHandle`] the gRPC layer calls. Each handle method is one RPC's
//! body, taking the decoded request types of `drover_proto::convert` where there are any.

use crate::config::ServerConfig;
use crate::error::{ServerError, StartError};
use crate::events::{EventRing, Fanout};
use crate::leader::{self, LeaderStats, Leadership};
use crate::metrics::{Metrics, MetricsServer};
use crate::raft::{RaftNode, ServerId, StateHandle, WaitTimeout};
use crate::worker::{EvalSource, WorkerConfigError, WorkerInfo, WorkerPool, WorkerPoolConfig};
use crate::write::{Writer, now};
use drover_core::blocked::BlockedEvalInfo;
use drover_core::fsm::{AllocClientUpdate, Command, Event};
use drover_core::periodic::{DispatchError, dispatch};
use drover_core::state::StateSnapshot;
use drover_core::types::*;
use drover_core::validate::{canonicalize, validate_job};
use drover_proto::convert::{
    AllocUpdates, DispatchRequest, DrainRequest, EligibilityChange, Heartbeat, JobRegistration,
    NodeCredentials, NodeRegistration, SchedulerConfigUpdate, WorkerTarget,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, broadcast, watch};
use tokio::task::JoinHandle;

/// How many applied-entry event batches the leader's live broadcast holds; the leader
/// loop resynchronizes from state if it ever falls this far behind.
const LIVE_EVENT_BATCHES: usize = 16 * 1024;

/// What a job registration committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRegistered {
    /// `None` for periodic and parameterized parents, which get no eval.
    pub eval_id: Option<EvalId>,
    pub job_modify_index: Index,
    /// The job's version after the write, read under the canonical key (the default
    /// namespace applied), so an empty request namespace still answers the real version.
    pub job_version: u64,
    /// The Raft index of the entry.
    pub index: Index,
}

/// What a dispatch committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobDispatched {
    /// The child job's id.
    pub job_id: JobId,
    pub eval_id: EvalId,
    /// The Raft index of the entry.
    pub index: Index,
}

/// What a job deregistration committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobDeregistered {
    pub eval_id: EvalId,
    pub index: Index,
}

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

struct Inner {
    config: ServerConfig,
    raft: Arc<RaftNode>,
    writer: Writer,
    state: StateHandle,
    leadership: Arc<Leadership>,
    workers: Mutex<WorkerPool>,
    events: broadcast::Sender<Arc<Vec<Event>>>,
    ring: Arc<EventRing>,
    metrics: Arc<Metrics>,
    shutdown: watch::Sender<bool>,
}

/// A running server. Stop it with [`Server::shutdown`] (the data dir can then be opened
/// again); dropping it without that leaves its tasks running until the runtime ends.
pub struct Server {
    handle: ServerHandle,
    monitor: Option<JoinHandle<()>>,
    metrics_server: Option<MetricsServer>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("server_id", &self.handle.inner.config.server_id)
            .finish_non_exhaustive()
    }
}

/// The server's API, cheap to clone; what the gRPC services call.
#[derive(Clone)]
pub struct ServerHandle {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("server_id", &self.inner.config.server_id)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Starts the Raft node on the config's data dir (bootstrapping or recovering it), the
    /// leadership monitor and the worker pool.
    pub async fn start(config: ServerConfig) -> Result<Server, StartError> {
        let pool_config = crate::worker::pool_config(&config).map_err(|e| StartError::Config {
            reason: e.to_string(),
        })?;
        let (events, _) = broadcast::channel(LIVE_EVENT_BATCHES);
        let ring = Arc::new(EventRing::new(config.event_buffer));
        let sink = Fanout {
            live: events.clone(),
            ring: ring.clone(),
        };
        let raft_config = config.raft_config().with_events(Arc::new(sink));
        let raft = Arc::new(RaftNode::start(raft_config).await?);
        let state = raft.state();
        ring.start_at(state.applied_index());
        let metrics = Arc::new(Metrics::new());
        let writer = Writer::new(raft.clone(), metrics.clone());
        let leadership = Leadership::new(
            config.clone(),
            state.clone(),
            writer.clone(),
            events.clone(),
        )
        .map_err(|e| StartError::Config {
            reason: e.to_string(),
        })?;
        let deps = crate::worker::WorkerDeps {
            source: leadership.clone() as Arc<dyn EvalSource>,
            writer: writer.clone(),
            state: state.clone(),
            dequeue_timeout: config.workers.dequeue_timeout,
            wait_limit: config.workers.wait_index_limit,
            backoff_base: config.workers.backoff_base,
            backoff_limit: config.workers.backoff_limit,
        };
        let pool = WorkerPool::start(config.server_id, deps, pool_config).map_err(|e| {
            StartError::Config {
                reason: e.to_string(),
            }
        })?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let monitor = tokio::spawn(leader::monitor(
            leadership.clone(),
            raft.clone(),
            shutdown_rx,
        ));
        tracing::info!(
            server_id = config.server_id,
            data_dir = %config.data_dir.display(),
            applied_index = state.applied_index(),
            "server started"
        );
        let metrics_addr = config.metrics_addr.clone();
        let handle = ServerHandle {
            inner: Arc::new(Inner {
                config,
                raft,
                writer,
                state,
                leadership,
                workers: Mutex::new(pool),
                events,
                ring,
                metrics,
                shutdown,
            }),
        };
        let metrics_server = match metrics_addr {
            Some(addr) => Some(crate::metrics::serve(handle.clone(), &addr).await.map_err(
                |e| StartError::Config {
                    reason: format!("cannot serve metrics on {addr}: {e}"),
                },
            )?),
            None => None,
        };
        Ok(Server {
            handle,
            monitor: Some(monitor),
            metrics_server,
        })
    }

    pub fn handle(&self) -> ServerHandle {
        self.handle.clone()
    }

    /// The configuration this server was started with.
    pub fn config(&self) -> &ServerConfig {
        &self.handle.inner.config
    }

    /// Where `/metrics` is served (the real port when the config asked for port 0);
    /// `None` when the config named no metrics address.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics_server.as_ref().map(MetricsServer::local_addr)
    }

    /// Serves the gRPC API (every drover service, health, reflection and the Raft
    /// transport) on the config's `bind_addr` (port 0 picks a free port; see
    /// [`crate::api::ApiServer::local_addr`]) until the returned server is shut down.
    pub async fn serve(
        &self,
        opts: crate::api::ApiOptions,
    ) -> Result<crate::api::ApiServer, crate::api::ServeError> {
        let handle = self.handle.clone();
        let raft = handle.raft_service();
        let addr = handle.inner.config.bind_addr.clone();
        let router = crate::api::router(handle, raft, opts).await?;
        crate::api::serve(router, &addr).await
    }

    /// Stops the workers, the leader duties and the Raft node, in that order.
    pub async fn shutdown(mut self) -> Result<(), StartError> {
        let inner = &self.handle.inner;
        tracing::info!(server_id = inner.config.server_id, "server shutting down");
        if let Some(m) = self.metrics_server.take() {
            m.shutdown().await;
        }
        inner.workers.lock().await.stop().await;
        inner.shutdown.send_replace(true);
        if let Some(m) = self.monitor.take() {
            let _ = m.await;
        }
        inner.raft.shutdown().await?;
        tracing::info!(server_id = inner.config.server_id, "server stopped");
        Ok(())
    }
}

fn check_secret(node: &Node, creds: &NodeCredentials) -> Result<(), ServerError> {
    if node.secret_id != creds.secret_id {
        return Err(ServerError::Unauthenticated {
            reason: format!("wrong secret for node {}", creds.node_id),
        });
    }
    Ok(())
}

impl ServerHandle {
    pub fn server_id(&self) -> ServerId {
        self.inner.config.server_id
    }

    pub fn config(&self) -> &ServerConfig {
        &self.inner.config
    }

    // ---- reads -------------------------------------------------------------------------

    /// Read access to the applied state.
    pub fn state(&self) -> StateHandle {
        self.inner.state.clone()
    }

    /// An O(1) snapshot of the applied state.
    pub fn snapshot(&self) -> StateSnapshot {
        self.inner.state.snapshot()
    }

    pub fn applied_index(&self) -> Index {
        self.inner.state.applied_index()
    }

    /// Waits until state has applied `index` (for reads that must see a write).
    pub async fn wait_for_index(
        &self,
        index: Index,
        timeout: Duration,
    ) -> Result<StateSnapshot, WaitTimeout> {
        self.inner.state.wait_for_index(index, timeout).await
    }

    /// The events of every applied entry, from now on, as a live broadcast (what the
    /// leader loop follows).
    pub fn subscribe_events(&self) -> broadcast::Receiver<Arc<Vec<Event>>> {
        self.inner.events.subscribe()
    }

    /// The retained recent events, which `EventService/Subscribe` replays and follows.
    pub fn event_ring(&self) -> Arc<EventRing> {
        self.inner.ring.clone()
    }

    /// The leader's broker and plan queue as a scheduler worker sees them: for schedulers
    /// running outside this server's pool (and tests that act as one).
    pub fn eval_source(&self) -> Arc<dyn EvalSource> {
        self.inner.leadership.clone()
    }

    /// This server's metrics.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.inner.metrics.clone()
    }

    /// Whether this server runs the leader duties.
    pub fn is_leader(&self) -> bool {
        self.inner.leadership.is_leading()
    }

    /// Raft's current metrics (term, role, log indexes, membership).
    pub fn raft_metrics(&self) -> crate::raft::RaftMetrics {
        self.inner.raft.metrics().borrow().clone()
    }

    /// Raft's metrics as they change, for whatever follows leadership (the gRPC health).
    pub fn watch_raft_metrics(&self) -> tokio::sync::watch::Receiver<crate::raft::RaftMetrics> {
        self.inner.raft.metrics()
    }

    /// The server side of the Raft transport, to mount on a gRPC router.
    pub fn raft_service(&self) -> crate::raft::RaftGrpcService {
        crate::raft::RaftGrpcService::new(self.inner.raft.rpc_handler())
    }

    /// The leader as Raft knows it.
    pub fn leader(&self) -> Option<ServerId> {
        self.inner.raft.current_leader()
    }

    /// Waits until this server's leader duties run, up to `timeout`.
    pub async fn wait_for_leadership(&self, timeout: Duration) -> bool {
        let mut rx = self.inner.leadership.watch_leading();
        matches!(
            tokio::time::timeout(timeout, rx.wait_for(|l| *l)).await,
            Ok(Ok(_))
        )
    }

    // ---- jobs --------------------------------------------------------------------------

    /// Validates the job (every problem listed), then commits it with its registration
    /// eval in one entry.
    pub async fn register_job(&self, reg: JobRegistration) -> Result<JobRegistered, ServerError> {
        let mut job = reg.job;
        canonicalize(&mut job);
        validate_job(&job, &self.inner.config.limits)?;
        let key = job.key();
        let snap = self.snapshot();
        crate::admission::check_registration(snap.scheduler_config())?;
        self.check_room(&snap, snap.job(&key).is_none()).await?;
        let now = now();
        let eval = (!job.is_template())
            .then(|| Evaluation::new(EvalId::random(), &job, TriggeredBy::JobRegister, now));
        let eval_id = eval.as_ref().map(|e| e.id);
        // Check-and-set runs in the FSM, so of concurrent writers expecting one index,
        // exactly one commits; a refusal comes back as `Refused` (FAILED_PRECONDITION).
        let cmd = match reg.enforce_index {
            Some(enforce_index) => Command::JobRegisterChecked {
                job,
                eval,
                now,
                enforce_index,
            },
            None => Command::JobRegister { job, eval, now },
        };
        let index = self.inner.writer.write(cmd).await?;
        let (job_modify_index, job_version) = self
            .snapshot()
            .job(&key)
            .map_or((index, 0), |j| (j.job_modify_index, j.version));
        tracing::info!(job_id = %key, eval_id = ?eval_id, index, "job registered");
        Ok(JobRegistered {
            eval_id,
            job_modify_index,
            job_version,
            index,
        })
    }

    /// Refuses new work while the cluster is at its job limit (for a new job) or the
    /// broker holds its maximum of outstanding evals, with a hint of when to retry.
    async fn check_room(&self, snap: &StateSnapshot, new_job: bool) -> Result<(), ServerError> {
        let config = &self.inner.config;
        if new_job && snap.job_count() >= config.max_jobs {
            return Err(ServerError::ResourceExhausted {
                reason: format!("the cluster holds its maximum of {} jobs", config.max_jobs),
                retry_after: Duration::from_secs(60),
            });
        }
        if let Ok(stats) = self.inner.leadership.stats().await {
            let held = stats.broker.total.tracked();
            if held >= config.max_outstanding_evals {
                return Err(ServerError::ResourceExhausted {
                    reason: format!(
                        "{held} evaluations are outstanding, the maximum is {}",
                        config.max_outstanding_evals
                    ),
                    retry_after: Duration::from_secs(1),
                });
            }
        }
        Ok(())
    }

    /// Dispatches a parameterized job: a child job with the request's meta and payload,
    /// committed with its eval in one entry.
    pub async fn dispatch_job(&self, req: DispatchRequest) -> Result<JobDispatched, ServerError> {
        let snap = self.snapshot();
        let parent = snap
            .job(&req.parent)
            .ok_or_else(|| ServerError::not_found("job", &req.parent))?;
        crate::admission::check_registration(snap.scheduler_config())?;
        self.check_room(&snap, true).await?;
        let now = now();
        let (job, eval) = {
            let mut rng = rand::rng();
            dispatch(
                parent,
                req.meta,
                req.payload,
                now,
                &mut rng,
                &self.inner.config.limits,
            )
            .map_err(dispatch_error)?
        };
        let job_id = job.id.clone();
        let eval_id = eval.id;
        let index = self
            .inner
            .writer
            .write(Command::JobRegister {
                job,
                eval: Some(eval),
                now,
            })
            .await?;
        tracing::info!(parent_id = %req.parent, %job_id, %eval_id, index, "job dispatched");
        Ok(JobDispatched {
            job_id,
            eval_id,
            index,
        })
    }

    /// Stops a job (or removes it with `purge`), with the eval that stops its allocations.
    pub async fn deregister_job(
        &self,
        key: JobKey,
        purge: bool,
    ) -> Result<JobDeregistered, ServerError> {
        let snap = self.snapshot();
        let job = snap
            .job(&key)
            .ok_or_else(|| ServerError::not_found("job", &key))?;
        let now = now();
        let eval = Evaluation::new(EvalId::random(), job, TriggeredBy::JobDeregister, now);
        let eval_id = eval.id;
        let index = self
            .inner
            .writer
            .write(Command::JobDeregister {
                job: key.clone(),
                purge,
                eval: Some(eval),
                now,
            })
            .await?;
        tracing::info!(job_id = %key, %eval_id, purge, index, "job deregistered");
        Ok(JobDeregistered { eval_id, index })
    }

    // ---- nodes (agent-facing) ----------------------------------------------------------

    /// Registers a node (or re-registers it with its id and secret). It starts
    /// `initializing` and suspended until a heartbeat reports it ready.
    pub async fn register_node(
        &self,
        reg: NodeRegistration,
    ) -> Result<NodeRegistered, ServerError> {
        let snap = self.snapshot();
        let (node_id, secret_id) = match &reg.previous {
            Some(creds) => {
                if let Some(existing) = snap.node(&creds.node_id) {
                    check_secret(existing, creds)?;
                }
                (creds.node_id, creds.secret_id.clone())
            }
            None => (NodeId::random(), uuid_secret()),
        };
        let mut node = reg.into_node(node_id, secret_id.clone());
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
        for cmd in commands {
            index = self.inner.writer.write(cmd).await?;
        }
        let after = self.snapshot();
        let (status, health) = after
            .node(&node.id)
            .map_or((node.status, node.health), |n| (n.status, n.health));
        Ok(HeartbeatAck {
            heartbeat_ttl: outcome.ttl,
            status,
            health,
            index,
        })
    }

    /// Client-side allocation updates from a node. Refused while the node is not ready
    /// (it must heartbeat first after a disconnect); a node can only update its own
    /// allocations. Failed allocations get an eval for their job (to reschedule them);
    /// infrastructure failures count towards the node being flaky.
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
        let mut updates: Vec<AllocClientUpdate> = Vec::with_capacity(req.updates.len());
        // The reason of each infrastructure failure the agent reported: its task's last
        // event marked as one (the agent never marks a job's own mistakes).
        let mut infra: Vec<String> = Vec::new();
        // Jobs that need an eval for this batch, and why: a failure to reschedule, or an
        // allocation the server holds as unknown reporting in again (the reconnect, which the
        // scheduler must settle now rather than at the end of the disconnect window).
        let mut eval_jobs = std::collections::BTreeMap::new();
        for u in req.updates {
            let alloc = snap
                .alloc(&u.update.alloc_id)
                .ok_or_else(|| ServerError::not_found("allocation", u.update.alloc_id))?;
            if alloc.node_id != node.id {
                return Err(ServerError::PermissionDenied {
                    reason: format!(
                        "allocation {} is not on node {}",
                        u.update.alloc_id, node.id
                    ),
                });
            }
            if u.infra_failure {
                let reason = u
                    .update
                    .task_states
                    .values()
                    .flat_map(|t| t.events.iter())
                    .filter(|e| e.infra_failure)
                    .max_by_key(|e| e.time)
                    .map_or_else(
                        || "infrastructure failure".to_string(),
                        |e| e.message.clone(),
                    );
                infra.push(reason);
            }
            let trigger = if u.update.client_status == ClientStatus::Failed
                && alloc.desired_status == DesiredStatus::Run
            {
                Some(TriggeredBy::AllocFailure)
            } else if alloc.client_status == ClientStatus::Unknown
                && u.update.client_status != ClientStatus::Unknown
            {
                Some(TriggeredBy::Reconnect)
            } else {
                None
            };
            if let Some(trigger) = trigger {
                let key = JobKey {
                    namespace: alloc.namespace.clone(),
                    id: alloc.job_id.clone(),
                };
                eval_jobs.entry(key).or_insert(trigger);
            }
            updates.push(u.update);
        }
        let now = now();
        let evals = eval_jobs
            .iter()
            .filter_map(|(k, trigger)| Some((snap.job(k)?, *trigger)))
            .map(|(j, trigger)| Evaluation::new(EvalId::random(), j, trigger, now))
            .collect();
        let index = self
            .inner
            .writer
            .write(Command::AllocClientUpdate {
                node_id: node.id,
                updates,
                evals,
                now,
            })
            .await?;
        if !infra.is_empty() {
            let cmds = self
                .inner
                .leadership
                .node_failures(&snap, node.id, &infra, now)
                .await;
            for cmd in cmds {
                self.inner.writer.write(cmd).await?;
            }
        }
        Ok(index)
    }

    /// This node's allocations as of now, for an authenticated node.
    pub fn node_allocs(
        &self,
        creds: &NodeCredentials,
    ) -> Result<Vec<Arc<Allocation>>, ServerError> {
        let snap = self.snapshot();
        let node = self.authenticated(&snap, creds)?;
        Ok(snap.allocs_by_node(&node.id).cloned().collect())
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

    // ---- nodes (operator) ---------------------------------------------------------------

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
        if req.drain.is_none() && !req.mark_eligible {
            // Ending a drain makes the node eligible in the FSM; keep it ineligible.
            index = self
                .inner
                .writer
                .write(Command::NodeEligibility {
                    node_id: req.node_id,
                    eligibility: Eligibility::Ineligible,
                    now,
                    evals: Vec::new(),
                })
                .await?;
        }
        Ok(index)
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

    // ---- operator ----------------------------------------------------------------------

    pub fn scheduler_config(&self) -> Arc<SchedulerConfig> {
        self.snapshot().scheduler_config().clone()
    }

    pub async fn set_scheduler_config(
        &self,
        req: SchedulerConfigUpdate,
    ) -> Result<Index, ServerError> {
        self.inner
            .writer
            .write(Command::SchedulerConfig {
                config: req.config,
                cas_index: req.cas_index,
            })
            .await
    }

    /// Broker, blocked-eval and plan-queue counters (leader only).
    pub async fn broker_stats(&self) -> Result<LeaderStats, ServerError> {
        self.inner.leadership.stats().await
    }

    /// Every blocked eval the leader tracks.
    pub async fn blocked_evals(&self) -> Result<Vec<BlockedEvalInfo>, ServerError> {
        let core = self.inner.leadership.lock_enabled().await?;
        Ok(core.blocked.blocked_list())
    }

    // ---- workers -----------------------------------------------------------------------

    /// Every worker of this server.
    pub async fn workers(&self) -> Vec<WorkerInfo> {
        self.inner.workers.lock().await.info()
    }

    pub async fn worker_config(&self) -> WorkerPoolConfig {
        self.inner.workers.lock().await.config().clone()
    }

    /// Pauses one worker or all of them.
    pub async fn pause_workers(
        &self,
        target: WorkerTarget,
    ) -> Result<Vec<WorkerInfo>, ServerError> {
        self.set_workers_paused(target, true).await
    }

    /// Resumes one paused worker or all paused workers.
    pub async fn resume_workers(
        &self,
        target: WorkerTarget,
    ) -> Result<Vec<WorkerInfo>, ServerError> {
        self.set_workers_paused(target, false).await
    }

    async fn set_workers_paused(
        &self,
        target: WorkerTarget,
        paused: bool,
    ) -> Result<Vec<WorkerInfo>, ServerError> {
        let pool = self.inner.workers.lock().await;
        match target {
            WorkerTarget::One { worker_id, .. } => {
                let changed = if paused {
                    pool.pause(&worker_id)
                } else {
                    pool.resume(&worker_id)
                };
                changed.map(|w| vec![w]).map_err(worker_error)
            }
            WorkerTarget::All { .. } if paused => Ok(pool.pause_all()),
            WorkerTarget::All { .. } => Ok(pool.resume_all()),
        }
    }

    /// Replaces the pool's configuration and rebuilds it; an invalid one changes nothing.
    pub async fn set_worker_config(
        &self,
        config: WorkerPoolConfig,
    ) -> Result<Vec<WorkerInfo>, ServerError> {
        self.inner
            .workers
            .lock()
            .await
            .reconfigure(config)
            .await
            .map_err(worker_error)
    }
}

fn worker_error(e: WorkerConfigError) -> ServerError {
    match e {
        WorkerConfigError::NotFound(id) => ServerError::not_found("worker", id),
        WorkerConfigError::BadStatus { .. } => ServerError::precondition(e.to_string()),
        WorkerConfigError::CountTooHigh { .. } => ServerError::InvalidArgument {
            reason: e.to_string(),
        },
    }
}

fn dispatch_error(e: DispatchError) -> ServerError {
    match e {
        DispatchError::NotParameterized { .. } | DispatchError::Stopped { .. } => {
            ServerError::precondition(e.to_string())
        }
        other => ServerError::InvalidArgument {
            reason: other.to_string(),
        },
    }
}

fn uuid_secret() -> String {
    EvalId::random().to_string()
}
