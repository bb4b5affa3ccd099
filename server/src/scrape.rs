//! The `/metrics` listener: on each scrape it gathers the [`Readings`] from the server
//! and has the registry render them.

use crate::ServerHandle;
use crate::metrics::Readings;
use crate::serving::Serving;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;

async fn scrape(State(handle): State<ServerHandle>) -> impl IntoResponse {
    let mut workers = std::collections::BTreeMap::new();
    for w in handle.workers().await {
        *workers
            .entry((w.status.as_str(), w.workload.as_str()))
            .or_insert(0) += 1;
    }
    let readings = Readings {
        state: handle.snapshot(),
        leader: handle.broker_stats().await.ok(),
        workers,
        raft_log: handle.raft_log_counts(),
    };
    let body = handle.metrics().render(&readings).await;
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
}

/// The running `/metrics` listener; stops when shut down or dropped.
#[derive(Debug)]
pub struct MetricsServer(Serving<()>);

impl MetricsServer {
    /// The address actually bound (the real port when the config asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.0.local_addr()
    }

    pub(crate) async fn shutdown(self) {
        self.0.shutdown(Duration::from_secs(2)).await;
    }
}

/// `GET /metrics` for `handle`: on its own listener, or beside the HTTP API when both
/// share an address.
pub(crate) fn router(handle: ServerHandle) -> axum::Router {
    axum::Router::new()
        .route("/metrics", axum::routing::get(scrape))
        .with_state(handle)
}

/// Binds `addr` and serves `GET /metrics` for `handle`.
pub(crate) async fn serve(handle: ServerHandle, addr: &str) -> std::io::Result<MetricsServer> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let app = router(handle);
    let serving = Serving::spawn(local, |stopped| async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(stopped)
            .await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "metrics listener failed");
        }
    });
    tracing::info!(addr = %local, "metrics listening");
    Ok(MetricsServer(serving))
}
