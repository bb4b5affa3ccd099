//! Simulated nodes heartbeat on streams: each keeps one open across its heartbeats and
//! stays up on it past several TTLs; a node cut off drops its stream, and opens another
//! once back.

use drover_agent::sim::{SimConfig, Simulator};
use drover_core::types::NodeStatus;
use drover_tests::{TestServer, eventually};
use std::time::Duration;

const TTL: Duration = Duration::from_millis(400);
const GRACE: Duration = Duration::from_millis(200);
const NODES: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_nodes_keep_one_heartbeat_stream_each_and_stay_up_on_it() {
    let server = TestServer::start_with(|c| {
        c.heartbeat.min_ttl = TTL;
        c.heartbeat.grace = GRACE;
    })
    .await;
    let sim = Simulator::start(SimConfig {
        servers: vec![server.url()],
        nodes: NODES,
        seed: 9,
        ..SimConfig::default()
    })
    .await
    .expect("simulator starts");
    let ids = sim.node_ids().to_vec();

    // Several TTLs: every node has beaten many times, on a stream it keeps.
    let started = sim.stats().await.expect("stats").heartbeats;
    let wanted = started + (NODES as u64) * 8;
    eventually(
        "many heartbeats on kept streams",
        Duration::from_secs(30),
        || async {
            let stats = sim.stats().await.expect("stats");
            (stats.heartbeats >= wanted && stats.heartbeat_streams == NODES).then_some(())
        },
    )
    .await;
    let stats = sim.stats().await.expect("stats");
    assert_eq!(stats.heartbeat_errors, 0, "{stats:?}");
    let snap = server.handle().snapshot();
    for id in &ids {
        assert_eq!(
            snap.node(id).map(|n| n.status),
            Some(NodeStatus::Ready),
            "{id}"
        );
    }

    let cut = ids[0];
    sim.silence(&[cut]).await.expect("silenced");
    // The cut-off node goes down and its stream is gone.
    node_and_streams(&server, &sim, cut, NodeStatus::Down, NODES - 1).await;
    sim.restore(&[cut]).await.expect("restored");
    // The node is back up on a new stream.
    node_and_streams(&server, &sim, cut, NodeStatus::Ready, NODES).await;
    sim.shutdown().await;
    server.stop().await;
}

/// Waits until `node` has `status` on the server and the simulator holds `streams`
/// heartbeat streams.
async fn node_and_streams(
    server: &TestServer,
    sim: &Simulator,
    node: drover_core::types::NodeId,
    status: NodeStatus,
    streams: usize,
) {
    eventually(
        &format!("node {node} {status:?} with {streams} heartbeat streams"),
        Duration::from_secs(30),
        || async {
            let stats = sim.stats().await.expect("stats");
            let reached = server
                .handle()
                .snapshot()
                .node(&node)
                .is_some_and(|n| n.status == status);
            (reached && stats.heartbeat_streams == streams).then_some(())
        },
    )
    .await;
}
