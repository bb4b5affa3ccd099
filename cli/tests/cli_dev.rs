//! `drover dev` as a person runs it: the real binary brings up a server, an agent,
//! simulated nodes (marked as such, finishing batch work) and the sample job (on the real
//! agent), answers the gRPC health service and `/metrics`, and stops cleanly on Ctrl-C
//! (SIGINT).

use crate::cli_support;

use cli_support::{drover_at, json, spawn, wait_for_line};
use drover_tests::{DEADLINE, eventually};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::time::Instant;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// A batch job only the simulated nodes may run.
const BATCH_ON_SIMULATED: &str = r#"
job "crunch" {
  datacenters = ["dc1"]
  type        = "batch"
  constraint {
    attribute = "${node.class}"
    value     = "simulated"
  }
  group "work" {
    count = 2
    task "t" {
      driver = "mock"
      config {
        command = "/bin/true"
      }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
"#;

/// A plain HTTP/1.1 GET; answers the body.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).expect("connects");
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("request sent");
    let mut raw = String::new();
    conn.read_to_string(&mut raw).expect("answer read");
    raw.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// A port nothing listens on right now (the OS's pick for port 0).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds port 0");
    listener.local_addr().expect("has an address").port()
}

async fn healthy(url: &str) -> bool {
    let Ok(channel) = tonic::transport::Channel::from_shared(url.to_string())
        .expect("valid url")
        .connect()
        .await
    else {
        return false;
    };
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .is_ok_and(|r| r.into_inner().status == ServingStatus::Serving as i32)
}

#[tokio::test(flavor = "multi_thread")]
async fn dev_serves_health_runs_the_sample_job_and_stops_on_ctrl_c() {
    let data_dir = tempfile::tempdir().expect("temp dir");
    let url = format!("http://127.0.0.1:{}", free_port());
    let started = Instant::now();
    let bind = url.trim_start_matches("http://").to_string();
    let dir = data_dir
        .path()
        .to_str()
        .expect("utf-8 temp dir")
        .to_string();
    let mut dev = spawn(
        &url,
        &[
            "dev",
            "--nodes",
            "3",
            "--bind",
            &bind,
            "--data-dir",
            &dir,
            "--metrics-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--sim-batch-duration",
            "1s",
        ],
    );

    eventually(
        "drover dev to answer the health service",
        DEADLINE,
        || async { healthy(&url).await.then_some(()) },
    )
    .await;
    let to_health = started.elapsed();
    eprintln!("drover dev answered the gRPC health service {to_health:?} after spawn");

    let nodes = eventually("the agent and 3 simulated nodes", DEADLINE, || async {
        let nodes = json(&drover_at(&url, &["node", "status", "-json"]).await);
        (nodes.as_array()?.len() == 4).then_some(nodes)
    })
    .await;
    let class_of = |row: &serde_json::Value| row["node"]["node_class"].as_str().map(str::to_owned);
    let agent_node: Vec<String> = nodes
        .as_array()
        .expect("a list")
        .iter()
        .filter(|row| class_of(row).as_deref() != Some("simulated"))
        .filter_map(|row| row["node"]["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        agent_node.len(),
        1,
        "one real node besides 3 simulated: {nodes}"
    );
    let sample = eventually(
        "the sample job's 3 allocations to run",
        DEADLINE,
        || async {
            // The sample job is registered once the nodes are up: "not found" until then.
            let out = drover_at(&url, &["job", "status", "web", "-json"]).await;
            if out.status.code() != Some(0) {
                return None;
            }
            let job = json(&out);
            let running = job["summary"]["groups"]["frontend"]["running"].as_u64()?;
            (running == 3).then_some(job)
        },
    )
    .await;
    let on_nodes: Vec<&str> = sample["allocations"]
        .as_array()
        .expect("allocations")
        .iter()
        .filter_map(|a| a["node_id"].as_str())
        .collect();
    assert!(
        on_nodes.len() == 3 && on_nodes.iter().all(|n| *n == agent_node[0]),
        "the sample job runs on the real agent {}: {on_nodes:?}",
        agent_node[0]
    );

    let job_file = data_dir.path().join("crunch.hcl");
    std::fs::write(&job_file, BATCH_ON_SIMULATED).expect("job file written");
    let run = drover_at(
        &url,
        &["job", "run", "-detach", job_file.to_str().expect("utf-8")],
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    eventually(
        "the batch job on simulated nodes to complete",
        DEADLINE,
        || async {
            let job = json(&drover_at(&url, &["job", "status", "crunch", "-json"]).await);
            let complete = job["summary"]["groups"]["work"]["complete"].as_u64()?;
            (complete == 2).then_some(())
        },
    )
    .await;

    // Nomad's HTTP API, printed beside the gRPC address, answers Nomad's clients.
    let http = wait_for_line(&dev, "the HTTP API address", |l| l.contains("HTTP API:"));
    let http = http
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("an address in the banner")
        .to_string();
    let jobs = http_get(&http, "/v1/jobs");
    assert!(jobs.contains(r#""ID":"crunch""#), "GET /v1/jobs: {jobs}");

    let metrics = wait_for_line(&dev, "the metrics address", |l| l.contains("Metrics:"));
    let metrics = metrics
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .expect("an address in the banner")
        .to_string();
    let body = http_get(&metrics, "/metrics");
    assert!(
        body.contains("drover_rpc_seconds_bucket{"),
        "dev's /metrics lacks the API latency:\n{body}"
    );

    wait_for_line(&dev, "the banner with the address", |l| l.contains(&url));

    let pid = Pid::from_raw(i32::try_from(dev.child.id()).expect("pid fits"));
    kill(pid, Signal::SIGINT).expect("SIGINT is delivered");
    let status = eventually("drover dev to exit after Ctrl-C", DEADLINE, || {
        let exited = dev.child.try_wait().expect("waits");
        async move { exited }
    })
    .await;
    assert!(status.success(), "drover dev exited with {status}");
    wait_for_line(&dev, "the goodbye line", |l| {
        l.contains("drover dev stopped")
    });
}

/// Kills the pids it holds when dropped: the dev servers are `drover dev`'s children and
/// would outlive a test that failed before stopping it.
struct KillOnDrop(Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
    }
}

/// The leader's id as the servers at `address` (a list) report it.
async fn leader_of(address: &str) -> Option<String> {
    let out = drover_at(address, &["server", "members", "-json"]).await;
    let members: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    members
        .as_array()?
        .iter()
        .find(|m| m["role"] == "leader")
        .and_then(|m| m["id"].as_str().map(String::from))
}

#[tokio::test(flavor = "multi_thread")]
async fn dev_with_three_servers_elects_a_new_leader_when_one_is_killed() {
    let data_dir = tempfile::tempdir().expect("temp dir");
    let dir = data_dir.path().to_str().expect("utf-8").to_string();
    // Its standard error is kept: starting must print no warning before the banner.
    let stderr_file = tempfile::NamedTempFile::new().expect("temp file");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
        .env("DROVER_ADDR", "http://127.0.0.1:1")
        .args([
            "dev",
            "--servers",
            "3",
            "--bind",
            "127.0.0.1:0",
            "--nodes",
            "2",
            "--no-sample-job",
            "--data-dir",
            &dir,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(stderr_file.reopen().expect("reopened"))
        .spawn()
        .expect("drover dev starts");
    let mut dev = cli_support::running(child);
    // "    Server 2:        http://127.0.0.1:P (raft 127.0.0.1:R, pid N, log ...)"
    let mut pids = std::collections::BTreeMap::new();
    for _ in 0..3 {
        let line = wait_for_line(&dev, "a server line", |l| {
            l.trim_start().starts_with("Server ")
        });
        let id = line.trim_start()["Server ".len()..]
            .split(':')
            .next()
            .expect("an id")
            .to_string();
        let pid: i32 = line
            .split("pid ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no pid in {line:?}"));
        pids.insert(id, pid);
    }
    let _guard = KillOnDrop(pids.values().copied().collect());
    let export = wait_for_line(&dev, "the DROVER_ADDR line", |l| l.contains("DROVER_ADDR="));
    let address = export
        .split('=')
        .nth(1)
        .expect("a value")
        .trim()
        .to_string();
    assert_eq!(address.split(',').count(), 3, "{address}");
    let before_banner = std::fs::read_to_string(stderr_file.path()).expect("stderr read");
    assert!(
        !before_banner.contains("WARN"),
        "warnings while the dev cluster started: {before_banner}"
    );

    let leader = eventually("a leader", DEADLINE, || leader_of(&address)).await;
    eventually("the agent and 2 simulated nodes", DEADLINE, || async {
        let nodes = json(&drover_at(&address, &["node", "status", "-json"]).await);
        (nodes.as_array()?.len() == 3).then_some(())
    })
    .await;

    kill(Pid::from_raw(pids[&leader]), Signal::SIGKILL).expect("the leader is killed");
    let new_leader = eventually("a new leader", DEADLINE, || async {
        leader_of(&address).await.filter(|l| *l != leader)
    })
    .await;
    eprintln!("server {leader} killed; server {new_leader} leads");
    let nodes = json(&drover_at(&address, &["node", "status", "-json"]).await);
    assert_eq!(nodes.as_array().map(Vec::len), Some(3), "{nodes}");

    kill(
        Pid::from_raw(i32::try_from(dev.child.id()).unwrap()),
        Signal::SIGINT,
    )
    .unwrap();
    let status = eventually("drover dev to exit after Ctrl-C", DEADLINE, || {
        let exited = dev.child.try_wait().expect("waits");
        async move { exited }
    })
    .await;
    assert!(status.success(), "drover dev exited with {status}");
    for (id, pid) in &pids {
        let gone = kill(Pid::from_raw(*pid), None).is_err();
        assert!(
            gone,
            "server {id} (pid {pid}) still runs after drover dev stopped"
        );
    }
}

/// SIGTERM and SIGHUP stop `drover dev` as Ctrl-C does: its temporary data dir removed,
/// its port free again, the sample job's processes gone; the next `drover dev` starts.
#[tokio::test(flavor = "multi_thread")]
async fn dev_cleans_up_on_sigterm_and_sighup_as_on_ctrl_c() {
    for signal in [Signal::SIGTERM, Signal::SIGHUP] {
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let bind = url.trim_start_matches("http://").to_string();
        let dev = spawn(
            &url,
            &["dev", "--nodes", "1", "--bind", &bind, "--no-metrics"],
        );
        let banner = wait_for_line(&dev, "the data dir in the banner", |l| {
            l.contains("Data dir:")
        });
        let data_dir = banner
            .split("Data dir:")
            .nth(1)
            .map(|d| d.trim().to_string())
            .expect("a data dir");
        eventually("drover dev to answer", DEADLINE, || async {
            healthy(&url).await.then_some(())
        })
        .await;
        let sample = eventually("the sample job running", DEADLINE, || async {
            let out = drover_at(&url, &["job", "status", "web", "-json"]).await;
            let job: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            let running = job["summary"]["groups"]["frontend"]["running"].as_u64()?;
            (running == 3).then_some(job)
        })
        .await;
        let alloc = sample["allocations"][0]["id"]
            .as_str()
            .expect("an id")
            .to_string();
        let pid = Pid::from_raw(i32::try_from(dev.child.id()).expect("pid fits"));
        kill(pid, signal).expect("the signal is delivered");
        let mut dev = dev;
        let status = eventually("drover dev to exit", DEADLINE, || {
            let exited = dev.child.try_wait().expect("waits");
            async move { exited }
        })
        .await;
        assert!(
            status.success(),
            "{signal}: drover dev exited with {status}"
        );
        assert!(
            !std::path::Path::new(&data_dir).exists(),
            "{signal}: the temporary data dir {data_dir} is left behind"
        );
        assert!(
            std::net::TcpListener::bind(&bind).is_ok(),
            "{signal}: port {port} is still held"
        );
        let left: Vec<String> = std::fs::read_dir("/proc")
            .expect("/proc")
            .filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read(e.path().join("environ")).ok())
            .filter_map(|env| {
                String::from_utf8_lossy(&env)
                    .split('\0')
                    .find(|v| *v == format!("NOMAD_ALLOC_ID={alloc}"))
                    .map(str::to_string)
            })
            .collect();
        assert!(
            left.is_empty(),
            "{signal}: the sample job's processes outlived drover dev: {left:?}"
        );
    }
}
