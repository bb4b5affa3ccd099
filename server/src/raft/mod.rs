//! drover's Raft: openraft 0.9 with an append-only log (`raft-log`) and core's FSM as the
//! state machine.
//!
//! ```text
//!  client_write(Command) ─▶ openraft ─▶ LogStore (raft-log, fsync) ─▶ commit ─▶ StateMachine
//!                                                                            │ fsm::apply, batched
//!                          StateHandle::snapshot() ◀── O(1) swap ◀───────────┤
//!                          EventSink::publish()    ◀── events per entry ◀────┘
//! ```
//!
//! On disk, under the data dir: `raft-log/` (the log's chunk files: entries, vote, committed
//! and purged log ids, the node id) and `snapshots/snapshot.bin` (the latest snapshot with its
//! meta). A data dir from before the append-only log has `raft-log.redb` instead, which the
//! first start moves over ([`legacy_log`]). A fresh data dir
//! bootstraps a cluster (by default of this node alone); a data dir with history recovers it:
//! the snapshot is loaded and openraft re-applies the committed log after it.
//!
//! Writes are acknowledged only once committed and applied: [`RaftNode::client_write`]
//! returns the entry's index and the FSM's verdict, or tells a follower where the leader is.

pub mod codec;
pub mod grpc;
pub mod legacy_log;
pub mod listener;
mod log_records;
pub mod log_store;
pub mod network;
mod payload_budget;
pub mod private;
mod readahead;
pub mod runtime;
pub mod snapshot_cadence;
pub mod snapshot_data;
pub mod snapshot_store;
pub mod state_machine;
pub mod types;

#[cfg(test)]
mod tests;

pub use grpc::{DEFAULT_MAX_MESSAGE_BYTES, GrpcTransport, JOIN_FORWARDED_HEADER, RaftGrpcService};
pub use listener::{CLUSTER_SECRET_HEADER, ClusterSecret, RaftListener, SecretError};
pub use log_store::{LOG_DIR, LogStore, LogStoreError};
pub use network::{
    BadRequest, LoopbackTransport, Network, NoTransport, RaftRpc, RaftRpcHandler, RaftTransport,
    RpcFuture, TransportError,
};
pub use runtime::RaftRuntime;
pub use snapshot_store::{SNAPSHOT_FILE, SnapshotError, SnapshotStore};
pub use state_machine::{EventSink, StateHandle, StateMachine, WaitTimeout};
pub use types::{ApplyResponse, Raft, RaftMetrics, ServerId, TypeConfig};

use drover_core::Index;
use drover_core::fsm::{ApplyError, Command};
use openraft::error::{ClientWriteError, InitializeError};
use openraft::{BasicNode, SnapshotPolicy};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The snapshot directory's name inside the data dir.
pub const SNAPSHOT_DIR: &str = "snapshots";

/// What a fresh data dir (no log, no vote) does on start. A data dir with history ignores it.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub enum Bootstrap {
    /// Form a cluster of this node alone (the single-server default).
    #[default]
    SingleNode,
    /// Form a cluster of these voters (node id → address); it must include this node. Every
    /// member may be given the same map: initializing twice with one config is safe.
    Cluster(BTreeMap<ServerId, String>),
    /// Start outside any cluster and be taken in (see `crate::discovery`).
    Join(JoinPlan),
}

/// How a server started with [`Bootstrap::Join`] gets into a cluster.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct JoinPlan {
    /// Raft addresses of other servers to ask to be taken in; none: wait for an operator's
    /// `drover operator raft add-peer`.
    pub addrs: Vec<String>,
    /// Form a new cluster once this many servers (this one included) found each other
    /// through `addrs` and none of them is in a cluster yet (Nomad's `bootstrap_expect`).
    pub expect: Option<usize>,
}

