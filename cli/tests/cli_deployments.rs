//! Deployments end to end, from the binary with a real agent: a broken version fails its
//! deployment on its first unhealthy allocation and is reverted to the last stable
//! version; a canary waits beside the old version until `deployment promote`; the
//! progress deadline fails a deployment that makes no progress.

use crate::cli_support;

use cli_support::{Running, assert_code, drover, json, stdout};
use drover_core::{ClientStatus, DesiredStatus, JobKey};
use drover_tests::{DEADLINE, TestServer, eventually};
use std::path::Path;

/// A `drover agent` running `raw_exec` tasks, once its node takes work.
async fn agent(server: &TestServer, data: &Path) -> Running {
    let agent = cli_support::agent_with_config(server, data, "raw_exec {\n  enabled = true\n}\n");
    eventually("the agent's node to take work", DEADLINE, || async {
        let snap = server.handle().snapshot();
        snap.nodes().any(|n| n.is_schedulable()).then_some(())
    })
    .await;
    agent
}

/// A job of `count` raw_exec tasks running `command`, rolled out under `update`.
fn job(count: u32, update: &str, command: &str, args: &str) -> String {
    format!(
        r#"job "web" {{
  datacenters = ["dc1"]
  update {{
    health_check      = "task_states"
    min_healthy_time  = "1s"
    healthy_deadline  = "20s"
    progress_deadline = "1m"
{update}
  }}
  group "web" {{
    count = {count}
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    reschedule {{
      delay          = "5s"
      delay_function = "constant"
      unlimited      = true
    }}
    task "server" {{
      driver = "raw_exec"
      config {{
        command = "{command}"
        args    = [{args}]
      }}
      resources {{
        cpu    = 50
        memory = 32
      }}
    }}
  }}
}}
"#
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("job file");
    path.to_str().expect("utf-8").to_owned()
}

/// Running allocations of the job that should run, per job version.
fn running_by_version(server: &TestServer) -> std::collections::BTreeMap<u64, usize> {
    let snap = server.handle().snapshot();
    let mut out = std::collections::BTreeMap::new();
    for a in snap.allocs_by_job(&JobKey::default_ns("web")) {
        if a.desired_status == DesiredStatus::Run && a.client_status == ClientStatus::Running {
            *out.entry(a.job_version).or_default() += 1;
        }
    }
    out
}

