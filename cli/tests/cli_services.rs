//! Services and health checks end to end, from the binary with a real agent: a job of two
//! groups, `web` (count 2, an http check) and `db` (a tcp check with `check_restart`),
//! where `web` renders db's address (and health) with `nomadService` and connects to it;
//! `service list` and `service info` show both with their health; killing db's server
//! process (its task lives on) makes its check fail, the registration go critical,
//! `check_restart` restart the task (counted as a restart) and web's template render
//! again, `service info` and `alloc status` showing the tcp check critical with what it
//! said, then passing; stopping the job removes every registration.

use crate::cli_support;

use cli_support::{Running, assert_code, drover, json, stdout};
use drover_core::{ClientStatus, DesiredStatus, JobKey, ServiceHealth};
use drover_tests::{DEADLINE, TestServer, eventually};
use std::path::Path;

/// The interpreter the tasks run; the test needs it on the machine.
const PYTHON: &str = "/usr/bin/python3";

/// `db` runs its server beside a shell that outlives it, so killing the server leaves the
/// task running and only its check can tell.
const JOB: &str = r#"
job "shop" {
  group "db" {
    network {
      port "db" {}
    }
    restart {
      attempts = 5
      interval = "5m"
      delay    = "1s"
      mode     = "fail"
    }
    task "db" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args = ["-c", "PYTHON -m http.server --bind ${NOMAD_IP_db} ${NOMAD_PORT_db} & echo $! > ${NOMAD_TASK_DIR}/server.pid; while :; do sleep 1; done"]
      }
      service {
        name = "${NOMAD_JOB_NAME}-db"
        port = "db"
        tags = ["primary"]
        check {
          type     = "tcp"
          interval = "2s"
          timeout  = "1s"
          check_restart {
            limit = 2
            grace = "1s"
          }
        }
      }
    }
  }
  group "web" {
    count = 2
    network {
      port "http" {}
    }
    task "web" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "PYTHON local/probe.py & exec PYTHON -m http.server --bind ${NOMAD_IP_http} ${NOMAD_PORT_http}"]
      }
      template {
        data        = "{{ range nomadService \"shop-db\" }}{{ .Address }}:{{ .Port }} {{ .Health }}\n{{ end }}"
        destination = "local/db.txt"
        change_mode = "noop"
      }
      template {
        destination = "local/probe.py"
        data        = <<EOT
import os, socket, time
while True:
    try:
        address = open("local/db.txt").read().split()[0]
        host, port = address.rsplit(":", 1)
        socket.create_connection((host, int(port)), 2).close()
        with open("local/reached.tmp", "w") as f:
            f.write(address + "\n")
        os.replace("local/reached.tmp", "local/reached.txt")
    except (OSError, IndexError, ValueError):
        pass
    time.sleep(0.5)
EOT
      }
      service {
        name = "web"
        port = "http"
        check {
          type     = "http"
          path     = "/"
          interval = "1s"
          timeout  = "1s"
        }
      }
    }
  }
}
"#;

fn agent(server: &TestServer, data: &Path) -> Running {
    cli_support::agent_with_config(server, data, "raw_exec {\n  enabled = true\n}\n")
}

