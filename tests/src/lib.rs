//! End-to-end tests of drover live in `tests/tests/`; this library is their shared harness:
//! a real server on `127.0.0.1:0` with a temp data dir, and polling with a deadline.

pub use drover_core as core;

use drover_agent::sim::SimConfig;
use drover_core::types::{Job, JobKey};
use drover_proto::convert::JobRegistration;
use drover_server::api::{ApiOptions, ApiServer};
use drover_server::{Server, ServerConfig, ServerHandle};
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;
use tonic::transport::Channel;

/// How long a test waits for the cluster to reach a state before it fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A leader serving the gRPC API on loopback, with its data dir removed on drop.
pub struct TestServer {
    server: Server,
    api: ApiServer,
    dir: tempfile::TempDir,
}

impl TestServer {
    /// A single server with test timings (`ServerConfig::for_tests`).
    pub async fn start() -> TestServer {
        Self::start_with(|_| {}).await
    }

    /// A single server whose test config `tweak` adjusts before start.
    pub async fn start_with(tweak: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = ServerConfig::for_tests(dir.path());
        config.bind_addr = "127.0.0.1:0".into();
        tweak(&mut config);
        let (server, api) = serve(config).await;
        TestServer { server, api, dir }
    }

    /// Stops the server and starts a new one on the same data dir (a restart).
    pub async fn restart(self) -> TestServer {
        let TestServer { server, api, dir } = self;
        let config = server.handle().config().clone();
        api.shutdown().await.expect("API stops");
        server.shutdown().await.expect("server stops");
        let (server, api) = serve(config).await;
        TestServer { server, api, dir }
    }

    /// The API's listening address.
    pub fn addr(&self) -> SocketAddr {
        self.api.local_addr()
    }

    /// The API's address as a URL clients connect to.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// A fresh connection to the API.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.url())
            .expect("loopback url is valid")
            .connect()
            .await
            .expect("connects to the test server")
    }

    /// The in-process handle, for reading state directly.
    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    /// Registers `job` through the handle, with no index check, and returns its key.
    pub async fn register(&self, job: Job) -> JobKey {
        let key = job.key();
        self.handle()
            .register_job(JobRegistration {
                job,
                enforce_index: None,
            })
            .await
            .expect("job registers");
        key
    }

    /// Settings for `nodes` simulated nodes of this server, seeded with `seed`, that take
    /// the mock jobs: those are raw_exec, which the simulated nodes pretend to run.
    pub fn sim_config(&self, nodes: usize, seed: u64) -> SimConfig {
        SimConfig {
            drivers: vec!["mock".into(), "raw_exec".into()],
            servers: vec![self.url()],
            nodes,
            seed,
            ..SimConfig::default()
        }
    }

    /// The server's data directory.
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the API and the server cleanly.
    pub async fn stop(self) {
        self.api.shutdown().await.expect("API stops");
        self.server.shutdown().await.expect("server stops");
    }
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("addr", &self.addr())
            .field("data_dir", &self.dir.path())
            .finish()
    }
}

async fn serve(config: ServerConfig) -> (Server, ApiServer) {
    let server = Server::start(config).await.expect("server starts");
    assert!(
        server.handle().wait_for_leadership(DEADLINE).await,
        "server did not become leader"
    );
    let api = server
        .serve(ApiOptions::default())
        .await
        .expect("API serves");
    (server, api)
}

/// Polls `f` every 50 ms until it returns `Some`, panicking with `what` after `deadline`.
pub async fn eventually<T, Fut: Future<Output = Option<T>>>(
    what: &str,
    deadline: Duration,
    mut f: impl FnMut() -> Fut,
) -> T {
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