/// How to start a [`RaftNode`].
#[derive(Clone, Debug)]
pub struct RaftConfig {
    pub node_id: ServerId,
    /// Holds the log file and the snapshot dir; created if missing.
    pub data_dir: PathBuf,
    /// The address peers reach this node's Raft service at (recorded in the membership).
    pub addr: String,
    pub heartbeat_interval: Duration,
    /// Elections start after a random timeout in `[election_timeout_min, election_timeout_max)`.
    pub election_timeout_min: Duration,
    pub election_timeout_max: Duration,
    /// Build a snapshot once this many entries were applied since the last one.
    pub snapshot_every: u64,
    /// Also build one once the log since the last snapshot holds as many bytes as that
    /// snapshot, and at least this many (`snapshot_cadence.rs`).
    pub snapshot_min_log_bytes: u64,
    /// How many entries already in a snapshot stay in the log (so a slightly lagging follower
    /// catches up from the log rather than a snapshot).
    pub logs_kept_after_snapshot: u64,
    /// How long one snapshot chunk (the last one includes installing it) may take.
    pub install_snapshot_timeout: Duration,
    /// The size of a snapshot chunk on the wire; keep it under the transport's message limit.
    pub snapshot_chunk_size: u64,
    /// At most this many entries per AppendEntries message.
    pub max_payload_entries: u64,
    /// At most about this many bytes of entries per AppendEntries message (one entry is
    /// always sent, however large). openraft bounds a payload only by its entry count and
    /// gives each message one heartbeat interval to be answered, so a follower behind by
    /// a few hundred large plans would otherwise be sent more than it can take in that time,
    /// time out, be sent the same again and never catch up. This is the ceiling: each
    /// peer's budget shrinks below it while the peer answers slowly (`payload_budget.rs`).
    pub max_payload_bytes: usize,
    pub bootstrap: Bootstrap,
    /// How long a start waits for a log file still held by a node of this process that is
    /// shutting down.
    pub open_timeout: Duration,
    /// How to reach peers; `None` for a single server.
    pub transport: Option<Arc<dyn RaftTransport>>,
    /// Receives the events of every applied entry.
    pub events: Option<Arc<dyn EventSink>>,
}

impl RaftConfig {
    /// A single-server config with production defaults.
    pub fn new(node_id: ServerId, data_dir: impl Into<PathBuf>, addr: impl Into<String>) -> Self {
        Self {
            node_id,
            data_dir: data_dir.into(),
            addr: addr.into(),
            heartbeat_interval: Duration::from_millis(150),
            election_timeout_min: Duration::from_millis(600),
            election_timeout_max: Duration::from_millis(1200),
            snapshot_every: 10_000,
            snapshot_min_log_bytes: snapshot_cadence::MIN_LOG_BYTES,
            logs_kept_after_snapshot: 1_000,
            install_snapshot_timeout: Duration::from_secs(60),
            snapshot_chunk_size: 2 * 1024 * 1024,
            max_payload_entries: 300,
            max_payload_bytes: 1024 * 1024,
            bootstrap: Bootstrap::SingleNode,
            open_timeout: Duration::from_secs(10),
            transport: None,
            events: None,
        }
    }

    pub fn with_transport(mut self, transport: Arc<dyn RaftTransport>) -> Self {
        self.transport = Some(transport);
        self
    }

    pub fn with_events(mut self, events: Arc<dyn EventSink>) -> Self {
        self.events = Some(events);
        self
    }

    pub fn with_bootstrap(mut self, bootstrap: Bootstrap) -> Self {
        self.bootstrap = bootstrap;
        self
    }

