//! Three nodes over the in-process transport: election, replication, forwarding, catch-up.

use super::*;
use std::collections::BTreeMap;
use std::sync::Arc;

struct Cluster {
    transport: LoopbackTransport,
    nodes: Vec<RaftNode>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Cluster {
    async fn start(n: u64, tune: impl Fn(&mut RaftConfig)) -> Cluster {
        let transport = LoopbackTransport::new();
        let members: BTreeMap<ServerId, String> = (1..=n)
            .map(|id| (id, format!("node-{id}.test:4647")))
            .collect();
        let mut nodes = Vec::new();
        let mut dirs = Vec::new();
        for id in 1..=n {
            let dir = tempfile::tempdir().unwrap();
            let mut config = test_config(id, dir.path())
                .with_transport(Arc::new(transport.clone()))
                .with_bootstrap(Bootstrap::Cluster(members.clone()));
            tune(&mut config);
            let node = RaftNode::start(config).await.unwrap();
            transport.register(id, node.rpc_handler());
            nodes.push(node);
            dirs.push(dir);
        }
        Cluster {
            transport,
            nodes,
            _dirs: dirs,
        }
    }

    fn node(&self, id: ServerId) -> &RaftNode {
        &self.nodes[(id - 1) as usize]
    }

    /// Waits until every node agrees on one leader and returns it.
    async fn leader(&self) -> ServerId {
        let leader = wait_leader(&self.nodes[0]).await;
        for node in &self.nodes {
            wait_metrics(node, "agreement on the leader", |m| {
                m.current_leader == Some(leader)
            })
            .await;
        }
        leader
    }

    async fn shutdown(self) {
        for node in &self.nodes {
            self.transport.unregister(node.node_id());
            node.shutdown().await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_replicate_and_forward() {
    init_tracing();
    let cluster = Cluster::start(3, |_| {}).await;
    let leader = cluster.leader().await;
    let voters: Vec<ServerId> = cluster
        .node(leader)
        .metrics()
        .borrow()
        .membership_config
        .membership()
        .voter_ids()
        .collect();
    assert_eq!(voters, vec![1, 2, 3]);

    let index = write_ok(cluster.node(leader), register_node(1)).await;
    for node in &cluster.nodes {
        let snap = node.state().wait_for_index(index, DEADLINE).await.unwrap();
        assert!(
            snap.node(&mock::node_id(1)).is_some(),
            "node {} has the replicated write",
            node.node_id()
        );
    }

    let follower = cluster
        .nodes
        .iter()
        .find(|n| n.node_id() != leader)
        .unwrap();
    let err = follower.client_write(register_node(2)).await.unwrap_err();
    assert_eq!(
        err,
        WriteError::ForwardToLeader {
            leader_id: Some(leader),
            leader_addr: Some(format!("node-{leader}.test:4647")),
        }
    );
    assert!(err.to_string().contains(&format!("node {leader}")), "{err}");
    cluster.shutdown().await;
}

/// Members of a bootstrap cluster take turns to form it: the lowest id at once, the next
/// only if no leader reached it within its turn. All at once, they split the first vote
/// and the first leader was voted out moments after it won.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lowest_member_forms_the_cluster_and_the_others_only_without_it() {
    init_tracing();
    let cluster = Cluster::start(3, |_| {}).await;
    assert_eq!(cluster.leader().await, 1, "the lowest member leads");
    for node in &cluster.nodes {
        let vote = node.metrics().borrow().vote;
        assert_eq!(
            vote.leader_id().voted_for(),
            Some(1),
            "node {} voted only for the lowest member",
            node.node_id()
        );
    }
    cluster.shutdown().await;

    // Member 1 never starts: member 2 waits its turn, then forms the cluster with 3.
    let transport = LoopbackTransport::new();
    let members: BTreeMap<ServerId, String> = (1..=3)
        .map(|id| (id, format!("node-{id}.test:4647")))
        .collect();
    let mut nodes = Vec::new();
    let mut dirs = Vec::new();
    for id in [2, 3] {
        let dir = tempfile::tempdir().unwrap();
        let config = test_config(id, dir.path())
            .with_transport(Arc::new(transport.clone()))
            .with_bootstrap(Bootstrap::Cluster(members.clone()));
        let node = RaftNode::start(config).await.unwrap();
        transport.register(id, node.rpc_handler());
        assert_eq!(
            node.metrics().borrow().current_term,
            0,
            "node {id} does not campaign before its turn"
        );
        nodes.push(node);
        dirs.push(dir);
    }
    let leader = wait_leader(&nodes[0]).await;
    assert_eq!(leader, 2, "the lowest member started leads");
    let index = write_ok(&nodes[0], register_node(1)).await;
    nodes[1]
        .state()
        .wait_for_index(index, DEADLINE)
        .await
        .expect("two of three members replicate");
    for node in nodes {
        transport.unregister(node.node_id());
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_a_purged_log_catches_up_from_a_snapshot() {
    init_tracing();
    let cluster = Cluster::start(3, |c| {
        c.logs_kept_after_snapshot = 0;
        // Small chunks: the snapshot crosses the transport in several messages.
        c.snapshot_chunk_size = 512;
    })
    .await;
    let leader = cluster.leader().await;
    let lagger = (1..=3).find(|&id| id != leader).unwrap();
    // Cut the leader off from the lagger, and keep the lagger from campaigning meanwhile so
    // the leader (the one whose log is purged) stays in charge.
    cluster.node(lagger).raft().runtime_config().elect(false);
    cluster.transport.unregister(lagger);

    let last = populate(cluster.node(leader), 3, 4).await;
    cluster.node(leader).trigger_snapshot().await.unwrap();
    wait_metrics(cluster.node(leader), "leader purged its log", |m| {
        m.purged.is_some_and(|p| p.index >= last)
    })
    .await;
    let expected = cluster.node(leader).state().snapshot();
    // What follows state by its events (a node's allocation watch) learns of the install.
    let mut installs = cluster.node(lagger).state().watch_installs();

    cluster
        .transport
        .register(lagger, cluster.node(lagger).rpc_handler());
    let node = cluster.node(lagger);
    let caught_up = node.state().wait_for_index(last, DEADLINE).await.unwrap();
    assert_eq!(state_bytes(&caught_up), state_bytes(&expected));
    wait_metrics(node, "snapshot installed", |m| {
        m.snapshot.is_some_and(|s| s.index >= last)
    })
    .await;
    tokio::time::timeout(DEADLINE, installs.changed())
        .await
        .expect("the install is signalled")
        .expect("the state outlives the receiver");
    cluster.shutdown().await;
}

/// A link that takes 1 ms per 16 KiB of every AppendEntries message, as a follower starved
/// of CPU does: a message above 800 KiB outlasts the tests' 50 ms heartbeat, which openraft
/// uses as the message's deadline.
#[derive(Debug)]
struct SlowLink {
    inner: Arc<dyn RaftTransport>,
}

impl RaftTransport for SlowLink {
    fn call<'a>(
        &'a self,
        rpc: RaftRpc,
        target: ServerId,
        addr: &'a str,
        payload: Vec<u8>,
    ) -> RpcFuture<'a> {
        Box::pin(async move {
            if rpc == RaftRpc::AppendEntries {
                let micros = payload.len() as u64 * 1000 / (16 * 1024);
                tokio::time::sleep(Duration::from_micros(micros)).await;
            }
            self.inner.call(rpc, target, addr, payload).await
        })
    }
}

/// A job whose register entry takes about 100 KB in the log.
fn bulky_job(n: u64) -> Command {
    let mut job = job(n);
    job.meta.insert("blob".into(), "x".repeat(100_000));
    Command::JobRegister {
        eval: None,
        job,
        now: T0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_far_behind_is_sent_messages_it_can_answer_in_time() {
    init_tracing();
    let cluster = Cluster::start(3, |c| {
        let inner = c.transport.take().expect("the cluster's transport");
        c.transport = Some(Arc::new(SlowLink { inner }));
        c.max_payload_bytes = 256 * 1024;
    })
    .await;
    let leader = cluster.leader().await;
    let lagger = (1..=3).find(|&id| id != leader).unwrap();
    cluster.node(lagger).raft().runtime_config().elect(false);
    cluster.transport.unregister(lagger);

    // 4 MB behind: in one message (openraft's 300 entries) it would never arrive in time.
    let mut last = 0;
    for j in 1..=40 {
        last = write_ok(cluster.node(leader), bulky_job(j)).await;
    }
    cluster
        .transport
        .register(lagger, cluster.node(lagger).rpc_handler());
    let caught_up = cluster
        .node(lagger)
        .state()
        .wait_for_index(last, DEADLINE)
        .await
        .expect("the lagging follower catches up");
    assert!(caught_up.job(&job(40).key()).is_some());
    cluster.shutdown().await;
}

/// A node served over real gRPC on a loopback port.
struct GrpcNode {
    node: RaftNode,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    _dir: tempfile::TempDir,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_over_grpc_on_loopback() {
    init_tracing();
    let mut listeners = Vec::new();
    let mut members = BTreeMap::new();
    for id in 1..=3 {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        members.insert(id, l.local_addr().unwrap().to_string());
        listeners.push(l);
    }
    let transport = Arc::new(GrpcTransport::default());
    let mut nodes = Vec::new();
    for (id, listener) in (1..=3).zip(listeners) {
        let dir = tempfile::tempdir().unwrap();
        let mut config = test_config(id, dir.path())
            .with_transport(transport.clone())
            .with_bootstrap(Bootstrap::Cluster(members.clone()));
        config.addr = members[&id].clone();
        let node = RaftNode::start(config).await.unwrap();
        let service = RaftGrpcService::new(node.rpc_handler(), Default::default())
            .into_server(DEFAULT_MAX_MESSAGE_BYTES);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    async {
                        let _ = stopped.await;
                    },
                ),
        );
        nodes.push(GrpcNode {
            node,
            stop,
            server,
            _dir: dir,
        });
    }

    let leader = wait_leader(&nodes[0].node).await;
    for n in &nodes {
        wait_metrics(&n.node, "agreement on the leader", |m| {
            m.current_leader == Some(leader)
        })
        .await;
    }
    let leader_node = &nodes[(leader - 1) as usize].node;
    let index = write_ok(leader_node, register_job(1)).await;
    for n in &nodes {
        let snap = n
            .node
            .state()
            .wait_for_index(index, DEADLINE)
            .await
            .unwrap();
        assert!(
            snap.job(&job(1).key()).is_some(),
            "node {}",
            n.node.node_id()
        );
    }
    let follower = nodes.iter().find(|n| n.node.node_id() != leader).unwrap();
    match follower.node.client_write(register_node(1)).await {
        Err(WriteError::ForwardToLeader {
            leader_id,
            leader_addr,
        }) => {
            assert_eq!(leader_id, Some(leader));
            assert_eq!(leader_addr.as_deref(), Some(members[&leader].as_str()));
        }
        other => panic!("expected a forward to the leader, got {other:?}"),
    }

    // Garbage on the wire is refused with INVALID_ARGUMENT, and the node carries on.
    let mut client = drover_proto::v1::raft_service_client::RaftServiceClient::connect(format!(
        "http://{}",
        members[&leader]
    ))
    .await
    .unwrap();
    let status = client
        .vote(drover_proto::v1::RaftRequest {
            payload: b"not a vote".to_vec(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().contains("bad raft vote request"),
        "{status:?}"
    );
    write_ok(leader_node, register_node(2)).await;

    for n in nodes {
        n.node.shutdown().await.unwrap();
        let _ = n.stop.send(());
        n.server.await.unwrap().unwrap();
    }
}

/// Raft runs on its own runtime: while every worker of the runtime that started the nodes
/// is stuck (schedulers burning CPU, a blocking call), heartbeats still flow, so nobody
/// calls an election and the leader keeps its term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_runtime_beside_raft_costs_the_leader_nothing() {
    init_tracing();
    let cluster = Cluster::start(3, |_| {}).await;
    let leader = cluster.leader().await;
    let term = cluster.node(leader).metrics().borrow().current_term;
    // Each stall outlasts the election timeout; Raft on the stalled runtime would wake to
    // followers whose timers ran out and call an election at one of them.
    let stuck_for = Duration::from_millis(800);
    for _ in 0..5 {
        let stuck: Vec<_> = (0..2)
            .map(|_| tokio::spawn(async move { std::thread::sleep(stuck_for) }))
            .collect();
        for s in stuck {
            s.await.unwrap();
        }
    }
    let index = write_ok(cluster.node(leader), register_node(1)).await;
    for node in &cluster.nodes {
        let m = node.metrics().borrow().clone();
        assert_eq!(
            (m.current_term, m.current_leader),
            (term, Some(leader)),
            "node {} after the other runtime stalled five times for {stuck_for:?}",
            node.node_id()
        );
        node.state().wait_for_index(index, DEADLINE).await.unwrap();
    }
    cluster.shutdown().await;
}
