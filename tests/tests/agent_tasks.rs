//! End-to-end: a real server on loopback and a real agent running real processes. Jobs go
//! in through the gRPC JobService; what the tests check is what the servers record and
//! what the process table shows.

use crate::agent_support;

use agent_support::*;
use drover_core::mock;
use drover_core::types::{
    ClientStatus, DelayFunction, Job, NodeHealth, ReschedulePolicy, RestartMode, RestartPolicy,
    TaskRunState,
};
use drover_tests::{DEADLINE, TestServer};
use std::time::Duration;

/// A service job whose one task runs `command args`.
fn job(id: &str, command: &str, args: &[&str]) -> Job {
    let mut job = mock::service_job(id, 1);
    let task = &mut job.groups[0].tasks[0];
    task.config.command = command.into();
    task.config.args = args.iter().map(|a| a.to_string()).collect();
    task.kill_timeout = Duration::from_secs(2);
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleep_job_runs_and_stopping_it_kills_the_process() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    // The first address refuses connections: the agent fails over to the second.
    let agent = start_agent(
        dir.path(),
        vec!["127.0.0.1:1".into(), server.addr().to_string()],
    )
    .await;
    let marker = sleep_marker();
    let _cleanup = KillOnDrop(marker.clone());
    let mut sleepy = job("sleepy", "sleep", &[&marker]);
    sleepy.groups[0].tasks[0].snapshot = Some("artifact-v1".into());
    register(&server, &sleepy).await;

    let (alloc_id, pid) = wait_alloc(&server, "sleepy", "the sleep task running", |a| {
        let a = a.first()?;
        (a.client_status == ClientStatus::Running).then_some(())?;
        Some((a.id, started_pid(a, "server")?))
    })
    .await;
    assert!(alive(pid), "pid {pid} runs");
    assert_eq!(processes_with(&marker), vec![pid], "exactly one process");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
    let environ = String::from_utf8_lossy(&environ);
    for var in [
        format!("NOMAD_ALLOC_ID={alloc_id}"),
        format!("DROVER_ALLOC_ID={alloc_id}"),
        "NOMAD_TASK_NAME=server".into(),
        "NOMAD_JOB_NAME=sleepy".into(),
        "NOMAD_GROUP_NAME=web".into(),
    ] {
        assert!(environ.contains(&var), "missing {var}");
    }
    let alloc_dir = dir.path().join("allocs").join(alloc_id.to_string());
    assert!(alloc_dir.join("alloc/logs/server.stdout").exists());
    assert!(alloc_dir.join("server/local").is_dir());

    let node_id = agent.node_id();
    wait_until("the node's last snapshot recorded", DEADLINE, || {
        let snap = server.handle().snapshot();
        snap.node(&node_id)
            .is_some_and(|n| n.last_snapshot.as_deref() == Some("artifact-v1"))
    })
    .await;

    deregister(&server, "sleepy").await;
    let stopped = wait_alloc(&server, "sleepy", "the allocation complete", |a| {
        let a = a.first()?;
        (a.client_status == ClientStatus::Complete).then(|| a.clone())
    })
    .await;
    assert!(!alive(pid), "pid {pid} was killed");
    assert!(processes_with(&marker).is_empty());
    let kinds: Vec<_> = events(&stopped, "server")
        .iter()
        .map(|e| e.kind())
        .collect();
    assert!(
        kinds.contains(&"Killing") && kinds.contains(&"Killed"),
        "{kinds:?}"
    );

    agent.shutdown_and_stop_tasks().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_task_restarts_per_policy_then_fails_and_is_rescheduled() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = start_agent(dir.path(), vec![server.addr().to_string()]).await;
    let mut failing = job("flaky-task", "sh", &["-c", "exit 1"]);
    let group = &mut failing.groups[0];
    group.restart = RestartPolicy {
        attempts: 2,
        interval: Duration::from_secs(60),
        delay: Duration::from_millis(100),
        mode: RestartMode::Fail,
    };
    group.reschedule = ReschedulePolicy {
        attempts: 1,
        interval: Duration::from_secs(3600),
        delay: Duration::from_millis(100),
        delay_function: DelayFunction::Constant,
        max_delay: Duration::from_secs(1),
        unlimited: false,
    };
    register(&server, &failing).await;

    let first = wait_alloc(&server, "flaky-task", "the first allocation failed", |a| {
        let a = a.first()?;
        (a.client_status == ClientStatus::Failed).then(|| a.clone())
    })
    .await;
    let task = &first.task_states["server"];
    assert_eq!(task.restarts, 2, "restarted per policy");
    assert!(task.failed);
    assert_eq!(task.state, TaskRunState::Dead);
    let evs = events(&first, "server");
    assert!(evs.iter().any(|e| e.kind() == "Not Restarting"), "{evs:?}");
    assert!(
        evs.iter()
            .any(|e| e.kind() == "Terminated" && e.exit_code() == Some(1)),
        "{evs:?}"
    );
    assert!(
        evs.iter().all(|e| !e.infra_failure()),
        "a task's own exit is not the node's fault"
    );

    let replacement = wait_alloc(&server, "flaky-task", "a replacement", |a| {
        a.iter()
            .find(|r| r.links.get().previous_allocation == Some(first.id))
            .map(|r| r.id)
    })
    .await;
    assert_ne!(replacement, first.id);

    deregister(&server, "flaky-task").await;
    agent.shutdown_and_stop_tasks().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_executable_is_a_clear_failure_of_the_job_and_the_agent_keeps_running() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = start_agent(dir.path(), vec![server.addr().to_string()]).await;
    let missing = "/nonexistent/drover-no-such-binary";
    let mut broken = job("broken", missing, &[]);
    broken.groups[0].reschedule = ReschedulePolicy::disabled();
    register(&server, &broken).await;

    let failed = wait_alloc(&server, "broken", "the allocation failed", |a| {
        let a = a.first()?;
        (a.client_status == ClientStatus::Failed).then(|| a.clone())
    })
    .await;
    let evs = events(&failed, "server");
    let failure = evs
        .iter()
        .find(|e| e.kind() == "Driver Failure")
        .unwrap_or_else(|| panic!("no driver failure in {evs:?}"));
    assert!(failure.message().contains(missing), "{}", failure.message());
    // Issue 14, item 4: the job's own mistake, never counted against the node.
    assert!(!failure.infra_failure());

    // The agent is unaffected: the next job runs.
    let marker = sleep_marker();
    let _cleanup = KillOnDrop(marker.clone());
    register(&server, &job("after", "sleep", &[&marker])).await;
    wait_alloc(&server, "after", "the next job running", |a| {
        (a.first()?.client_status == ClientStatus::Running).then_some(())
    })
    .await;
    deregister(&server, "after").await;
    agent.shutdown_and_stop_tasks().await;
    kill_leftovers(&marker);
    server.stop().await;
}

