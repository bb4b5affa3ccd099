//! The [`ServerHandle`]'s RPC bodies, one module per API area (mirroring `crate::api`):
//! each method decodes nothing and encodes nothing; it takes `drover_proto::convert`'s
//! request types, checks what needs state, and writes through Raft.

mod acl;
mod allocs;
mod deployments;
mod jobs;
mod nodes;
mod operator;
mod workers;

pub use acl::{CreatedToken, TokenRequest};
pub use allocs::AllocStopped;
pub use deployments::{DeploymentActed, DeploymentAction};
pub use jobs::{JobDeregistered, JobDispatched, JobRegistered};
pub use nodes::{HeartbeatAck, NodeRegistered};

use crate::config::ServerConfig;
use crate::events::EventRing;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::raft::{RaftNode, ServerId, StateHandle, WaitTimeout};
use crate::worker::{EvalSource, WorkerPool};
use crate::write::Writer;
use drover_core::Index;
use drover_core::fsm::Event;
use drover_core::state::StateSnapshot;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, broadcast, watch};

/// What every handle shares: the server's parts, for the RPC bodies in [`crate::handle`].
pub(crate) struct Inner {
    pub(crate) config: ServerConfig,
    pub(crate) raft: Arc<RaftNode>,
    pub(crate) writer: Writer,
    /// Nodes' allocation reports, written several to an entry under load.
    pub(crate) client_updates: crate::client_updates::ClientUpdates,
    pub(crate) state: StateHandle,
    pub(crate) leadership: Arc<Leadership>,
    pub(crate) workers: Mutex<WorkerPool>,
    pub(crate) events: broadcast::Sender<Arc<Vec<Event>>>,
    pub(crate) ring: Arc<EventRing>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) shutdown: watch::Sender<bool>,
    /// Who this server is, as its Raft listener tells peers.
    pub(crate) self_info: crate::forward::SelfInfo,
    /// Where the leader's API is, for the calls a follower forwards.
    pub(crate) directory: Arc<crate::forward::Directory>,
    /// Adds and removes servers, hands leadership over (on the leader).
    pub(crate) membership: Arc<crate::membership::Membership>,
}

/// The server's API, cheap to clone; what the gRPC services call.
#[derive(Clone)]
pub struct ServerHandle {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("server_id", &self.inner.config.server_id)
            .finish_non_exhaustive()
    }
}

impl ServerHandle {
    pub fn server_id(&self) -> ServerId {
        self.inner.config.server_id
    }

    pub fn config(&self) -> &ServerConfig {
        &self.inner.config
    }

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

    /// Hands leadership to voter `target` (or the most caught-up other voter); on the
    /// leader only. Returns the new leader and its term.
    pub async fn transfer_leadership(
        &self,
        target: Option<crate::raft::ServerId>,
    ) -> Result<(crate::raft::ServerId, u64), crate::membership::MembershipError> {
        self.inner.membership.transfer(target).await
    }

    /// Whether this server runs the leader duties.
    pub fn is_leader(&self) -> bool {
        self.inner.leadership.is_leading()
    }

    /// Raft's current metrics (term, role, log indexes, membership).
    pub fn raft_metrics(&self) -> crate::raft::RaftMetrics {
        self.inner.raft.metrics().borrow().clone()
    }

    /// What the Raft log appended since this server started.
    pub fn raft_log_counts(&self) -> crate::raft::log_store::LogCounts {
        self.inner.raft.log_counts()
    }

    /// Raft's metrics as they change, for whatever follows leadership (the gRPC health).
    pub fn watch_raft_metrics(&self) -> tokio::sync::watch::Receiver<crate::raft::RaftMetrics> {
        self.inner.raft.metrics()
    }

    /// Whether no write was ever given `index`: on the leader, anything past its last log
    /// entry. A follower cannot tell (it may not have seen the leader's latest entries),
    /// so it always says no.
    pub fn is_unwritten_index(&self, index: Index) -> bool {
        self.is_leader()
            && self
                .inner
                .raft
                .metrics()
                .borrow()
                .last_log_index
                .is_some_and(|last| index > last)
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
}
