//! The gRPC API: one tonic service per `drover.v1` service, each a thin layer over
//! [`ServerHandle`] (decode the request, call the handle, encode the answer; errors become
//! `tonic::Status` through `From<ServerError>` and `From<ConvertError>`).
//!
//! [`router`] mounts them all, plus the standard health service (each name of
//! [`drover_proto::SERVICE_NAMES`] following leadership, see [`health`]), gRPC reflection (from
//! [`drover_proto::FILE_DESCRIPTOR_SET`]); never the Raft transport, which has its own
//! authenticated listener. [`serve`] binds an address
//! (port 0 allowed) and runs the router until [`ApiServer::shutdown`].

mod acl;
mod agent_address;
mod alloc_watch;
mod allocs;
mod cluster;
mod decode_status;
mod deployments;
mod evals;
mod events;
mod health;
mod heartbeat_stream;
mod jobs;
mod node_watch;
mod nodes;
mod operator;
mod page;
mod register_rate;
pub mod request_limits;
mod search;
mod services;
mod status;
pub mod subscribers;
pub mod timing;
mod workers;

pub use acl::AclApi;
pub use allocs::AllocApi;
pub use cluster::ClusterApi;
pub use deployments::DeploymentApi;
pub use evals::EvalApi;
pub use events::EventApi;
pub use jobs::JobApi;
pub use nodes::NodeApi;
pub use operator::OperatorApi;
pub use register_rate::RegisterRate;
pub use search::SearchApi;
pub use services::ServiceApi;
pub use status::StatusApi;
pub use workers::WorkerApi;

use crate::ServerHandle;
use crate::serving::Serving;
use crate::serving::connections::Connections;
use drover_core::state::StateSnapshot;
use drover_proto::v1 as pb;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::Status;
use tonic::codegen::http;
use tonic::transport::server::Router;

/// The layer every API response passes through (see [`decode_status`]).
type ResponseMap = fn(http::Response<tonic::body::Body>) -> http::Response<tonic::body::Body>;
/// The layers every API call passes through: activity (each connection's requests in
/// flight), timing, decode-status, auth, limits and forwarding (outermost first). The gRPC
/// listener and the in-process service handed to the HTTP adapter ([`InProcess`]) are built
/// from the same stack, so both run every check (in process, activity counts nothing: the
/// calls come over no connection of the listener's).
pub type ApiLayers = tower::layer::util::Stack<
    crate::forward::ForwardLayer,
    tower::layer::util::Stack<
        request_limits::LimitLayer,
        tower::layer::util::Stack<
            crate::auth::AuthLayer,
            tower::layer::util::Stack<
                tower::util::MapResponseLayer<ResponseMap>,
                tower::layer::util::Stack<
                    timing::TimingLayer,
                    tower::layer::util::Stack<
                        crate::serving::activity::ActivityLayer,
                        tower::layer::util::Identity,
                    >,
                >,
            >,
        >,
    >,
>;
/// The API's router: every service behind [`ApiLayers`].
pub type ApiRouter = Router<tower::layer::util::Stack<ApiLayers, tower::layer::util::Identity>>;
/// The same services and layers as [`ApiRouter`], called in process (no socket): what the
/// HTTP adapter calls, so an HTTP request meets every check a gRPC call meets.
pub type InProcess = drover_http::GrpcService;

/// HTTP/2 streams one connection may open at once (the simulator puts 100 watches on one).
const MAX_STREAMS_PER_CONNECTION: u32 = 128;

/// Streams a client may reset before the server took them up, queued at once, before the
/// connection is refused with GOAWAY `too_many_resets`. h2's default (20) is a defence
/// against rapid-reset floods, but a busy connection shared by many nodes whose client
/// cancels timed-out calls (grpcio does) passes it honestly, and the GOAWAY then fails
/// every node on the connection. The queue stays bounded, so the defence holds.
const MAX_PENDING_RESETS_PER_CONNECTION: usize = 1024;

