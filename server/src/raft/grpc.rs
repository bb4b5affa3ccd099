//! The Raft transport over gRPC: `drover.v1.RaftService`, one unary call per openraft RPC,
//! each carrying the opaque payload of [`super::network`].
//!
//! [`GrpcTransport`] is the client side (one lazily connected channel per peer address);
//! [`RaftGrpcService`] is the server side, a thin wrapper of a [`RaftRpcHandler`] to mount on
//! the server's tonic router with [`RaftGrpcService::into_server`].

use super::listener::ClusterSecret;
use super::network::{RaftRpc, RaftRpcHandler, RaftTransport, RpcFuture, TransportError};
use super::types::ServerId;
use drover_proto::v1::raft_service_client::RaftServiceClient;
use drover_proto::v1::raft_service_server::{RaftService, RaftServiceServer};
use drover_proto::v1::{
    JoinRequest, JoinResponse, RaftRequest, RaftResponse, StartElectionRequest,
    StartElectionResponse,
};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status};

/// Room for a snapshot chunk (see `RaftConfig::snapshot_chunk_size`) or a full
/// AppendEntries batch, with margin.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Calls peers' `RaftService`. Cheap to clone; channels are shared and reconnect on their own.
#[derive(Clone)]
pub struct GrpcTransport {
    clients: Arc<Mutex<HashMap<String, RaftServiceClient<Channel>>>>,
    max_message_bytes: usize,
    connect_timeout: Duration,
    /// Presented on every call; peers refuse calls without it.
    secret: Option<ClusterSecret>,
    /// Calls peers over TLS with this server's certificate.
    tls: Option<crate::tls::ServerTls>,
}

impl fmt::Debug for GrpcTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcTransport")
            .field("max_message_bytes", &self.max_message_bytes)
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

impl Default for GrpcTransport {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_MESSAGE_BYTES, Duration::from_secs(2))
    }
}

impl GrpcTransport {
    pub fn new(max_message_bytes: usize, connect_timeout: Duration) -> Self {
        Self {
            clients: Arc::default(),
            max_message_bytes,
            connect_timeout,
            secret: None,
            tls: None,
        }
    }

    /// Calls peers over TLS (see [`crate::tls`]).
    pub fn with_tls(mut self, tls: Option<crate::tls::ServerTls>) -> Self {
        self.tls = tls;
        self
    }

    /// Presents `secret` on every call (see [`super::listener`]).
    pub fn with_secret(mut self, secret: ClusterSecret) -> Self {
        self.secret = Some(secret);
        self
    }

    fn client(
        &self,
        target: ServerId,
        addr: &str,
    ) -> Result<RaftServiceClient<Channel>, TransportError> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(addr) {
            return Ok(c.clone());
        }
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let uri = if addr.contains("://") {
            addr.to_string()
        } else {
            format!("{scheme}://{addr}")
        };
        let unreachable = |reason: String| TransportError::Unreachable {
            target,
            addr: addr.to_string(),
            reason,
        };
        let mut endpoint =
            Endpoint::from_shared(uri).map_err(|e| unreachable(format!("bad address: {e}")))?;
        if let Some(tls) = &self.tls {
            let config = tls
                .peer_client(drover_proto::tls::host_of(addr))
                .map_err(|e| unreachable(format!("tls: {e}")))?;
            endpoint = endpoint
                .tls_config(config)
                .map_err(|e| unreachable(format!("tls: {e}")))?;
        }
        let channel = endpoint
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true)
            .connect_lazy();
        let client = RaftServiceClient::new(channel)
            .max_decoding_message_size(self.max_message_bytes)
            .max_encoding_message_size(self.max_message_bytes);
        clients.insert(addr.to_string(), client.clone());
        Ok(client)
    }
}

impl GrpcTransport {
    /// A call to a peer's listener: with the cluster secret and a deadline.
    fn request<T>(&self, message: T, timeout: Duration) -> Request<T> {
        let mut req = Request::new(message);
        req.set_timeout(timeout);
        if let Some(secret) = &self.secret {
            secret.attach(&mut req);
        }
        req
    }

