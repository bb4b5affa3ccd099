//! Raft messages between servers.
//!
//! openraft talks to peers through [`RaftNetworkFactory`] / [`RaftNetwork`]; drover implements
//! them once, over a byte-level [`RaftTransport`] with the three RPCs of the proto's
//! `RaftService` (`AppendEntries`, `Vote`, `InstallSnapshot`, each a `bytes payload` in and
//! out). The payloads are the postcard encoding of the openraft request and of the handler's
//! `Result<response, RaftError>` (see [`super::codec::encode_rpc`]). On the receiving side a
//! [`RaftRpcHandler`] decodes a request, hands it to the local Raft and encodes the outcome,
//! so the gRPC service ([`super::grpc`]) is a thin adapter around it. [`LoopbackTransport`]
//! connects nodes of one process (tests, simulations).

use super::codec::{self, RecordError};
use super::payload_budget::PayloadBudget;
use super::types::{Entry, Raft, ServerId, TypeConfig};
use futures::future::BoxFuture;
use openraft::BasicNode;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The future a transport call returns: the response payload, or why there is none.
pub type RpcFuture<'a> = BoxFuture<'a, Result<Vec<u8>, TransportError>>;

/// The three Raft messages a peer answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RaftRpc {
    AppendEntries,
    Vote,
    InstallSnapshot,
}

/// Moves encoded Raft messages to a peer and back. Implemented by the gRPC client (one
/// `RaftService` method per [`RaftRpc`]) and by [`LoopbackTransport`].
pub trait RaftTransport: Send + Sync + fmt::Debug + 'static {
    fn call<'a>(
        &'a self,
        rpc: RaftRpc,
        target: ServerId,
        addr: &'a str,
        payload: Vec<u8>,
    ) -> RpcFuture<'a>;
}

/// Why a transport call failed.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum TransportError {
    /// Nothing answers at the address (connection refused, unknown peer): openraft backs off.
    #[error("raft node {target} at {addr} is unreachable: {reason}")]
    Unreachable {
        target: ServerId,
        addr: String,
        reason: String,
    },
    /// The call failed on the way (reset, timeout, bad status): openraft retries.
    #[error("raft rpc to node {target} at {addr} failed: {reason}")]
    Failed {
        target: ServerId,
        addr: String,
        reason: String,
    },
}

/// Builds a connection per peer over a shared transport.
#[derive(Clone, Debug)]
pub struct Network {
    transport: Arc<dyn RaftTransport>,
    max_payload_bytes: usize,
}

