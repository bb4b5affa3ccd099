//! One task's container: pull (if the engine lacks the image), create, start, and then a
//! waiter and a log pump of its own, so [`Container::wait`] is cancel-safe and the task's
//! output reaches its log files while the agent runs.

use super::{DockerDriver, DockerError, LABEL_ALLOC, LABEL_TASK, engine_message, is_not_found};
use crate::cgroups::Sample;
use crate::driver::{ExitOutcome, LogPaths};
use bollard::models::{ContainerCreateBody, HostConfig, PortBinding, PortMap};
use bollard::query_parameters as q;
use drover_core::types::AllocatedPort;
use futures::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long a container's last output may take to reach its log files after it ended.
const LOG_DRAIN: Duration = Duration::from_secs(2);

/// What to run in a container.
#[derive(Clone, Debug)]
pub struct ContainerSpec<'a> {
    pub alloc_id: &'a str,
    pub task: &'a str,
    pub image: &'a str,
    /// Replaces the image's command when set; `args` follow it (or the image's entrypoint).
    pub command: &'a str,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    /// `uid:gid` or a name the image knows; `None`: the image's user.
    pub user: Option<String>,
    pub memory_mb: u64,
    pub cpu_mhz: u64,
    pub pids_limit: u64,
    /// `host`, `none`, `bridge`, ...; `None`: the engine's default.
    pub network_mode: Option<&'a str>,
    /// `host:container[:ro]` bind mounts (the allocation's shared and the task's local dir).
    pub binds: Vec<String>,
    /// The group's ports the task's `config.ports` names: each host `host_ip:value` is
    /// published to the container's `to` (its `value` when unmapped), TCP and UDP.
    pub ports: Vec<AllocatedPort>,
}

/// The protocols a published port carries, as Nomad's docker driver publishes them.
const PORT_PROTOCOLS: [&str; 2] = ["tcp", "udp"];

/// The engine's exposed ports (`<port>/<protocol>`) and their host bindings for `ports`.
/// Two labels mapped to one container port are both bound to it.
fn port_bindings(ports: &[AllocatedPort]) -> (Vec<String>, PortMap) {
    let mut exposed = Vec::new();
    let mut bindings = PortMap::new();
    for port in ports {
        for protocol in PORT_PROTOCOLS {
            let key = format!("{}/{protocol}", port.task_port());
            let binding = PortBinding {
                host_ip: Some(port.host_ip.to_string()),
                host_port: Some(port.value.to_string()),
            };
            match bindings.get_mut(&key) {
                Some(Some(list)) => list.push(binding),
                _ => {
                    exposed.push(key.clone());
                    bindings.insert(key, Some(vec![binding]));
                }
            }
        }
    }
    (exposed, bindings)
}

impl ContainerSpec<'_> {
    fn body(&self) -> ContainerCreateBody {
        let mut cmd: Vec<String> = Vec::new();
        if !self.command.is_empty() {
            cmd.push(self.command.to_string());
        }
        cmd.extend(self.args.iter().cloned());
        let mb = |v: u64| i64::try_from(v.saturating_mul(1024 * 1024)).unwrap_or(i64::MAX);
        let (exposed, bindings) = port_bindings(&self.ports);
        let publishes = !exposed.is_empty();
        ContainerCreateBody {
            image: Some(self.image.to_string()),
            cmd: (!cmd.is_empty()).then_some(cmd),
            env: Some(self.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            user: self.user.clone(),
            exposed_ports: publishes.then_some(exposed),
            labels: Some(HashMap::from([
                (LABEL_ALLOC.to_string(), self.alloc_id.to_string()),
                (LABEL_TASK.to_string(), self.task.to_string()),
            ])),
            host_config: Some(HostConfig {
                memory: Some(mb(self.memory_mb)),
                // No swap beyond the memory limit: a task over its memory is OOM-killed, as
                // with the process drivers.
                memory_swap: Some(mb(self.memory_mb)),
                // The engine's relative weight, in the unit Nomad passes: the task's MHz.
                cpu_shares: Some(i64::try_from(self.cpu_mhz.max(2)).unwrap_or(i64::MAX)),
                pids_limit: i64::try_from(self.pids_limit).ok(),
                network_mode: self.network_mode.map(str::to_string),
                binds: Some(self.binds.clone()),
                port_bindings: publishes.then_some(bindings),
                ..HostConfig::default()
            }),
            ..ContainerCreateBody::default()
        }
    }
}

/// An image reference with a tag: the engine pulls every tag of a bare name.
fn with_tag(image: &str) -> String {
    let last = image.rsplit('/').next().unwrap_or(image);
    if last.contains(':') || image.contains('@') {
        image.to_string()
    } else {
        format!("{image}:latest")
    }
}