    fn openraft_config(&self) -> Result<openraft::Config, RaftError> {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let config = openraft::Config {
            cluster_name: "drover".to_string(),
            heartbeat_interval: ms(self.heartbeat_interval),
            election_timeout_min: ms(self.election_timeout_min),
            election_timeout_max: ms(self.election_timeout_max),
            install_snapshot_timeout: ms(self.install_snapshot_timeout),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(snapshot_cadence::staggered(
                self.snapshot_every,
                self.node_id,
            )),
            max_in_snapshot_log_to_keep: self.logs_kept_after_snapshot,
            snapshot_max_chunk_size: self.snapshot_chunk_size,
            max_payload_entries: self.max_payload_entries,
            // A follower this far behind gets a snapshot rather than the log.
            replication_lag_threshold: self.snapshot_every.max(1),
            ..Default::default()
        };
        config.validate().map_err(|e| RaftError::Config {
            reason: e.to_string(),
        })
    }
}

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum RaftError {
    #[error("invalid raft config: {reason}")]
    Config { reason: String },
    #[error("invalid raft bootstrap for node {node_id}: {reason}")]
    Bootstrap { node_id: ServerId, reason: String },
    #[error("cannot use data dir {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    LogStore(#[from] LogStoreError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error("raft node {node_id} stopped: {reason}")]
    Fatal { node_id: ServerId, reason: String },
    #[error("cannot initialize raft node {node_id} with members {members:?}: {reason}")]
    Initialize {
        node_id: ServerId,
        members: Vec<ServerId>,
        reason: String,
    },
    #[error("raft startup task failed: {reason}")]
    Task { reason: String },
}

/// Why a write was not acknowledged.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum WriteError {
    /// This node is not the leader: send the write there (the leader may be unknown during an
    /// election; retry shortly).
    #[error("{}", forward_text(*leader_id, leader_addr.as_deref()))]
    ForwardToLeader {
        leader_id: Option<ServerId>,
        leader_addr: Option<String>,
    },
    #[error("raft refused the write: {reason}")]
    Refused { reason: String },
    #[error("raft is not running: {reason}")]
    Stopped { reason: String },
}

fn forward_text(leader_id: Option<ServerId>, leader_addr: Option<&str>) -> String {
    match (leader_id, leader_addr) {
        (Some(id), Some(addr)) => format!("not the leader: forward to node {id} at {addr}"),
        (Some(id), None) => format!("not the leader: forward to node {id} (address unknown)"),
        _ => "not the leader, and no leader is known yet".to_string(),
    }
}

/// A running Raft node: the log, the state machine and the consensus task.
pub struct RaftNode {
    node_id: ServerId,
    addr: String,
    data_dir: PathBuf,
    raft: Raft,
    state: StateHandle,
    /// True while a leadership transfer holds new writes back (see [`RaftNode::hold_writes`]).
    held: watch::Sender<bool>,
    log_stats: Arc<log_store::LogStats>,
    /// Snapshots by the log's bytes; stops with this node.
    _cadence: snapshot_cadence::Cadence,
    /// Where openraft's tasks run; declared last so it outlives the handles above.
    runtime: RaftRuntime,
}

/// Holds new writes back while it lives (see [`RaftNode::hold_writes`]).
#[derive(Debug)]
pub struct WriteHold(watch::Sender<bool>);

impl Drop for WriteHold {
    fn drop(&mut self) {
        self.0.send_replace(false);
    }
}

impl fmt::Debug for RaftNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RaftNode")
            .field("node_id", &self.node_id)
            .field("addr", &self.addr)
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

async fn blocking<T, E, F>(f: F) -> Result<T, RaftError>
where
    T: Send + 'static,
    E: Into<RaftError> + Send + 'static,
    F: FnOnce() -> Result<T, E> + Send + 'static,
{
    joined(tokio::task::spawn_blocking(f).await)
}

/// A blocking task's result, its panic or cancellation as a task error.
fn joined<T, E: Into<RaftError>>(
    done: Result<Result<T, E>, tokio::task::JoinError>,
) -> Result<T, RaftError> {
    done.map_err(|e| RaftError::Task {
        reason: e.to_string(),
    })?
    .map_err(Into::into)
}

