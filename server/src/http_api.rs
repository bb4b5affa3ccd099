//! Starting Nomad's HTTP API (`drover-http`) beside the gRPC listener: the adapter gets
//! the in-process gRPC service, this server's view of the leader for Nomad's headers, the
//! gRPC API's TLS files, and `/metrics` when it shares the address.

use crate::ServerHandle;
use std::sync::Arc;

/// This server's Raft view, for `X-Nomad-KnownLeader` and `X-Nomad-LastContact`.
#[derive(Debug)]
struct RaftView(ServerHandle);

impl drover_http::ClusterView for RaftView {
    fn known_leader(&self) -> bool {
        self.0.leader().is_some()
    }

    /// drover does not track a follower's last contact; 0 reads as "fresh", which a
    /// follower with a known leader is within its election timeout.
    fn last_contact_ms(&self) -> u64 {
        0
    }
}

/// Serves the HTTP API on `addr` over `in_process`.
pub(crate) async fn serve(
    handle: &ServerHandle,
    addr: &str,
    in_process: drover_http::GrpcService,
) -> Result<drover_http::HttpServer, drover_http::HttpError> {
    let config = handle.config();
    let opts = drover_http::HttpOptions {
        max_body_bytes: config.max_message_bytes,
        acl_enabled: config.acl_enabled,
        tls: config.tls.as_ref().map(|t| drover_http::HttpTls {
            cert_file: t.cert_file.clone(),
            key_file: t.key_file.clone(),
            ca_file: Some(t.ca_file.clone()),
            verify_incoming: t.verify_incoming,
        }),
        ..drover_http::HttpOptions::default()
    };
    let metrics = config
        .metrics_on_http()
        .then(|| crate::scrape::router(handle.clone()));
    drover_http::serve(
        addr,
        in_process,
        Arc::new(RaftView(handle.clone())),
        opts,
        metrics,
    )
    .await
}
