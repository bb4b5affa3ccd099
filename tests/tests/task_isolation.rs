//! End-to-end, issue 32: a real agent runs real tasks in cgroups, and `exec` tasks
//! isolated. A task that allocates three times its `memory` is OOM-killed and reported so
//! while the node stays healthy (for `exec` and for `raw_exec`, which gets the same
//! limits); an `exec` task sees only its own processes, runs as `nobody`, and finds no
//! `/root` and no agent state; a fork bomb runs into its `pids` limit and the agent lives.

use crate::agent_support;

use agent_support::*;
use drover_core::mock;
use drover_core::types::{
    ClientStatus, Job, NodeHealth, ReschedulePolicy, RestartMode, RestartPolicy,
};
use drover_tests::{DEADLINE, TestServer};
use std::time::Duration;

/// A batch job whose one task runs `sh -c script` on `driver`, never restarted.
fn job(id: &str, driver: &str, script: &str, memory_mb: u64) -> Job {
    let mut job = mock::batch_job(id, 1);
    let group = &mut job.groups[0];
    group.restart = RestartPolicy {
        attempts: 0,
        interval: Duration::from_secs(60),
        delay: Duration::from_millis(100),
        mode: RestartMode::Fail,
    };
    group.reschedule = ReschedulePolicy::disabled();
    let task = &mut group.tasks[0];
    task.driver = driver.into();
    task.config.command = "sh".into();
    task.config.args = vec!["-c".into(), script.into()];
    task.resources.memory_mb = memory_mb;
    task.kill_timeout = Duration::from_secs(2);
    job
}

