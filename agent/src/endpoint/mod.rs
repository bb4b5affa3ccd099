//! The agent's own gRPC endpoint (`drover.v1.AgentService`): its allocations' task logs
//! and in-place restarts, for servers that pass operators' calls on (`drover alloc logs`,
//! `alloc restart`, the console). The agent registers the endpoint's address as the node
//! attribute [`drover_proto::AGENT_ADDRESS_ATTRIBUTE`].
//!
//! Every call must carry a grant a server signed for this node ([`access`]); with TLS the
//! endpoint serves the agent's certificate (which names the node) and requires the
//! caller's to come from the cluster CA and name the server role.

pub mod access;
pub mod logs;

use crate::AgentError;
use crate::config::AgentConfig;
use crate::supervisor::Supervisor;
use drover_core::types::AllocId;
use drover_proto::convert::parse_id;
use drover_proto::v1 as pb;
use drover_proto::v1::agent_service_server::{AgentService, AgentServiceServer};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// A bound endpoint, serving once [`Bound::serve`] hands it the agent's parts.
#[derive(Debug)]
pub struct Bound {
    listener: TcpListener,
    advertise: String,
    tls: Option<tonic::transport::ServerTlsConfig>,
}

impl Bound {
    /// Binds `config.endpoint_addr` and works out the address to advertise.
    pub async fn bind(config: &AgentConfig) -> Result<Bound, AgentError> {
        let invalid = |problem: String| AgentError::ConfigInvalid {
            field: "endpoint_addr",
            problem,
        };
        let listener = TcpListener::bind(&config.endpoint_addr)
            .await
            .map_err(|e| {
                invalid(format!(
                    "cannot listen on {}: {e}; pass --endpoint-addr 127.0.0.1:0 (or another free address)",
                    config.endpoint_addr
                ))
            })?;
        let local = listener.local_addr().map_err(|e| invalid(e.to_string()))?;
        let tls = server_tls(&config.tls).map_err(|problem| AgentError::ConfigInvalid {
            field: "tls",
            problem,
        })?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let host = match &config.endpoint_advertise {
            Some(a) => a.clone(),
            None if local.ip().is_unspecified() => {
                return Err(AgentError::ConfigInvalid {
                    field: "endpoint_advertise",
                    problem: format!(
                        "is required when the endpoint listens on {local}: servers need an address to reach it"
                    ),
                });
            }
            None => local.to_string(),
        };
        Ok(Bound {
            listener,
            advertise: format!("{scheme}://{host}"),
            tls,
        })
    }

    /// Whether the endpoint serves TLS (and so requires callers' server certificates).
    pub fn serves_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The URL servers reach the endpoint at.
    pub fn advertise(&self) -> &str {
        &self.advertise
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until the returned sender is dropped or fired.
    pub fn serve(self, parts: Parts) -> oneshot::Sender<()> {
        let (stop, stopped) = oneshot::channel::<()>();
        let service = AgentServiceServer::new(AgentApi(Arc::new(parts)));
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(self.listener);
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = self.tls {
            match builder.tls_config(tls) {
                Ok(b) => builder = b,
                Err(e) => {
                    tracing::error!(error = %e, "agent endpoint tls is unusable; not serving");
                    return stop;
                }
            }
        }
        let router = builder.add_service(service);
        tokio::spawn(async move {
            let stopped = async {
                let _ = stopped.await;
            };
            if let Err(e) = router.serve_with_incoming_shutdown(incoming, stopped).await {
                tracing::warn!(error = %e, "agent endpoint stopped");
            }
        });
        stop
    }
}

/// The endpoint's TLS: the agent's certificate, requiring callers' from the CA.
fn server_tls(
    files: &drover_proto::tls::TlsFiles,
) -> Result<Option<tonic::transport::ServerTlsConfig>, String> {
    let (Some(ca), Some(identity)) = (
        files.ca().map_err(|e| e.to_string())?,
        files.identity().map_err(|e| e.to_string())?,
    ) else {
        return Ok(None);
    };
    Ok(Some(
        tonic::transport::ServerTlsConfig::new()
            .identity(identity)
            .client_ca_root(ca),
    ))
}

/// What the endpoint serves from.
#[derive(Debug)]
pub struct Parts {
    /// Who may call, for what.
    pub gate: access::Gate,
    pub supervisor: Arc<Mutex<Supervisor>>,
    /// `<data_dir>/allocs`.
    pub alloc_root: PathBuf,
}

#[derive(Clone, Debug)]
struct AgentApi(Arc<Parts>);

type LogStream = Pin<Box<dyn Stream<Item = Result<pb::AllocLogsResponse, Status>> + Send>>;

impl AgentApi {
    /// The task a request names, or the allocation's only one.
    async fn task(&self, alloc_id: AllocId, task: &str) -> Result<String, Status> {
        let tasks = self
            .0
            .supervisor
            .lock()
            .await
            .tasks(alloc_id)
            .ok_or_else(|| {
                Status::not_found(format!(
                    "allocation {alloc_id} is not on this node any more"
                ))
            })?;
        match (task, tasks.as_slice()) {
            ("", [only]) => Ok(only.clone()),
            ("", _) => Err(Status::invalid_argument(format!(
                "task: allocation {alloc_id} has several tasks; name one of {}",
                tasks.join(", ")
            ))),
            (t, _) if tasks.iter().any(|n| n == t) => Ok(t.to_string()),
            (t, _) => Err(Status::not_found(format!(
                "task {t:?} is not in allocation {alloc_id} (it has {})",
                tasks.join(", ")
            ))),
        }
    }
}

#[tonic::async_trait]
impl AgentService for AgentApi {
    type LogsStream = LogStream;

