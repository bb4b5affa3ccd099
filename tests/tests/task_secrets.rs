//! End-to-end, issue 28 item 2: a task cannot reach the agent's secrets. A real agent
//! process, started the way an operator starts one (join token in `DROVER_TOKEN`), runs a
//! real task that tries what an attacker with a job-submit token would try: print the
//! agent's environment, read the node secret by a relative and an absolute path, list other
//! allocations, read the agent's `/proc` environ. Then the modes of the data dir are
//! checked as the issue states them.

use crate::agent_support;

use agent_support::*;
use drover_core::mock;
use drover_core::types::ClientStatus;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const JOIN_TOKEN: &str = "join-token-4a1f9c0e-never-for-tasks";
const AGENT_MARKER: &str = "agent-only-value-7d2b";

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cannot_read_the_join_token_the_agents_env_or_the_node_secret() {
    let server = drover_tests::TestServer::start().await;
    let root = tempfile::tempdir().expect("temp dir");
    // A temp dir is 0700; the data dir's parent must let `nobody` pass, as /var/lib does.
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod temp dir");
    let data = root.path().join("agent");
    let config = "client {\n  default_user = \"nobody\"\n}\nraw_exec {\n  enabled = true\n}\n";
    let (mut agent, _node) = spawn_test_agent(
        &data,
        &server.addr().to_string(),
        Some(config),
        &[
            ("DROVER_TOKEN", JOIN_TOKEN),
            ("AGENT_ONLY_MARKER", AGENT_MARKER),
        ],
    )
    .await;
    let agent_pid = agent.id().expect("agent pid");
    let data_abs = data.display();
    let script = format!(
        "echo \"token=[${{DROVER_TOKEN:-}}] marker=[${{AGENT_ONLY_MARKER:-}}] alloc=[$NOMAD_ALLOC_ID]\"
         env
         cat ../../../state/node.json && echo NODE-SECRET-READ-RELATIVE
         cat {data_abs}/state/node.json && echo NODE-SECRET-READ-ABSOLUTE
         ls {data_abs}/state && echo STATE-LISTED
         ls {data_abs}/allocs && echo ALLOCS-LISTED
         cat /proc/{agent_pid}/environ && echo AGENT-ENVIRON-READ
         echo done"
    );
    let mut job = mock::batch_job("secrets", 1);
    let task = &mut job.groups[0].tasks[0];
    task.config.command = "sh".into();
    task.config.args = vec!["-c".into(), script];
    register(&server, &job).await;

    let alloc = wait_alloc(&server, "secrets", "the probing task to finish", |a| {
        let a = a.first()?;
        a.client_status.is_terminal().then(|| a.clone())
    })
    .await;
    assert_eq!(alloc.client_status, ClientStatus::Complete, "{alloc:?}");
    let task_name = &job.groups[0].tasks[0].name;
    let alloc_dir = data.join("allocs").join(alloc.id.to_string());
    let logs = alloc_dir.join("alloc/logs");
    let stdout = std::fs::read_to_string(logs.join(format!("{task_name}.stdout"))).expect("log");
    let stderr = std::fs::read_to_string(logs.join(format!("{task_name}.stderr"))).expect("log");

    // The task ran, saw its own variables, and printed to the end.
    assert!(
        stdout.contains(&format!("alloc=[{}]", alloc.id)),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("done"), "{stdout}");
    assert!(stdout.contains("token=[] marker=[]"), "{stdout}");
    for secret in [JOIN_TOKEN, AGENT_MARKER] {
        assert!(!stdout.contains(secret), "task saw {secret}:\n{stdout}");
    }
    for leak in [
        "NODE-SECRET-READ-RELATIVE",
        "NODE-SECRET-READ-ABSOLUTE",
        "STATE-LISTED",
        "ALLOCS-LISTED",
        "AGENT-ENVIRON-READ",
        "secret_id",
    ] {
        assert!(!stdout.contains(leak), "{leak}:\n{stdout}");
    }
    assert!(stderr.contains("Permission denied"), "{stderr}");
    // Only the allow-list: nothing of the test's (and so the agent's) own environment.
    for line in stdout
        .lines()
        .filter(|l| l.contains('=') && !l.contains('['))
    {
        let key = line.split('=').next().unwrap_or_default();
        let allowed = key.starts_with("NOMAD_")
            || key.starts_with("DROVER_")
            || ["PATH", "HOME", "PWD", "SHLVL", "_"].contains(&key);
        assert!(allowed, "task inherited {line:?}");
    }

    let nobody = drover_agent::users::lookup("nobody").expect("nobody exists");
    let cases = [
        (data.clone(), 0o711),
        (data.join("state"), 0o700),
        (data.join("state/node.json"), 0o600),
        (data.join("state/allocs"), 0o700),
        (data.join("allocs"), 0o711),
        (alloc_dir.clone(), 0o751),
        (alloc_dir.join("alloc"), 0o750),
        (logs.clone(), 0o750),
        (logs.join(format!("{task_name}.stdout")), 0o640),
        (alloc_dir.join(task_name), 0o750),
    ];
    for (path, want) in cases {
        assert_eq!(mode(&path), want, "{}", path.display());
    }
    let task_dir = std::fs::metadata(alloc_dir.join(task_name)).expect("task dir");
    assert_eq!(task_dir.uid(), nobody.uid, "the task's dir is its user's");
    assert_eq!(std::fs::metadata(&logs).expect("logs").uid(), 0);

    agent.start_kill().expect("agent killed");
    let _ = agent.wait().await;
    server.stop().await;
}
