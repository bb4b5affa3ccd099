//! What the CLI end-to-end tests share: running the real `drover` binary against a
//! [`TestServer`], nodes that register and keep heartbeating, and job files on disk.

use drover_core::mock;
use drover_proto::v1 as pb;
use drover_proto::v1::node_service_client::NodeServiceClient;
use drover_tests::{DEADLINE, TestServer, eventually};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Runs `drover ARGS` against `server` (through `DROVER_ADDR`, as an operator would) on a
/// blocking thread, so the in-process server keeps running meanwhile.
pub async fn drover(server: &TestServer, args: &[&str]) -> Output {
    drover_at(&server.url(), args).await
}

/// Runs `drover ARGS` with `DROVER_ADDR` set to `address`.
pub async fn drover_at(address: &str, args: &[&str]) -> Output {
    let address = address.to_string();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_drover"));
        cmd.env("DROVER_ADDR", address)
            .args(&args)
            .timeout(Duration::from_secs(60));
        cmd.output().expect("drover runs")
    })
    .await
    .expect("the command thread finishes")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The process's exit code, with its output in the failure message when it has none.
pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or_else(|| {
        panic!(
            "drover was killed by a signal\nstdout: {}\nstderr: {}",
            stdout(out),
            stderr(out)
        )
    })
}

/// Asserts the command exited `want`, showing its output when it did not.
pub fn assert_code(out: &Output, want: i32) {
    assert_eq!(
        code(out),
        want,
        "unexpected exit code\nstdout: {}\nstderr: {}",
        stdout(out),
        stderr(out)
    );
}

/// The command's standard output as JSON; it must parse.
pub fn json(out: &Output) -> serde_json::Value {
    assert_code(out, 0);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("-json output does not parse: {e}\n{}", stdout(out)))
}

/// Simulated nodes registered through the node API, heartbeating ready until dropped.
pub struct Nodes {
    pub ids: Vec<String>,
    heartbeats: JoinHandle<()>,
}

impl Drop for Nodes {
    fn drop(&mut self) {
        self.heartbeats.abort();
    }
}

/// Registers `count` nodes, keeps them heartbeating, and waits until all are healthy.
pub async fn join_nodes(server: &TestServer, count: u64) -> Nodes {
    let mut client = NodeServiceClient::new(server.channel().await);
    let mut auths = Vec::new();
    for n in 1..=count {
        let node = mock::node(n);
        let answer = client
            .register(pb::RegisterNodeRequest {
                node: Some(pb::NodeRegistration {
                    node_id: String::new(),
                    secret_id: String::new(),
                    name: node.name,
                    datacenter: node.datacenter,
                    node_class: String::new(),
                    attributes: node.attributes.into_iter().collect(),
                    meta: node.meta.into_iter().collect(),
                    resources: Some((&node.resources).into()),
                    reserved: Some((&node.reserved).into()),
                    networks: Some((&node.networks).into()),
                }),
            })
            .await
            .expect("node registers")
            .into_inner();
        auths.push(pb::NodeAuth {
            node_id: answer.node_id,
            secret_id: answer.secret_id,
        });
    }
    let ids = auths.iter().map(|a| a.node_id.clone()).collect();
    let beating = client.clone();
    let heartbeats = tokio::spawn(async move {
        let mut client = beating;
        loop {
            for auth in &auths {
                let _ = client
                    .update_status(pb::UpdateNodeStatusRequest {
                        auth: Some(auth.clone()),
                        readiness: pb::Readiness::Ready.into(),
                        last_snapshot: None,
                    })
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });
    let nodes = Nodes { ids, heartbeats };
    let handle = server.handle();
    eventually("nodes to become healthy", DEADLINE, || {
        let snapshot = handle.snapshot();
        let healthy = nodes.ids.iter().all(|id| {
            id.parse()
                .ok()
                .and_then(|id| snapshot.node(&id))
                .is_some_and(|n| n.health == drover_core::NodeHealth::Healthy)
        });
        async move { healthy.then_some(()) }
    })
    .await;
    nodes
}

/// Writes a service job `id` with one group `api` of `count` small tasks to `dir`.
pub fn write_job(dir: &Path, id: &str, count: u32) -> PathBuf {
    let path = dir.join(format!("{id}.nomad.hcl"));
    let text = format!(
        r#"job "{id}" {{
  datacenters = ["dc1"]
  type        = "service"

  group "api" {{
    count = {count}

    task "server" {{
      driver = "raw_exec"

      config {{
        command = "/bin/sleep"
        args    = ["600"]
      }}

      resources {{
        cpu    = 100
        memory = 64
      }}
    }}
  }}
}}
"#
    );
    std::fs::write(&path, text).expect("job file is written");
    path
}

