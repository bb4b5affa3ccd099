//! Several servers of one made-up cluster, for the console's failover tests. Each answers
//! the load (`FakeCluster`), the status calls, the event stream and its own scheduler
//! workers (as a server does until servers pass worker calls on to each other), all from
//! one state the test changes: who leads, the events appended, which pools are paused.
//!
//! Each server runs on a runtime of its own, so [`FakeServers::kill`] takes its listener
//! and every connection down at once, as `kill -9` takes a real server's.

use super::fake_cluster::FakeCluster;
use drover_proto::v1 as pb;
use pb::event_service_server::{EventService, EventServiceServer};
use pb::status_service_server::{StatusService, StatusServiceServer};
use pb::worker_service_server::{WorkerService, WorkerServiceServer};
use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// The index the load answers at (`FakeCluster`'s); events follow it.
const LOADED_AT: u64 = 1_000;
/// Workers in each server's pool.
const POOL: usize = 2;

/// What the servers share and the test changes.
#[derive(Debug)]
struct State {
    leader: String,
    term: u64,
    events: Vec<pb::SubscribeResponse>,
    alive: Vec<bool>,
    /// Server ids whose pool is paused.
    paused: BTreeSet<String>,
    /// Worker lists never answer, as a follower's call passed on to a dead leader hangs.
    stalled: bool,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// The index of the newest event, for streams waiting for more.
    appended: watch::Sender<u64>,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The running servers. Server `i` (Raft id `i + 1`) answers at `urls[i]`.
pub struct FakeServers {
    pub urls: Vec<String>,
    shared: Arc<Shared>,
    runtimes: Vec<Option<tokio::runtime::Runtime>>,
}

/// A server's TLS: its certificate and key (PEM), and the CA its clients' certificates
/// must be signed by, when it asks for them.
#[derive(Clone, Debug)]
pub struct FakeTls {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
    pub client_ca: Option<Vec<u8>>,
}

impl FakeServers {
    /// `count` servers in plain gRPC, the first of them leading.
    pub fn start(count: usize) -> Self {
        Self::start_with(count, None)
    }

    /// `count` servers, serving TLS when `tls` says, the first of them leading.
    pub fn start_with(count: usize, tls: Option<FakeTls>) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                leader: "1".into(),
                term: 1,
                events: Vec::new(),
                alive: vec![true; count],
                paused: BTreeSet::new(),
                stalled: false,
            }),
            appended: watch::channel(LOADED_AT).0,
        });
        let mut urls = Vec::new();
        let mut runtimes = Vec::new();
        for me in 0..count {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a runtime for a fake server");
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener
                .set_nonblocking(true)
                .expect("a non-blocking listener");
            urls.push(format!(
                "http://{}",
                listener.local_addr().expect("its address")
            ));
            let shared = shared.clone();
            let tls = tls.clone();
            runtime.spawn(async move {
                let listener =
                    tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
                let mut builder = tonic::transport::Server::builder();
                if let Some(tls) = tls {
                    use tonic::transport::{Certificate, Identity, ServerTlsConfig};
                    let mut config =
                        ServerTlsConfig::new().identity(Identity::from_pem(tls.cert, tls.key));
                    if let Some(ca) = tls.client_ca {
                        config = config.client_ca_root(Certificate::from_pem(ca));
                    }
                    builder = builder.tls_config(config).expect("a TLS configuration");
                }
                let router = FakeCluster::even(3, 12, 2)
                    .router(&mut builder)
                    .add_service(StatusServiceServer::new(StatusApi {
                        me,
                        shared: shared.clone(),
                    }))
                    .add_service(EventServiceServer::new(EventApi(shared.clone())))
                    .add_service(WorkerServiceServer::new(WorkerApi { me, shared }));
                let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
                router.serve_with_incoming(incoming).await
            });
            runtimes.push(Some(runtime));
        }
        FakeServers {
            urls,
            shared,
            runtimes,
        }
    }

    /// The servers' addresses as `--address` takes them.
    pub fn address(&self) -> String {
        self.urls.join(",")
    }

    /// Stops server `i` at once: its listener and every connection to it go.
    pub fn kill(&mut self, i: usize) {
        if let Some(runtime) = self.runtimes[i].take() {
            runtime.shutdown_background();
        }
        self.shared.state().alive[i] = false;
    }

    /// Server `id` leads from now on, in a new term.
    pub fn elect(&self, id: &str) {
        let mut state = self.shared.state();
        state.leader = id.into();
        state.term += 1;
    }

    /// Appends an event registering node `name` (index: the newest plus one) and returns
    /// its index.
    pub fn register_node(&self, name: &str, n: u64) -> u64 {
        let mut node = drover_core::mock::node(n);
        node.name = name.into();
        let index = {
            let mut state = self.shared.state();
            let index = state.events.last().map_or(LOADED_AT, |e| e.index) + 1;
            node.modify_index = index;
            state.events.push(pb::SubscribeResponse {
                events: vec![pb::Event {
                    topic: pb::Topic::Node as i32,
                    event_type: pb::EventType::NodeRegistration as i32,
                    key: node.id.to_string(),
                    index,
                    payload: Some(pb::event::Payload::Node(pb::Node::from(&node))),
                }],
                index,
            });
            index
        };
        self.shared.appended.send_replace(index);
        index
    }

    /// From now on no server answers worker lists.
    pub fn stall_workers(&self) {
        self.shared.state().stalled = true;
    }

    /// Pauses the pool of server `id`, as `operator workers pause -all` sent to it does.
    pub fn pause_pool(&self, id: &str) {
        self.shared.state().paused.insert(id.into());
    }
}

