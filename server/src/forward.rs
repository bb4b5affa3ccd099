//! Any server answers. A call only the leader can serve (every write, node registration
//! and heartbeats, the broker's and blocked evals' numbers), or a read that asks for
//! [`CONSISTENCY_HEADER`]` = consistent`, is forwarded by a follower to the leader's client
//! API as it came: its headers (so the leader checks the caller's own token) and its body,
//! with the leader's answer streamed back. Reads are otherwise served from local state,
//! which every answer's index places in the log.
//!
//! A follower learns the leader's API address by asking the leader's Raft listener (the
//! address in the membership) for its [`pb::ServerInfo`]. A forwarded call carries
//! [`FORWARDED_HEADER`] and is never forwarded again: a server that has lost the lead in
//! between answers it itself (UNAVAILABLE, naming the leader), so calls cannot loop.
//!
//! A leader whose lease has lapsed (no quorum answered it lately: it may be cut off)
//! answers leader calls UNAVAILABLE at once, so its callers go to another server rather
//! than wait for a quorum it cannot reach.
//!
//! A follower is a proxy for many clients, so its calls to the leader travel on several
//! connections ([`CALL_LANES`]) rather than one, which the leader's per-connection limit
//! would hold to one client's share. Heartbeats have a connection of their own: a node's
//! liveness must never queue behind other nodes' writes waiting for a Raft commit, or a
//! loaded cluster marks its nodes down for its own slowness.
//!
//! The heartbeat stream ([`HEARTBEAT_STREAM_PATH`]) is the one leader call a follower does
//! not forward whole: it serves the stream itself and sends each heartbeat on to the
//! leader as the unary call, over the heartbeat connection (see [`Directory::heartbeat_lane`]
//! and `api::heartbeat_stream`). Forwarded whole, every node's stream would sit on the
//! follower's one heartbeat connection, which the leader caps at 128 streams,
//! and would end at the first change of leader; relayed, a heartbeat is one call on that
//! connection for as long as it takes, and each goes to whichever server leads by then.
//!
//! A forwarded call never outlives its caller: it runs under a deadline a little shorter
//! than the caller's own (`grpc-timeout`), and at most [`MAX_FORWARD`]. If the leader this
//! server knows changes while the call is on its way (a partitioned leader was replaced),
//! the call is not left waiting for an answer that may never come: a small request is sent
//! again to the new leader once, anything else answers UNAVAILABLE at once so the caller
//! retries.

use crate::raft::{GrpcTransport, RaftNode, ServerId};
use drover_proto::v1 as pb;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::transport::{Channel, Endpoint};
use tower::ServiceExt;

/// The longest a forwarded call may take, whatever the caller allows.
pub const MAX_FORWARD: Duration = Duration::from_secs(10);
/// Taken off the caller's deadline, so this server answers before the caller gives up.
const DEADLINE_MARGIN: Duration = Duration::from_millis(100);
/// Requests up to this size are kept so they can be sent again to a new leader.
const MAX_REPLAY_BYTES: u64 = 1 << 20;

/// Connections a follower spreads its forwarded calls over (heartbeats have their own).
pub const CALL_LANES: usize = 4;
/// The call that keeps a node alive; it travels on its own connection.
const HEARTBEAT_PATH: &str = "/drover.v1.NodeService/UpdateStatus";
/// The heartbeat stream: served by whichever server it reaches, which sends each heartbeat
/// on as [`HEARTBEAT_PATH`] when it does not lead.
pub(crate) const HEARTBEAT_STREAM_PATH: &str = "/drover.v1.NodeService/Heartbeats";

/// Set on a call a follower forwarded (to the forwarding server's id).
pub const FORWARDED_HEADER: &str = "drover-forwarded-by";
/// A read with this set to `consistent` is answered by the leader.
pub const CONSISTENCY_HEADER: &str = "drover-consistency";

