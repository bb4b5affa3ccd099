//! `drover node drain -enable` follows the drain until the servers end it (once nothing it
//! moves is left on the node, as Nomad's does); `-detach` returns at once; a deadline moves
//! what pacing holds back.

use crate::cli_support;

use cli_support::{assert_code, drover, json, stdout};
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
    let file = dir.path().join("web.nomad.hcl");
    std::fs::write(&file, job("web", 1, "1s")).expect("job file");
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

/// A service job of `count` raw_exec tasks whose replacements count as healthy after
/// `min_healthy` of running.
fn job(id: &str, count: u32, min_healthy: &str) -> String {
    format!(
        r#"job "{id}" {{
  datacenters = ["dc1"]
  group "api" {{
    count = {count}
    migrate {{
      max_parallel     = 1
      min_healthy_time = "{min_healthy}"
      healthy_deadline = "5m"
    }}
    task "server" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sleep"
        args    = ["600"]
      }}
      resources {{
        cpu    = 100
        memory = 64
      }}
    }}
  }}
}}
"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deadline_moves_what_pacing_holds_back_and_the_drain_ends_by_itself() {
    let server = TestServer::start().await;
    let sim = Simulator::start(SimConfig {
        drivers: vec!["mock".into(), "raw_exec".into()],
        servers: vec![server.url()],
        nodes: 1,
        seed: 5,
        ..SimConfig::default()
    })
    .await
    .expect("the simulator starts");
    let dir = tempfile::tempdir().expect("temp dir");
    // Two allocations on the one node; a replacement would need a minute to count as
    // healthy, so only the deadline can move the second.
    let file = dir.path().join("slow.nomad.hcl");
    std::fs::write(&file, job("slow", 2, "1m")).expect("job file");
    assert_code(
        &drover(&server, &["job", "run", file.to_str().expect("utf-8")]).await,
        0,
    );
    let node = eventually("both allocations to run", DEADLINE, || async {
        let job = json(&drover(&server, &["job", "status", "slow", "-json"]).await);
        let running: Vec<String> = job["allocations"]
            .as_array()?
            .iter()
            .filter(|a| a["client_status"] == "Running")
            .filter_map(|a| a["node_id"].as_str().map(str::to_owned))
            .collect();
        (running.len() == 2).then(|| running[0].clone())
    })
    .await;
    let started = std::time::Instant::now();
    let drained = drover(
        &server,
        &["node", "drain", "-enable", "-deadline", "3s", &node],
    )
    .await;
    assert_code(&drained, 0);
    let text = stdout(&drained);
    assert!(text.contains("==> Drain complete for node"), "{text}");
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(3),
        "the deadline, not pacing, moved them: {text}"
    );
    let status = json(&drover(&server, &["node", "status", "-json"]).await);
    let drained_node = status
        .as_array()
        .expect("nodes")
        .iter()
        .map(|row| &row["node"])
        .find(|n| n["id"] == node.as_str())
        .expect("the node")
        .clone();
    assert!(
        drained_node["drain"].is_null(),
        "the drain ended: {drained_node}"
    );
    assert_eq!(drained_node["eligibility"], "Ineligible", "{drained_node}");
    sim.shutdown().await;
    server.stop().await;
}
