//! The gRPC harness shared by the API tests: a real server and its API on 127.0.0.1:0 with a
//! temp data dir, and typed clients on one channel.

use super::start_with;
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1::eval_service_client::EvalServiceClient;
use drover_proto::v1::job_service_client::JobServiceClient;
use drover_proto::v1::node_service_client::NodeServiceClient;
use drover_proto::v1::operator_service_client::OperatorServiceClient;
use drover_proto::v1::status_service_client::StatusServiceClient;
use drover_server::api::{ApiOptions, ApiServer};
use drover_server::{Server, ServerConfig, ServerHandle};
use tonic::transport::Endpoint;
use tonic_health::pb::health_client::HealthClient;

pub struct Api {
    pub server: Server,
    pub api: ApiServer,
    pub h: ServerHandle,
    pub channel: Channel,
    pub _dir: Option<tempfile::TempDir>,
}

impl Api {
    pub async fn start(tweak: impl FnOnce(&mut ServerConfig)) -> Api {
        let dir = tempfile::tempdir().unwrap();
        let mut config = ServerConfig::for_tests(dir.path());
        config.bind_addr = "127.0.0.1:0".into();
        tweak(&mut config);
        let mut api = Self::start_config(config).await;
        api._dir = Some(dir);
        api
    }

    pub async fn start_config(config: ServerConfig) -> Api {
        let (server, h) = start_with(config).await;
        Self::serve(server, h).await
    }

    /// Starts without waiting for leadership (a server that may never get a leader).
    pub async fn start_leaderless(tweak: impl FnOnce(&mut ServerConfig)) -> Api {
        super::init_tracing();
        let dir = tempfile::tempdir().unwrap();
        let mut config = ServerConfig::for_tests(dir.path());
        config.bind_addr = "127.0.0.1:0".into();
        tweak(&mut config);
        let server = Server::start(config).await.expect("server starts");
        let h = server.handle();
        let mut api = Self::serve(server, h).await;
        api._dir = Some(dir);
        api
    }

    async fn serve(server: Server, h: ServerHandle) -> Api {
        let api = server.serve(ApiOptions::default()).await.unwrap();
        let channel = Channel::plain(Self::endpoint(&api).connect().await.unwrap());
        Api {
            server,
            api,
            h,
            channel,
            _dir: None,
        }
    }

    pub fn endpoint(api: &ApiServer) -> Endpoint {
        Endpoint::from_shared(format!("http://{}", api.local_addr())).unwrap()
    }

    pub fn jobs(&self) -> JobServiceClient<Channel> {
        JobServiceClient::new(self.channel.clone())
    }

    pub fn health(&self) -> HealthClient<Channel> {
        HealthClient::new(self.channel.clone())
    }

    pub fn evals(&self) -> EvalServiceClient<Channel> {
        EvalServiceClient::new(self.channel.clone())
    }

    pub fn nodes(&self) -> NodeServiceClient<Channel> {
        NodeServiceClient::new(self.channel.clone())
    }

    pub fn operator(&self) -> OperatorServiceClient<Channel> {
        OperatorServiceClient::new(self.channel.clone())
    }

    pub fn status(&self) -> StatusServiceClient<Channel> {
        StatusServiceClient::new(self.channel.clone())
    }

    pub async fn stop(self) {
        drop(self.channel);
        self.api.shutdown().await.unwrap();
        self.server.shutdown().await.unwrap();
    }
}