/// Who this server is, as its Raft listener tells peers. The API address is filled in
/// once the API is bound.
pub type SelfInfo = Arc<RwLock<pb::ServerInfo>>;

/// Whether the call at `path` can be answered from this server's own state. Everything
/// else goes to the leader, so an RPC added later is forwarded unless listed here.
pub fn served_locally(path: &str) -> bool {
    let Some((service, method)) = path.trim_start_matches('/').split_once('/') else {
        return true;
    };
    match service {
        "drover.v1.StatusService"
        | "drover.v1.WorkerService"
        | "drover.v1.SearchService"
        | "drover.v1.ServiceService" => true,
        "drover.v1.EventService" => method == "Subscribe",
        "drover.v1.AclService" => matches!(
            method,
            "TokenSelf" | "TokenList" | "TokenGet" | "PolicyList" | "PolicyGet"
        ),
        "drover.v1.EvalService" => matches!(method, "List" | "Get"),
        "drover.v1.JobService" => matches!(
            method,
            "Get" | "List" | "Versions" | "Allocations" | "Evaluations" | "Summary" | "Plan"
        ),
        "drover.v1.NodeService" => matches!(
            method,
            "Heartbeats" | "WatchAllocations" | "NodeList" | "NodeGet" | "AllocGet" | "AllocList"
        ),
        "drover.v1.OperatorService" => method == "SchedulerGetConfig",
        "drover.v1.DeploymentService" => matches!(method, "List" | "Get"),
        s => s.starts_with("grpc."),
    }
}

/// The leader's API, as this server last learnt it.
#[derive(Debug)]
struct Known {
    leader: ServerId,
    raft_addr: String,
    lanes: Arc<Lanes>,
}

/// The connections to one leader's API: one for heartbeats, [`CALL_LANES`] for the rest.
#[derive(Debug)]
struct Lanes {
    heartbeats: Channel,
    calls: Vec<Channel>,
    next: std::sync::atomic::AtomicUsize,
}

impl Lanes {
    /// The connection a call to `path` takes: heartbeats their own, the rest in turn.
    fn for_path(&self, path: &str) -> Channel {
        if path == HEARTBEAT_PATH {
            return self.heartbeats.clone();
        }
        let turn = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.calls[turn % self.calls.len()].clone()
    }
}

/// Finds the leader's client API.
#[derive(Debug)]
pub struct Directory {
    raft: Arc<RaftNode>,
    transport: GrpcTransport,
    tls: Option<crate::tls::ServerTls>,
    /// How long a call waits for an election to end before UNAVAILABLE.
    wait: Duration,
    /// The leader's lease: past it without a quorum's answer, this server (if it leads)
    /// answers no leader call, and the caller goes to another server.
    lease: Duration,
    known: Mutex<Option<Known>>,
    /// Other servers' APIs by id, with the Raft address they were learnt at.
    peers: Mutex<std::collections::HashMap<ServerId, (String, Channel)>>,
}

