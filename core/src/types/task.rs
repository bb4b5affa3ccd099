//! A task: one process to run inside an allocation.

use super::{Artifact, Lifecycle, Resources, RestartPolicy, Service, Template};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Drivers drover can run: host processes, isolated processes, containers over the Docker
/// Engine API, and the simulator's stand-in.
pub const KNOWN_DRIVERS: [&str; 4] = ["raw_exec", "exec", "docker", "mock"];

/// A task's driver configuration. `command` and `args` are what the process driver reads;
/// anything else a job file sets is kept verbatim in `extra` for drivers that want it.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct TaskConfig {
    pub command: String,
    pub args: Vec<String>,
    pub extra: BTreeMap<String, String>,
    /// The docker driver's `ports`: labels of the group's network ports the container
    /// publishes (host `host_ip:value` to the container's `to`, or `value` when unmapped).
    #[serde(default)]
    pub ports: Vec<String>,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Task {
    pub name: String,
    pub driver: String,
    pub config: TaskConfig,
    pub env: BTreeMap<String, String>,
    pub resources: Resources,
    /// The artifact the task runs from; nodes that last ran it are preferred (warm inputs).
    pub snapshot: Option<String>,
    /// Time between the polite signal and the kill on stop.
    pub kill_timeout: Duration,
    pub meta: BTreeMap<String, String>,
    /// Who the task runs as on the node; `None`: the agent's choice.
    pub user: Option<String>,
    /// The signal the task is stopped with (`SIGINT`, ...); `None`: SIGTERM.
    pub kill_signal: Option<String>,
    /// Overrides the group's restart policy for this task.
    pub restart: Option<RestartPolicy>,
    /// `None`: a main task.
    pub lifecycle: Option<Lifecycle>,
    /// Fetched into the task's directory before it starts, in order.
    pub artifacts: Vec<Artifact>,
    /// Rendered into the task's directory before it starts, after the artifacts.
    pub templates: Vec<Template>,
    /// Where a dispatched job's payload is written, relative to the task's `local/` dir
    /// (`dispatch_payload { file }`).
    pub dispatch_payload: Option<String>,
    /// Services the task offers; their script checks run in the task's context.
    #[serde(default)]
    pub services: Vec<Service>,
}

impl Task {
    pub const DEFAULT_KILL_TIMEOUT: Duration = Duration::from_secs(5);

    /// A `raw_exec` task running `command` with Nomad's default resources (100 MHz, 300 MB).
    pub fn raw_exec(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            driver: "raw_exec".into(),
            config: TaskConfig {
                command: command.into(),
                ..TaskConfig::default()
            },
            env: BTreeMap::new(),
            resources: Resources::new(100, 300, 0),
            snapshot: None,
            kill_timeout: Self::DEFAULT_KILL_TIMEOUT,
            meta: BTreeMap::new(),
            user: None,
            kill_signal: None,
            restart: None,
            lifecycle: None,
            artifacts: Vec::new(),
            templates: Vec::new(),
            dispatch_payload: None,
            services: Vec::new(),
        }
    }
}