/// `deployment list -json`, newest first.
async fn deployments(server: &TestServer) -> Vec<serde_json::Value> {
    let out = drover(server, &["deployment", "list", "-json"]).await;
    assert_code(&out, 0);
    json(&out).as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_version_fails_its_deployment_and_the_job_reverts_to_the_stable_one() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = agent(&server, &dir.path().join("agent")).await;
    let update = "    max_parallel = 1\n    auto_revert  = true\n";
    let v1 = write(
        dir.path(),
        "v1.nomad.hcl",
        &job(3, update, "/bin/sleep", "\"600\""),
    );
    let run = drover(&server, &["job", "run", &v1]).await;
    assert_code(&run, 0);
    let text = stdout(&run);
    assert!(text.contains("successful"), "{text}");
    assert!(
        server
            .handle()
            .snapshot()
            .job(&JobKey::default_ns("web"))
            .expect("job")
            .stable,
        "a successful deployment makes the version stable"
    );

    let v2 = write(
        dir.path(),
        "v2.nomad.hcl",
        &job(3, update, "/bin/sh", "\"-c\", \"exit 1\""),
    );
    let run = drover(&server, &["job", "run", &v2]).await;
    let text = stdout(&run);
    assert_code(&run, 1);
    assert!(
        text.contains("Failed due to unhealthy allocations"),
        "{text}"
    );

    eventually("the revert to roll out", DEADLINE, || async {
        let snap = server.handle().snapshot();
        let job = snap.job(&JobKey::default_ns("web"))?;
        let done =
            job.version == 2 && job.stable && running_by_version(&server).get(&2) == Some(&3);
        done.then_some(())
    })
    .await;
    let snap = server.handle().snapshot();
    let v2_placed = snap
        .allocs_by_job(&JobKey::default_ns("web"))
        .filter(|a| a.job_version == 1)
        .count();
    assert_eq!(
        v2_placed, 1,
        "max_parallel 1: one broken allocation, never more"
    );
    let list = deployments(&server).await;
    let failed = list
        .iter()
        .find(|d| d["job_version"] == 1)
        .expect("version 1's deployment");
    assert_eq!(failed["status"], "Failed", "{failed}");
    assert!(
        failed["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Failed due to unhealthy allocations")),
        "{failed}"
    );
    let status = drover(&server, &["job", "status", "web"]).await;
    assert!(
        stdout(&status).contains("Latest Deployment"),
        "{}",
        stdout(&status)
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_canary_runs_beside_the_old_version_until_promoted() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = agent(&server, &dir.path().join("agent")).await;
    let update = "    max_parallel = 1\n    canary       = 1\n    auto_promote = false\n";
    let v1 = write(
        dir.path(),
        "v1.nomad.hcl",
        &job(3, update, "/bin/sleep", "\"600\""),
    );
    assert_code(&drover(&server, &["job", "run", &v1]).await, 0);
    let v2 = write(
        dir.path(),
        "v2.nomad.hcl",
        &job(3, update, "/bin/sleep", "\"601\""),
    );
    assert_code(&drover(&server, &["job", "run", "-detach", &v2]).await, 0);
    let id = eventually("the canary to be healthy", DEADLINE, || async {
        let list = deployments(&server).await;
        let d = list.iter().find(|d| d["job_version"] == 1)?;
        let g = &d["groups"]["web"];
        (g["healthy"] == 1 && g["placed_canaries"].as_array()?.len() == 1)
            .then(|| d["id"].as_str().map(str::to_owned))
            .flatten()
    })
    .await;
    let running = running_by_version(&server);
    assert_eq!(
        (running.get(&0), running.get(&1)),
        (Some(&3), Some(&1)),
        "the canary runs beside the three old allocations"
    );
    let status = drover(&server, &["deployment", "status", &id[..8]]).await;
    assert_code(&status, 0);
    assert!(
        stdout(&status).contains("requires manual promotion"),
        "{}",
        stdout(&status)
    );

    let promoted = drover(&server, &["deployment", "promote", &id[..8]]).await;
    assert_code(&promoted, 0);
    eventually("the rollout to complete", DEADLINE, || async {
        let list = deployments(&server).await;
        let d = list.iter().find(|d| d["job_version"] == 1)?;
        let running = running_by_version(&server);
        (d["status"] == "Successful" && running.get(&1) == Some(&3) && !running.contains_key(&0))
            .then_some(())
    })
    .await;
    // A finished deployment cannot be promoted again.
    let again = drover(&server, &["deployment", "promote", &id]).await;
    assert_code(&again, 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_progress_deadline_fails_a_deployment_that_makes_no_progress() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = agent(&server, &dir.path().join("agent")).await;
    // Nothing can place it: the deployment never sees a healthy allocation.
    let text = job(2, "    max_parallel = 1\n", "/bin/sleep", "\"600\"")
        .replace("healthy_deadline  = \"20s\"", "healthy_deadline  = \"2s\"")
        .replace("progress_deadline = \"1m\"", "progress_deadline = \"3s\"")
        .replace(
            "  group \"web\" {\n",
            "  group \"web\" {\n    constraint {\n      attribute = \"${attr.kernel.name}\"\n      value     = \"plan9\"\n    }\n",
        );
    let file = write(dir.path(), "stuck.nomad.hcl", &text);
    assert_code(&drover(&server, &["job", "run", "-detach", &file]).await, 0);
    eventually("the deployment to fail", DEADLINE, || async {
        let list = deployments(&server).await;
        let d = list.first()?;
        (d["status"] == "Failed").then(|| {
            assert_eq!(d["description"], "Failed due to progress deadline", "{d}");
        })
    })
    .await;
    server.stop().await;
}

/// `job(..)` gated on service checks: the task registers a service whose script check
/// exits with `code`, weighed as `on_update` says.
fn checked_job(code: u8, on_update: &str) -> String {
    let service = format!(
        "      service {{\n        name     = \"web\"\n        provider = \"nomad\"\n        check {{\n          type      = \"script\"\n          command   = \"/bin/sh\"\n          args      = [\"-c\", \"exit {code}\"]\n          interval  = \"1s\"\n          timeout   = \"1s\"\n          on_update = \"{on_update}\"\n        }}\n      }}\n"
    );
    job(1, "    max_parallel = 1\n", "/bin/sleep", "\"600\"")
        .replace("\"task_states\"", "\"checks\"")
        .replace("healthy_deadline  = \"20s\"", "healthy_deadline  = \"4s\"")
        .replace(
            "      driver = \"raw_exec\"\n",
            &format!("      driver = \"raw_exec\"\n{service}"),
        )
}

#[tokio::test(flavor = "multi_thread")]
async fn with_health_check_checks_an_allocation_is_healthy_only_once_its_checks_pass() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = agent(&server, &dir.path().join("agent")).await;
    let passing = write(
        dir.path(),
        "v1.nomad.hcl",
        &checked_job(0, "require_healthy"),
    );
    let run = drover(&server, &["job", "run", &passing]).await;
    assert_code(&run, 0);
    assert!(stdout(&run).contains("successful"), "{}", stdout(&run));

    // The task runs on, but its check fails: unhealthy once the healthy deadline passes.
    let failing = write(
        dir.path(),
        "v2.nomad.hcl",
        &checked_job(2, "require_healthy"),
    );
    let run = drover(&server, &["job", "run", &failing]).await;
    assert_code(&run, 1);
    let text = stdout(&run);
    assert!(
        text.contains("Failed due to unhealthy allocations"),
        "{text}"
    );

    // The same failing check, told not to gate updates, lets the rollout succeed.
    let ignored = write(dir.path(), "v3.nomad.hcl", &checked_job(2, "ignore"));
    let run = drover(&server, &["job", "run", &ignored]).await;
    assert_code(&run, 0);
    assert!(stdout(&run).contains("successful"), "{}", stdout(&run));
    server.stop().await;
}