impl Directory {
    pub fn new(
        raft: Arc<RaftNode>,
        transport: GrpcTransport,
        tls: Option<crate::tls::ServerTls>,
        wait: Duration,
        lease: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            raft,
            transport,
            tls,
            wait,
            lease,
            known: Mutex::new(None),
            peers: Mutex::new(std::collections::HashMap::new()),
        })
    }

    /// Every server of the membership (voters and learners), this one included.
    pub fn members(&self) -> Vec<ServerId> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        m.membership_config
            .membership()
            .nodes()
            .map(|(id, _)| *id)
            .collect()
    }

    /// A channel to server `id`'s client API (for calls that act on one server, such as
    /// its workers); NOT_FOUND when `id` is not a member, UNAVAILABLE when it does not say
    /// where its API is.
    pub async fn server(&self, id: ServerId) -> Result<Channel, Status> {
        let raft_addr = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            m.membership_config
                .membership()
                .get_node(&id)
                .map(|n| n.addr.clone())
        };
        let Some(raft_addr) = raft_addr else {
            return Err(Status::not_found(format!(
                "server {id} is not a member of this cluster (`drover server members` lists them)"
            )));
        };
        if let Some((at, channel)) = self.lock_peers().get(&id)
            && *at == raft_addr
        {
            return Ok(channel.clone());
        }
        let info = self
            .transport
            .server_info(id, &raft_addr)
            .await
            .map_err(|e| Status::unavailable(format!("cannot reach server {id}: {e}")))?;
        if info.api_addr.is_empty() {
            return Err(Status::unavailable(format!(
                "server {id} does not serve its API yet; retry"
            )));
        }
        let channel = self.channel(&info)?;
        self.lock_peers().insert(id, (raft_addr, channel.clone()));
        Ok(channel)
    }

    fn lock_peers(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<ServerId, (String, Channel)>> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connections to the leader's API; `None` when this server leads.
    async fn leader(&self) -> Result<Option<Arc<Lanes>>, Status> {
        let elected = {
            let mut metrics = self.raft.metrics();
            let elected =
                tokio::time::timeout(self.wait, metrics.wait_for(|m| m.current_leader.is_some()))
                    .await;
            match elected {
                Ok(Ok(m)) => m.current_leader.map(|leader| {
                    // Here on every heartbeat: the leader's address is copied only when
                    // it is another server's.
                    let me = leader == self.raft.node_id();
                    let addr = (!me)
                        .then(|| m.membership_config.membership().get_node(&leader))
                        .flatten()
                        .map(|n| n.addr.clone());
                    let lapsed = me && !crate::leader::lease_holds(&m, self.lease);
                    (leader, addr, lapsed)
                }),
                _ => None,
            }
        };
        let Some((leader, raft_addr, lapsed)) = elected else {
            return Err(Status::unavailable(format!(
                "no leader elected within {:?}; retry",
                self.wait
            )));
        };
        if lapsed {
            return Err(Status::unavailable(format!(
                "server {leader} leads but no quorum has answered it within its lease of {:?}: it may be cut off from the others; retry on another server",
                self.lease
            )));
        }
        if leader == self.raft.node_id() {
            return Ok(None);
        }
        let Some(raft_addr) = raft_addr else {
            return Err(Status::unavailable(format!(
                "leader {leader} is not in this server's membership yet; retry"
            )));
        };
        if let Some(k) = &*self.known.lock().unwrap_or_else(|p| p.into_inner())
            && k.leader == leader
            && k.raft_addr == raft_addr
        {
            return Ok(Some(k.lanes.clone()));
        }
        let info = self
            .transport
            .server_info(leader, &raft_addr)
            .await
            .map_err(|e| Status::unavailable(format!("cannot reach the leader: {e}")))?;
        if info.api_addr.is_empty() {
            return Err(Status::unavailable(format!(
                "leader {leader} does not serve its API yet; retry"
            )));
        }
        // Each lazily connected channel is a connection of its own.
        let lanes = Arc::new(Lanes {
            heartbeats: self.channel(&info)?,
            calls: (0..CALL_LANES)
                .map(|_| self.channel(&info))
                .collect::<Result<_, _>>()?,
            next: std::sync::atomic::AtomicUsize::new(0),
        });
        tracing::info!(leader, api_addr = %info.api_addr, lanes = CALL_LANES + 1, "forwarding leader calls");
        *self.known.lock().unwrap_or_else(|p| p.into_inner()) = Some(Known {
            leader,
            raft_addr,
            lanes: lanes.clone(),
        });
        Ok(Some(lanes))
    }

    /// Where a heartbeat goes, checked for each one: `None` when this server leads and its
    /// lease holds (handle it here), the leader's heartbeat connection when another server
    /// leads, and UNAVAILABLE (as a unary heartbeat would get) when no leader is elected or
    /// this server leads past its lease.
    pub(crate) async fn heartbeat_lane(&self) -> Result<Option<Channel>, Status> {
        Ok(self.leader().await?.map(|lanes| lanes.heartbeats.clone()))
    }

    /// The leader this server knows, if any.
    pub fn known_leader(&self) -> Option<ServerId> {
        self.raft.metrics().borrow().current_leader
    }

    /// Whether the leader this server knows is other than `from` within the wait a call
    /// gives an election.
    pub(crate) async fn leader_changes_within_wait(&self, from: Option<ServerId>) -> bool {
        tokio::time::timeout(self.wait, self.leader_changed(from))
            .await
            .is_ok()
    }

    /// Resolves once the leader this server knows is no longer `from`.
    pub(crate) async fn leader_changed(&self, from: Option<ServerId>) {
        let mut metrics = self.raft.metrics();
        let _ = metrics.wait_for(|m| m.current_leader != from).await;
    }

    fn channel(&self, info: &pb::ServerInfo) -> Result<Channel, Status> {
        let bad = |e: String| Status::unavailable(format!("leader api {}: {e}", info.api_addr));
        let mut endpoint = Endpoint::from_shared(format!("{}://{}", info.scheme, info.api_addr))
            .map_err(|e| bad(e.to_string()))?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true);
        if let Some(tls) = &self.tls {
            let config = tls
                .peer_client(drover_proto::tls::host_of(&info.api_addr))
                .map_err(|e| bad(e.to_string()))?;
            endpoint = endpoint
                .tls_config(config)
                .map_err(|e| bad(e.to_string()))?;
        }
        Ok(endpoint.connect_lazy())
    }
}