/// Issue 14, item 4: four jobs with a command that does not exist fail, and the only node
/// stays healthy even with a flaky threshold of one (this test asserted the opposite
/// before: a job's mistake made the node flaky).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_own_failures_never_make_the_node_flaky() {
    let server = TestServer::start_with(|c| c.health.flaky_threshold = 1).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = start_agent(dir.path(), vec![server.addr().to_string()]).await;
    for i in 0..4 {
        let mut broken = job(&format!("broken-{i}"), "/no/such/binary", &[]);
        broken.groups[0].reschedule = ReschedulePolicy::disabled();
        register(&server, &broken).await;
        wait_alloc(
            &server,
            &format!("broken-{i}"),
            "the allocation failed",
            |a| (a.first()?.client_status == ClientStatus::Failed).then_some(()),
        )
        .await;
    }
    let node = server
        .handle()
        .snapshot()
        .node(&agent.node_id())
        .cloned()
        .expect("the node");
    assert_eq!(node.health, NodeHealth::Healthy, "{:?}", node.events);
    agent.shutdown_and_stop_tasks().await;
    server.stop().await;
}

/// The Nomad `raw_exec` example runs unchanged: parsed from the file, placed, run by the
/// agent with `${NOMAD_ALLOC_ID}` and `${NOMAD_TASK_DIR}` in its args replaced by the
/// allocation's own values, and killed when the job stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nomad_raw_exec_example_runs_unchanged() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = start_agent(dir.path(), vec![server.addr().to_string()]).await;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/nomad-raw-exec.nomad.hcl");
    let src = std::fs::read_to_string(&path).expect("the Nomad example reads");
    let job = drover_core::jobspec::parse_source(&src, &path.display().to_string())
        .expect("the Nomad example parses");
    register(&server, &job).await;

    let (alloc_id, pid) = wait_alloc(&server, "hello", "the example running", |a| {
        let a = a.first()?;
        (a.client_status == ClientStatus::Running).then_some(())?;
        Some((a.id, started_pid(a, "hello")?))
    })
    .await;
    let _cleanup = KillOnDrop(alloc_id.to_string());
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    let cmdline = String::from_utf8_lossy(&cmdline);
    let task_dir = dir
        .path()
        .join("allocs")
        .join(alloc_id.to_string())
        .join("hello/local");
    assert!(
        cmdline.contains(&format!("hello from {alloc_id} in {}", task_dir.display())),
        "args interpolated: {cmdline}"
    );

    deregister(&server, "hello").await;
    wait_until("the example's process killed", DEADLINE, || !alive(pid)).await;
    agent.shutdown_and_stop_tasks().await;
    server.stop().await;
}
