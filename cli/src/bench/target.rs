//! The server under test: one started in this process with production settings on a
//! temporary data dir (the Raft log on disk, every commit durable), or one already running
//! elsewhere that the run only talks to.

use super::error::BenchError;
use drover_server::api::{ApiOptions, ApiServer};
use drover_server::{Server, ServerConfig};
use std::time::Duration;

/// How long a fresh single server may take to elect itself.
const LEADERSHIP_DEADLINE: Duration = Duration::from_secs(30);

/// Where the benchmarked server runs.
#[derive(Debug)]
pub enum Target {
    InProcess(Box<InProcess>),
    Remote { url: String },
}

/// A server of this process and what it needs to live: its API and its data dir, which is
/// deleted when the run ends.
#[derive(Debug)]
pub struct InProcess {
    server: Server,
    api: ApiServer,
    url: String,
    _data_dir: tempfile::TempDir,
}

impl Target {
    /// Starts a single server on loopback (a free port) and waits until it leads.
    pub async fn start_in_process() -> Result<Target, BenchError> {
        let data_dir = tempfile::Builder::new()
            .prefix("drover-bench-")
            .tempdir()
            .map_err(BenchError::DataDir)?;
        let mut config = ServerConfig::new(data_dir.path().join("server"));
        config.bind_addr = "127.0.0.1:0".into();
        let server = Server::start(config)
            .await
            .map_err(BenchError::ServerStart)?;
        let api = match server.serve(ApiOptions::default()).await {
            Ok(api) => api,
            Err(e) => {
                stop_quietly(server).await;
                return Err(e.into());
            }
        };
        let url = format!("http://{}", api.local_addr());
        let target = Target::InProcess(Box::new(InProcess {
            server,
            api,
            url,
            _data_dir: data_dir,
        }));
        if let Target::InProcess(local) = &target
            && !local
                .server
                .handle()
                .wait_for_leadership(LEADERSHIP_DEADLINE)
                .await
        {
            // The server is of no use; stopping it is only tidying up.
            if let Err(e) = target.stop().await {
                tracing::warn!(error = %e, "leaderless bench server did not stop cleanly");
            }
            return Err(BenchError::NoLeader(LEADERSHIP_DEADLINE));
        }
        Ok(target)
    }

    pub fn url(&self) -> &str {
        match self {
            Target::InProcess(local) => &local.url,
            Target::Remote { url } => url,
        }
    }

    pub fn is_in_process(&self) -> bool {
        matches!(self, Target::InProcess(_))
    }

    /// Stops a server of this process (API first, then the server) and removes its data;
    /// a remote server is left as it is.
    pub async fn stop(self) -> Result<(), BenchError> {
        let Target::InProcess(local) = self else {
            return Ok(());
        };
        let InProcess {
            server,
            api,
            _data_dir,
            ..
        } = *local;
        let api_stopped = api.shutdown().await.map_err(BenchError::ServeStop);
        server.shutdown().await.map_err(BenchError::ServerStop)?;
        api_stopped
    }
}

async fn stop_quietly(server: Server) {
    if let Err(e) = server.shutdown().await {
        tracing::warn!(error = %e, "bench server did not stop cleanly");
    }
}