/// Wraps the API's services in [`Forward`].
#[derive(Clone, Debug)]
pub struct ForwardLayer {
    pub directory: Arc<Directory>,
    pub server_id: ServerId,
}

impl<S> tower::Layer<S> for ForwardLayer {
    type Service = Forward<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Forward {
            inner,
            layer: self.clone(),
        }
    }
}

/// Serves a call here, or sends it to the leader (see the module docs).
#[derive(Clone, Debug)]
pub struct Forward<S> {
    inner: S,
    layer: ForwardLayer,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S> tower::Service<http::Request<Body>> for Forward<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<Body>) -> Self::Future {
        let mut inner = crate::layers::take_ready(&mut self.inner);
        let headers = req.headers();
        let consistent = headers
            .get(CONSISTENCY_HEADER)
            .is_some_and(|v| v == "consistent");
        let path = req.uri().path();
        let wants_leader = path != HEARTBEAT_STREAM_PATH && (consistent || !served_locally(path));
        if !wants_leader || headers.contains_key(FORWARDED_HEADER) {
            return Box::pin(inner.call(req));
        }
        let layer = self.layer.clone();
        Box::pin(async move {
            let deadline = forward_deadline(req.headers());
            req.headers_mut()
                .insert(FORWARDED_HEADER, http::HeaderValue::from(layer.server_id));
            let path = req.uri().path().to_string();
            let (parts, body) = req.into_parts();
            let small = http_body::Body::size_hint(&body)
                .upper()
                .is_some_and(|n| n <= MAX_REPLAY_BYTES);
            // A small request is kept whole, so it can go again to a new leader.
            let (kept, mut body) = if small {
                match http_body_util::BodyExt::collect(body).await {
                    Ok(collected) => (Some(collected.to_bytes()), None),
                    Err(e) => {
                        return Ok(
                            Status::unavailable(format!("reading the request: {e}")).into_http()
                        );
                    }
                }
            } else {
                (None, Some(body))
            };
            let started = tokio::time::Instant::now();
            for attempt in 0..2 {
                let leader = layer.directory.known_leader();
                let channel = match layer.directory.leader().await {
                    Ok(None) => {
                        let body = kept
                            .clone()
                            .map(|b| Body::new(http_body_util::Full::new(b)))
                            .or_else(|| body.take());
                        let Some(body) = body else { break };
                        return inner.call(http::Request::from_parts(parts, body)).await;
                    }
                    Ok(Some(lanes)) => lanes.for_path(&path),
                    Err(status) => return Ok(status.into_http()),
                };
                let Some(body) = kept
                    .clone()
                    .map(|b| Body::new(http_body_util::Full::new(b)))
                    .or_else(|| body.take())
                else {
                    break;
                };
                let mut onward = http::Request::from_parts(parts.clone(), body);
                *onward.extensions_mut() = http::Extensions::new();
                let left = deadline.saturating_sub(started.elapsed());
                tokio::select! {
                    answer = tokio::time::timeout(left, channel.oneshot(onward)) => {
                        return Ok(match answer {
                            Ok(Ok(res)) => res,
                            Ok(Err(e)) => {
                                tracing::warn!(path, error = %e, "forwarding to the leader failed");
                                Status::unavailable(format!("forwarding to the leader failed: {e}; retry"))
                                    .into_http()
                            }
                            Err(_) => Status::deadline_exceeded(format!(
                                "the leader did not answer within {left:?}; retry"
                            ))
                            .into_http(),
                        });
                    }
                    () = layer.directory.leader_changed(leader) => {
                        tracing::info!(path, attempt, from = ?leader, to = ?layer.directory.known_leader(), "leader changed while forwarding");
                        if kept.is_none() {
                            break;
                        }
                    }
                }
            }
            Ok(
                Status::unavailable(
                    "the leader changed while the call was on its way to it; retry",
                )
                .into_http(),
            )
        })
    }
}