/// A running (or re-attached) container.
#[derive(Debug)]
pub struct Container {
    driver: DockerDriver,
    pub name: String,
    exit: watch::Receiver<Option<ExitOutcome>>,
    waiter: JoinHandle<()>,
    logs: JoinHandle<()>,
}

impl Drop for Container {
    /// The container itself lives on (an agent that detaches leaves it running); only the
    /// agent's watchers of it stop.
    fn drop(&mut self) {
        self.waiter.abort();
        self.logs.abort();
    }
}

impl DockerDriver {
    /// Makes sure the engine has `image`, pulling it when it does not.
    async fn ensure_image(&self, image: &str) -> Result<(), DockerError> {
        let refused = |message: String| DockerError::Image {
            image: image.to_string(),
            message,
        };
        match self.docker.inspect_image(image).await {
            Ok(_) => return Ok(()),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(engine_message(&e).map_or_else(|| self.engine_error(&e), refused)),
        }
        let reference = with_tag(image);
        tracing::info!(image = %reference, "pulling image");
        let options = q::CreateImageOptionsBuilder::new()
            .from_image(&reference)
            .build();
        let mut pull = self.docker.create_image(Some(options), None, None);
        while let Some(step) = pull.next().await {
            if let Err(e) = step {
                return Err(engine_message(&e).map_or_else(|| self.engine_error(&e), refused));
            }
        }
        Ok(())
    }

    /// Pulls (if needed), creates and starts the task's container, replacing a stopped one
    /// of the same name (an earlier run of the task).
    pub async fn start(
        &self,
        spec: &ContainerSpec<'_>,
        logs: &LogPaths,
    ) -> Result<Container, DockerError> {
        self.ensure_image(spec.image).await?;
        let name = DockerDriver::container_name(spec.alloc_id, spec.task);
        self.remove(&name).await?;
        let refused = |e: &bollard::errors::Error| match engine_message(e) {
            Some(message) => DockerError::Container {
                name: name.clone(),
                message,
            },
            None => self.engine_error(e),
        };
        let options = q::CreateContainerOptionsBuilder::new().name(&name).build();
        self.docker
            .create_container(Some(options), spec.body())
            .await
            .map_err(|e| refused(&e))?;
        if let Err(e) = self
            .docker
            .start_container(&name, None::<q::StartContainerOptions>)
            .await
        {
            let _ = self.remove(&name).await;
            return Err(refused(&e));
        }
        let published: Vec<String> = spec
            .ports
            .iter()
            .map(|p| format!("{}->{}", p.socket(), p.task_port()))
            .collect();
        tracing::info!(container = %name, image = %spec.image, ?published, "container started");
        Ok(self.watch(name, logs, 0))
    }

    /// The task's container after an agent restart: `Ok(Some)` while it runs, its end when
    /// it stopped meanwhile, `Ok(None)` when the engine no longer has it.
    pub async fn reattach(
        &self,
        alloc_id: &str,
        task: &str,
        logs: &LogPaths,
    ) -> Result<Option<Result<Container, ExitOutcome>>, DockerError> {
        let name = DockerDriver::container_name(alloc_id, task);
        let state = match self.docker.inspect_container(&name, None).await {
            Ok(c) => c.state.unwrap_or_default(),
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(self.engine_error(&e)),
        };
        if state.running == Some(true) {
            // Output written while the agent was away is in the engine's log; what follows
            // is copied from now on.
            let since = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i32::try_from(d.as_secs()).unwrap_or(0));
            return Ok(Some(Ok(self.watch(name, logs, since))));
        }
        Ok(Some(Err(outcome(
            state.exit_code.unwrap_or(-1),
            state.oom_killed == Some(true),
        ))))
    }

    /// Starts the waiter and the log pump of a started container.
    fn watch(&self, name: String, logs: &LogPaths, since: i32) -> Container {
        let (exit_tx, exit) = watch::channel(None);
        let logs = tokio::spawn(pump_logs(self.clone(), name.clone(), logs.clone(), since));
        let waiter = tokio::spawn(wait_for_exit(self.clone(), name.clone(), exit_tx));
        Container {
            driver: self.clone(),
            name,
            exit,
            waiter,
            logs,
        }
    }
}

fn outcome(code: i64, oom: bool) -> ExitOutcome {
    let code = i32::try_from(code).unwrap_or(-1);
    if oom {
        ExitOutcome::OomKilled(code)
    } else {
        ExitOutcome::Exited(code)
    }
}

