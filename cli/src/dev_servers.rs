//! `drover dev --servers N`: the dev cluster's servers as separate `drover server`
//! processes forming one Raft cluster on loopback, so failover can be tried by hand
//! (`kill -9` the leader's pid and watch the console).

use crate::child::{Stopped, wait_or_kill};
use anyhow::Context;
use rand::RngCore;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long the servers may take to elect a leader.
const ELECTION_DEADLINE: Duration = Duration::from_secs(20);

/// How long a server may take to stop after SIGINT before it is killed: its own shutdown
/// gives in-flight calls a few seconds, so one still running past this is stuck, and a dev
/// cluster must not outlive its `drover dev`.
const STOP_DEADLINE: Duration = Duration::from_secs(15);

/// One server process of the dev cluster.
#[derive(Debug)]
pub struct DevServer {
    pub id: u64,
    pub url: String,
    pub raft_addr: String,
    pub log: PathBuf,
    child: Child,
}

impl DevServer {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// The server processes; dropping it stops them.
#[derive(Debug)]
pub struct DevServers {
    pub servers: Vec<DevServer>,
}

/// API and Raft ports for `n` servers: from `bind`'s port up (API, Raft, API, Raft, ...),
/// or free ones when it is 0.
fn ports(bind: &str, n: usize) -> anyhow::Result<(String, Vec<u16>)> {
    let (host, port) = bind
        .rsplit_once(':')
        .with_context(|| format!("--bind {bind:?} is not host:port"))?;
    let port: u16 = port
        .parse()
        .with_context(|| format!("--bind {bind:?}: port {port:?} is not a number"))?;
    if port != 0 {
        let last = usize::from(port) + 2 * n - 1;
        anyhow::ensure!(
            last <= 65535,
            "--bind {bind}: no room for {n} servers' ports"
        );
        return Ok((
            host.to_string(),
            (0..2 * n).map(|i| port + i as u16).collect(),
        ));
    }
    let held = (0..2 * n)
        .map(|_| std::net::TcpListener::bind((host, 0)))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("cannot find free ports on {host}"))?;
    let ports = held
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((host.to_string(), ports))
}

impl DevServers {
    /// Starts `n` servers with data dirs under `data_dir` and waits until they elected a
    /// leader.
    pub async fn start(data_dir: &Path, bind: &str, n: usize) -> anyhow::Result<DevServers> {
        let (host, ports) = ports(bind, n)?;
        let mut secret = [0u8; 24];
        rand::rng().fill_bytes(&mut secret);
        let secret: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let exe = std::env::current_exe().context("cannot find the drover binary")?;
        let peers: Vec<String> = (0..n)
            .map(|i| format!("{}={host}:{}", i + 1, ports[2 * i + 1]))
            .collect();
        let mut servers = Vec::new();
        for i in 0..n {
            let id = i as u64 + 1;
            let dir = data_dir.join(format!("server-{id}"));
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let log = data_dir.join(format!("server-{id}.log"));
            let out = std::fs::File::create(&log)
                .with_context(|| format!("cannot create {}", log.display()))?;
            let api = format!("{host}:{}", ports[2 * i]);
            let raft_addr = format!("{host}:{}", ports[2 * i + 1]);
            let mut cmd = Command::new(&exe);
            // A process group of its own: Ctrl-C in the terminal (or a signal to dev's
            // group) reaches dev alone, which stops the agent before the servers.
            cmd.process_group(0);
            cmd.args(["server", "--server-id", &id.to_string()])
                .args(["--name", &format!("dev-{id}")])
                .arg("--data-dir")
                .arg(&dir)
                .args(["--bind", &api, "--raft-addr", &raft_addr, "--no-metrics"])
                .env("DROVER_CLUSTER_SECRET", &secret)
                .stdin(Stdio::null())
                .stdout(out.try_clone()?)
                .stderr(out);
            for p in &peers {
                cmd.args(["--peer", p]);
            }
            let child = cmd
                .spawn()
                .with_context(|| format!("cannot start server {id} ({})", exe.display()))?;
            servers.push(DevServer {
                id,
                url: format!("http://{api}"),
                raft_addr,
                log,
                child,
            });
        }
        let cluster = DevServers { servers };
        cluster.wait_for_leader().await?;
        Ok(cluster)
    }

    /// Every server's URL, comma-separated: what `DROVER_ADDR` takes.
    pub fn addresses(&self) -> String {
        self.servers
            .iter()
            .map(|s| s.url.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    async fn wait_for_leader(&self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + ELECTION_DEADLINE;
        loop {
            // Every server, not one: a follower that has not yet heard of the leader
            // answers UNAVAILABLE, and the agent started next would fail over noisily.
            let mut knowing = 0;
            for s in &self.servers {
                if let Ok(client) = crate::client::Client::connect(&s.url).await
                    && client
                        .status()
                        .leader(drover_proto::v1::LeaderRequest {})
                        .await
                        .is_ok()
                {
                    knowing += 1;
                }
            }
            if knowing == self.servers.len() {
                return Ok(());
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "the dev servers elected no leader within {ELECTION_DEADLINE:?}; see {}",
                self.servers
                    .iter()
                    .map(|s| s.log.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Asks every server still running to stop (SIGINT, as Ctrl-C) and waits for it; one
    /// still running after [`STOP_DEADLINE`] is killed, saying so.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        for s in &mut self.servers {
            if matches!(s.child.try_wait(), Ok(None)) {
                let _ = kill(Pid::from_raw(s.child.id() as i32), Signal::SIGINT);
            }
        }
        let deadline = std::time::Instant::now() + STOP_DEADLINE;
        for s in &mut self.servers {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if let Ok(Stopped::Killed) = wait_or_kill(&mut s.child, left) {
                eprintln!(
                    "    server {} (pid {}) did not stop within {}s of SIGINT; killed it (see {})",
                    s.id,
                    s.child.id(),
                    STOP_DEADLINE.as_secs(),
                    s.log.display()
                );
            }
        }
    }
}

impl Drop for DevServers {
    fn drop(&mut self) {
        self.stop();
    }
}
