//! Nomad's HTTP API (`/v1`) for drover, so the tools Nomad users already run (the
//! `nomad` CLI's API calls, python-nomad, Nomad's Go `api` module, CI scripts) talk to
//! drover unchanged.
//!
//! A thin adapter: each route translates Nomad's request into calls on the gRPC API and
//! the answers into Nomad's JSON. The gRPC API is called in process, through the very
//! service stack the gRPC listener serves (auth, request limits, forwarding to the leader,
//! timing), which the server hands over as a [`GrpcService`]: every ACL check, forwarding
//! rule and validation is the gRPC API's own, by construction. This crate depends on the
//! wire types and core, never on the server.

pub mod grpc;
mod listener;
pub mod nomad;
pub mod query;
pub mod reply;
mod routes;
mod stream;
mod tls;

pub use grpc::{BoxError, GrpcService, from_service};
pub use listener::{HttpError, HttpServer, serve};
pub use tls::HttpTls;

use std::time::Duration;

/// What the HTTP adapter learns from its server for Nomad's `X-Nomad-KnownLeader` and
/// `X-Nomad-LastContact` headers, which every answer carries.
pub trait ClusterView: Send + Sync + std::fmt::Debug + 'static {
    /// Whether this server knows a leader.
    fn known_leader(&self) -> bool;
    /// Milliseconds since this server last heard from the leader (0 on the leader).
    fn last_contact_ms(&self) -> u64;
}

/// Settings of the HTTP listener.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// The largest request body; a larger one is refused (413) before it is read whole.
    pub max_body_bytes: usize,
    /// How long a streaming client (logs, events) may leave its buffer unread before it
    /// is dropped.
    pub stream_stall: Duration,
    /// Whether the servers require ACL tokens (for `agent/self`).
    pub acl_enabled: bool,
    /// Serve HTTPS with these files (the gRPC API's TLS settings); `None`: plain HTTP.
    pub tls: Option<HttpTls>,
    /// How long a client has to complete the TLS handshake.
    pub handshake_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            max_body_bytes: 4 << 20,
            stream_stall: Duration::from_secs(30),
            acl_enabled: false,
            tls: None,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// The API's routes over `grpc`, as one axum router (what [`serve`] serves; tests and
/// benches can call it without a socket).
pub fn app(
    grpc: GrpcService,
    cluster: std::sync::Arc<dyn ClusterView>,
    opts: HttpOptions,
) -> axum::Router {
    routes::router(routes::Ctx {
        grpc: grpc::Grpc::new(grpc),
        cluster,
        opts: std::sync::Arc::new(opts),
    })
}
