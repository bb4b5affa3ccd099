//! Which drivers this node can run, and why not: fingerprinted once at start and
//! advertised as node attributes in Nomad's convention, `driver.<name>.detected`,
//! `driver.<name>.healthy`, `driver.<name>.health` (a reason an operator can act on) and
//! `driver.<name> = "1"` only when the driver is detected and healthy, which is what the
//! scheduler's driver check places on.
//!
//! `exec` is healthy only when a probe task really ran isolated (namespaces, mounts,
//! chroot) and the cgroups that enforce its limits were found; `raw_exec` only when the
//! agent's config enables it; `docker` only when its engine answered (detected when its
//! socket exists), with the engine's version as `driver.docker.version`.

use crate::cgroups::Cgroups;
use crate::config::AgentConfig;
use crate::isolation::{Isolation, ShimSpec, mounts};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the fingerprint found for one driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    pub detected: bool,
    pub healthy: bool,
    pub reason: String,
}

impl Health {
    fn good(reason: String) -> Self {
        Self {
            detected: true,
            healthy: true,
            reason,
        }
    }

    fn bad(detected: bool, reason: String) -> Self {
        Self {
            detected,
            healthy: false,
            reason,
        }
    }
}

/// The drivers of this node and what they share.
#[derive(Debug)]
pub struct Drivers {
    /// The binary that runs the task shim.
    pub shim: PathBuf,
    pub cgroups: Option<Cgroups>,
    pub raw_exec_cgroups: bool,
    pub chroot_env: Vec<PathBuf>,
    pub pids_limit: u64,
    /// By driver name, every driver the agent knows.
    pub health: BTreeMap<&'static str, Health>,
    /// The Docker Engine, when it answered the fingerprint.
    pub docker: Option<super::docker::DockerDriver>,
}

impl Drivers {
    /// Fingerprints every driver; `scratch` is a private directory the `exec` probe may use.
    pub async fn fingerprint(config: &AgentConfig, scratch: &Path) -> Self {
        let shim = config
            .shim
            .clone()
            .unwrap_or_else(|| PathBuf::from("/proc/self/exe"));
        let cgroups = Cgroups::detect(&config.cgroup_parent);
        if let Err(e) = &cgroups {
            tracing::warn!(error = %e, "no cgroups: task limits are not enforced");
        }
        let mut health = BTreeMap::new();
        let raw_exec = if !config.raw_exec.enabled {
            Health::bad(
                false,
                "raw_exec is disabled in the agent's config (raw_exec { enabled = true })".into(),
            )
        } else {
            let limits = match (&cgroups, config.raw_exec.no_cgroups) {
                (_, true) => "without cgroups (raw_exec { no_cgroups = true })".to_string(),
                (Ok(c), false) => format!("in cgroup {} with limits", c.version()),
                (Err(e), false) => format!("without limits: {e}"),
            };
            Health::good(format!("raw_exec runs tasks as host processes {limits}"))
        };
        health.insert("raw_exec", raw_exec);
        let exec = exec_health(&shim, cgroups.as_ref().ok(), &config.chroot_env, scratch).await;
        health.insert("exec", exec);
        let (docker, docker_health) = docker_health(&config.docker).await;
        health.insert("docker", docker_health);
        let drivers = Self {
            shim,
            raw_exec_cgroups: !config.raw_exec.no_cgroups,
            cgroups: cgroups.ok(),
            chroot_env: config.chroot_env.clone(),
            pids_limit: config.task_pids_limit,
            health,
            docker,
        };
        for (name, h) in &drivers.health {
            tracing::info!(driver = name, healthy = h.healthy, reason = %h.reason, "driver fingerprinted");
        }
        drivers
    }

    /// The node attributes that advertise the drivers.
    pub fn attributes(&self) -> BTreeMap<String, String> {
        let mut attributes = BTreeMap::new();
        for (name, h) in &self.health {
            attributes.insert(format!("driver.{name}.detected"), h.detected.to_string());
            attributes.insert(format!("driver.{name}.healthy"), h.healthy.to_string());
            attributes.insert(format!("driver.{name}.health"), h.reason.clone());
            if h.detected && h.healthy {
                attributes.insert(format!("driver.{name}"), "1".into());
            }
        }
        if let Some(c) = &self.cgroups {
            attributes.insert("unique.cgroup.version".into(), c.version().into());
        }
        if let Some(d) = &self.docker {
            attributes.insert("driver.docker.version".into(), d.version.clone());
        }
        attributes
    }

    /// Whether `driver` may run a task here; the error names the driver and the reason.
    pub fn check(&self, driver: &str) -> Result<(), super::DriverError> {
        match self.health.get(driver) {
            Some(h) if h.detected && h.healthy => Ok(()),
            Some(h) => Err(super::DriverError::Unavailable {
                driver: driver.to_string(),
                reason: h.reason.clone(),
            }),
            None => Err(super::DriverError::UnknownDriver {
                driver: driver.to_string(),
            }),
        }
    }
}