/// A one-allocation service job of the `mock` driver (simulated nodes run it).
pub fn write_mock_job(dir: &Path, id: &str) -> PathBuf {
    let path = dir.join(format!("{id}.nomad.hcl"));
    let text = format!(
        r#"job "{id}" {{
  datacenters = ["dc1"]
  group "g" {{
    task "t" {{
      driver = "mock"
      config {{
        command = "/bin/true"
      }}
      resources {{
        cpu    = 10
        memory = 10
      }}
    }}
  }}
}}
"#
    );
    std::fs::write(&path, text).expect("job file is written");
    path
}

/// A `drover` process left running (`dev`, `event stream`); killed if the test ends first.
pub struct Running {
    pub child: Child,
    /// Its standard output, line by line, as it prints them.
    pub lines: Receiver<String>,
}

impl Drop for Running {
    /// SIGTERM first, so that a `drover dev` left by a failing test stops the tasks it
    /// started rather than leaving them to init; SIGKILL if it has not gone in a while.
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
            let until = std::time::Instant::now() + Duration::from_secs(10);
            while std::time::Instant::now() < until {
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `drover ARGS` in the background with `DROVER_ADDR` set to `address`.
pub fn spawn(address: &str, args: &[&str]) -> Running {
    let child = Command::new(env!("CARGO_BIN_EXE_drover"))
        .env("DROVER_ADDR", address)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("drover starts");
    running(child)
}

/// A started process (its stdout piped) as a [`Running`]: its lines are read as it prints.
pub fn running(mut child: Child) -> Running {
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Running { child, lines }
}

/// The API address a `drover server` started with `--bind 127.0.0.1:0` printed: the kernel
/// picks the port as the server binds it, so no test beside it can take it in between.
pub fn listening_address(server: &Running) -> String {
    let line = wait_for_line(server, "the server's API address", |l| {
        l.contains(" listening on ")
    });
    line.split(" listening on ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(|url| {
            url.trim_start_matches("http://")
                .trim_start_matches("https://")
        })
        .expect("an address after 'listening on'")
        .to_string()
}

/// Reads lines from `running` until one satisfies `wanted`, failing after the deadline.
pub fn wait_for_line(running: &Running, what: &str, wanted: impl Fn(&str) -> bool) -> String {
    let until = std::time::Instant::now() + DEADLINE;
    let mut seen = Vec::new();
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match running.lines.recv_timeout(left) {
            Ok(line) if wanted(&line) => return line,
            Ok(line) => seen.push(line),
            Err(_) => panic!("timed out waiting for {what}; printed: {seen:?}"),
        }
    }
}

/// `n` ports that were free a moment ago on 127.0.0.1.
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// Three `drover server` processes forming one cluster with `--peer`: server `i + 1`
/// serves its API on `api[i]` and Raft on `raft[i]`, with its data in `dirs[i]`.
pub fn spawn_cluster(
    api: &[String],
    raft: &[String],
    dirs: &[tempfile::TempDir],
    secret: &str,
) -> Vec<Running> {
    let peers: Vec<String> = (0..raft.len())
        .map(|i| format!("{}={}", i + 1, raft[i]))
        .collect();
    (0..api.len())
        .map(|i| {
            let id = (i + 1).to_string();
            let dir = dirs[i].path().to_str().unwrap().to_string();
            let mut args = vec![
                "server",
                "--server-id",
                &id,
                "--data-dir",
                &dir,
                "--bind",
                &api[i],
                "--raft-addr",
                &raft[i],
                "--cluster-secret",
                secret,
                "--no-metrics",
            ];
            for p in &peers {
                args.extend(["--peer", p.as_str()]);
            }
            spawn(&api[i], &args)
        })
        .collect()
}

/// The leader's id as `address` reports it (`server members`), if it knows one.
pub async fn leader_seen_by(address: &str) -> Option<String> {
    let out = drover_at(address, &["server", "members", "-json"]).await;
    let members: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
    members
        .as_array()?
        .iter()
        .find(|m| m["role"] == "leader")
        .and_then(|m| m["id"].as_str().map(String::from))
}