/// `service list -json` as (name, instances, health).
async fn listed(server: &TestServer) -> Vec<(String, u64, String)> {
    let out = drover(server, &["service", "list", "-json"]).await;
    assert_code(&out, 0);
    json(&out)
        .as_array()
        .expect("a list")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or_default().to_owned(),
                s["instances"].as_u64().unwrap_or_default(),
                s["health"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The db allocation that should run and runs: its id and the db task's restarts.
fn db_alloc(server: &TestServer) -> Option<(String, u32)> {
    let snap = server.handle().snapshot();
    snap.allocs_by_job(&JobKey::default_ns("shop"))
        .find(|a| {
            a.task_group == "db"
                && a.desired_status == DesiredStatus::Run
                && a.client_status == ClientStatus::Running
        })
        .map(|a| {
            let restarts = a.task_states.get("db").map_or(0, |t| t.restarts);
            (a.id.to_string(), restarts)
        })
}

/// The (status, output) of each check of shop-db's instances, as `service info -json`
/// shows them.
async fn db_checks(server: &TestServer) -> Vec<(String, String)> {
    let info = json(&drover(server, &["service", "info", "shop-db", "-json"]).await);
    info.as_array()
        .expect("instances")
        .iter()
        .flat_map(|r| r["checks"].as_array().cloned().unwrap_or_default())
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_owned(),
                c["output"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The health of shop-db's one listed instance.
fn db_health(server: &TestServer) -> Option<ServiceHealth> {
    let snap = server.handle().snapshot();
    let mut instances = snap.service_instances("default", "shop-db");
    instances.next().map(|r| r.health)
}

#[tokio::test(flavor = "multi_thread")]
async fn services_register_turn_critical_restart_their_task_and_go_with_their_job() {
    assert!(
        Path::new(PYTHON).exists(),
        "the job's tasks run {PYTHON}, which this machine lacks"
    );
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("agent");
    let _agent = agent(&server, &data);
    let job = dir.path().join("shop.nomad.hcl");
    std::fs::write(&job, JOB.replace("PYTHON", PYTHON)).expect("job file");
    assert_code(
        &drover(
            &server,
            &["job", "run", "-detach", job.to_str().expect("utf-8")],
        )
        .await,
        0,
    );

    // Both services listed, every instance passing its check.
    eventually("both services passing", DEADLINE, || async {
        let got = listed(&server).await;
        (got == [
            ("shop-db".to_owned(), 1, "passing".to_owned()),
            ("web".to_owned(), 2, "passing".to_owned()),
        ])
        .then_some(())
    })
    .await;
    let info = json(&drover(&server, &["service", "info", "shop-db", "-json"]).await);
    let instance = &info.as_array().expect("instances")[0];
    let address = format!(
        "{}:{}",
        instance["address"].as_str().expect("an address"),
        instance["port"]
    );
    std::net::TcpStream::connect(&address).expect("db answers where the catalog says");
    assert_eq!(instance["tags"], serde_json::json!(["primary"]));
    let (alloc, restarts) = db_alloc(&server).expect("db running");
    assert_eq!(instance["alloc_id"], alloc.as_str());
    // Each web allocation rendered db's address and reached it.
    let webs: Vec<String> = {
        let snap = server.handle().snapshot();
        snap.allocs_by_job(&JobKey::default_ns("shop"))
            .filter(|a| a.task_group == "web")
            .map(|a| a.id.to_string())
            .collect()
    };
    assert_eq!(webs.len(), 2);
    let rendered = |web: &str| {
        std::fs::read_to_string(data.join(format!("allocs/{web}/web/local/db.txt")))
            .unwrap_or_default()
    };
    for web in &webs {
        eventually("web to reach db", DEADLINE, || async {
            let reached = data.join(format!("allocs/{web}/web/local/reached.txt"));
            let text = std::fs::read_to_string(reached).ok()?;
            (text.trim() == address).then_some(())
        })
        .await;
        // Rendered first while db's check had not passed yet, then again.
        eventually("web's template to show db passing", DEADLINE, || async {
            (rendered(web) == format!("{address} passing\n")).then_some(())
        })
        .await;
    }
    let table = stdout(&drover(&server, &["service", "info", "web"]).await);
    let (instances, checks) = table
        .split_once("\nChecks\n")
        .unwrap_or_else(|| panic!("no checks in {table}"));
    assert_eq!(
        instances.lines().filter(|l| l.contains("passing")).count(),
        2,
        "{table}"
    );
    // One http check per instance, passing with the answer's status.
    assert_eq!(
        checks
            .lines()
            .filter(|l| l.contains("passing") && l.contains(": 200"))
            .count(),
        2,
        "{table}"
    );

    // Its server dies, its task lives on: the check fails, the registration goes
    // critical, and check_restart restarts the task (counted as a restart).
    let pid_file = data.join(format!("allocs/{alloc}/db/local/server.pid"));
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("the server's pid")
        .trim()
        .parse()
        .expect("a pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("the server is killed");
    eventually("db critical", DEADLINE, || async {
        (db_health(&server) == Some(ServiceHealth::Critical)).then_some(())
    })
    .await;
    // Its tcp check says so, with what the failed connect said.
    eventually("db's check critical in service info", DEADLINE, || async {
        let checks = db_checks(&server).await;
        (checks.len() == 1
            && checks[0].0 == "Critical"
            && checks[0].1.starts_with(&format!("tcp connect {address}: ")))
        .then_some(())
    })
    .await;
    let table = stdout(&drover(&server, &["service", "info", "shop-db"]).await);
    assert!(
        table
            .lines()
            .any(|l| l.contains("shop-db") && l.contains("critical") && l.contains("tcp connect")),
        "{table}"
    );
    eventually(
        "web's template rendered again with db critical",
        DEADLINE,
        || async { (rendered(&webs[0]) == format!("{address} critical\n")).then_some(()) },
    )
    .await;
    eventually("db restarted by its check", DEADLINE, || async {
        db_alloc(&server).filter(|(id, n)| *id == alloc && *n == restarts + 1)
    })
    .await;
    eventually("db passing again", DEADLINE, || async {
        (db_health(&server) == Some(ServiceHealth::Passing)).then_some(())
    })
    .await;
    eventually(
        "db's check passing again in service info",
        DEADLINE,
        || async {
            (db_checks(&server).await
                == [(
                    "Passing".to_owned(),
                    format!("tcp connect {address}: success"),
                )])
            .then_some(())
        },
    )
    .await;
    eventually(
        "web's template rendered again with db passing",
        DEADLINE,
        || async { (rendered(&webs[0]) == format!("{address} passing\n")).then_some(()) },
    )
    .await;
    let status = stdout(&drover(&server, &["alloc", "status", &alloc]).await);
    assert!(status.contains("check_restart limit reached"), "{status}");
    // Its checks, as Nomad's alloc status lists them.
    let checks = status
        .split_once("Nomad Service Checks\n")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no checks in {status}"));
    assert!(
        checks
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("shop-db") && l.contains("passing")),
        "{status}"
    );

    // Stopping the job removes every registration.
    assert_code(&drover(&server, &["job", "stop", "shop"]).await, 0);
    eventually("no service left", DEADLINE, || async {
        listed(&server)
            .await
            .is_empty()
            .then(|| server.handle().snapshot().service_count())
            .filter(|n| *n == 0)
    })
    .await;
    let empty = stdout(&drover(&server, &["service", "list"]).await);
    assert_eq!(empty, "No services found\n");
}
