//! The server under test: a `drover server` child process started here with production
//! settings on a temporary data dir (the Raft log on disk, every commit durable), or one
//! already running elsewhere that the run only talks to.
//!
//! A child process, not a server inside the bench, so that the server's own peak memory,
//! CPU time and disk writes are read from `/proc/PID` apart from the simulator's and the
//! load generator's, and so that the restart scenario can SIGKILL it.

use super::error::BenchError;
use super::procfs::{self, Usage};
use crate::child::{Stopped, wait_or_kill};
use crate::client::Client;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

/// How long a fresh single server may take to elect itself and serve.
const LEADERSHIP_DEADLINE: Duration = Duration::from_secs(60);

/// Where the benchmarked server runs.
#[derive(Debug)]
pub enum Target {
    Child(Box<ChildServer>),
    /// `--servers N`: that many `drover server` processes forming one Raft cluster over
    /// loopback (static peers and a cluster secret, as an operator starts them); the run
    /// talks to all of them through `url`, a comma-separated list.
    Cluster {
        servers: Vec<ChildServer>,
        url: String,
    },
    Remote {
        url: String,
    },
}

/// A `drover server` started for the run, and the data dir deleted when the run ends.
#[derive(Debug)]
pub struct ChildServer {
    child: Child,
    url: String,
    metrics_addr: String,
    args: Vec<String>,
    /// The cluster secret of a `--servers N` cluster, passed in the environment.
    secret: Option<String>,
    log: PathBuf,
    data_dir: tempfile::TempDir,
}

/// Extra settings for the child server, as lines of its HCL config file.
#[derive(Clone, Debug, Default)]
pub struct ServerSettings {
    pub config_hcl: String,
}

impl Target {
    /// Starts `drover server` (this binary) on free loopback ports and waits until it
    /// leads and answers.
    pub async fn start_child(settings: &ServerSettings) -> Result<Target, BenchError> {
        let attempt = || async {
            let mut server = ChildServer::start(settings, None)?;
            match server.wait_until_serving(LEADERSHIP_DEADLINE).await {
                Ok(()) => Ok(Target::Child(Box::new(server))),
                Err(e) => {
                    server.kill();
                    Err(e)
                }
            }
        };
        on_fresh_ports(attempt).await
    }

    /// Starts `n` servers as one cluster and waits until every one of them knows the
    /// leader.
    pub async fn start_cluster(settings: &ServerSettings, n: usize) -> Result<Target, BenchError> {
        on_fresh_ports(|| Self::try_start_cluster(settings, n)).await
    }

