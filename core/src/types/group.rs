//! A task group: the unit of placement. All its tasks land on one node together.

use super::{Constraint, EphemeralDisk, GroupNetwork, Resources, Service, Task};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct TaskGroup {
    pub name: String,
    pub count: u32,
    pub constraints: Vec<Constraint>,
    pub tasks: Vec<Task>,
    pub restart: RestartPolicy,
    pub reschedule: ReschedulePolicy,
    /// `None`: the group does not tolerate disconnects (its allocations are lost at once).
    pub disconnect: Option<DisconnectPolicy>,
    /// Stop the allocation this long after its node disconnects (Nomad's
    /// `stop_after_client_disconnect`).
    pub stop_after_client_disconnect: Option<Duration>,
    /// Per-group update strategy; falls back to the job's.
    pub update: Option<super::UpdateStrategy>,
    pub meta: std::collections::BTreeMap<String, String>,
    /// How a node drain moves this group's allocations.
    pub migrate: MigrateStrategy,
    /// Scratch disk for the allocation, counted with its tasks' disk.
    pub ephemeral_disk: Option<EphemeralDisk>,
    /// The ports its allocations hold on their node; `None`: it asks for none.
    pub network: Option<GroupNetwork>,
    /// The group's own services (each task's are in the task).
    #[serde(default)]
    pub services: Vec<Service>,
}

/// What makes an allocation healthy for a drain or a deployment.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum HealthCheck {
    /// Every task running, and every service check that gates updates passing, for
    /// `min_healthy_time`.
    #[default]
    Checks,
    /// Every task running for `min_healthy_time`.
    TaskStates,
}

impl HealthCheck {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthCheck::Checks => "checks",
            HealthCheck::TaskStates => "task_states",
        }
    }

    pub fn parse(s: &str) -> Option<HealthCheck> {
        match s {
            "checks" => Some(HealthCheck::Checks),
            "task_states" => Some(HealthCheck::TaskStates),
            _ => None,
        }
    }
}

/// Nomad's `migrate` block: a drain marks at most `max_parallel` of the group's
/// allocations at a time, and marks the next only as replacements turn healthy (running
/// for `min_healthy_time`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct MigrateStrategy {
    pub max_parallel: u32,
    pub health_check: HealthCheck,
    pub min_healthy_time: Duration,
    /// A replacement not healthy by then is not waited for any longer (it is not counted
    /// healthy; the drain's deadline, if any, still moves the rest).
    pub healthy_deadline: Duration,
}

impl Default for MigrateStrategy {
    /// Nomad's defaults.
    fn default() -> Self {
        Self {
            max_parallel: 1,
            health_check: HealthCheck::Checks,
            min_healthy_time: Duration::from_secs(10),
            healthy_deadline: Duration::from_secs(300),
        }
    }
}

impl TaskGroup {
    /// A group of `count` copies of the given tasks, with the defaults of the job's type.
    pub fn new(name: impl Into<String>, count: u32, tasks: Vec<Task>) -> Self {
        Self {
            name: name.into(),
            count,
            constraints: Vec::new(),
            tasks,
            restart: RestartPolicy::default(),
            reschedule: ReschedulePolicy::service_default(),
            disconnect: None,
            stop_after_client_disconnect: None,
            update: None,
            meta: Default::default(),
            migrate: MigrateStrategy::default(),
            ephemeral_disk: None,
            network: None,
            services: Vec::new(),
        }
    }

    /// What one allocation of this group asks of a node: the sum over its tasks, plus its
    /// ephemeral disk.
    pub fn resources(&self) -> Resources {
        let disk = self.ephemeral_disk.map_or(0, |d| d.size_mb);
        self.tasks.iter().map(|t| t.resources).sum::<Resources>() + Resources::new(0, 0, disk)
    }

    /// The window during which a disconnected allocation is `unknown` rather than lost.
    pub fn disconnect_window(&self) -> Option<Duration> {
        self.disconnect.as_ref().and_then(|d| d.lost_after)
    }
}

/// What the agent does when a task exits unexpectedly, before the server reschedules.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct RestartPolicy {
    pub attempts: u32,
    pub interval: Duration,
    pub delay: Duration,
    pub mode: RestartMode,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum RestartMode {
    /// Give up and mark the task failed once attempts in the interval are used.
    Fail,
    /// Wait until the interval ends, then try again.
    Delay,
}

impl Default for RestartPolicy {
    /// Nomad's service default: 2 attempts in 30 minutes, 15 s apart, then fail.
    fn default() -> Self {
        Self {
            attempts: 2,
            interval: Duration::from_secs(30 * 60),
            delay: Duration::from_secs(15),
            mode: RestartMode::Fail,
        }
    }
}

/// How the server replaces failed allocations.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ReschedulePolicy {
    pub attempts: u32,
    pub interval: Duration,
    pub delay: Duration,
    pub delay_function: DelayFunction,
    pub max_delay: Duration,
    pub unlimited: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum DelayFunction {
    Constant,
    Exponential,
    Fibonacci,
}

impl DelayFunction {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "constant" => Some(Self::Constant),
            "exponential" => Some(Self::Exponential),
            "fibonacci" => Some(Self::Fibonacci),
            _ => None,
        }
    }
}

impl ReschedulePolicy {
    /// Nomad's service default: unlimited, exponential from 30 s up to 1 h.
    pub fn service_default() -> Self {
        Self {
            attempts: 0,
            interval: Duration::ZERO,
            delay: Duration::from_secs(30),
            delay_function: DelayFunction::Exponential,
            max_delay: Duration::from_secs(3600),
            unlimited: true,
        }
    }

    /// Nomad's batch default: one attempt in 24 h after 5 s.
    pub fn batch_default() -> Self {
        Self {
            attempts: 1,
            interval: Duration::from_secs(24 * 3600),
            delay: Duration::from_secs(5),
            delay_function: DelayFunction::Constant,
            max_delay: Duration::ZERO,
            unlimited: false,
        }
    }

    /// No rescheduling at all (system jobs, or `attempts = 0` without `unlimited`).
    pub fn disabled() -> Self {
        Self {
            attempts: 0,
            interval: Duration::ZERO,
            delay: Duration::ZERO,
            delay_function: DelayFunction::Constant,
            max_delay: Duration::ZERO,
            unlimited: false,
        }
    }

    pub fn enabled(&self) -> bool {
        self.unlimited || self.attempts > 0
    }
}

/// How a group treats a node that stops heartbeating (Nomad's `disconnect` block).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct DisconnectPolicy {
    /// How long allocations stay `unknown` before they are lost; `max_client_disconnect`
    /// in older job files.
    pub lost_after: Option<Duration>,
    /// Whether to place a replacement while the original is unknown.
    pub replace: bool,
    /// Which of original and replacement survives when the original reconnects.
    pub reconcile: ReconcileStrategy,
    /// Stop the allocation on the client after this long without the servers.
    pub stop_on_client_after: Option<Duration>,
}

impl Default for DisconnectPolicy {
    fn default() -> Self {
        Self {
            lost_after: None,
            replace: true,
            reconcile: ReconcileStrategy::BestScore,
            stop_on_client_after: None,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ReconcileStrategy {
    /// Keep the original unless the job version changed (drover's and Nomad's default).
    BestScore,
    KeepOriginal,
    KeepReplacement,
    LongestRunning,
}

impl ReconcileStrategy {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "best_score" => Some(Self::BestScore),
            "keep_original" => Some(Self::KeepOriginal),
            "keep_replacement" => Some(Self::KeepReplacement),
            "longest_running" => Some(Self::LongestRunning),
            _ => None,
        }
    }
}