    /// Asks the server `target` at Raft address `addr` who it is (see `crate::forward`).
    pub async fn server_info(
        &self,
        target: ServerId,
        addr: &str,
    ) -> Result<drover_proto::v1::ServerInfo, TransportError> {
        let mut client = self.client(target, addr)?;
        let req = self.request(
            drover_proto::v1::ServerInfoRequest {},
            self.connect_timeout * 2,
        );
        client
            .info(req)
            .await
            .map(Response::into_inner)
            .map_err(|status| unreachable(target, addr, &status))
    }

    /// Asks the server at `addr` to take `join.server_id` into the cluster (see
    /// `crate::membership`). The answer keeps its gRPC status, so the caller can tell "no
    /// leader yet" (retry) from a refusal.
    pub async fn join(
        &self,
        addr: &str,
        join: JoinRequest,
        timeout: Duration,
        forwarded: bool,
    ) -> Result<JoinResponse, Status> {
        let mut client = self
            .client(0, addr)
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let mut req = self.request(join, timeout);
        if forwarded {
            req.metadata_mut().insert(
                JOIN_FORWARDED_HEADER,
                tonic::metadata::MetadataValue::from_static("1"),
            );
        }
        client.join(req).await.map(Response::into_inner)
    }

    /// Sends a follower's scheduling call (see `crate::leader_link`) to the leader at
    /// `addr`; the answer's bytes.
    pub async fn scheduling(
        &self,
        addr: &str,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let mut client = self.client(0, addr)?;
        let req = self.request(RaftRequest { payload }, timeout);
        client
            .scheduling(req)
            .await
            .map(|r| r.into_inner().payload)
            .map_err(|status| unreachable(0, addr, &status))
    }

    /// Tells `target` to start an election now (a leadership transfer's last step).
    pub async fn start_election(&self, target: ServerId, addr: &str) -> Result<(), TransportError> {
        let mut client = self.client(target, addr)?;
        let req = self.request(StartElectionRequest {}, self.connect_timeout * 2);
        client
            .start_election(req)
            .await
            .map(|_| ())
            .map_err(|status| unreachable(target, addr, &status))
    }
}

/// Set on a `Join` a follower passed on to the leader: it is never passed on again.
pub const JOIN_FORWARDED_HEADER: &str = "drover-join-forwarded";

fn unreachable(target: ServerId, addr: &str, status: &Status) -> TransportError {
    TransportError::Unreachable {
        target,
        addr: addr.to_string(),
        reason: format!("{:?}: {}", status.code(), status.message()),
    }
}

impl RaftTransport for GrpcTransport {
    fn call<'a>(
        &'a self,
        rpc: RaftRpc,
        target: ServerId,
        addr: &'a str,
        payload: Vec<u8>,
    ) -> RpcFuture<'a> {
        Box::pin(async move {
            let mut client = self.client(target, addr)?;
            let mut req = Request::new(RaftRequest { payload });
            if let Some(secret) = &self.secret {
                secret.attach(&mut req);
            }
            let res = match rpc {
                RaftRpc::AppendEntries => client.append_entries(req).await,
                RaftRpc::Vote => client.vote(req).await,
                RaftRpc::InstallSnapshot => client.install_snapshot(req).await,
            };
            match res {
                Ok(resp) => Ok(resp.into_inner().payload),
                Err(status) => {
                    let reason = format!("{:?}: {}", status.code(), status.message());
                    Err(if status.code() == Code::Unavailable {
                        TransportError::Unreachable {
                            target,
                            addr: addr.to_string(),
                            reason,
                        }
                    } else {
                        TransportError::Failed {
                            target,
                            addr: addr.to_string(),
                            reason,
                        }
                    })
                }
            }
        })
    }
}

/// The server side of `RaftService` for one node.
#[derive(Clone, Debug)]
pub struct RaftGrpcService {
    handler: RaftRpcHandler,
    info: crate::forward::SelfInfo,
    /// Takes joining servers in; without it `Join` is refused.
    membership: Option<Arc<crate::membership::Membership>>,
    /// Serves followers' workers while this server leads; without it `Scheduling` is
    /// refused.
    scheduling: Option<Arc<crate::leader::Leadership>>,
}

