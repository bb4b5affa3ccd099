//! The operator's commands against a real server: node status, offline / online,
//! eligibility, workers pause / resume, the scheduler configuration, the event stream.

use crate::cli_support;

use cli_support::{assert_code, drover, join_nodes, json, spawn, stdout, wait_for_line};
use drover_tests::{DEADLINE, TestServer, eventually};

#[tokio::test(flavor = "multi_thread")]
async fn offline_and_online_a_node() {
    let server = TestServer::start().await;
    let nodes = join_nodes(&server, 2).await;
    let listed = json(&drover(&server, &["node", "status", "-json"]).await);
    assert_eq!(listed.as_array().map(Vec::len), Some(2));

    // Tables print eight characters of an id; the commands take them back.
    let id = &nodes.ids[0];
    let short: String = id.chars().filter(|c| *c != '-').take(8).collect();
    let table = stdout(&drover(&server, &["node", "status"]).await);
    assert!(table.contains(&short), "{table}");

    let off = drover(&server, &["node", "offline", &short]).await;
    assert_code(&off, 0);
    assert!(stdout(&off).contains("offlined"), "{}", stdout(&off));
    let node = json(&drover(&server, &["node", "status", id, "-json"]).await);
    assert_eq!(node["node"]["health"], "Offlined");

    let on = drover(&server, &["node", "online", id]).await;
    assert_code(&on, 0);
    eventually("the node to be healthy again", DEADLINE, || async {
        let node = json(&drover(&server, &["node", "status", id, "-json"]).await);
        (node["node"]["health"] == "Healthy").then_some(())
    })
    .await;

    let inelig = drover(&server, &["node", "eligibility", id, "-disable"]).await;
    assert_code(&inelig, 0);
    let node = json(&drover(&server, &["node", "status", id, "-json"]).await);
    assert_eq!(node["node"]["eligibility"], "Ineligible");

    // Every node argument takes the node's name too, as the console does.
    let by_name = drover(&server, &["node", "offline", "node-2"]).await;
    assert_code(&by_name, 0);
    let node = json(&drover(&server, &["node", "status", &nodes.ids[1], "-json"]).await);
    assert_eq!(node["node"]["health"], "Offlined");
    let shown = json(&drover(&server, &["node", "status", "node-2", "-json"]).await);
    assert_eq!(shown["node"]["id"], nodes.ids[1].as_str());
    let unknown = drover(&server, &["node", "offline", "node-9"]).await;
    assert_code(&unknown, 1);
    assert!(
        cli_support::stderr(&unknown).contains("no node is called \"node-9\""),
        "{}",
        cli_support::stderr(&unknown)
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pause_and_resume_workers() {
    let server = TestServer::start().await;
    let workers = json(&drover(&server, &["operator", "workers", "list", "-json"]).await);
    let count = workers.as_array().map_or(0, Vec::len);
    assert!(count > 0, "{workers}");

    assert_code(
        &drover(&server, &["operator", "workers", "pause", "-all"]).await,
        0,
    );
    eventually("every worker to be paused", DEADLINE, || async {
        let workers = json(&drover(&server, &["operator", "workers", "list", "-json"]).await);
        let statuses: Vec<&str> = workers
            .as_array()?
            .iter()
            .filter_map(|w| w["status"].as_str())
            .collect();
        (statuses.len() == count && statuses.iter().all(|s| *s == "paused")).then_some(())
    })
    .await;

    assert_code(
        &drover(&server, &["operator", "workers", "resume", "-all"]).await,
        0,
    );
    eventually("every worker to run again", DEADLINE, || async {
        let workers = json(&drover(&server, &["operator", "workers", "list", "-json"]).await);
        let running = workers.as_array()?.iter().all(|w| w["status"] == "started");
        running.then_some(())
    })
    .await;

    let config = json(&drover(&server, &["operator", "workers", "config", "-json"]).await);
    assert_eq!(config["count"].as_u64(), Some(count as u64));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn job_run_while_paused_says_so() {
    let server = TestServer::start().await;
    let _nodes = join_nodes(&server, 1).await;
    assert_code(
        &drover(&server, &["operator", "workers", "pause", "-all"]).await,
        0,
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let file = cli_support::write_mock_job(dir.path(), "waits");
    let file = file.to_str().expect("utf-8 path");
    let run = spawn(&server.url(), &["job", "run", file]);
    let said = wait_for_line(&run, "the run to say scheduling is paused", |l| {
        l.contains("Scheduling is paused")
    });
    assert!(said.contains("workers resume -all"), "{said}");
    assert_code(
        &drover(&server, &["operator", "workers", "resume", "-all"]).await,
        0,
    );
    wait_for_line(&run, "the evaluation to finish once resumed", |l| {
        l.contains("finished with status \"complete\"")
    });
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn scheduler_configuration_round_trip() {
    let server = TestServer::start().await;
    let before = json(&drover(&server, &["operator", "scheduler", "get-config", "-json"]).await);
    assert_eq!(before["algorithm"], "Binpack");
    let set = drover(
        &server,
        &[
            "operator",
            "scheduler",
            "set-config",
            "-scheduler-algorithm=spread",
            "-pause-eval-broker",
            "true",
        ],
    )
    .await;
    assert_code(&set, 0);
    let after = json(&drover(&server, &["operator", "scheduler", "get-config", "-json"]).await);
    assert_eq!(after["algorithm"], "Spread");
    assert_eq!(after["pause_eval_broker"], true);
    let list = drover(&server, &["eval", "list"]).await;
    assert_code(&list, 0);
    assert!(
        stdout(&list).starts_with("eval broker paused"),
        "eval list says the broker is paused: {}",
        stdout(&list)
    );
    assert_eq!(
        after["preemption"], before["preemption"],
        "untouched settings stay"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn event_stream_prints_json_lines() {
    let server = TestServer::start().await;
    let nodes = join_nodes(&server, 1).await;
    let id = &nodes.ids[0];
    let stream = spawn(&server.url(), &["event", "stream", "-topic", "Node"]);
    // The stream starts from "now": keep offlining and onlining until an event shows up.
    // Each round leaves the node online, so the next round's offline is a real change.
    let line = eventually("a node health event on the stream", DEADLINE, || async {
        assert_code(&drover(&server, &["node", "offline", id]).await, 0);
        assert_code(&drover(&server, &["node", "online", id]).await, 0);
        stream
            .lines
            .recv_timeout(std::time::Duration::from_millis(500))
            .ok()
    })
    .await;
    let event: serde_json::Value = serde_json::from_str(&line).expect("each line is JSON");
    assert_eq!(event["topic"], "Node", "{line}");
    assert_eq!(event["key"], id.as_str(), "{line}");
    // The first line may have been a round's last event: make more, and read them.
    assert_code(&drover(&server, &["node", "offline", id]).await, 0);
    wait_for_line(&stream, "more node events", |l| {
        serde_json::from_str::<serde_json::Value>(l).is_ok_and(|e| e["topic"] == "Node")
    });
    server.stop().await;
}

/// `server members` lists the one server of a test cluster as the leader, alive.
#[tokio::test(flavor = "multi_thread")]
async fn server_members_lists_the_servers() {
    let server = TestServer::start().await;
    let table = drover(&server, &["server", "members"]).await;
    assert_code(&table, 0);
    let text = stdout(&table);
    assert!(text.starts_with("Name"), "{text}");
    assert!(text.contains("leader") && text.contains("alive"), "{text}");
    let members = json(&drover(&server, &["server", "members", "-json"]).await);
    assert_eq!(members.as_array().map(Vec::len), Some(1), "{members}");
    assert_eq!(members[0]["role"], "leader");
    assert_eq!(members[0]["version"], env!("CARGO_PKG_VERSION"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn purge_a_node_and_its_jobs_are_evaluated() {
    let server = TestServer::start().await;
    let nodes = join_nodes(&server, 1).await;
    let id = &nodes.ids[0];
    let dir = tempfile::tempdir().expect("temp dir");
    let file = cli_support::write_mock_job(dir.path(), "gone");
    let file = file.to_str().expect("utf-8 path");
    assert_code(&drover(&server, &["job", "run", "-detach", file]).await, 0);
    eventually("the job placed on the node", DEADLINE, || async {
        let node = json(&drover(&server, &["node", "status", id, "-json"]).await);
        (!node["allocations"].as_array()?.is_empty()).then_some(())
    })
    .await;

    let short: String = id.chars().filter(|c| *c != '-').take(8).collect();
    let purged = drover(&server, &["node", "purge", &short]).await;
    assert_code(&purged, 0);
    let said = stdout(&purged);
    assert!(said.contains(&format!("Node \"{short}\" purged")), "{said}");
    let evals: Vec<&str> = said
        .lines()
        .filter_map(|l| l.strip_prefix("Evaluation ID: "))
        .collect();
    assert_eq!(evals.len(), 1, "one eval, for the job: {said}");
    let eval = json(&drover(&server, &["eval", "status", evals[0], "-json"]).await);
    assert_eq!(eval["job_id"], "gone", "{eval}");
    let listed = json(&drover(&server, &["node", "status", "-json"]).await);
    assert_eq!(listed.as_array().map(Vec::len), Some(0), "{listed}");

    let again = drover(&server, &["node", "purge", id]).await;
    assert_code(&again, 1);
    server.stop().await;
}