/// How long the fingerprint waits for the Docker Engine to answer.
const DOCKER_FINGERPRINT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The Docker Engine of the agent's config: healthy only when it answers.
async fn docker_health(
    config: &crate::config::DockerConfig,
) -> (Option<super::docker::DockerDriver>, Health) {
    if !config.enabled {
        let why = "docker is disabled in the agent's config (docker { enabled = false })";
        return (None, Health::bad(false, why.into()));
    }
    // An engine that hangs must not hold the agent's start: it is simply not healthy.
    let connect = super::docker::DockerDriver::connect(&config.endpoint);
    match tokio::time::timeout(DOCKER_FINGERPRINT_TIMEOUT, connect).await {
        Ok(Ok(d)) => {
            let reason = format!("docker engine {} answers at {}", d.version, d.endpoint);
            (Some(d), Health::good(reason))
        }
        Ok(Err((detected, reason))) => (None, Health::bad(detected, reason)),
        Err(_) => {
            let reason = format!(
                "the engine at {} did not answer within {:?}",
                config.endpoint, DOCKER_FINGERPRINT_TIMEOUT
            );
            (None, Health::bad(true, reason))
        }
    }
}

/// Runs `sh -c 'exit 0'` isolated as an `exec` task would be; healthy only if it ran.
async fn exec_health(
    shim: &Path,
    cgroups: Option<&Cgroups>,
    chroot_env: &[PathBuf],
    scratch: &Path,
) -> Health {
    let uid = nix::unistd::geteuid();
    if !uid.is_root() {
        return Health::bad(
            false,
            format!("exec needs root for namespaces, mounts and chroot: running as uid {uid}"),
        );
    }
    if cgroups.is_none() {
        return Health::bad(
            true,
            "exec needs cgroups to enforce task limits and none were found".into(),
        );
    }
    match probe(shim, chroot_env, scratch).await {
        Ok(()) => Health::good("exec isolates tasks: namespaces, chroot, cgroups".into()),
        Err(e) => Health::bad(true, format!("exec could not isolate a probe task: {e}")),
    }
}

async fn probe(shim: &Path, chroot_env: &[PathBuf], scratch: &Path) -> Result<(), String> {
    let root = scratch.join("exec-probe");
    let shared = scratch.join("exec-probe-alloc");
    for d in [&root, &shared] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let entries = mounts::host_entries(chroot_env);
    let spec = ShimSpec {
        program: "sh".into(),
        args: vec!["-c".into(), "exit 0".into()],
        env: BTreeMap::from([("PATH".into(), crate::runner::TASK_PATH.into())]),
        cwd: "/".into(),
        user: None,
        cgroup_procs: Vec::new(),
        isolation: Some(Isolation {
            mounts: mounts::plan(&root, &entries, &shared),
            root: root.clone(),
            hostname: "exec-probe".into(),
        }),
    };
    let log = |name: &str| {
        std::fs::File::create(scratch.join(name)).map_err(|e| format!("probe log: {e}"))
    };
    let mut child =
        crate::isolation::launch::launch(shim, &spec, log("probe.out")?, log("probe.err")?)
            .await
            .map_err(|e| e.to_string())?;
    let status = child.wait().await.map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        let err = std::fs::read_to_string(scratch.join("probe.err")).unwrap_or_default();
        Err(format!("probe {status}: {}", err.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DockerConfig;

    fn config(path: &Path) -> DockerConfig {
        DockerConfig {
            enabled: true,
            endpoint: format!("unix://{}", path.display()),
        }
    }

    #[tokio::test]
    async fn docker_is_unhealthy_without_an_engine_that_answers() {
        let dir = tempfile::tempdir().expect("temp dir");
        // No socket at all: not detected.
        let (engine, health) = docker_health(&config(&dir.path().join("absent.sock"))).await;
        assert!(engine.is_none() && !health.detected && !health.healthy);
        assert!(
            health.reason.contains("no docker engine socket at"),
            "{health:?}"
        );

        // A socket that accepts and never answers: detected, unhealthy, and the agent's
        // start is not held past the fingerprint's timeout.
        let path = dir.path().join("silent.sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        let held = tokio::spawn(async move {
            let mut conns = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                conns.push(conn);
            }
        });
        let started = std::time::Instant::now();
        let (engine, health) = docker_health(&config(&path)).await;
        assert!(engine.is_none() && health.detected && !health.healthy);
        assert!(
            health.reason.contains("did not answer within 5s"),
            "{health:?}"
        );
        assert!(started.elapsed() < DOCKER_FINGERPRINT_TIMEOUT * 2);
        held.abort();

        let disabled = DockerConfig {
            enabled: false,
            ..config(&path)
        };
        let (_, health) = docker_health(&disabled).await;
        assert!(
            health.reason.contains("docker { enabled = false }"),
            "{health:?}"
        );
    }
}