impl RaftGrpcService {
    /// Serves `handler`'s Raft RPCs, and `info` to peers that ask who this server is.
    pub fn new(handler: RaftRpcHandler, info: crate::forward::SelfInfo) -> Self {
        Self {
            handler,
            info,
            membership: None,
            scheduling: None,
        }
    }

    /// Answers `Scheduling` with `leadership`'s broker and plan applier.
    pub fn with_scheduling(mut self, leadership: Arc<crate::leader::Leadership>) -> Self {
        self.scheduling = Some(leadership);
        self
    }

    /// Answers `Join` with `membership`.
    pub fn with_membership(mut self, membership: Arc<crate::membership::Membership>) -> Self {
        self.membership = Some(membership);
        self
    }

    /// The tonic service to add to the server's router, accepting messages up to
    /// `max_message_bytes` (match the peers' [`GrpcTransport`]).
    pub fn into_server(self, max_message_bytes: usize) -> RaftServiceServer<Self> {
        RaftServiceServer::new(self)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes)
    }
}

fn reply(
    res: Result<Vec<u8>, super::network::BadRequest>,
) -> Result<Response<RaftResponse>, Status> {
    match res {
        Ok(payload) => Ok(Response::new(RaftResponse { payload })),
        Err(e) => Err(Status::invalid_argument(e.to_string())),
    }
}

#[tonic::async_trait]
impl RaftService for RaftGrpcService {
    async fn append_entries(
        &self,
        request: Request<RaftRequest>,
    ) -> Result<Response<RaftResponse>, Status> {
        reply(
            self.handler
                .append_entries(&request.into_inner().payload)
                .await,
        )
    }

    async fn vote(&self, request: Request<RaftRequest>) -> Result<Response<RaftResponse>, Status> {
        reply(self.handler.vote(&request.into_inner().payload).await)
    }

    async fn install_snapshot(
        &self,
        request: Request<RaftRequest>,
    ) -> Result<Response<RaftResponse>, Status> {
        reply(
            self.handler
                .install_snapshot(&request.into_inner().payload)
                .await,
        )
    }

    async fn info(
        &self,
        _request: Request<drover_proto::v1::ServerInfoRequest>,
    ) -> Result<Response<drover_proto::v1::ServerInfo>, Status> {
        let mut info = self.info.read().unwrap_or_else(|p| p.into_inner()).clone();
        let m = self.handler.raft().metrics().borrow().clone();
        info.in_cluster = m
            .membership_config
            .membership()
            .voter_ids()
            .next()
            .is_some();
        info.leader_id = m.current_leader.unwrap_or(0);
        Ok(Response::new(info))
    }

    async fn join(&self, request: Request<JoinRequest>) -> Result<Response<JoinResponse>, Status> {
        let forwarded = request.metadata().contains_key(JOIN_FORWARDED_HEADER);
        let Some(membership) = &self.membership else {
            return Err(Status::failed_precondition(
                "this server does not take servers in",
            ));
        };
        membership
            .join(request.into_inner(), forwarded)
            .await
            .map(Response::new)
    }

    async fn scheduling(
        &self,
        request: Request<RaftRequest>,
    ) -> Result<Response<RaftResponse>, Status> {
        let Some(leadership) = &self.scheduling else {
            return Err(Status::failed_precondition(
                "this server does not serve scheduling calls",
            ));
        };
        let raft = self.membership.as_ref().map(|m| m.raft());
        let Some(raft) = raft else {
            return Err(Status::failed_precondition(
                "this server does not serve scheduling calls",
            ));
        };
        let payload =
            crate::leader_link::serve(leadership, raft, &request.into_inner().payload).await;
        Ok(Response::new(RaftResponse { payload }))
    }

    async fn start_election(
        &self,
        _request: Request<StartElectionRequest>,
    ) -> Result<Response<StartElectionResponse>, Status> {
        tracing::info!("starting an election: leadership is handed to this server");
        self.handler
            .raft()
            .trigger()
            .elect()
            .await
            .map_err(|e| Status::unavailable(format!("raft stopped: {e}")))?;
        Ok(Response::new(StartElectionResponse {}))
    }
}