/// Three `drover server` processes forming one cluster on free loopback ports.
pub struct Three {
    /// Server `i + 1`'s API, `http://127.0.0.1:PORT`.
    pub url: Vec<String>,
    /// Server `i + 1`'s process; take it out to kill it.
    pub servers: Vec<Option<Running>>,
    /// The leader's id once the cluster formed.
    pub leader: String,
    /// Their data dirs, kept while the servers run.
    _dirs: Vec<tempfile::TempDir>,
}

impl Three {
    /// Starts them with the cluster secret `secret` and waits for a leader.
    pub async fn start(secret: &str) -> Three {
        let ports = free_ports(6);
        let api: Vec<String> = (0..3).map(|i| format!("127.0.0.1:{}", ports[i])).collect();
        let raft: Vec<String> = (0..3)
            .map(|i| format!("127.0.0.1:{}", ports[3 + i]))
            .collect();
        let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let servers = spawn_cluster(&api, &raft, &dirs, secret)
            .into_iter()
            .map(Some)
            .collect();
        let url: Vec<String> = api.iter().map(|a| format!("http://{a}")).collect();
        let leader = eventually("a leader", DEADLINE, || leader_seen_by(&url[0])).await;
        Three {
            url,
            servers,
            leader,
            _dirs: dirs,
        }
    }

    /// The leader's place in `url` and `servers`.
    pub fn leader_at(&self) -> usize {
        self.leader.parse::<usize>().expect("a numeric server id") - 1
    }
}

/// Runs `drover tls` in `dir`: a CA, then a certificate for each of `kinds` (its flags,
/// `--server`, `--client --node NAME`, ...), signed by it; each must succeed.
pub async fn make_certs(dir: &str, kinds: &[&[&str]]) {
    let ca = format!("{dir}/drover-agent-ca.pem");
    let ca_key = format!("{dir}/drover-agent-ca-key.pem");
    let mut runs = vec![vec!["tls", "ca", "create", "--dir", dir]];
    for kind in kinds {
        let mut args = vec!["tls", "cert", "create"];
        args.extend_from_slice(kind);
        args.extend(["--ca", &ca, "--key", &ca_key, "--dir", dir]);
        runs.push(args);
    }
    for args in runs {
        let out = drover_at("unused:1", &args).await;
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
    }
}

/// A `drover agent` on `data` with `config` (HCL, written beside `data`) against `server`.
pub fn agent_with_config(server: &TestServer, data: &Path, config: &str) -> Running {
    let file = data.with_extension("hcl");
    std::fs::write(&file, config).expect("agent config");
    spawn(
        &server.url(),
        &[
            "agent",
            "-config",
            file.to_str().expect("utf-8"),
            "--servers",
            &server.url(),
            "--data-dir",
            data.to_str().expect("utf-8"),
        ],
    )
}

/// The address of port `label` in `alloc status`'s "Allocation Addresses" table.
pub fn printed_address(status: &str, label: &str) -> Option<std::net::SocketAddr> {
    let table = status.split_once("Allocation Addresses")?.1;
    table
        .lines()
        .map(str::split_whitespace)
        .find_map(|mut cells| match (cells.next(), cells.next()) {
            (Some(l), Some(addr)) if l == label => addr.parse().ok(),
            _ => None,
        })
}

/// `job`'s allocation that should run and runs (default namespace), as its full id and
/// `task`'s restart count.
pub fn running_alloc(server: &TestServer, job: &str, task: &str) -> Option<(String, u32)> {
    use drover_core::{ClientStatus, DesiredStatus, JobKey};
    let snap = server.handle().snapshot();
    snap.allocs_by_job(&JobKey::default_ns(job))
        .find(|a| {
            a.desired_status == DesiredStatus::Run && a.client_status == ClientStatus::Running
        })
        .map(|a| {
            let restarts = a.task_states.get(task).map_or(0, |t| t.restarts);
            (a.id.to_string(), restarts)
        })
}

/// `job`'s failed allocation (default namespace), once one failed.
pub async fn failed_alloc(
    server: &TestServer,
    job: &str,
) -> std::sync::Arc<drover_core::Allocation> {
    eventually(
        &format!("an allocation of {job} to fail"),
        DEADLINE,
        || async {
            let snap = server.handle().snapshot();
            snap.allocs_by_job(&drover_core::JobKey::default_ns(job))
                .find(|a| a.client_status == drover_core::ClientStatus::Failed)
                .cloned()
        },
    )
    .await
}