impl Network {
    /// `max_payload_bytes` bounds the entries of one AppendEntries (see
    /// [`super::RaftConfig::max_payload_bytes`]).
    pub fn new(transport: Arc<dyn RaftTransport>, max_payload_bytes: usize) -> Self {
        Self {
            transport,
            max_payload_bytes,
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: ServerId, node: &BasicNode) -> Connection {
        Connection {
            transport: self.transport.clone(),
            target,
            node: node.clone(),
            budget: PayloadBudget::new(self.max_payload_bytes),
        }
    }
}

/// openraft's view of one peer.
#[derive(Debug)]
pub struct Connection {
    transport: Arc<dyn RaftTransport>,
    target: ServerId,
    node: BasicNode,
    /// What one AppendEntries to this peer may carry, following its answers.
    budget: PayloadBudget,
}

type RpcResult<T, E> = Result<T, RPCError<ServerId, BasicNode, RaftError<ServerId, E>>>;

impl Connection {
    async fn call<Req, Resp, E>(
        &self,
        what: &'static str,
        req: &Req,
        rpc: RaftRpc,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let payload =
            codec::encode_rpc(what, req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let sent = self
            .transport
            .call(rpc, self.target, self.node.addr.as_str(), payload);
        let reply = sent.await.map_err(|e| match e {
            TransportError::Unreachable { .. } => RPCError::Unreachable(Unreachable::new(&e)),
            TransportError::Failed { .. } => RPCError::Network(NetworkError::new(&e)),
        })?;
        let outcome: Result<Resp, RaftError<ServerId, E>> = codec::decode_rpc(what, &reply)
            .map_err(|e| {
                tracing::warn!(target_node = self.target, addr = %self.node.addr, error = %e, "undecodable raft reply");
                RPCError::Network(NetworkError::new(&e))
            })?;
        outcome.map_err(|e| {
            RPCError::RemoteError(RemoteError::new_with_node(
                self.target,
                self.node.clone(),
                e,
            ))
        })
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    /// Sends the longest prefix of the entries within the peer's byte budget (at least one)
    /// and reports a partial success when it left some out: openraft sends the rest next.
    async fn append_entries(
        &mut self,
        mut rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<ServerId>, openraft::error::Infallible> {
        let kept = entries_within(&rpc.entries, self.budget.take());
        let trimmed_to = (kept < rpc.entries.len()).then(|| {
            rpc.entries.truncate(kept);
            rpc.entries.last().map(|e| e.log_id)
        });
        let started = std::time::Instant::now();
        let response = self
            .call("append entries", &rpc, RaftRpc::AppendEntries)
            .await;
        let before = self.budget.current();
        match &response {
            Ok(_) => {
                self.budget
                    .answered(started.elapsed(), option.hard_ttl(), trimmed_to.is_some())
            }
            Err(_) => self.budget.failed(),
        }
        if self.budget.current() != before {
            tracing::debug!(
                target_node = self.target,
                budget_bytes = self.budget.current(),
                took_ms = started.elapsed().as_millis() as u64,
                "append entries budget changed"
            );
        }
        Ok(match (response?, trimmed_to) {
            (AppendEntriesResponse::Success, Some(last)) => {
                AppendEntriesResponse::PartialSuccess(last)
            }
            (response, _) => response,
        })
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<ServerId>, InstallSnapshotError> {
        self.call("install snapshot", &rpc, RaftRpc::InstallSnapshot)
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<ServerId>,
        _option: RPCOption,
    ) -> RpcResult<VoteResponse<ServerId>, openraft::error::Infallible> {
        self.call("vote", &rpc, RaftRpc::Vote).await
    }
}

/// How many of `entries`, from the first, fit in `budget` encoded bytes; never fewer than
/// one, so an entry larger than the budget still goes alone.
fn entries_within(entries: &[Entry], budget: usize) -> usize {
    let mut used = 0usize;
    for (i, entry) in entries.iter().enumerate() {
        let size = postcard::experimental::serialized_size(entry).unwrap_or(usize::MAX);
        used = used.saturating_add(size);
        if used > budget {
            return i.max(1);
        }
    }
    entries.len()
}

/// A request payload that could not be decoded (the gRPC adapter answers INVALID_ARGUMENT).
#[derive(Debug, thiserror::Error)]
#[error("bad raft {rpc} request: {source}")]
pub struct BadRequest {
    pub rpc: &'static str,
    pub source: RecordError,
}

/// The receiving side of the three RPCs: decodes, calls the local Raft, encodes the outcome
/// (a Raft-level refusal travels back inside the payload, as openraft expects).
#[derive(Clone)]
pub struct RaftRpcHandler {
    raft: Raft,
}

impl fmt::Debug for RaftRpcHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RaftRpcHandler").finish_non_exhaustive()
    }
}

impl RaftRpcHandler {
    /// The node the RPCs go to.
    pub fn raft(&self) -> &Raft {
        &self.raft
    }
}

fn encode_reply<T: Serialize>(what: &'static str, value: &T) -> Result<Vec<u8>, BadRequest> {
    codec::encode_rpc(what, value).map_err(|source| BadRequest { rpc: what, source })
}

impl RaftRpcHandler {
    pub fn new(raft: Raft) -> Self {
        Self { raft }
    }

    /// Answers an AppendEntries; one that took this follower longer than the leader waits
    /// (a heartbeat interval) is logged with where the time went, since the leader drops
    /// it and sends it again.
    pub async fn append_entries(&self, payload: &[u8]) -> Result<Vec<u8>, BadRequest> {
        let what = "append entries";
        let started = std::time::Instant::now();
        let req: AppendEntriesRequest<TypeConfig> =
            codec::decode_rpc(what, payload).map_err(|source| BadRequest { rpc: what, source })?;
        let entries = req.entries.len();
        let decoded = started.elapsed();
        let res = self.raft.append_entries(req).await;
        let took = started.elapsed();
        let patience = Duration::from_millis(self.raft.config().heartbeat_interval);
        if took > patience {
            tracing::warn!(
                entries,
                bytes = payload.len(),
                decode_ms = decoded.as_millis() as u64,
                raft_ms = (took - decoded).as_millis() as u64,
                "append entries answered later than the leader waits"
            );
        }
        encode_reply(what, &res)
    }

    pub async fn vote(&self, payload: &[u8]) -> Result<Vec<u8>, BadRequest> {
        let what = "vote";
        let req: VoteRequest<ServerId> =
            codec::decode_rpc(what, payload).map_err(|source| BadRequest { rpc: what, source })?;
        let res = self.raft.vote(req).await;
        encode_reply(what, &res)
    }

    pub async fn install_snapshot(&self, payload: &[u8]) -> Result<Vec<u8>, BadRequest> {
        let what = "install snapshot";
        let req: InstallSnapshotRequest<TypeConfig> =
            codec::decode_rpc(what, payload).map_err(|source| BadRequest { rpc: what, source })?;
        let res = self.raft.install_snapshot(req).await;
        encode_reply(what, &res)
    }
}

/// Connects the nodes of one process: a call goes straight to the target's handler. Nodes
/// that are not registered (or were removed, to simulate a partition) are unreachable.
#[derive(Clone, Default)]
pub struct LoopbackTransport {
    peers: Arc<RwLock<BTreeMap<ServerId, RaftRpcHandler>>>,
}

impl fmt::Debug for LoopbackTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let peers: Vec<ServerId> = self.read().keys().copied().collect();
        f.debug_struct("LoopbackTransport")
            .field("peers", &peers)
            .finish()
    }
}

impl LoopbackTransport {
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<ServerId, RaftRpcHandler>> {
        self.peers.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `node` reachable through `handler`.
    pub fn register(&self, node: ServerId, handler: RaftRpcHandler) {
        self.peers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node, handler);
    }