/// Each stream's flow-control window. The connection's window holds every stream's, so
/// streams parked by a limit (per connection, or the listener's budgets) never use up the
/// window a served stream needs to receive the rest of its message: without this, one
/// parked stream could hold hyper's default 1 MiB connection window and stall the rest.
const STREAM_WINDOW: u32 = 64 << 10;

/// Settings of the gRPC listener.
#[derive(Clone, Debug)]
pub struct ApiOptions {
    /// The largest request or response message, in bytes, overriding the server config's
    /// `max_message_bytes` (`None`: the config's). A larger request is refused by tonic
    /// before it reaches a handler (OUT_OF_RANGE / RESOURCE_EXHAUSTED).
    pub max_message_bytes: Option<usize>,
    /// The longest a read may wait for its `QueryOptions.min_index`.
    pub max_query_wait: Duration,
    /// Event-stream subscribers served at once; one more is refused with
    /// RESOURCE_EXHAUSTED (each costs a task and a cursor on every applied entry).
    pub max_subscribers: usize,
    /// Event-stream subscribers one token (not a management one) may hold at once.
    pub max_subscribers_per_token: usize,
    /// Subscriber slots only management tokens may take.
    pub subscribers_reserved_for_management: usize,
    /// Requests in flight on one connection; more wait for a slot (HTTP/2 flow control
    /// holds their bytes on the client).
    pub max_concurrent_per_connection: usize,
}

impl Default for ApiOptions {
    fn default() -> Self {
        Self {
            max_message_bytes: None,
            max_query_wait: Duration::from_secs(10),
            max_subscribers: 256,
            max_subscribers_per_token: 16,
            subscribers_reserved_for_management: 16,
            max_concurrent_per_connection: 32,
        }
    }
}

/// What the services share: the handle and the options.
#[derive(Clone, Debug)]
pub(crate) struct Api {
    pub(crate) handle: ServerHandle,
    pub(crate) opts: ApiOptions,
    pub(crate) node_wakeups: std::sync::Arc<node_watch::NodeWakeups>,
    /// The event stream's subscriber slots.
    pub(crate) subscribers: std::sync::Arc<subscribers::Subscribers>,
    /// How fast each join credential may register nodes.
    pub(crate) registrations: std::sync::Arc<register_rate::RegisterLimiter>,
}

impl Api {
    /// A `min_index` no write was ever given can never be reached: OUT_OF_RANGE at once
    /// rather than UNAVAILABLE after the whole wait. The next index to be written may be
    /// waited for: that is how a blocking query (Nomad's `?index=`, through the HTTP API)
    /// waits for the next change.
    pub(crate) fn check_min_index(&self, min_index: u64) -> Result<(), Status> {
        if self.handle.is_unwritten_index(min_index.saturating_sub(1)) {
            return Err(Status::out_of_range(format!(
                "query.min_index {min_index} is past the last index written ({}): no write has it",
                self.handle.applied_index()
            )));
        }
        Ok(())
    }

    /// The state to answer a read from: at once, or once `min_index` is applied (waiting
    /// at most the request's `max_wait_ms`, capped by the server's limit).
    pub(crate) async fn read(
        &self,
        query: Option<&pb::QueryOptions>,
    ) -> Result<StateSnapshot, Status> {
        let Some(q) = query.filter(|q| q.min_index > 0) else {
            return Ok(self.handle.snapshot());
        };
        self.check_min_index(q.min_index)?;
        let wait = match q.max_wait_ms {
            0 => self.opts.max_query_wait,
            ms => Duration::from_millis(ms).min(self.opts.max_query_wait),
        };
        self.handle
            .wait_for_index(q.min_index, wait)
            .await
            .map_err(|_| {
                Status::unavailable(format!(
                    "state did not reach index {} within {wait:?} (at {}); retry",
                    q.min_index,
                    self.handle.applied_index()
                ))
            })
    }
}

