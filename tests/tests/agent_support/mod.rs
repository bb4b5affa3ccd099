//! What the agent end-to-end tests share: jobs registered through the gRPC API, reads of
//! the servers' allocations, the process table, and a TCP proxy that can cut the agent off
//! from the servers (a network partition) and let it back.

use drover_agent::{Agent, AgentConfig};
use drover_core::types::{Allocation, Job, JobKey, NodeId, TaskEvent};
use drover_proto::v1 as pb;
use drover_proto::v1::job_service_client::JobServiceClient;
use drover_tests::{DEADLINE, TestServer, eventually};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The config of an in-process agent on `dir`: `raw_exec` enabled, and the test-agent
/// binary as its task shim (this test binary does not dispatch one).
pub fn agent_config(dir: &Path, servers: Vec<String>) -> AgentConfig {
    let mut config = AgentConfig {
        data_dir: dir.to_path_buf(),
        servers,
        name: Some("e2e-agent".into()),
        shim: Some(env!("CARGO_BIN_EXE_test-agent").into()),
        ..AgentConfig::default()
    };
    config.raw_exec.enabled = true;
    config
}

/// An agent on `dir` talking to `servers` (in failover order).
pub async fn start_agent(dir: &Path, servers: Vec<String>) -> Agent {
    start_agent_with(agent_config(dir, servers)).await
}

/// An agent with `config`, once the servers consider its node ready.
pub async fn start_agent_with(config: AgentConfig) -> Agent {
    let agent = Agent::start(config).await.expect("agent starts");
    eventually("the node to be ready", DEADLINE, || async {
        agent.is_ready().then_some(())
    })
    .await;
    agent
}

/// The test-agent binary as its own process on `dir` against `server`, with `config` (the
/// agent's HCL, written beside the data dir) and `env` on top of the test's environment;
/// returns it once it printed its node id.
pub async fn spawn_test_agent(
    dir: &Path,
    server: &str,
    config: Option<&str>,
    env: &[(&str, &str)],
) -> (tokio::process::Child, NodeId) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_test-agent"));
    if let Some(text) = config {
        let path = dir.with_extension("hcl");
        std::fs::write(&path, text).expect("write agent config");
        command.arg("--config").arg(path);
    }
    let mut child = command
        .arg(dir)
        .arg(server)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("test-agent starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .expect("agent registers in time")
        .expect("reads stdout")
        .expect("agent printed its node id");
    let id = line
        .strip_prefix("node ")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    (child, id)
}

pub async fn register(server: &TestServer, job: &Job) {
    let mut jobs = JobServiceClient::new(server.channel().await);
    jobs.register(pb::RegisterJobRequest {
        job: Some(job.into()),
        enforce_index: None,
    })
    .await
    .expect("job registers");
}

pub async fn deregister(server: &TestServer, job_id: &str) {
    let mut jobs = JobServiceClient::new(server.channel().await);
    jobs.deregister(pb::DeregisterJobRequest {
        namespace: String::new(),
        job_id: job_id.into(),
        purge: false,
    })
    .await
    .expect("job deregisters");
}

/// The job's allocations as the servers hold them, oldest first.
pub fn allocs(server: &TestServer, job_id: &str) -> Vec<Arc<Allocation>> {
    let snap = server.handle().snapshot();
    let mut v: Vec<_> = snap
        .allocs_by_job(&JobKey::default_ns(job_id))
        .cloned()
        .collect();
    v.sort_by_key(|a| a.create_index);
    v
}

/// Waits until `pick` finds something among the job's allocations.
pub async fn wait_alloc<T>(
    server: &TestServer,
    job_id: &str,
    what: &str,
    pick: impl Fn(&[Arc<Allocation>]) -> Option<T>,
) -> T {
    eventually(what, DEADLINE, || {
        let found = pick(&allocs(server, job_id));
        async move { found }
    })
    .await
}

/// The events the agent reported for one task of an allocation.
pub fn events<'a>(alloc: &'a Allocation, task: &str) -> &'a [TaskEvent] {
    alloc
        .task_states
        .get(task)
        .map_or(&[][..], |t| t.events.as_slice())
}

/// The pid of the task's newest start, read from its "Started" event.
pub fn started_pid(alloc: &Allocation, task: &str) -> Option<i32> {
    events(alloc, task)
        .iter()
        .rev()
        .find(|e| e.kind() == "Started")?
        .message()
        .strip_prefix("task started as pid ")?
        .parse()
        .ok()
}

/// A `sleep` argument unique to this moment, so the test finds its process in /proc.
pub fn sleep_marker() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .subsec_nanos();
    format!("3600.{nanos:09}")
}

/// Whether `pid` is a live process (a zombie has exited).
pub fn alive(pid: i32) -> bool {
    drover_agent::driver::process::read_stat(pid).is_some_and(|s| !matches!(s.state, 'Z' | 'X'))
}

/// Live processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// Kills whatever a failed test left running with `marker` in its command line.
pub fn kill_leftovers(marker: &str) {
    for pid in processes_with(marker) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
}

/// Kills the processes carrying `marker` when dropped, so a failing test leaves none behind.
pub struct KillOnDrop(pub String);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        kill_leftovers(&self.0);
    }
}

/// A TCP proxy in front of a server. Disabling it drops every open connection and refuses
/// new ones, as a network partition would; enabling it lets traffic through again.
pub struct Proxy {
    addr: std::net::SocketAddr,
    enabled: Arc<AtomicBool>,
    cut: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(upstream: std::net::SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let enabled = Arc::new(AtomicBool::new(true));
        let (cut, _) = watch::channel(0u64);
        let (on, cuts) = (enabled.clone(), cut.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if !on.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let mut cut_rx = cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (mut client, mut server) = (client, server);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut_rx.changed() => {}
                    }
                });
            }
        });
        Proxy {
            addr,
            enabled,
            cut,
            task,
        }
    }

    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::SeqCst);
        if !on {
            self.cut.send_modify(|n| *n += 1);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Polls every 50 ms until `f` holds, for at most `deadline`.
pub async fn wait_until(what: &str, deadline: Duration, f: impl Fn() -> bool) {
    eventually(what, deadline, || {
        let ok = f();
        async move { ok.then_some(()) }
    })
    .await
}