    /// Makes `node` unreachable (and releases its handler).
    pub fn unregister(&self, node: ServerId) {
        self.peers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&node);
    }
}

impl RaftTransport for LoopbackTransport {
    fn call<'a>(
        &'a self,
        rpc: RaftRpc,
        target: ServerId,
        addr: &'a str,
        payload: Vec<u8>,
    ) -> RpcFuture<'a> {
        let handler = self.read().get(&target).cloned();
        Box::pin(async move {
            let handler = handler.ok_or_else(|| TransportError::Unreachable {
                target,
                addr: addr.to_string(),
                reason: "no such node in this process".to_string(),
            })?;
            let res = match rpc {
                RaftRpc::AppendEntries => handler.append_entries(&payload).await,
                RaftRpc::Vote => handler.vote(&payload).await,
                RaftRpc::InstallSnapshot => handler.install_snapshot(&payload).await,
            };
            res.map_err(|e| TransportError::Failed {
                target,
                addr: addr.to_string(),
                reason: e.to_string(),
            })
        })
    }
}

/// The network of a node without peers (a single server): every call is unreachable.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTransport;

impl RaftTransport for NoTransport {
    fn call<'a>(
        &'a self,
        _: RaftRpc,
        target: ServerId,
        addr: &'a str,
        _: Vec<u8>,
    ) -> RpcFuture<'a> {
        Box::pin(async move { Err(no_peer(target, addr)) })
    }
}

fn no_peer(target: ServerId, addr: &str) -> TransportError {
    TransportError::Unreachable {
        target,
        addr: addr.to_string(),
        reason: "this server has no raft transport configured".to_string(),
    }
}