/// Every drover service (and health and reflection) on one tonic router, counting requests
/// on the connections of `conns`, and the same services behind the same layers as one
/// in-process service for the HTTP adapter. Raft is not here: it has its own authenticated
/// listener (`crate::raft::listener`).
pub async fn router(
    handle: ServerHandle,
    opts: ApiOptions,
    conns: std::sync::Arc<Connections>,
) -> Result<(ApiRouter, InProcess), ServeError> {
    let max = opts
        .max_message_bytes
        .unwrap_or(handle.config().max_message_bytes);
    let node_wakeups = node_watch::NodeWakeups::start(&handle);
    let per_connection = opts.max_concurrent_per_connection.max(1);
    let subscribers = subscribers::Subscribers::new(subscribers::SlotLimits {
        total: opts.max_subscribers,
        per_token: opts.max_subscribers_per_token,
        reserved_for_management: opts.subscribers_reserved_for_management,
    });
    let registrations = std::sync::Arc::new(register_rate::RegisterLimiter::new(
        handle.config().node_register_rate,
    ));
    let api = Api {
        handle,
        opts,
        node_wakeups,
        subscribers,
        registrations,
    };
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health::follow_raft(health_reporter, api.handle.watch_raft_metrics()).await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(drover_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    macro_rules! svc {
        ($server:path, $imp:expr) => {
            <$server>::new($imp)
                .max_decoding_message_size(max)
                .max_encoding_message_size(max)
        };
    }
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = &api.handle.config().tls {
        let config = tls
            .api_listener()
            .map_err(|e| ServeError::Tls(e.to_string()))?;
        builder = builder
            .tls_config(config)
            .map_err(|e| ServeError::Tls(e.to_string()))?;
    }
    let decode_status: ResponseMap = decode_status::invalid_argument_for_decode_failures;
    let auth = std::sync::Arc::new(crate::auth::Authenticator::new(
        api.handle.config().acl_enabled,
        api.handle.state(),
    ));
    let budget = request_limits::Budget::new(api.handle.config().requests.clone());
    let keepalive = api.handle.config().connections.clone();
    let layers: ApiLayers = tower::ServiceBuilder::new()
        .layer(crate::serving::activity::ActivityLayer(conns))
        .layer(timing::TimingLayer(api.handle.metrics()))
        .layer(tower::util::MapResponseLayer::new(decode_status))
        .layer(crate::auth::AuthLayer(auth))
        .layer(request_limits::LimitLayer(budget))
        .layer(crate::forward::ForwardLayer {
            directory: api.handle.inner.directory.clone(),
            server_id: api.handle.server_id(),
        })
        .into_inner();
    let routes = tonic::service::Routes::new(health)
        .add_service(reflection)
        .add_service(svc!(
            pb::job_service_server::JobServiceServer<JobApi>,
            JobApi(api.clone())
        ))
        .add_service(svc!(
            pb::eval_service_server::EvalServiceServer<EvalApi>,
            EvalApi(api.clone())
        ))
        .add_service(svc!(
            pb::service_service_server::ServiceServiceServer<ServiceApi>,
            ServiceApi(api.clone())
        ))
        .add_service(svc!(
            pb::node_service_server::NodeServiceServer<NodeApi>,
            NodeApi(api.clone())
        ))
        .add_service(svc!(
            pb::operator_service_server::OperatorServiceServer<OperatorApi>,
            OperatorApi(api.clone())
        ))
        .add_service(svc!(
            pb::worker_service_server::WorkerServiceServer<WorkerApi>,
            WorkerApi(api.clone())
        ))
        .add_service(svc!(
            pb::event_service_server::EventServiceServer<EventApi>,
            EventApi(api.clone())
        ))
        .add_service(svc!(
            pb::search_service_server::SearchServiceServer<SearchApi>,
            SearchApi(api.clone())
        ))
        .add_service(svc!(
            pb::acl_service_server::AclServiceServer<AclApi>,
            AclApi(api.clone())
        ))
        .add_service(svc!(
            pb::alloc_service_server::AllocServiceServer<AllocApi>,
            AllocApi::new(api.clone())
        ))
        .add_service(svc!(
            pb::deployment_service_server::DeploymentServiceServer<DeploymentApi>,
            DeploymentApi(api.clone())
        ))
        .add_service(svc!(
            pb::cluster_service_server::ClusterServiceServer<ClusterApi>,
            ClusterApi(api.clone())
        ))
        .add_service(svc!(
            pb::status_service_server::StatusServiceServer<StatusApi>,
            StatusApi(api)
        ))
        .prepare();
    let in_process = drover_http::from_service(tower::Layer::layer(&layers, routes.clone()));
    let router = builder
        .http2_keepalive_interval(Some(keepalive.keepalive_interval))
        .http2_keepalive_timeout(Some(keepalive.keepalive_timeout))
        .concurrency_limit_per_connection(per_connection)
        .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_RESETS_PER_CONNECTION))
        .initial_stream_window_size(Some(STREAM_WINDOW))
        .initial_connection_window_size(Some(STREAM_WINDOW * MAX_STREAMS_PER_CONNECTION))
        .layer(layers)
        .add_routes(routes);
    Ok((router, in_process))
}