/// Logs a restart's phases once the log written before it is applied again (openraft
/// re-applies what was committed while it starts, and the rest once a leader commits it):
/// opening the log, loading the snapshot (read, decode, every index rebuilt), replaying
/// the entries after the snapshot. The restart bench's seconds are these phases plus the
/// clients reconnecting.
async fn log_replay_timed(
    raft: openraft::Raft<TypeConfig>,
    node_id: ServerId,
    snapshot_index: u64,
    started: std::time::Instant,
    [log_opened, state_loaded]: [Duration; 2],
) {
    let mut metrics = raft.metrics();
    let last_log = metrics.borrow().last_log_index.unwrap_or(0);
    let replayed = metrics
        .wait_for(|m| m.last_applied.is_some_and(|l| l.index >= last_log))
        .await;
    if replayed.is_err() {
        return;
    }
    let ms = |d: Duration| d.as_millis() as u64;
    tracing::info!(
        node_id,
        entries = last_log.saturating_sub(snapshot_index),
        log_open_ms = ms(log_opened),
        snapshot_load_ms = ms(state_loaded - log_opened),
        replay_ms = ms(started.elapsed() - state_loaded),
        "restart replayed the log"
    );
}

/// How long a fresh member of a bootstrap cluster waits before it forms the cluster
/// itself. openraft campaigns as soon as a node is initialized, so members that all
/// initialize at once split the first vote and the first leader is voted out moments
/// after it won. The lowest id forms the cluster at once and the others take their turn
/// only if no leader has reached them by then (the lowest is down), each one election
/// timeout pair later than the one before it.
fn bootstrap_delay(
    node_id: ServerId,
    members: &BTreeMap<ServerId, BasicNode>,
    election_timeout_max: Duration,
) -> Duration {
    let rank = members.keys().position(|id| *id == node_id).unwrap_or(0);
    (election_timeout_max * 2).saturating_mul(u32::try_from(rank).unwrap_or(u32::MAX))
}

async fn initialize(
    raft: &Raft,
    node_id: ServerId,
    data_dir: &std::path::Path,
    members: BTreeMap<ServerId, BasicNode>,
) -> Result<(), RaftError> {
    let ids: Vec<ServerId> = members.keys().copied().collect();
    match raft.initialize(members).await {
        Ok(()) => {}
        // Another member initialized first and reached us: the cluster exists.
        Err(openraft::error::RaftError::APIError(InitializeError::NotAllowed(e))) => {
            tracing::info!(node_id, reason = %e, "cluster already initialized");
        }
        Err(e) => {
            return Err(RaftError::Initialize {
                node_id,
                members: ids,
                reason: e.to_string(),
            });
        }
    }
    tracing::info!(node_id, members = ?ids, data_dir = %data_dir.display(), "raft cluster initialized");
    Ok(())
}