    async fn logs(
        &self,
        req: Request<pb::AllocLogsRequest>,
    ) -> Result<Response<Self::LogsStream>, Status> {
        let alloc_id: AllocId = parse_id("alloc_id", &req.get_ref().alloc_id)?;
        let p = &self.0;
        p.gate.check(
            &req,
            alloc_id,
            &req.get_ref().task,
            pb::AllocAccess::ReadLogs,
        )?;
        let req = req.into_inner();
        let task = self.task(alloc_id, &req.task).await?;
        let dirs = crate::runner::TaskDirs::new(&p.alloc_root.join(alloc_id.to_string()), &task);
        let paths = crate::driver::LogPaths::new(&dirs.logs, &task);
        let path = if req.stderr {
            paths.stderr
        } else {
            paths.stdout
        };
        let read = logs::LogRead {
            tail_lines: req.tail_lines,
            follow: req.follow,
        };
        let (chunks_tx, mut chunks) = mpsc::channel(8);
        let (out_tx, out) = mpsc::channel(8);
        let supervisor = p.supervisor.clone();
        tokio::spawn(async move {
            let done = move || supervisor.try_lock().is_ok_and(|s| !s.is_live(alloc_id));
            logs::stream(&path, read, chunks_tx, done).await;
        });
        tokio::spawn(async move {
            while let Some(chunk) = chunks.recv().await {
                let item = chunk
                    .map(|data| pb::AllocLogsResponse { data })
                    .map_err(|e| Status::internal(format!("cannot read the task log: {e}")));
                if out_tx.send(item).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out))))
    }

    async fn restart(
        &self,
        req: Request<pb::AllocRestartRequest>,
    ) -> Result<Response<pb::AllocRestartResponse>, Status> {
        let alloc_id: AllocId = parse_id("alloc_id", &req.get_ref().alloc_id)?;
        let p = &self.0;
        p.gate.check(
            &req,
            alloc_id,
            &req.get_ref().task,
            pb::AllocAccess::Lifecycle,
        )?;
        let req = req.into_inner();
        if !req.task.is_empty() {
            self.task(alloc_id, &req.task).await?;
        }
        let task = Some(req.task.as_str()).filter(|t| !t.is_empty());
        let tasks = p
            .supervisor
            .lock()
            .await
            .restart(alloc_id, task)
            .ok_or_else(|| {
                Status::failed_precondition(format!("allocation {alloc_id} is not running"))
            })?;
        if tasks.is_empty() {
            return Err(Status::failed_precondition(format!(
                "allocation {alloc_id} has no running task{}",
                task.map(|t| format!(" named {t:?}")).unwrap_or_default()
            )));
        }
        tracing::info!(%alloc_id, ?tasks, "restarting tasks in place");
        Ok(Response::new(pb::AllocRestartResponse { tasks }))
    }
}
