//! End-to-end: the agent's durability and its half of disconnect / reconnect. An agent
//! process killed with SIGKILL and started again re-attaches to its running task instead of
//! starting a duplicate; an agent cut off from the servers keeps its task running, and on
//! reconnect heartbeats first and then reports, so the servers keep the original.

use crate::agent_support;

use agent_support::*;
use drover_core::mock;
use drover_core::types::{
    ClientStatus, DisconnectPolicy, Job, NodeId, NodeStatus, RestartMode, RestartPolicy,
    TaskRunState,
};
use drover_tests::{DEADLINE, TestServer};
use std::path::Path;
use std::time::Duration;

fn sleep_job(id: &str, marker: &str) -> Job {
    let mut job = mock::service_job(id, 1);
    let task = &mut job.groups[0].tasks[0];
    task.config.command = "sleep".into();
    task.config.args = vec![marker.into()];
    task.kill_timeout = Duration::from_secs(2);
    job.groups[0].restart = RestartPolicy {
        attempts: 2,
        interval: Duration::from_secs(60),
        delay: Duration::from_millis(100),
        mode: RestartMode::Fail,
    };
    job
}

/// The test-agent binary as its own process; returns it once it printed its node id.
async fn spawn_agent(dir: &Path, server: &str) -> (tokio::process::Child, NodeId) {
    spawn_test_agent(dir, server, None, &[]).await
}

async fn sigkill(child: &mut tokio::process::Child) {
    child.start_kill().expect("SIGKILL sent");
    child.wait().await.expect("agent reaped");
}

fn kinds(alloc: &drover_core::types::Allocation) -> Vec<String> {
    events(alloc, "server")
        .iter()
        .map(|e| e.kind().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_with_sigkill_re_attaches_instead_of_duplicating() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let addr = server.addr().to_string();
    let marker = sleep_marker();
    let _cleanup = KillOnDrop(marker.clone());

    let (mut first, node_id) = spawn_agent(dir.path(), &addr).await;
    register(&server, &sleep_job("durable", &marker)).await;
    let (alloc_id, pid) = wait_alloc(&server, "durable", "the task running", |a| {
        let a = a.first()?;
        (a.client_status == ClientStatus::Running).then_some(())?;
        Some((a.id, started_pid(a, "server")?))
    })
    .await;

    sigkill(&mut first).await;
    assert!(alive(pid), "the task outlives its agent");

    let (mut second, again) = spawn_agent(dir.path(), &addr).await;
    assert_eq!(again, node_id, "a restarted agent is the same node");
    let reattached = wait_alloc(&server, "durable", "the re-attach reported", |a| {
        let a = a.iter().find(|a| a.id == alloc_id)?;
        kinds(a)
            .iter()
            .any(|k| k == "Re-attached")
            .then(|| a.clone())
    })
    .await;
    assert_eq!(reattached.client_status, ClientStatus::Running);
    assert_eq!(reattached.task_states["server"].restarts, 0);
    assert_eq!(processes_with(&marker), vec![pid], "no duplicate process");
    assert_eq!(
        allocs(&server, "durable").len(),
        1,
        "no replacement allocation"
    );

    // Killed again, and this time the task dies too while no agent watches it: the next
    // agent notices, says the exit code is unknowable, and restarts it per policy.
    sigkill(&mut second).await;
    kill_leftovers(&marker);
    wait_until("the task gone", DEADLINE, || !alive(pid)).await;
    let (mut third, _) = spawn_agent(dir.path(), &addr).await;
    let (restarted, new_pid) = wait_alloc(&server, "durable", "the task restarted", |a| {
        let a = a.iter().find(|a| a.id == alloc_id)?;
        let new_pid = started_pid(a, "server").filter(|p| *p != pid)?;
        (a.task_states["server"].state == TaskRunState::Running).then(|| (a.clone(), new_pid))
    })
    .await;
    let unknown_exit = events(&restarted, "server")
        .iter()
        .any(|e| e.kind() == "Terminated" && e.message().contains("exit code unknown"));
    assert!(unknown_exit, "{:?}", kinds(&restarted));
    assert_eq!(processes_with(&marker), vec![new_pid]);

    deregister(&server, "durable").await;
    wait_until("the restarted task stopped", DEADLINE, || !alive(new_pid)).await;
    sigkill(&mut third).await;
    kill_leftovers(&marker);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_reconnect_the_agent_heartbeats_then_reports_and_the_original_survives() {
    let server = TestServer::start().await;
    let proxy = Proxy::start(server.addr()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = start_agent(dir.path(), vec![proxy.addr()]).await;
    let node_id = agent.node_id();
    let marker = sleep_marker();
    let _cleanup = KillOnDrop(marker.clone());
    let mut job = sleep_job("tolerant", &marker);
    job.groups[0].disconnect = Some(DisconnectPolicy {
        lost_after: Some(Duration::from_secs(120)),
        // With replacements on, the servers may place one on this node as soon as it is
        // back, before the original's update lands; the reconnect eval the update triggers
        // must then stop the replacement and keep the original.
        replace: true,
        ..DisconnectPolicy::default()
    });
    register(&server, &job).await;
    let (alloc_id, pid) = wait_alloc(&server, "tolerant", "the task running", |a| {
        let a = a.first()?;
        (a.client_status == ClientStatus::Running).then_some(())?;
        Some((a.id, started_pid(a, "server")?))
    })
    .await;

    proxy.set_enabled(false);
    let node_status = |want: NodeStatus| {
        let snap = server.handle().snapshot();
        snap.node(&node_id).is_some_and(|n| n.status == want)
    };
    wait_until("the node disconnected", DEADLINE, || {
        node_status(NodeStatus::Disconnected)
    })
    .await;
    wait_alloc(&server, "tolerant", "the allocation unknown", |a| {
        let a = a.iter().find(|a| a.id == alloc_id)?;
        (a.client_status == ClientStatus::Unknown).then_some(())
    })
    .await;
    assert!(
        alive(pid),
        "the task keeps running while the servers are unreachable"
    );
    assert!(!agent.is_ready());

    proxy.set_enabled(true);
    let back = wait_alloc(&server, "tolerant", "the original running again", |a| {
        let a = a.iter().find(|a| a.id == alloc_id)?;
        (a.client_status == ClientStatus::Running).then(|| a.clone())
    })
    .await;
    assert!(
        node_status(NodeStatus::Ready),
        "the node heartbeated before its update landed"
    );
    assert_eq!(back.task_states["server"].state, TaskRunState::Running);
    assert_eq!(
        back.task_states["server"].restarts, 0,
        "the task was never restarted"
    );
    assert!(alive(pid));
    // A replacement placed while the node was away may start briefly; the reconnect eval
    // stops it, and the original alone remains.
    wait_until("no replacement survives", DEADLINE, || {
        allocs(&server, "tolerant")
            .iter()
            .filter(|a| a.id != alloc_id)
            .all(|a| a.is_terminal())
    })
    .await;
    wait_until("the original runs, once", DEADLINE, || {
        processes_with(&marker) == vec![pid]
    })
    .await;
    assert!(
        allocs(&server, "tolerant")
            .iter()
            .any(|a| a.id == alloc_id && !a.is_terminal()),
        "the original is the allocation kept"
    );

    deregister(&server, "tolerant").await;
    wait_until("the task stopped", DEADLINE, || !alive(pid)).await;
    agent.shutdown_and_stop_tasks().await;
    kill_leftovers(&marker);
    server.stop().await;
}