/// The deadline for a forwarded call: the caller's own (`grpc-timeout`) less a margin, and
/// at most [`MAX_FORWARD`].
fn forward_deadline(headers: &http::HeaderMap) -> Duration {
    let caller = headers
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout);
    caller
        .map(|d| d.saturating_sub(DEADLINE_MARGIN))
        .unwrap_or(MAX_FORWARD)
        .min(MAX_FORWARD)
}

/// gRPC's `grpc-timeout` header: up to eight digits and a unit (H M S m u n).
fn parse_grpc_timeout(v: &str) -> Option<Duration> {
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::served_locally;
    use std::time::Duration;
    use tonic::codegen::http;

    #[test]
    fn forwarded_calls_end_before_their_callers_give_up() {
        use super::{MAX_FORWARD, forward_deadline};
        let rows = [
            (Some("2S"), Duration::from_millis(1900)),
            (Some("500m"), Duration::from_millis(400)),
            (Some("50m"), Duration::ZERO),
            (Some("1H"), MAX_FORWARD),
            (Some("garbage"), MAX_FORWARD),
            (None, MAX_FORWARD),
        ];
        for (header, want) in rows {
            let mut headers = http::HeaderMap::new();
            if let Some(h) = header {
                headers.insert("grpc-timeout", http::HeaderValue::from_static(h));
            }
            assert_eq!(forward_deadline(&headers), want, "{header:?}");
        }
    }

    #[test]
    fn reads_stay_and_everything_else_goes_to_the_leader() {
        let table = [
            ("/drover.v1.JobService/List", true),
            ("/drover.v1.JobService/Register", false),
            ("/drover.v1.NodeService/UpdateStatus", false),
            ("/drover.v1.NodeService/Heartbeats", true),
            ("/drover.v1.NodeService/WatchAllocations", true),
            ("/drover.v1.EvalService/BrokerStats", false),
            ("/drover.v1.EvalService/Get", true),
            ("/drover.v1.AclService/TokenCreate", false),
            ("/drover.v1.StatusService/Members", true),
            ("/drover.v1.SomeNewService/Anything", false),
            ("/grpc.health.v1.Health/Check", true),
        ];
        for (path, local) in table {
            assert_eq!(served_locally(path), local, "{path}");
        }
    }
}
