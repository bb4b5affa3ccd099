//! The simulator started before its server (as `drover dev` and scripts do) waits for it
//! with a backoff instead of exiting at once.

use drover_agent::sim::{SimConfig, Simulator};
use drover_core::types::NodeStatus;
use drover_tests::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_waits_for_a_server_that_is_not_up_yet() {
    // A port nothing listens on yet: the OS's pick for port 0, released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let sim = tokio::spawn(Simulator::start(SimConfig {
        servers: vec![format!("http://127.0.0.1:{port}")],
        nodes: 3,
        seed: 5,
        ..SimConfig::default()
    }));
    // The simulator's first attempt finds nothing listening; the server comes up after.
    let server = TestServer::start_with(|c| c.bind_addr = format!("127.0.0.1:{port}")).await;
    let sim = sim
        .await
        .expect("the simulator task finishes")
        .expect("the simulator waits for the server and starts");
    let snap = server.handle().snapshot();
    for id in sim.node_ids() {
        let node = snap.node(id).expect("the node registered");
        assert_eq!(node.status, NodeStatus::Ready, "{id}");
    }
    sim.shutdown().await;
    server.stop().await;
}