/// Waits for the container to stop and publishes how it ended. A broken connection to the
/// engine is retried: the container's end is still there to read once it answers.
async fn wait_for_exit(
    driver: DockerDriver,
    name: String,
    exit: watch::Sender<Option<ExitOutcome>>,
) {
    loop {
        let options = q::WaitContainerOptionsBuilder::new()
            .condition("not-running")
            .build();
        let code = match driver
            .docker
            .wait_container(&name, Some(options))
            .next()
            .await
        {
            Some(Ok(resp)) => Some(resp.status_code),
            // The client turns a non-zero exit into this error, code and all.
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Some(code),
            Some(Err(e)) if is_not_found(&e) => {
                exit.send_replace(Some(ExitOutcome::Unknown("the container was removed")));
                return;
            }
            Some(Err(e)) => {
                tracing::warn!(container = %name, error = %e, "waiting for a container failed; retrying");
                None
            }
            None => None,
        };
        if let Some(code) = code {
            let oom = match driver.docker.inspect_container(&name, None).await {
                Ok(c) => c.state.and_then(|s| s.oom_killed).unwrap_or(false),
                Err(_) => false,
            };
            exit.send_replace(Some(outcome(code, oom)));
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Copies the container's stdout and stderr into the task's log files until it stops.
async fn pump_logs(driver: DockerDriver, name: String, paths: LogPaths, since: i32) {
    let (out, err) = match paths.open() {
        Ok(files) => files,
        Err(e) => {
            tracing::warn!(container = %name, error = %e, "cannot open task logs");
            return;
        }
    };
    let (mut out, mut err) = (
        tokio::fs::File::from_std(out),
        tokio::fs::File::from_std(err),
    );
    let options = q::LogsOptionsBuilder::new()
        .follow(true)
        .stdout(true)
        .stderr(true)
        .since(since)
        .build();
    let mut stream = driver.docker.logs(&name, Some(options));
    while let Some(chunk) = stream.next().await {
        let written = match chunk {
            Ok(bollard::container::LogOutput::StdErr { message }) => err.write_all(&message).await,
            Ok(other) => out.write_all(other.as_ref()).await,
            Err(e) => {
                tracing::debug!(container = %name, error = %e, "container log stream ended");
                break;
            }
        };
        if let Err(e) = written {
            tracing::warn!(container = %name, error = %e, "cannot write task log");
        }
    }
    let _ = out.flush().await;
    let _ = err.flush().await;
}

impl Container {
    /// Waits for the container to stop. Cancel-safe.
    pub async fn wait(&mut self) -> ExitOutcome {
        let outcome = match self.exit.wait_for(Option::is_some).await {
            Ok(o) => o.clone().unwrap_or(ExitOutcome::Unknown("no exit status")),
            Err(_) => ExitOutcome::Unknown("the container's waiter stopped"),
        };
        // Its last lines reach the log files before anyone is told it ended.
        let _ = tokio::time::timeout(LOG_DRAIN, &mut self.logs).await;
        outcome
    }

    /// Sends `signal`, then SIGKILL if the container still runs after `timeout`.
    pub async fn kill(
        &mut self,
        signal: nix::sys::signal::Signal,
        timeout: Duration,
    ) -> ExitOutcome {
        self.signal(signal).await;
        match tokio::time::timeout(timeout, self.wait()).await {
            Ok(outcome) => outcome,
            Err(_) => {
                tracing::info!(container = %self.name, "container outlived its kill timeout; sending SIGKILL");
                self.signal(nix::sys::signal::Signal::SIGKILL).await;
                self.wait().await
            }
        }
    }

    /// Sends `signal` to the container's main process; one that already stopped is fine.
    pub async fn signal(&self, signal: nix::sys::signal::Signal) {
        let options = q::KillContainerOptionsBuilder::new()
            .signal(signal.as_str())
            .build();
        if let Err(e) = self
            .driver
            .docker
            .kill_container(&self.name, Some(options))
            .await
            && engine_message(&e).is_none()
        {
            tracing::warn!(container = %self.name, error = %e, "cannot signal container");
        }
    }

    /// What reads the container's usage, apart from the container's handle (which the
    /// task runner holds while it waits).
    pub fn stats(&self) -> ContainerStats {
        ContainerStats {
            driver: self.driver.clone(),
            name: self.name.clone(),
        }
    }
}

/// Reads one container's usage from the engine.
#[derive(Clone, Debug)]
pub struct ContainerStats {
    driver: DockerDriver,
    name: String,
}

impl ContainerStats {
    /// One reading of the container's CPU time and memory, as a cgroup gives them.
    pub async fn sample(&self) -> Option<Sample> {
        let options = q::StatsOptionsBuilder::new()
            .stream(false)
            .one_shot(true)
            .build();
        let stats = self
            .driver
            .docker
            .stats(&self.name, Some(options))
            .next()
            .await?
            .ok()?;
        let cpu_ns = stats.cpu_stats?.cpu_usage?.total_usage?;
        let memory = stats.memory_stats?;
        // The working set, as `docker stats` shows it: usage less the page cache.
        let cache = memory
            .stats
            .as_ref()
            .and_then(|s| s.get("cache").or_else(|| s.get("inactive_file")).copied())
            .unwrap_or(0);
        Some(Sample {
            cpu_ns,
            memory_bytes: memory.usage?.saturating_sub(cache),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_images_get_the_latest_tag() {
        let cases = [
            ("busybox", "busybox:latest"),
            ("busybox:1.36", "busybox:1.36"),
            ("127.0.0.1:5000/app", "127.0.0.1:5000/app:latest"),
            ("127.0.0.1:5000/app:2", "127.0.0.1:5000/app:2"),
            ("app@sha256:abc", "app@sha256:abc"),
        ];
        for (image, want) in cases {
            assert_eq!(with_tag(image), want, "{image}");
        }
    }

    #[test]
    fn a_spec_becomes_limits_labels_and_a_command() {
        let env = BTreeMap::from([("A".to_string(), "1".to_string())]);
        let args = vec!["-c".to_string(), "echo hi".to_string()];
        let spec = ContainerSpec {
            alloc_id: "a1",
            task: "web",
            image: "busybox:1",
            command: "sh",
            args: &args,
            env: &env,
            user: None,
            memory_mb: 64,
            cpu_mhz: 250,
            pids_limit: 100,
            network_mode: Some("host"),
            binds: vec!["/d/alloc:/alloc".into()],
            ports: Vec::new(),
        };
        let body = spec.body();
        assert_eq!(
            body.cmd,
            Some(vec!["sh".into(), "-c".into(), "echo hi".into()])
        );
        assert_eq!(body.env, Some(vec!["A=1".into()]));
        let labels = body.labels.expect("labels");
        assert_eq!(
            (labels[LABEL_ALLOC].as_str(), labels[LABEL_TASK].as_str()),
            ("a1", "web")
        );
        let host = body.host_config.expect("host config");
        assert_eq!(host.memory, Some(64 << 20));
        assert_eq!(host.memory_swap, Some(64 << 20));
        assert_eq!(host.cpu_shares, Some(250));
        assert_eq!(host.pids_limit, Some(100));
        assert_eq!(host.network_mode.as_deref(), Some("host"));
        assert_eq!((body.exposed_ports, host.port_bindings), (None, None));
    }

    #[test]
    fn ports_publish_host_ports_to_the_mapped_container_port() {
        let port = |label: &str, value: u16, to: u16, ip: &str| AllocatedPort {
            label: label.into(),
            value,
            to,
            host_ip: ip.parse().expect("ip"),
        };
        let env = BTreeMap::new();
        let spec = ContainerSpec {
            alloc_id: "a1",
            task: "web",
            image: "busybox:1",
            command: "",
            args: &[],
            env: &env,
            user: None,
            memory_mb: 64,
            cpu_mhz: 100,
            pids_limit: 100,
            network_mode: None,
            binds: Vec::new(),
            ports: vec![
                port("http", 21000, 8080, "127.0.0.1"),
                port("raw", 21001, 0, "10.0.0.4"),
                port("alt", 21002, 8080, "127.0.0.1"),
            ],
        };
        let body = spec.body();
        let mut exposed = body.exposed_ports.expect("exposed ports");
        exposed.sort();
        assert_eq!(exposed, ["21001/tcp", "21001/udp", "8080/tcp", "8080/udp"]);
        let bindings = body
            .host_config
            .expect("host config")
            .port_bindings
            .expect("port bindings");
        let hosts = |key: &str| -> Vec<(String, String)> {
            bindings[key]
                .as_ref()
                .expect("bindings")
                .iter()
                .map(|b| {
                    (
                        b.host_ip.clone().unwrap_or_default(),
                        b.host_port.clone().unwrap_or_default(),
                    )
                })
                .collect()
        };
        let at = |ip: &str, port: &str| (ip.to_string(), port.to_string());
        for protocol in PORT_PROTOCOLS {
            assert_eq!(
                hosts(&format!("8080/{protocol}")),
                [at("127.0.0.1", "21000"), at("127.0.0.1", "21002")]
            );
            assert_eq!(
                hosts(&format!("21001/{protocol}")),
                [at("10.0.0.4", "21001")]
            );
        }
        assert_eq!(bindings.len(), 4);
    }
}
