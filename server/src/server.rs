//! A running server's lifecycle: [`Server::start`] brings up the Raft node, the leader
//! duties (run while it leads), the worker pool and the metrics endpoint;
//! [`Server::serve`] serves the gRPC API; [`Server::shutdown`] stops them in order. The
//! RPC bodies live on the [`ServerHandle`] in [`crate::handle`].

use crate::config::ServerConfig;
use crate::error::StartError;
use crate::events::{EventRing, Fanout};
use crate::handle::{Inner, ServerHandle};
use crate::leader::{self, Leadership};
use crate::leader_link::{AnySource, LeaderLink};
use crate::membership::Membership;
use crate::metrics::Metrics;
use crate::raft::{
    Bootstrap, GrpcTransport, RaftGrpcService, RaftListener, RaftNode, RaftTransport,
};
use crate::scrape::MetricsServer;
use crate::worker::{EvalSource, WorkerPool};
use crate::write::Writer;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Mutex, broadcast, watch};
use tokio::task::JoinHandle;

/// How many applied-entry event batches the leader's live broadcast holds; the leader
/// loop resynchronizes from state if it ever falls this far behind.
const LIVE_EVENT_BATCHES: usize = 16 * 1024;

/// How long a connection to a peer's Raft listener may take before the call fails (and
/// openraft retries it).
const PEER_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A running server. Stop it with [`Server::shutdown`] (the data dir can then be opened
/// again); dropping it without that leaves its tasks running until the runtime ends.
pub struct Server {
    handle: ServerHandle,
    monitor: Option<JoinHandle<()>>,
    metrics_server: Option<MetricsServer>,
    raft_listener: Option<RaftListener>,
    /// Gets a server started outside any cluster into one (see [`crate::discovery`]).
    discovery: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("server_id", &self.handle.inner.config.server_id)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Starts the Raft node on the config's data dir (bootstrapping or recovering it), the
    /// leadership monitor and the worker pool.
    pub async fn start(config: ServerConfig) -> Result<Server, StartError> {
        Self::start_with_raft_transport(config, |grpc| Arc::new(grpc)).await
    }

    /// [`Server::start`] with Raft's messages sent through what `wrap` makes of the gRPC
    /// transport: how simulations lose, delay and partition them (see
    /// `server/tests/sim_cluster.rs`). Everything else still uses gRPC.
    pub async fn start_with_raft_transport(
        config: ServerConfig,
        wrap: impl FnOnce(GrpcTransport) -> Arc<dyn RaftTransport>,
    ) -> Result<Server, StartError> {
        let pool_config = crate::worker::pool_config(&config).map_err(|e| StartError::Config {
            reason: e.to_string(),
        })?;
        let (events, _) = broadcast::channel(LIVE_EVENT_BATCHES);
        let ring = Arc::new(EventRing::new(config.event_buffer));
        let sink = Fanout {
            live: events.clone(),
            ring: ring.clone(),
        };
        // The Raft listener binds first: with port 0 the membership must record the real
        // port. Its service starts once the node exists.
        let config_error = |reason: String| StartError::Config { reason };
        let secret = config.cluster_secret().map_err(config_error)?;
        let raft_bind = config.raft_bind_addr();
        let raft_socket = TcpListener::bind(&raft_bind)
            .await
            .map_err(StartError::bind("raft", &raft_bind))?;
        let raft_local = raft_socket
            .local_addr()
            .map_err(|e| config_error(format!("raft address {raft_bind}: {e}")))?;
        let advertise = if raft_bind.ends_with(":0") {
            raft_local.to_string()
        } else {
            raft_bind.clone()
        };
        let peer_transport = || {
            GrpcTransport::new(config.max_message_bytes, PEER_CONNECT_TIMEOUT)
                .with_secret(secret.clone())
                .with_tls(config.tls.clone())
        };
        // Raft's replication has connections of its own: they are opened from the Raft
        // runtime and driven by it, while forwarding's are driven by this one.
        let transport = peer_transport();
        let raft_tls = config
            .tls
            .as_ref()
            .map(crate::tls::ServerTls::raft_listener)
            .transpose()
            .map_err(|e| config_error(format!("tls: {e}")))?;
        let transport_for_forwarding = peer_transport();
        let raft_config = config
            .raft_config(&advertise)
            .with_events(Arc::new(sink))
            .with_transport(wrap(transport));
        let raft = Arc::new(RaftNode::start(raft_config).await?);
        let self_info: crate::forward::SelfInfo =
            Arc::new(std::sync::RwLock::new(drover_proto::v1::ServerInfo {
                server_id: config.server_id,
                name: config.display_name(),
                api_addr: String::new(),
                version: config.advertised_version.clone(),
                scheme: if config.tls.is_some() {
                    "https"
                } else {
                    "http"
                }
                .to_string(),
                raft_addr: advertise.clone(),
                ..Default::default()
            }));
        let directory = crate::forward::Directory::new(
            raft.clone(),
            transport_for_forwarding.clone(),
            config.tls.clone(),
            config.raft.election_timeout_max * 4,
            crate::leader::lease(&config.raft),
        );
        let membership = Membership::new(
            raft.clone(),
            transport_for_forwarding.clone(),
            config.raft.election_timeout_max,
            config.raft.heartbeat_interval,
            config.raft.catch_up_timeout,
        );
        let state = raft.state();
        ring.start_at(state.applied_index());
        let metrics = Arc::new(Metrics::new());
        let writer = Writer::new(
            raft.clone(),
            metrics.clone(),
            crate::leader::lease(&config.raft),
        );
        let leadership = Leadership::new(
            config.clone(),
            state.clone(),
            writer.clone(),
            events.clone(),
        )
        .map_err(|e| StartError::Config {
            reason: e.to_string(),
        })?;
        // Served from the Raft runtime: a peer's AppendEntries is read, decoded and answered
        // on Raft's threads, never queued behind this runtime's work.
        let on_raft = raft.runtime().enter();
        let raft_socket = raft_socket
            .into_std()
            .and_then(TcpListener::from_std)
            .map_err(|e| config_error(format!("cannot serve raft on {raft_bind}: {e}")))?;
        let raft_listener = RaftListener::serve(
            raft_socket,
            RaftGrpcService::new(raft.rpc_handler(), self_info.clone())
                .with_membership(membership.clone())
                .with_scheduling(leadership.clone()),
            secret,
            config.max_message_bytes,
            raft_tls,
            crate::serving::connections::ConnectionLimits {
                max: config.connections.max_raft,
                handshake_timeout: config.connections.handshake_timeout,
                idle_timeout: config.connections.idle_timeout,
            },
        )
        .map_err(|e| config_error(format!("cannot serve raft on {raft_bind}: {e}")))?;
        drop(on_raft);
        let discovery = match &config.bootstrap {
            Bootstrap::Join(plan) if !plan.addrs.is_empty() => Some(tokio::spawn(
                crate::discovery::run(raft.clone(), transport_for_forwarding.clone(), plan.clone()),
            )),
            _ => None,
        };
        // Workers schedule on every server: through the leader's broker and applier when
        // another server leads (see `crate::leader_link`).
        let link = LeaderLink::new(raft.clone(), transport_for_forwarding.clone());
        let source = AnySource::new(leadership.clone(), raft.clone(), link.clone());
        let deps = crate::worker::WorkerDeps {
            source: Arc::new(source) as Arc<dyn EvalSource>,
            writer: writer.clone().with_link(link),
            state: state.clone(),
            dequeue_timeout: config.workers.dequeue_timeout,
            wait_limit: config.workers.wait_index_limit,
            backoff_base: config.workers.backoff_base,
            backoff_limit: config.workers.backoff_limit,
        };
        let pool = WorkerPool::start(config.server_id, deps, pool_config).map_err(|e| {
            StartError::Config {
                reason: e.to_string(),
            }
        })?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let monitor = tokio::spawn(leader::monitor(
            leadership.clone(),
            raft.clone(),
            shutdown_rx,
        ));
        tracing::info!(
            server_id = config.server_id,
            data_dir = %config.data_dir.display(),
            applied_index = state.applied_index(),
            "server started"
        );
        // A metrics address shared with the HTTP API is served by that listener instead.
        let metrics_addr = config
            .metrics_addr
            .clone()
            .filter(|_| !config.metrics_on_http());
        let handle = ServerHandle {
            inner: Arc::new(Inner {
                config,
                raft,
                client_updates: crate::client_updates::ClientUpdates::start(writer.clone()),
                writer,
                state,
                leadership,
                workers: Mutex::new(pool),
                events,
                ring,
                metrics,
                shutdown,
                self_info,
                directory,
                membership,
            }),
        };
        let mut server = Server {
            handle,
            monitor: Some(monitor),
            metrics_server: None,
            raft_listener: Some(raft_listener),
            discovery,
        };
        if let Some(addr) = metrics_addr {
            match crate::scrape::serve(server.handle.clone(), &addr).await {
                Ok(m) => server.metrics_server = Some(m),
                Err(e) => {
                    // Raft and the workers run already: stop them in order, so the data
                    // dir is left as a clean stop leaves it and nothing logs its own death.
                    if let Err(stop) = server.shutdown().await {
                        tracing::warn!(error = %stop, "server did not stop cleanly after a failed start");
                    }
                    return Err(StartError::bind("metrics", &addr)(e));
                }
            }
        }
        Ok(server)
    }

    pub fn handle(&self) -> ServerHandle {
        self.handle.clone()
    }

    /// The configuration this server was started with.
    pub fn config(&self) -> &ServerConfig {
        &self.handle.inner.config
    }

    /// Where `/metrics` is served (the real port when the config asked for port 0);
    /// `None` when the config named no metrics address.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics_server.as_ref().map(MetricsServer::local_addr)
    }

    /// Where the server-to-server (Raft) listener is bound, which [`Server::start`]
    /// started; the real port when the config asked for port 0.
    pub fn raft_addr(&self) -> Option<std::net::SocketAddr> {
        self.raft_listener.as_ref().map(RaftListener::local_addr)
    }

    /// Serves the client API (every drover service, health and reflection; never Raft,
    /// which has its own listener) on the config's `bind_addr` (port 0 picks a free port;
    /// see [`crate::api::ApiServer::local_addr`]) until the returned server is shut down.
    pub async fn serve(
        &self,
        opts: crate::api::ApiOptions,
    ) -> Result<crate::api::ApiServer, crate::api::ServeError> {
        let handle = self.handle.clone();
        let addr = handle.inner.config.bind_addr.clone();
        let tls = handle.inner.config.tls.is_some();
        let settings = &handle.inner.config.connections;
        let fd_limit = crate::serving::raise_fd_limit();
        let limits = crate::serving::connections::ConnectionLimits {
            max: settings
                .max_api
                .unwrap_or_else(|| crate::serving::default_max_connections(fd_limit)),
            handshake_timeout: settings.handshake_timeout,
            idle_timeout: settings.idle_timeout,
        };
        tracing::info!(
            open_file_limit = fd_limit,
            max_connections = limits.max,
            "connection limits"
        );
        let conns = crate::serving::connections::Connections::new("api", limits);
        let (router, in_process) = crate::api::router(handle.clone(), opts, conns.clone()).await?;
        let mut api = crate::api::serve(router, conns, &addr).await?;
        if let Some(http_addr) = handle.inner.config.http_addr.clone() {
            let http = crate::http_api::serve(&handle, &http_addr, in_process).await?;
            api = api.with_http(http, handle.inner.config.metrics_on_http());
        }
        // Peers forward leader calls to this address: the bound port, and where the API
        // listens on every interface, the host the Raft listener is advertised on.
        let local = api.local_addr();
        let api_addr = if local.ip().is_unspecified() {
            let raft_addr = handle.inner.raft.addr();
            let host = raft_addr.rsplit_once(':').map_or(raft_addr, |(h, _)| h);
            format!("{host}:{}", local.port())
        } else {
            local.to_string()
        };
        handle
            .inner
            .self_info
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .api_addr = api_addr;
        if !tls && !api.local_addr().ip().is_loopback() {
            tracing::warn!(
                addr = %api.local_addr(),
                "the API is served WITHOUT TLS on a non-loopback address: anyone who can reach \
                 it can read and change the cluster; configure tls {{ ... }} (see `drover tls`)"
            );
        }
        Ok(api)
    }

    /// Stops the workers, the leader duties and the Raft node, in that order.
    pub async fn shutdown(mut self) -> Result<(), StartError> {
        let inner = &self.handle.inner;
        tracing::info!(server_id = inner.config.server_id, "server shutting down");
        if let Some(m) = self.metrics_server.take() {
            m.shutdown().await;
        }
        if let Some(d) = self.discovery.take() {
            d.abort();
        }
        inner.workers.lock().await.stop().await;
        inner.shutdown.send_replace(true);
        if let Some(m) = self.monitor.take() {
            let _ = m.await;
        }
        inner.raft.shutdown().await?;
        if let Some(l) = self.raft_listener.take() {
            l.shutdown().await;
        }
        tracing::info!(server_id = inner.config.server_id, "server stopped");
        Ok(())
    }
}
