//! The agent's side of reconnecting, against a scripted NodeService that behaves like the
//! servers do: allocation updates are refused with FAILED_PRECONDITION until the node has
//! heartbeated. The order of the calls it receives shows the agent heartbeats first, and
//! that a refusal makes it heartbeat at once instead of waiting out its TTL; the agent
//! heartbeats on the stream when the servers have it, and falls back to the unary call
//! when they answer UNIMPLEMENTED (servers older than the stream).

use drover_agent::heartbeat::{Heartbeat, Link};
use drover_agent::reporter::{self, Reporter};
use drover_agent::rpc::Servers;
use drover_agent::state::NodeIdentity;
use drover_core::fsm::AllocClientUpdate;
use drover_core::mock;
use drover_core::node_health::Readiness;
use drover_core::types::ClientStatus;
use drover_proto::convert::ClientAllocUpdate;
use drover_proto::v1 as pb;
use drover_proto::v1::node_service_server::{NodeService, NodeServiceServer};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// Long enough that only an explicit request makes the agent heartbeat inside a test.
const TTL_MS: u64 = 60_000;

/// How a heartbeat came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Unary,
    Stream,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Call {
    Heartbeat(Via),
    Refused,
    Accepted(ClientStatus),
}

#[derive(Default)]
struct Fake {
    calls: Mutex<Vec<Call>>,
    /// Whether the node heartbeated since it was last cut off.
    ready: Mutex<bool>,
    /// Whether the server serves the heartbeat stream (else UNIMPLEMENTED, as an older
    /// server answers).
    streams: bool,
}

impl Fake {
    fn heartbeat(&self, via: Via) -> pb::UpdateNodeStatusResponse {
        *self.ready.lock().expect("lock") = true;
        self.calls.lock().expect("lock").push(Call::Heartbeat(via));
        pb::UpdateNodeStatusResponse {
            heartbeat_ttl_ms: TTL_MS,
            status: pb::NodeStatus::Ready as i32,
            health: pb::NodeHealth::Healthy as i32,
            index: 1,
        }
    }
}

#[derive(Clone, Default)]
struct Scripted(Arc<Fake>);

type Never = Pin<Box<dyn Stream<Item = Result<pb::WatchAllocationsResponse, Status>> + Send>>;
type NoAnswers = Pin<Box<dyn Stream<Item = Result<pb::UpdateNodeStatusResponse, Status>> + Send>>;

#[tonic::async_trait]
impl NodeService for Scripted {
    async fn register(
        &self,
        _: Request<pb::RegisterNodeRequest>,
    ) -> Result<Response<pb::RegisterNodeResponse>, Status> {
        Err(Status::unimplemented(
            "the test's node is registered already",
        ))
    }

    async fn update_status(
        &self,
        _: Request<pb::UpdateNodeStatusRequest>,
    ) -> Result<Response<pb::UpdateNodeStatusResponse>, Status> {
        Ok(Response::new(self.0.heartbeat(Via::Unary)))
    }

    type HeartbeatsStream = NoAnswers;

    async fn heartbeats(
        &self,
        req: Request<tonic::Streaming<pb::UpdateNodeStatusRequest>>,
    ) -> Result<Response<NoAnswers>, Status> {
        if !self.0.streams {
            return Err(Status::unimplemented(
                "a server older than the heartbeat stream",
            ));
        }
        let fake = self.0.clone();
        let answers = futures::stream::unfold(req.into_inner(), move |mut requests| {
            let fake = fake.clone();
            async move {
                match requests.message().await {
                    Ok(Some(_)) => Some((Ok(fake.heartbeat(Via::Stream)), requests)),
                    Ok(None) | Err(_) => None,
                }
            }
        });
        Ok(Response::new(Box::pin(answers)))
    }

    type WatchAllocationsStream = Never;

    async fn watch_allocations(
        &self,
        _: Request<pb::WatchAllocationsRequest>,
    ) -> Result<Response<Never>, Status> {
        Err(Status::unimplemented("not used here"))
    }

    async fn update_allocations(
        &self,
        req: Request<pb::UpdateAllocationsRequest>,
    ) -> Result<Response<pb::UpdateAllocationsResponse>, Status> {
        let mut calls = self.0.calls.lock().expect("lock");
        if !*self.0.ready.lock().expect("lock") {
            calls.push(Call::Refused);
            return Err(Status::failed_precondition("node is down: heartbeat first"));
        }
        for u in &req.get_ref().updates {
            let status = match u.client_status {
                s if s == pb::ClientStatus::Running as i32 => ClientStatus::Running,
                _ => ClientStatus::Complete,
            };
            calls.push(Call::Accepted(status));
        }
        Ok(Response::new(pb::UpdateAllocationsResponse { index: 2 }))
    }
}

fn update(status: ClientStatus) -> ClientAllocUpdate {
    ClientAllocUpdate {
        update: AllocClientUpdate {
            deployment_health: None,
            alloc_id: mock::alloc_id(1),
            client_status: status,
            client_description: Default::default(),
            task_states: Default::default(),
        },
        infra_failure: false,
        services: None,
    }
}

async fn wait_for_calls(fake: &Fake, what: &str, f: impl Fn(&[Call]) -> bool) {
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if f(&fake.calls.lock().expect("lock")) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "timed out waiting for {what}: {:?}",
            fake.calls.lock().expect("lock")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn updates_wait_for_a_heartbeat_and_a_refusal_triggers_one_at_once() {
    for (streams, via) in [(true, Via::Stream), (false, Via::Unary)] {
        heartbeat_first(streams, via).await;
    }
}

/// The scenario against a server that serves the heartbeat stream or not; `via`: how its
/// heartbeats must come.
async fn heartbeat_first(streams: bool, via: Via) {
    let fake = Scripted(Arc::new(Fake {
        streams,
        ..Fake::default()
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let serving = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(NodeServiceServer::new(fake.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let servers = Arc::new(Servers::new(&[addr.to_string()]).expect("address"));
    let identity = NodeIdentity {
        node_id: mock::node_id(1),
        secret_id: "secret".into(),
    };
    let link = Arc::new(Link::default());
    let reporter = Reporter::default();

    // A status is pending before the node has heartbeated: nothing may be sent yet.
    reporter.submit(update(ClientStatus::Running));
    let reports = tokio::spawn(reporter::run(
        reporter.clone(),
        servers.clone(),
        identity.clone(),
        link.clone(),
        Duration::from_millis(50),
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(fake.0.calls.lock().expect("lock").is_empty());

    let beats = tokio::spawn(
        Heartbeat {
            servers,
            identity,
            registration: pb::NodeRegistration::default(),
            registered: true,
            readiness: Box::new(|| Readiness::Ready),
            link: link.clone(),
        }
        .run(),
    );
    wait_for_calls(&fake.0, "the first update", |c| {
        c == [Call::Heartbeat(via), Call::Accepted(ClientStatus::Running)]
    })
    .await;

    // The servers lose the node (it missed heartbeats): the next update is refused, the
    // agent heartbeats at once (its TTL is a minute away) and then sends it again.
    *fake.0.ready.lock().expect("lock") = false;
    reporter.submit(update(ClientStatus::Complete));
    wait_for_calls(&fake.0, "the retried update", |c| {
        c.ends_with(&[
            Call::Refused,
            Call::Heartbeat(via),
            Call::Accepted(ClientStatus::Complete),
        ])
    })
    .await;
    assert_eq!(reporter.pending(), 0);

    reports.abort();
    beats.abort();
    serving.abort();
}