/// Why the gRPC listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("tls: {0}")]
    Tls(String),
    #[error("http api: {0}")]
    Http(#[from] drover_http::HttpError),
}

/// How long [`ApiServer::shutdown`] waits for open connections to finish.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// A running client API: the gRPC listener, and Nomad's HTTP API when configured.
/// [`ApiServer::shutdown`] stops them gracefully; dropping it stops them too (in-flight
/// calls are cut).
#[derive(Debug)]
pub struct ApiServer {
    grpc: Serving<Result<(), tonic::transport::Error>>,
    /// Boxed: most servers (every test's) serve no HTTP API.
    http: Option<Box<drover_http::HttpServer>>,
    metrics_on_http: bool,
}

impl ApiServer {
    /// The address actually bound (the real port when the config asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.grpc.local_addr()
    }

    /// Where Nomad's HTTP API is served; `None` when the config names no `http_addr`.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().map(|h| h.local_addr())
    }

    /// The HTTP API's address when `/metrics` is served beside it.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.http_addr().filter(|_| self.metrics_on_http)
    }

    pub(crate) fn with_http(mut self, http: drover_http::HttpServer, metrics: bool) -> Self {
        self.http = Some(Box::new(http));
        self.metrics_on_http = metrics;
        self
    }

    /// Stops accepting calls and lets in-flight ones finish, for at most
    /// [`SHUTDOWN_GRACE`]; connections still open then (watch and event streams) are cut.
    pub async fn shutdown(self) -> Result<(), tonic::transport::Error> {
        if let Some(http) = self.http {
            http.shutdown(SHUTDOWN_GRACE).await;
        }
        self.grpc.shutdown(SHUTDOWN_GRACE).await.unwrap_or(Ok(()))
    }
}

/// Binds `addr` and serves `router` on it, admitting connections under `conns`' limits.
pub async fn serve(
    router: ApiRouter,
    conns: std::sync::Arc<Connections>,
    addr: &str,
) -> Result<ApiServer, ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: addr.to_string(),
            source,
        })?;
    let local = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: addr.to_string(),
        source,
    })?;
    let max_connections = conns.limits().max;
    let incoming = conns.accept(listener);
    let serving = Serving::spawn(local, |stopped| {
        router.serve_with_incoming_shutdown(incoming, stopped)
    });
    tracing::info!(addr = %local, max_connections, "gRPC API listening");
    Ok(ApiServer {
        grpc: serving,
        http: None,
        metrics_on_http: false,
    })
}