impl RaftNode {
    /// Opens the data dir and starts the node. A fresh data dir bootstraps as the config says;
    /// one with history recovers from it and is never re-initialized.
    pub async fn start(config: RaftConfig) -> Result<RaftNode, RaftError> {
        let raft_config = Arc::new(config.openraft_config()?);
        let node_id = config.node_id;
        let data_dir = config.data_dir.clone();
        if let Bootstrap::Cluster(members) = &config.bootstrap
            && !members.contains_key(&node_id)
        {
            return Err(RaftError::Bootstrap {
                node_id,
                reason: format!(
                    "the initial members {:?} do not include this node",
                    members.keys().collect::<Vec<_>>()
                ),
            });
        }
        private::private_dir(&data_dir).map_err(|source| RaftError::DataDir {
            path: data_dir.clone(),
            source,
        })?;

        let migrate_from = data_dir.clone();
        blocking(move || legacy_log::migrate(&migrate_from, node_id)).await?;
        let log_dir = data_dir.join(LOG_DIR);
        private::private_dir(&log_dir).map_err(|source| RaftError::DataDir {
            path: log_dir.clone(),
            source,
        })?;
        let wait = config.open_timeout;
        let started = std::time::Instant::now();
        // Opened here, not on Raft's runtime: the log's flush worker inherits the opener's
        // priority, and with it at Raft's, c1m's commits carried fewer entries each (8 %
        // more of them) and took 14 % more server CPU at the median.
        let log_store = blocking(move || LogStore::open(&log_dir, node_id, wait)).await?;
        let log_opened = started.elapsed();
        let log_stats = log_store.stats();
        let snap_dir = data_dir.join(SNAPSHOT_DIR);
        let snapshot_file = snap_dir.join(SNAPSHOT_FILE);
        let events = config.events.clone();
        let committed = log_store.committed_hint();
        let runtime = RaftRuntime::start(node_id).map_err(|e| RaftError::Task {
            reason: format!("cannot start the raft runtime: {e}"),
        })?;
        // Loaded at Raft's priority: a restart's snapshot load competes with the nodes
        // reconnecting to the API meanwhile.
        let sm = joined(
            runtime
                .blocking(move || {
                    StateMachine::open_replaying(node_id, &snap_dir, events, committed)
                })
                .await,
        )?;
        let state = sm.handle();
        let state_loaded = started.elapsed();
        let snapshot_index = sm.applied_index();

        let transport = config
            .transport
            .clone()
            .unwrap_or_else(|| Arc::new(NoTransport));
        let network = Network::new(transport, config.max_payload_bytes);
        // Built on the Raft runtime, so openraft spawns its core and workers there.
        let raft = runtime
            .run(openraft::Raft::new(
                node_id,
                raft_config,
                network,
                log_store,
                sm,
            ))
            .await
            .map_err(|e| RaftError::Task {
                reason: e.to_string(),
            })?
            .map_err(|e| RaftError::Fatal {
                node_id,
                reason: e.to_string(),
            })?;
        let fatal = |e: openraft::error::Fatal<ServerId>| RaftError::Fatal {
            node_id,
            reason: e.to_string(),
        };

        let initialized = raft.is_initialized().await.map_err(fatal)?;
        let election_timeout_max = config.election_timeout_max;
        let members = match (&config.bootstrap, initialized) {
            (_, true) | (Bootstrap::Join(_), false) => None,
            (Bootstrap::SingleNode, false) => Some(BTreeMap::from([(
                node_id,
                BasicNode::new(config.addr.clone()),
            )])),
            (Bootstrap::Cluster(m), false) => Some(
                m.iter()
                    .map(|(id, addr)| (*id, BasicNode::new(addr.clone())))
                    .collect(),
            ),
        };
        if initialized {
            runtime.spawn(log_replay_timed(
                raft.clone(),
                node_id,
                snapshot_index,
                started,
                [log_opened, state_loaded],
            ));
        }
        let cadence = snapshot_cadence::spawn(
            raft.clone(),
            log_stats.clone(),
            snapshot_file,
            config.snapshot_min_log_bytes,
            node_id,
        );
        let node = RaftNode {
            node_id,
            addr: config.addr,
            data_dir,
            raft,
            state,
            held: watch::channel(false).0,
            log_stats,
            _cadence: cadence,
            runtime,
        };
        match members {
            Some(members) => match bootstrap_delay(node_id, &members, election_timeout_max) {
                Duration::ZERO => {
                    if let Err(e) = node.initialize(members).await {
                        let _ = node.raft.shutdown().await;
                        return Err(e);
                    }
                }
                delay => {
                    tracing::info!(
                        node_id,
                        delay_ms = delay.as_millis() as u64,
                        "waiting for a lower member to form the cluster before forming it here"
                    );
                    let raft = node.raft.clone();
                    let data_dir = node.data_dir.clone();
                    node.runtime.spawn(async move {
                        tokio::time::sleep(delay).await;
                        match raft.is_initialized().await {
                            Ok(false) => {
                                if let Err(e) =
                                    initialize(&raft, node_id, &data_dir, members).await
                                {
                                    tracing::warn!(node_id, error = %e, "cannot form the cluster");
                                }
                            }
                            Ok(true) => {}
                            Err(e) => tracing::debug!(node_id, error = %e, "stopped before forming the cluster"),
                        }
                    });
                }
            },
            None => tracing::info!(
                node_id,
                data_dir = %node.data_dir.display(),
                recovered = initialized,
                applied_index = node.state.applied_index(),
                "raft node started"
            ),
        }
        Ok(node)
    }