impl Drop for FakeServers {
    fn drop(&mut self) {
        for runtime in self.runtimes.iter_mut().filter_map(Option::take) {
            runtime.shutdown_background();
        }
    }
}

fn id_of(me: usize) -> String {
    (me + 1).to_string()
}

#[derive(Clone, Debug)]
struct StatusApi {
    me: usize,
    shared: Arc<Shared>,
}

impl StatusApi {
    fn role(&self, state: &State, of: usize) -> i32 {
        if state.leader == id_of(of) {
            pb::RaftRole::Leader as i32
        } else {
            pb::RaftRole::Follower as i32
        }
    }
}

#[tonic::async_trait]
impl StatusService for StatusApi {
    async fn leader(
        &self,
        _: Request<pb::LeaderRequest>,
    ) -> Result<Response<pb::LeaderResponse>, Status> {
        let state = self.shared.state();
        Ok(Response::new(pb::LeaderResponse {
            leader_id: state.leader.clone(),
            leader_address: String::new(),
            term: state.term,
            index: *self.shared.appended.borrow(),
        }))
    }

    async fn peers(
        &self,
        _: Request<pb::PeersRequest>,
    ) -> Result<Response<pb::PeersResponse>, Status> {
        Err(Status::unimplemented("not part of the fake servers"))
    }

    async fn cluster_status(
        &self,
        _: Request<pb::ClusterStatusRequest>,
    ) -> Result<Response<pb::ClusterStatusResponse>, Status> {
        let state = self.shared.state();
        let index = *self.shared.appended.borrow();
        Ok(Response::new(pb::ClusterStatusResponse {
            server_id: id_of(self.me),
            role: self.role(&state, self.me),
            term: state.term,
            leader_id: state.leader.clone(),
            applied_index: index,
            index,
            ..Default::default()
        }))
    }

    async fn members(
        &self,
        _: Request<pb::MembersRequest>,
    ) -> Result<Response<pb::MembersResponse>, Status> {
        let state = self.shared.state();
        let members = (0..state.alive.len())
            .map(|of| pb::Member {
                id: id_of(of),
                name: format!("drover-{}", id_of(of)),
                address: format!("127.0.0.1:{}", 4648 + of),
                role: self.role(&state, of),
                status: if state.alive[of] {
                    pb::MemberStatus::Alive as i32
                } else {
                    pb::MemberStatus::Unreachable as i32
                },
                last_contact_ms: 0,
                version: "0.1.0".into(),
            })
            .collect();
        Ok(Response::new(pb::MembersResponse {
            members,
            index: *self.shared.appended.borrow(),
        }))
    }
}

#[derive(Clone, Debug)]
struct EventApi(Arc<Shared>);

type Events = Pin<Box<dyn Stream<Item = Result<pb::SubscribeResponse, Status>> + Send>>;

#[tonic::async_trait]
impl EventService for EventApi {
    type SubscribeStream = Events;

