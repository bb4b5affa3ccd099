//! `drover node drain -enable` follows the drain until nothing it moves is left on the
//! node (as Nomad's does); `-detach` returns at once.

mod cli_support;

use cli_support::{assert_code, drover, json, stdout, write_job};
use drover_agent::sim::{SimConfig, Simulator};
use drover_tests::{DEADLINE, TestServer, eventually};

#[tokio::test(flavor = "multi_thread")]
async fn a_drain_is_followed_until_its_allocations_moved() {
    let server = TestServer::start().await;
    let sim = Simulator::start(SimConfig {
        // The jobs here are raw_exec: the simulated nodes pretend to run them.
        drivers: vec!["mock".into(), "raw_exec".into()],
        servers: vec![server.url()],
        nodes: 2,
        seed: 3,
        ..SimConfig::default()
    })
    .await
    .expect("the simulator starts");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write_job(dir.path(), "web", 1);
    assert_code(
        &drover(&server, &["job", "run", file.to_str().expect("utf-8")]).await,
        0,
    );
    let running_on = || async {
        let job = json(&drover(&server, &["job", "status", "web", "-json"]).await);
        job["allocations"]
            .as_array()?
            .iter()
            .find(|a| a["client_status"] == "Running")
            .and_then(|a| a["node_id"].as_str().map(str::to_owned))
    };
    let first = eventually("the allocation to run", DEADLINE, running_on).await;

    // Followed: the command returns once the allocation has left the node.
    let drained = drover(&server, &["node", "drain", "-enable", &first]).await;
    assert_code(&drained, 0);
    let text = stdout(&drained);
    assert!(text.contains("drain strategy set"), "{text}");
    assert!(text.contains("==> Drain complete for node"), "{text}");
    let job = json(&drover(&server, &["job", "status", "web", "-json"]).await);
    let on_first = job["allocations"]
        .as_array()
        .expect("allocations")
        .iter()
        .filter(|a| a["node_id"] == first.as_str())
        .all(|a| a["client_status"] == "Complete");
    assert!(
        on_first,
        "an allocation still runs on the drained node: {job}"
    );
    let second = eventually("the replacement to run", DEADLINE, running_on).await;
    assert_ne!(second, first);

    // Detached: the drain is set and the command returns without following it.
    let detached = drover(&server, &["node", "drain", "-enable", "-detach", &second]).await;
    assert_code(&detached, 0);
    let text = stdout(&detached);
    assert!(text.contains("drain strategy set"), "{text}");
    assert!(!text.contains("Following"), "{text}");
    sim.shutdown().await;
    server.stop().await;
}