    /// One attempt of [`Self::start_cluster`]; servers already started are killed when
    /// their `ChildServer`s drop on an error.
    async fn try_start_cluster(settings: &ServerSettings, n: usize) -> Result<Target, BenchError> {
        let ports = (0..n)
            .map(|_| free_ports())
            .collect::<Result<Vec<_>, _>>()
            .map_err(io("finding free ports"))?;
        let peers: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, [_, raft, _])| format!("{}=127.0.0.1:{raft}", i + 1))
            .collect();
        let mut secret = [0u8; 24];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut secret);
        let secret: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let mut servers = Vec::new();
        for (i, p) in ports.into_iter().enumerate() {
            let member = Member {
                id: i as u64 + 1,
                ports: p,
                peers: &peers,
                secret: &secret,
            };
            servers.push(ChildServer::start(settings, Some(member))?);
        }
        for i in 0..servers.len() {
            if let Err(e) = servers[i].wait_until_serving(LEADERSHIP_DEADLINE).await {
                // A member that lost a port keeps the others from a quorum: say so rather
                // than that no leader came.
                return Err(servers
                    .iter_mut()
                    .find_map(|s| s.exit_error().filter(lost_a_port))
                    .unwrap_or(e));
            }
        }
        let url = servers
            .iter()
            .map(|s| s.url.as_str())
            .collect::<Vec<_>>()
            .join(",");
        Ok(Target::Cluster { servers, url })
    }

    pub fn url(&self) -> &str {
        match self {
            Target::Child(child) => &child.url,
            Target::Cluster { url, .. } | Target::Remote { url } => url,
        }
    }

    /// The one server started for the run; `None` for a cluster or a remote server.
    pub fn child(&self) -> Option<&ChildServer> {
        match self {
            Target::Child(child) => Some(child),
            Target::Cluster { .. } | Target::Remote { .. } => None,
        }
    }

    pub fn child_mut(&mut self) -> Option<&mut ChildServer> {
        match self {
            Target::Child(child) => Some(child),
            Target::Cluster { .. } | Target::Remote { .. } => None,
        }
    }

    /// The servers started for the run: one, the cluster's, or none for a remote one.
    pub fn children(&self) -> Vec<&ChildServer> {
        match self {
            Target::Child(child) => vec![child],
            Target::Cluster { servers, .. } => servers.iter().collect(),
            Target::Remote { .. } => Vec::new(),
        }
    }

    /// The server started for the run that leads now (its metrics say so); a single
    /// child server always does.
    pub async fn leader(&self) -> Option<&ChildServer> {
        match self {
            Target::Child(child) => Some(child),
            Target::Cluster { servers, .. } => {
                for server in servers {
                    if let Ok(page) = super::scrape::fetch(server.metrics_addr()).await
                        && super::scrape::counter(&page, "drover_leader") == 1.0
                    {
                        return Some(server);
                    }
                }
                None
            }
            Target::Remote { .. } => None,
        }
    }

    /// Whether the run started the servers (and so may stop them and skip clean-up).
    pub fn is_child(&self) -> bool {
        !matches!(self, Target::Remote { .. })
    }

    /// Stops a server started for the run (SIGINT, as Ctrl-C, then waits) and removes its
    /// data; a remote server is left as it is.
    pub async fn stop(self) -> Result<(), BenchError> {
        let servers = match self {
            Target::Child(server) => vec![*server],
            Target::Cluster { servers, .. } => servers,
            Target::Remote { .. } => return Ok(()),
        };
        let mut first_error = None;
        for server in servers {
            if let Err(e) = server.stop().await
                && first_error.is_none()
            {
                first_error = Some(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// A server's place in a `--servers N` cluster.
struct Member<'a> {
    id: u64,
    /// API, Raft and metrics ports.
    ports: [u16; 3],
    /// Every member as `ID=host:raft-port`, this one included.
    peers: &'a [String],
    secret: &'a str,
}

impl ChildServer {
    /// Starts `drover server` (this binary) on free loopback ports, alone or as `member`
    /// of a cluster; serving is the caller's to wait for.
    fn start(settings: &ServerSettings, member: Option<Member<'_>>) -> Result<Self, BenchError> {
        let data_dir = tempfile::Builder::new()
            .prefix("drover-bench-")
            .tempdir()
            .map_err(BenchError::DataDir)?;
        let [api, raft, metrics] = match &member {
            Some(m) => m.ports,
            None => free_ports().map_err(io("finding free ports"))?,
        };
        let config = data_dir.path().join("server.hcl");
        std::fs::write(&config, &settings.config_hcl).map_err(BenchError::DataDir)?;
        let mut args = vec![
            "server".to_string(),
            "--config".into(),
            config.display().to_string(),
            "--data-dir".into(),
            data_dir.path().join("server").display().to_string(),
            "--bind".into(),
            format!("127.0.0.1:{api}"),
            "--raft-addr".into(),
            format!("127.0.0.1:{raft}"),
            "--metrics-addr".into(),
            format!("127.0.0.1:{metrics}"),
            "--log-level".into(),
            // Raft's own lines are few (start, membership, a restart's phases) and the
            // restart scenario reads its phases from them; the server's, leadership's and
            // workers' few lines show how far a stop got if it hangs.
            "warn,drover_server::raft=info,drover_server::server=info,drover_server::leader=info,drover_server::worker=info".into(),
        ];
        if let Some(m) = &member {
            args.extend(["--server-id".into(), m.id.to_string()]);
            args.extend(["--name".into(), format!("bench-{}", m.id)]);
            for peer in m.peers {
                args.extend(["--peer".into(), peer.clone()]);
            }
        }
        let secret = member.map(|m| m.secret.to_string());
        let log = data_dir.path().join("server.log");
        let child = spawn(&args, secret.as_deref(), &log)?;
        Ok(ChildServer {
            child,
            url: format!("http://127.0.0.1:{api}"),
            metrics_addr: format!("127.0.0.1:{metrics}"),
            args,
            secret,
            log,
            data_dir,
        })
    }

    /// SIGINT (as Ctrl-C), then waits for it to exit and removes its data.
    /// A server still running [`STOP_DEADLINE`] after SIGINT is killed and reported with
    /// the last lines of its own (not Raft's) log, which show how far its shutdown got.
    async fn stop(mut self) -> Result<(), BenchError> {
        self.interrupt();
        let status = tokio::task::spawn_blocking(move || {
            let status = wait_or_kill(&mut self.child, STOP_DEADLINE);
            (status, self)
        })
        .await;
        match status {
            Ok((Ok(Stopped::Exited(status)), _)) if status.success() => Ok(()),
            Ok((Ok(Stopped::Exited(status)), server)) => Err(BenchError::ServerExit {
                status: status.to_string(),
                log: server.log_tail(),
            }),
            Ok((Ok(Stopped::Killed), server)) => Err(BenchError::ServerHung {
                waited: STOP_DEADLINE,
                log: server.own_log_tail(),
            }),
            Ok((Err(e), _)) => Err(io("waiting for the server to stop")(e)),
            Err(e) => Err(io("waiting for the server to stop")(std::io::Error::other(
                e,
            ))),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Where the server serves Prometheus metrics (`host:port`).
    pub fn metrics_addr(&self) -> &str {
        &self.metrics_addr
    }

    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// Bytes of the files under the data dir now (Raft log, snapshots, the log file).
    pub fn data_dir_bytes(&self) -> u64 {
        dir_bytes(self.data_dir.path())
    }

    /// The server's own CPU time, disk writes and memory so far.
    pub fn usage(&self) -> Option<Usage> {
        procfs::usage(self.pid())
    }

    /// SIGKILL: the server gets no chance to flush or say goodbye.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn interrupt(&mut self) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGINT);
        }
    }

    /// Starts the server again on the same data dir, ports and settings, after [`kill`]
    /// (Self::kill). Returns once it is a process again; serving is the caller's to wait
    /// for.
    pub fn restart(&mut self) -> Result<(), BenchError> {
        self.child = spawn(&self.args, self.secret.as_deref(), &self.log)?;
        Ok(())
    }

    /// Why the server is no longer running, with its log's tail; `None` while it runs.
    fn exit_error(&mut self) -> Option<BenchError> {
        let status = self.child.try_wait().ok().flatten()?;
        Some(BenchError::ServerExit {
            status: status.to_string(),
            log: self.log_tail(),
        })
    }

    /// Waits until the server answers as leader, or fails with its log's tail if it
    /// exits or the deadline passes.
    pub async fn wait_until_serving(&mut self, within: Duration) -> Result<(), BenchError> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(exited) = self.exit_error() {
                return Err(exited);
            }
            if let Ok(client) = Client::connect(&self.url).await
                && client
                    .status()
                    .leader(drover_proto::v1::LeaderRequest {})
                    .await
                    .is_ok()
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(BenchError::NoLeader(within));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Everything the server logged so far, across restarts.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last lines the server logged, to explain why it stopped.
    fn log_tail(&self) -> String {
        last_lines(&self.log_text(), 10, |_| true)
    }

    /// The last lines drover's own modules logged: a server without its peers fills the
    /// rest of its log with openraft's retries.
    fn own_log_tail(&self) -> String {
        own_lines(&self.log_text(), 10)
    }
}

/// The last `n` lines of `log` that `keep` keeps.
fn last_lines(log: &str, n: usize, keep: impl Fn(&str) -> bool) -> String {
    let kept: Vec<&str> = log.lines().filter(|l| keep(l)).collect();
    kept[kept.len().saturating_sub(n)..].join("\n")
}

/// The last `n` lines that drover's own modules logged: the target (the word after the
/// timestamp and level) is `drover_server`'s, whatever the message names.
fn own_lines(log: &str, n: usize) -> String {
    last_lines(log, n, |l| {
        l.split_whitespace()
            .nth(2)
            .is_some_and(|target| target.starts_with("drover_server"))
    })
}

/// How long a server may take to stop after SIGINT: a clean stop takes seconds, so one
/// still running after a minute is hung.
const STOP_DEADLINE: Duration = Duration::from_secs(60);

impl Drop for ChildServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> BenchError {
    move |source| BenchError::Io { what, source }
}

fn spawn(args: &[String], secret: Option<&str>, log: &Path) -> Result<Child, BenchError> {
    let exe = std::env::current_exe().map_err(io("finding the drover binary"))?;
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io("opening the server's log"))?;
    let err = out.try_clone().map_err(io("opening the server's log"))?;
    let mut command = Command::new(&exe);
    if let Some(secret) = secret {
        command.env("DROVER_CLUSTER_SECRET", secret);
    }
    command
        .args(args)
        .env_remove("DROVER_ADDR")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| BenchError::Spawn {
            exe: exe.display().to_string(),
            source: e,
        })
}

/// How many times a run starts its servers again, on fresh ports, when one was taken.
const PORT_RETRIES: usize = 2;

/// Runs `start` (which picks its own free ports each time) again while it fails because
/// a port was taken before a server bound it ([`lost_a_port`]).
async fn on_fresh_ports<F, Fut>(start: F) -> Result<Target, BenchError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Target, BenchError>>,
{
    use backon::Retryable;
    start
        .retry(
            backon::ConstantBuilder::new()
                .with_delay(Duration::ZERO)
                .with_max_times(PORT_RETRIES),
        )
        .when(lost_a_port)
        .notify(|_, _| tracing::info!("a free port was taken before a server bound it; retrying"))
        .await
}

/// Whether a server exited because another process bound one of its ports in the moment
/// between [`free_ports`] closing them and the server binding them (the server's own
/// message for that: see `conflict.rs`).
fn lost_a_port(e: &BenchError) -> bool {
    matches!(e, BenchError::ServerExit { log, .. } if log.contains("is already in use"))
}

/// Three free loopback ports (API, Raft, metrics), found by binding port 0; the
/// listeners are closed just before the server binds them, so another process may take
/// one first: [`lost_a_port`] tells the caller to try again.
fn free_ports() -> std::io::Result<[u16; 3]> {
    let held = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ports = [0; 3];
    for (port, listener) in ports.iter_mut().zip(&held) {
        *port = listener.local_addr()?.port();
    }
    Ok(ports)
}

/// Bytes of the files under `dir`, recursively.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conflict::PortConflict;

    fn exited_with(log: String) -> BenchError {
        BenchError::ServerExit {
            status: "exit status: 1".into(),
            log,
        }
    }

    #[test]
    fn a_port_taken_before_the_server_bound_it_is_retried_and_nothing_else_is() {
        for flag in ["--bind", "--raft-addr", "--metrics-addr", "--http-addr"] {
            let conflict = PortConflict {
                flag,
                addr: "127.0.0.1:40123".into(),
            };
            let log = format!("Error: {conflict}");
            assert!(lost_a_port(&exited_with(log)), "{flag}");
        }
        let others = [
            exited_with("Error: server does not start: data dir is locked".into()),
            BenchError::NoLeader(Duration::from_secs(60)),
        ];
        for e in others {
            assert!(!lost_a_port(&e), "{e}");
        }
    }

    #[test]
    fn a_hung_servers_report_keeps_its_own_lines_and_not_raft_retries_naming_it() {
        let log = "\
2026-11-28T11:41:47.1Z  INFO drover_server::server: server shutting down server_id=3
2026-11-28T11:41:47.2Z  INFO drover_server::leader: leader duties revoked plans_dropped=0
2026-11-28T11:42:48.1Z  WARN openraft::replication: error replication to target=1 error=drover_server::raft::network::TransportError
2026-11-28T11:42:48.2Z ERROR openraft::replication: RPCError err=drover_server::raft::network::TransportError";
        assert_eq!(
            own_lines(log, 10),
            "2026-11-28T11:41:47.1Z  INFO drover_server::server: server shutting down server_id=3\n\
             2026-11-28T11:41:47.2Z  INFO drover_server::leader: leader duties revoked plans_dropped=0"
        );
        assert_eq!(
            own_lines(log, 1),
            "2026-11-28T11:41:47.2Z  INFO drover_server::leader: leader duties revoked plans_dropped=0"
        );
    }
}
