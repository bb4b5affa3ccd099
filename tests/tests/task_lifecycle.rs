//! End-to-end, issue 32's task blocks on a real agent: a prestart hook runs (to completion)
//! before the main task, which runs as the task's own `user`; a poststop hook runs after
//! it; a failing prestart keeps the main task from ever starting and fails the
//! allocation with the reason.

use crate::agent_support;

use agent_support::*;
use drover_core::mock;
use drover_core::types::{
    ClientStatus, Job, Lifecycle, LifecycleHook, ReschedulePolicy, RestartMode, RestartPolicy, Task,
};
use drover_tests::TestServer;
use std::time::Duration;

fn sh(name: &str, script: &str, hook: Option<LifecycleHook>) -> Task {
    let mut task = Task::raw_exec(name, "sh");
    task.config.args = vec!["-c".into(), script.into()];
    task.lifecycle = hook.map(|hook| Lifecycle {
        hook,
        sidecar: false,
    });
    task
}

fn job(id: &str, tasks: Vec<Task>) -> Job {
    let mut job = mock::batch_job(id, 1);
    let group = &mut job.groups[0];
    group.tasks = tasks;
    group.restart = RestartPolicy {
        attempts: 0,
        interval: Duration::from_secs(60),
        delay: Duration::from_millis(100),
        mode: RestartMode::Fail,
    };
    group.reschedule = ReschedulePolicy::disabled();
    job
}

fn stdout(dir: &std::path::Path, alloc: &drover_core::types::Allocation, task: &str) -> String {
    let path = dir
        .join("allocs")
        .join(alloc.id.to_string())
        .join(format!("alloc/logs/{task}.stdout"));
    std::fs::read_to_string(&path).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_run_around_the_main_task_and_a_failed_prestart_stops_it() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = start_agent(dir.path(), vec![server.addr().to_string()]).await;

    // The prestart hook sleeps first: had the main task not waited, it would find nothing.
    let mut main = sh(
        "main",
        "cat $NOMAD_ALLOC_DIR/ready && echo uid=$(id -u)",
        None,
    );
    main.user = Some("nobody".into());
    let ordered = job(
        "hooks",
        vec![
            main,
            sh(
                "init",
                "sleep 0.3; echo prepared > $NOMAD_ALLOC_DIR/ready; chmod 644 $NOMAD_ALLOC_DIR/ready",
                Some(LifecycleHook::Prestart),
            ),
            sh("flush", "echo after-main", Some(LifecycleHook::Poststop)),
        ],
    );
    register(&server, &ordered).await;
    let alloc = wait_alloc(&server, "hooks", "the hooks job to finish", |a| {
        let a = a.first()?;
        a.client_status.is_terminal().then(|| a.clone())
    })
    .await;
    assert_eq!(alloc.client_status, ClientStatus::Complete, "{alloc:?}");
    let nobody = drover_agent::users::lookup("nobody").expect("nobody");
    assert_eq!(
        stdout(dir.path(), &alloc, "main"),
        format!("prepared\nuid={}\n", nobody.uid)
    );
    assert_eq!(stdout(dir.path(), &alloc, "flush"), "after-main\n");
    let started = |task: &str| alloc.task_states.get(task).and_then(|s| s.started_at);
    assert!(started("init") <= started("main"), "prestart first");
    assert!(started("main") <= started("flush"), "poststop last");

    let failing = job(
        "bad-init",
        vec![
            sh("main", "echo main-ran", None),
            sh("init", "exit 3", Some(LifecycleHook::Prestart)),
        ],
    );
    register(&server, &failing).await;
    let alloc = wait_alloc(&server, "bad-init", "the allocation to fail", |a| {
        let a = a.first()?;
        a.client_status.is_terminal().then(|| a.clone())
    })
    .await;
    assert_eq!(alloc.client_status, ClientStatus::Failed, "{alloc:?}");
    let main = alloc.task_states.get("main").expect("main's state");
    assert!(main.started_at.is_none(), "main never started: {main:?}");
    assert!(
        events(&alloc, "init")
            .iter()
            .any(|e| e.message().contains("exited with code 3")),
        "{:?}",
        events(&alloc, "init")
    );
    assert_eq!(stdout(dir.path(), &alloc, "main"), "");
    agent.shutdown_and_stop_tasks().await;
    server.stop().await;
}
