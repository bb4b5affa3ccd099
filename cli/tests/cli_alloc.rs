//! `drover alloc logs|restart|stop` from the binary against a real server and a real
//! agent (`drover agent`) running a real process that prints numbered lines.

use crate::cli_support;

use cli_support::{assert_code, drover, spawn, stdout, wait_for_line};
use drover_core::{AllocId, ClientStatus, DesiredStatus};
use drover_tests::{DEADLINE, TestServer, eventually};

/// A service job whose task prints `line N` to stdout and `err N` to stderr ten times a
/// second, for at most a minute (so a task a failed test leaves behind ends by itself).
fn printer_job(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("printer.nomad.hcl");
    let text = r#"job "printer" {
  datacenters = ["dc1"]
  group "print" {
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "i=0; while [ $i -lt 600 ]; do echo line $i; echo err $i >&2; i=$((i+1)); sleep 0.1; done"]
      }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
"#;
    std::fs::write(&path, text).expect("job file");
    path
}

/// The numbers of `line N` lines in `text`.
fn numbers(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("line ")?.parse().ok())
        .collect()
}

/// The job's allocations that should run and do, as (id, restarts of its task).
fn running(server: &TestServer) -> Vec<(AllocId, u32)> {
    let snap = server.handle().snapshot();
    snap.allocs_by_job(&drover_core::JobKey::default_ns("printer"))
        .filter(|a| {
            a.desired_status == DesiredStatus::Run && a.client_status == ClientStatus::Running
        })
        .map(|a| (a.id, a.task_states.get("server").map_or(0, |t| t.restarts)))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_follow_restart_and_stop_from_the_binary() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("agent");
    let _agent = spawn(
        &server.url(),
        &[
            "agent",
            "--raw-exec",
            "--servers",
            &server.url(),
            "--data-dir",
            data.to_str().expect("utf-8"),
        ],
    );
    let job = printer_job(dir.path());
    assert_code(
        &drover(
            &server,
            &["job", "run", "-detach", job.to_str().expect("utf-8")],
        )
        .await,
        0,
    );
    let alloc = eventually("the printer running", DEADLINE, || async {
        running(&server).first().map(|(id, _)| *id)
    })
    .await;
    let short = alloc.to_string()[..8].to_string();

    // The whole stdout from the start, once a few lines are there.
    let all = eventually("five lines of output", DEADLINE, || async {
        let out = drover(&server, &["alloc", "logs", &short]).await;
        let text = stdout(&out);
        (out.status.success() && numbers(&text).len() >= 5).then_some(text)
    })
    .await;
    assert_eq!(numbers(&all)[..5], [0, 1, 2, 3, 4], "{all}");

    // -n: the last lines only; -stderr: the other stream.
    let out = drover(&server, &["alloc", "logs", "-n", "2", &short, "server"]).await;
    assert_code(&out, 0);
    let tail = numbers(&stdout(&out));
    assert_eq!(tail.len(), 2, "{}", stdout(&out));
    assert_eq!(tail[1], tail[0] + 1);
    let out = drover(
        &server,
        &["alloc", "logs", "-stderr", "-tail", "-n", "1", &short],
    )
    .await;
    assert_code(&out, 0);
    assert!(stdout(&out).starts_with("err "), "{}", stdout(&out));
    let out = drover(&server, &["alloc", "logs", &short, "nosuchtask"]).await;
    assert_code(&out, 1);

    // -f keeps printing what the task writes after the command started.
    let follow = spawn(&server.url(), &["alloc", "logs", "-f", "-n", "1", &short]);
    let later = tail[1] + 10;
    wait_for_line(&follow, "a line written after -f started", |l| {
        numbers(l).first().is_some_and(|n| *n >= later)
    });
    drop(follow);

    // restart: the task starts over in place, in the same allocation.
    let out = drover(&server, &["alloc", "restart", &short]).await;
    assert_code(&out, 0);
    assert!(
        stdout(&out).contains("Restarting task \"server\""),
        "{}",
        stdout(&out)
    );
    eventually("the task restarted in place", DEADLINE, || async {
        running(&server).contains(&(alloc, 1)).then_some(())
    })
    .await;

    // stop: the allocation stops and the scheduler places a replacement.
    let out = drover(&server, &["alloc", "stop", &short]).await;
    assert_code(&out, 0);
    assert!(
        stdout(&out).contains("Monitoring evaluation"),
        "{}",
        stdout(&out)
    );
    eventually("a replacement running", DEADLINE, || async {
        let now = running(&server);
        (now.len() == 1 && now[0].0 != alloc).then_some(())
    })
    .await;

    assert_code(
        &drover(&server, &["job", "stop", "-detach", "printer"]).await,
        0,
    );
    eventually("the printer stopped", DEADLINE, || async {
        running(&server).is_empty().then_some(())
    })
    .await;
}
