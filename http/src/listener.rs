//! The HTTP listener: its own accept loop, so each connection's TLS handshake runs in the
//! connection's task under a deadline (a slow client never holds up the next accept), and
//! a stop lets open requests finish within a grace before connections are cut. The loop is
//! one function over accepted sockets, ready to take the server's shared connection
//! limits (handshake and idle timeouts, a connection cap) when the listeners share them.

use crate::{ClusterView, GrpcService, HttpOptions};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Why the listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("tls: {0}")]
    Tls(String),
}

/// A running HTTP listener; [`HttpServer::shutdown`] stops it, dropping it cuts it.
#[derive(Debug)]
pub struct HttpServer {
    local: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// The address actually bound (the real port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Stops accepting; requests in flight get `grace` to finish, then are cut.
    pub async fn shutdown(mut self, grace: Duration) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take() {
            if tokio::time::timeout(grace + Duration::from_millis(100), task)
                .await
                .is_err()
            {
                tracing::warn!(addr = %self.local, "HTTP API did not stop within its grace");
            }
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Binds `addr` and serves the API over `grpc` on it, with `extra` routes beside it (the
/// server's `/metrics` when it shares the address).
pub async fn serve(
    addr: &str,
    grpc: GrpcService,
    cluster: Arc<dyn ClusterView>,
    opts: HttpOptions,
    extra: Option<axum::Router>,
) -> Result<HttpServer, HttpError> {
    let tls = opts
        .tls
        .as_ref()
        .map(crate::HttpTls::acceptor)
        .transpose()
        .map_err(HttpError::Tls)?;
    let bind = |source| HttpError::Bind {
        addr: addr.to_string(),
        source,
    };
    let listener = TcpListener::bind(addr).await.map_err(bind)?;
    let local = listener.local_addr().map_err(bind)?;
    let handshake = opts.handshake_timeout;
    let mut app = crate::app(grpc, cluster, opts);
    if let Some(extra) = extra {
        app = app.merge(extra);
    }
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(accept_loop(listener, app, tls, handshake, stopped));
    tracing::info!(addr = %local, "HTTP API listening");
    Ok(HttpServer {
        local,
        stop,
        task: Some(task),
    })
}

/// How long requests in flight may run on after a stop.
const GRACE: Duration = Duration::from_secs(2);

async fn accept_loop(
    listener: TcpListener,
    app: axum::Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    handshake: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    loop {
        let (socket, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off rather than spin.
                    tracing::warn!(error = %e, "HTTP API accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped.changed() => break,
        };
        let _ = socket.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let watcher = graceful.watcher();
        let tls = tls.clone();
        tokio::spawn(async move {
            let builder = hyper::server::conn::http1::Builder::new();
            let served = match tls {
                None => {
                    let conn = builder.serve_connection(TokioIo::new(socket), service);
                    watcher.watch(conn).await
                }
                Some(acceptor) => {
                    let stream =
                        match tokio::time::timeout(handshake, acceptor.accept(socket)).await {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::debug!(%peer, error = %e, "HTTP API TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!(%peer, "HTTP API TLS handshake timed out");
                                return;
                            }
                        };
                    let conn = builder.serve_connection(TokioIo::new(stream), service);
                    watcher.watch(conn).await
                }
            };
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "HTTP API connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("HTTP API connections cut after the grace");
    }
}