    async fn subscribe(
        &self,
        request: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Events>, Status> {
        let shared = self.0.clone();
        let mut cursor = match request.into_inner().from_index {
            0 => *shared.appended.borrow() + 1,
            from => from,
        };
        let mut appended = shared.appended.subscribe();
        let (tx, out) = mpsc::channel(64);
        // On the server's own runtime: killing the server ends it too.
        tokio::spawn(async move {
            loop {
                appended.borrow_and_update();
                let batch: Vec<pb::SubscribeResponse> = shared
                    .state()
                    .events
                    .iter()
                    .filter(|e| e.index >= cursor)
                    .cloned()
                    .collect();
                for response in batch {
                    cursor = response.index + 1;
                    if tx.send(Ok(response)).await.is_err() {
                        return;
                    }
                }
                if appended.changed().await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(out),
        )))
    }
}

#[derive(Clone, Debug)]
struct WorkerApi {
    me: usize,
    shared: Arc<Shared>,
}

impl WorkerApi {
    /// This server's pool, as it lists it.
    fn pool(&self) -> Vec<pb::WorkerInfo> {
        let paused = self.shared.state().paused.contains(&id_of(self.me));
        (0..POOL)
            .map(|w| pb::WorkerInfo {
                id: format!("s{}-g0-w{w}", id_of(self.me)),
                server_id: id_of(self.me),
                enabled_schedulers: Vec::new(),
                started_unix_ms: 1_767_225_000_000,
                status: if paused {
                    pb::WorkerStatus::Paused as i32
                } else {
                    pb::WorkerStatus::Started as i32
                },
                workload_status: if paused {
                    pb::WorkloadStatus::Paused as i32
                } else {
                    pb::WorkloadStatus::WaitingToDequeue as i32
                },
            })
            .collect()
    }

    /// Pauses or resumes this server's whole pool, as a selector of every worker asks;
    /// anything else is refused as the real server refuses another server's workers.
    fn set_paused(
        &self,
        selector: Option<pb::WorkerSelector>,
        paused: bool,
    ) -> Result<Vec<pb::WorkerInfo>, Status> {
        let selector = selector.unwrap_or_default();
        if !selector.server_id.is_empty() && selector.server_id != id_of(self.me) {
            return Err(Status::not_found(format!(
                "server {} not found",
                selector.server_id
            )));
        }
        if selector.target != Some(pb::worker_selector::Target::All(true)) {
            return Err(Status::unimplemented("the fake servers pause whole pools"));
        }
        {
            let mut state = self.shared.state();
            if paused {
                state.paused.insert(id_of(self.me));
            } else {
                state.paused.remove(&id_of(self.me));
            }
        }
        Ok(self.pool())
    }
}

#[tonic::async_trait]
impl WorkerService for WorkerApi {
    async fn list(
        &self,
        _: Request<pb::ListWorkersRequest>,
    ) -> Result<Response<pb::ListWorkersResponse>, Status> {
        if self.shared.state().stalled {
            std::future::pending::<()>().await;
        }
        Ok(Response::new(pb::ListWorkersResponse {
            workers: self.pool(),
            unreachable: Vec::new(),
        }))
    }

    async fn pause(
        &self,
        request: Request<pb::PauseWorkersRequest>,
    ) -> Result<Response<pb::PauseWorkersResponse>, Status> {
        let workers = self.set_paused(request.into_inner().workers, true)?;
        Ok(Response::new(pb::PauseWorkersResponse { workers }))
    }

    async fn resume(
        &self,
        request: Request<pb::ResumeWorkersRequest>,
    ) -> Result<Response<pb::ResumeWorkersResponse>, Status> {
        let workers = self.set_paused(request.into_inner().workers, false)?;
        Ok(Response::new(pb::ResumeWorkersResponse { workers }))
    }

    async fn get_config(
        &self,
        _: Request<pb::GetWorkerConfigRequest>,
    ) -> Result<Response<pb::GetWorkerConfigResponse>, Status> {
        Err(Status::unimplemented("not part of the fake servers"))
    }

    async fn set_config(
        &self,
        _: Request<pb::SetWorkerConfigRequest>,
    ) -> Result<Response<pb::SetWorkerConfigResponse>, Status> {
        Err(Status::unimplemented("not part of the fake servers"))
    }
}