    /// Forms a cluster of `members` (this node among them). Safe when another member
    /// formed the same cluster first; refused on a node that belongs to another one.
    pub async fn initialize(
        &self,
        members: BTreeMap<ServerId, BasicNode>,
    ) -> Result<(), RaftError> {
        initialize(&self.raft, self.node_id, &self.data_dir, members).await
    }

    pub fn node_id(&self) -> ServerId {
        self.node_id
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Read access to the applied state.
    pub fn state(&self) -> StateHandle {
        self.state.clone()
    }

    /// The openraft handle, for what this wrapper does not cover (membership changes).
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Where Raft's own tasks run (the Raft listener serves from it too).
    pub fn runtime(&self) -> &RaftRuntime {
        &self.runtime
    }

    /// The receiving side of the Raft RPCs, for the server's transport.
    pub fn rpc_handler(&self) -> RaftRpcHandler {
        RaftRpcHandler::new(self.raft.clone())
    }

    /// Holds new writes back until the returned guard is dropped: a leader handing over
    /// its lead keeps quiet, since every entry it replicates renews the followers' leader
    /// lease and makes them refuse the new leader's election. Writes wait, then go to
    /// whichever server leads by then (a follower answers them with the leader's address).
    pub fn hold_writes(&self) -> WriteHold {
        self.held.send_replace(true);
        WriteHold(self.held.clone())
    }

    /// Appends `cmd` and returns once it is committed and applied: its index and the FSM's
    /// verdict (the entry is committed either way).
    pub async fn client_write(
        &self,
        cmd: Command,
    ) -> Result<(Index, Result<(), ApplyError>), WriteError> {
        if *self.held.borrow() {
            let mut held = self.held.subscribe();
            let _ = held.wait_for(|h| !h).await;
        }
        let kind = cmd.kind();
        match self.raft.client_write(cmd).await {
            Ok(resp) => {
                tracing::trace!(index = resp.log_id.index, kind, "write committed");
                Ok((resp.log_id.index, resp.data.result))
            }
            Err(openraft::error::RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                Err(WriteError::ForwardToLeader {
                    leader_id: f.leader_id,
                    leader_addr: f.leader_node.map(|n| n.addr),
                })
            }
            Err(openraft::error::RaftError::APIError(e)) => Err(WriteError::Refused {
                reason: e.to_string(),
            }),
            Err(openraft::error::RaftError::Fatal(e)) => Err(WriteError::Stopped {
                reason: e.to_string(),
            }),
        }
    }

    /// Asks for a snapshot now (it is built in the background; watch `metrics().snapshot`).
    pub async fn trigger_snapshot(&self) -> Result<(), WriteError> {
        self.raft
            .trigger()
            .snapshot()
            .await
            .map_err(|e| WriteError::Stopped {
                reason: e.to_string(),
            })
    }

    /// What the Raft log appended since this server started.
    pub fn log_counts(&self) -> log_store::LogCounts {
        self.log_stats.read()
    }

    /// Raft's metrics; the receiver sees every change (leader, term, applied index, ...).
    pub fn metrics(&self) -> watch::Receiver<RaftMetrics> {
        self.raft.metrics()
    }

    /// The leader as this node currently knows it.
    pub fn current_leader(&self) -> Option<ServerId> {
        self.raft.metrics().borrow().current_leader
    }

    pub fn is_leader(&self) -> bool {
        self.current_leader() == Some(self.node_id)
    }

    /// Waits until some leader is known, up to `timeout`.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Option<ServerId> {
        let mut rx = self.metrics();
        let seen = tokio::time::timeout(timeout, rx.wait_for(|m| m.current_leader.is_some())).await;
        match seen {
            Ok(Ok(m)) => m.current_leader,
            _ => None,
        }
    }

    /// Stops the node and waits until its consensus task has exited.
    pub async fn shutdown(&self) -> Result<(), RaftError> {
        self.raft.shutdown().await.map_err(|e| RaftError::Task {
            reason: e.to_string(),
        })?;
        tracing::info!(node_id = self.node_id, "raft node stopped");
        Ok(())
    }
}