fn log(dir: &std::path::Path, alloc: &drover_core::types::Allocation, stream: &str) -> String {
    let path = dir.join("allocs").join(alloc.id.to_string()).join(format!(
        "alloc/logs/{}.{stream}",
        alloc.task_states.keys().next().unwrap()
    ));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_over_its_memory_is_oom_killed_and_the_node_stays_healthy() {
    let server = TestServer::start_with(|c| c.health.flaky_threshold = 1).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = start_agent(dir.path(), vec![server.addr().to_string()]).await;
    // 96 MB through a 32 MB task: `tail` keeps a line-less stream whole in memory.
    let hog = "echo hogging; head -c 100663296 /dev/zero | tail";
    for driver in ["exec", "raw_exec"] {
        let id = format!("hog-{driver}").replace('_', "-");
        register(&server, &job(&id, driver, hog, 32)).await;
        let alloc = wait_alloc(&server, &id, "the hog to end", |a| {
            let a = a.first()?;
            a.client_status.is_terminal().then(|| a.clone())
        })
        .await;
        assert_eq!(
            alloc.client_status,
            ClientStatus::Failed,
            "{driver}: {alloc:?}"
        );
        let task = alloc.task_states.keys().next().expect("a task").to_string();
        let oom = events(&alloc, &task)
            .iter()
            .find(|e| e.kind() == "OOM Killed")
            .unwrap_or_else(|| panic!("{driver}: no OOM event in {:?}", events(&alloc, &task)));
        assert!(oom.message().contains("32 MB"), "{}", oom.message());
        assert!(!oom.infra_failure());
        assert!(
            log(dir.path(), &alloc, "stdout").contains("hogging"),
            "{driver}"
        );
    }
    let node = server
        .handle()
        .snapshot()
        .node(&agent.node_id())
        .cloned()
        .expect("the node");
    assert_eq!(node.health, NodeHealth::Healthy, "{:?}", node.events);
    assert!(agent.is_ready());
    agent.shutdown_and_stop_tasks().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_task_sees_only_its_own_root_processes_and_user() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = start_agent(dir.path(), vec![server.addr().to_string()]).await;
    let data = dir.path().display();
    let script = format!(
        "echo uid=$(id -u) host=$(hostname) task_dir=$NOMAD_TASK_DIR alloc_dir=$NOMAD_ALLOC_DIR
         echo procs=$(ls /proc | grep -c '^[0-9]')
         ps -e -o pid= -o comm= | sed 's/^ */ps: /'
         ls /root && echo ROOT-VISIBLE
         ls {data}/state && echo STATE-VISIBLE
         touch /usr/written && echo USR-WRITABLE
         echo hello > $NOMAD_ALLOC_DIR/shared && echo alloc-writable
         echo done"
    );
    register(&server, &job("isolated", "exec", &script, 64)).await;
    let alloc = wait_alloc(&server, "isolated", "the exec task to end", |a| {
        let a = a.first()?;
        a.client_status.is_terminal().then(|| a.clone())
    })
    .await;
    let stdout = log(dir.path(), &alloc, "stdout");
    let stderr = log(dir.path(), &alloc, "stderr");
    assert_eq!(
        alloc.client_status,
        ClientStatus::Complete,
        "{stdout}\n{stderr}"
    );
    let nobody = drover_agent::users::lookup("nobody").expect("nobody");
    let task = alloc.task_states.keys().next().expect("a task").to_string();
    assert!(
        stdout.contains(&format!(
            "uid={} host={task} task_dir=/local alloc_dir=/alloc",
            nobody.uid
        )),
        "{stdout}"
    );
    // Its init, the shell, and ps (plus the subshells of this script): nothing else.
    let ps: Vec<&str> = stdout.lines().filter(|l| l.starts_with("ps: ")).collect();
    assert!(!ps.is_empty() && ps.len() <= 6, "{ps:?}");
    assert!(
        ps[0].starts_with("ps: 1 "),
        "the namespace's init is pid 1: {ps:?}"
    );
    for line in &ps {
        let pid: u32 = line[4..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(pid < 20, "a process from outside the namespace: {line}");
    }
    for leak in ["ROOT-VISIBLE", "STATE-VISIBLE", "USR-WRITABLE"] {
        assert!(!stdout.contains(leak), "{leak}:\n{stdout}");
    }
    assert!(
        stdout.contains("alloc-writable") && stdout.contains("done"),
        "{stdout}\n{stderr}"
    );
    let shared = dir
        .path()
        .join("allocs")
        .join(alloc.id.to_string())
        .join("alloc/shared");
    assert_eq!(
        std::fs::read_to_string(shared).expect("written through /alloc"),
        "hello\n"
    );
    agent.shutdown_and_stop_tasks().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_runs_into_its_pids_limit_and_the_agent_lives() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = agent_config(dir.path(), vec![server.addr().to_string()]);
    config.task_pids_limit = 32;
    let agent = start_agent_with(config).await;
    let marker = sleep_marker();
    let _cleanup = KillOnDrop(marker.clone());
    // The loop runs in a subshell that dies when fork fails; the task itself lives on.
    let bomb = format!(
        "(i=0; while [ $i -lt 100 ]; do sleep {marker} & i=$((i+1)); done)
         echo bomb-stopped >&2
         exec sleep {marker}"
    );
    let mut bomb_job = job("bomb", "raw_exec", &bomb, 64);
    bomb_job.job_type = drover_core::types::JobType::Service;
    register(&server, &bomb_job).await;
    let alloc = wait_alloc(&server, "bomb", "the bomb running", |a| {
        let a = a.first()?;
        (a.client_status == ClientStatus::Running).then(|| a.clone())
    })
    .await;
    wait_until("the bomb to hit its limit", DEADLINE, || {
        std::fs::read_to_string(
            dir.path()
                .join("allocs")
                .join(alloc.id.to_string())
                .join(format!(
                    "alloc/logs/{}.stderr",
                    alloc.task_states.keys().next().unwrap()
                )),
        )
        .is_ok_and(|e| e.contains("bomb-stopped"))
    })
    .await;
    let held = processes_with(&marker).len();
    assert!(
        (1..=32).contains(&held),
        "{held} sleeps under a limit of 32"
    );
    assert!(agent.is_ready());
    deregister(&server, "bomb").await;
    wait_until("every process of the bomb killed", DEADLINE, || {
        processes_with(&marker).is_empty()
    })
    .await;
    agent.shutdown_and_stop_tasks().await;
    server.stop().await;
}

/// Issue 32, usage: the agent samples a running task's cgroup and reports what it uses
/// with the allocation's updates (what `alloc status` shows against what was asked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_task_reports_its_cpu_and_memory_use() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = start_agent(dir.path(), vec![server.addr().to_string()]).await;
    let marker = sleep_marker();
    let _cleanup = KillOnDrop(marker.clone());
    // 30 MB held by `tail` (its input never ends) and one core kept busy.
    let busy = format!("(head -c 31457280 /dev/zero; sleep {marker}) | tail & while :; do :; done");
    let mut busy_job = job("busy", "raw_exec", &busy, 128);
    busy_job.job_type = drover_core::types::JobType::Service;
    register(&server, &busy_job).await;
    let usage = wait_alloc(&server, "busy", "usage to be reported", |a| {
        let usage = a.first()?.task_states.values().find_map(|s| s.usage)?;
        (usage.cpu_mhz > 0 && usage.memory_mb >= 25).then_some(usage)
    })
    .await;
    assert!(usage.memory_mb < 128, "{usage:?}");
    deregister(&server, "busy").await;
    let stopped = wait_alloc(&server, "busy", "the job stopped", |a| {
        let a = a.first()?;
        a.client_status.is_terminal().then(|| a.clone())
    })
    .await;
    assert!(
        stopped.task_states.values().all(|s| s.usage.is_none()),
        "no usage once stopped"
    );
    agent.shutdown_and_stop_tasks().await;
    server.stop().await;
}

/// A long-running `exec` task starts at once (the agent does not wait for the shim's end)
/// and stopping it reaches the task through its init: it ends by the kill signal and
/// nothing of it is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_running_exec_task_starts_at_once_and_stops_cleanly() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = start_agent(dir.path(), vec![server.addr().to_string()]).await;
    let marker = sleep_marker();
    let _cleanup = KillOnDrop(marker.clone());
    let mut sleeper = job("sleeper", "exec", &format!("exec sleep {marker}"), 32);
    sleeper.job_type = drover_core::types::JobType::Service;
    register(&server, &sleeper).await;
    // Well inside the shim's 20 s answer timeout: a start that waited for it would fail.
    drover_tests::eventually("the exec task running", Duration::from_secs(10), || {
        let running = allocs(&server, "sleeper")
            .first()
            .is_some_and(|a| a.client_status == ClientStatus::Running);
        async move { running.then_some(()) }
    })
    .await;
    assert_eq!(
        processes_with(&marker).len(),
        1,
        "one sleep, in its namespace"
    );
    deregister(&server, "sleeper").await;
    let stopped = wait_alloc(&server, "sleeper", "the task stopped", |a| {
        let a = a.first()?;
        a.client_status.is_terminal().then(|| a.clone())
    })
    .await;
    assert_eq!(stopped.client_status, ClientStatus::Complete, "{stopped:?}");
    let task = stopped
        .task_states
        .keys()
        .next()
        .expect("a task")
        .to_string();
    assert!(
        events(&stopped, &task)
            .iter()
            .any(|e| e.message().contains("SIGTERM")),
        "{:?}",
        events(&stopped, &task)
    );
    assert!(processes_with(&marker).is_empty());
    agent.shutdown_and_stop_tasks().await;
    server.stop().await;
}
