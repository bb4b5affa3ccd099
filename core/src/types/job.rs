//! A job: what an operator asks drover to keep running (or run once).

use super::{Constraint, Index, JobId, JobKey, TaskGroup, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The scheduler a job's evaluations go to.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub enum JobType {
    Service,
    Batch,
    System,
    SysBatch,
}

impl JobType {
    pub const ALL: [JobType; 4] = [
        JobType::Service,
        JobType::Batch,
        JobType::System,
        JobType::SysBatch,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobType::Service => "service",
            JobType::Batch => "batch",
            JobType::System => "system",
            JobType::SysBatch => "sysbatch",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// System and sysbatch jobs place one allocation per eligible node.
    pub fn is_per_node(self) -> bool {
        matches!(self, JobType::System | JobType::SysBatch)
    }

    /// Batch and sysbatch allocations run to completion and are never re-run once complete.
    pub fn runs_to_completion(self) -> bool {
        matches!(self, JobType::Batch | JobType::SysBatch)
    }
}

impl std::fmt::Display for JobType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum JobStatus {
    /// Registered, nothing running yet.
    Pending,
    Running,
    /// Stopped, or every allocation terminal with nothing left to place.
    Dead,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Pending => "pending",
            JobStatus::Running => "running",
            JobStatus::Dead => "dead",
        }
    }
}

/// Rolling update settings.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct UpdateStrategy {
    /// How many allocations may be replaced at once; 0 disables rolling (all at once).
    pub max_parallel: u32,
    /// Pause between rounds.
    pub stagger: Duration,
    /// Set when the job file writes an `update` block: a new version then rolls out as a
    /// deployment, gated on the health of what it places. `None` (a job without the block,
    /// or with `max_parallel = 0`) keeps the plain rolling update.
    pub deployment: Option<super::DeploymentStrategy>,
}

impl Default for UpdateStrategy {
    fn default() -> Self {
        Self {
            max_parallel: 1,
            stagger: Duration::from_secs(30),
            deployment: None,
        }
    }
}

impl UpdateStrategy {
    /// The deployment settings, when this strategy rolls out as a deployment.
    pub fn rollout(&self) -> Option<&super::DeploymentStrategy> {
        self.deployment.as_ref().filter(|_| self.max_parallel > 0)
    }
}

/// Launch the job on a cron schedule; each launch is a child job `<id>/periodic-<unix>`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct PeriodicConfig {
    pub cron: String,
    /// Skip a launch while an earlier child is still running.
    pub prohibit_overlap: bool,
    /// IANA zone name the cron spec is read in; UTC when empty.
    pub time_zone: String,
    pub enabled: bool,
}

/// A job launched only by `dispatch`, with meta and an optional payload.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct ParameterizedConfig {
    pub payload: PayloadRequirement,
    pub meta_required: Vec<String>,
    pub meta_optional: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum PayloadRequirement {
    #[default]
    Optional,
    Required,
    Forbidden,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Job {
    pub id: JobId,
    pub namespace: String,
    pub name: String,
    pub job_type: JobType,
    /// 1..=100; higher is scheduled first.
    pub priority: u8,
    /// Datacenter globs (`dc*`, `*`).
    pub datacenters: Vec<String>,
    pub constraints: Vec<Constraint>,
    pub groups: Vec<TaskGroup>,
    pub update: UpdateStrategy,
    pub periodic: Option<PeriodicConfig>,
    pub parameterized: Option<ParameterizedConfig>,
    /// For dispatched and periodic children: the parent's id.
    pub parent_id: Option<JobId>,
    /// Dispatch payload, kept with the child job.
    pub payload: Vec<u8>,
    pub meta: BTreeMap<String, String>,
    /// Starts at 0; bumped by the FSM on every register that changes the spec.
    pub version: u64,
    /// Set when a deployment of this version succeeded: what `auto_revert` goes back to.
    pub stable: bool,
    pub status: JobStatus,
    /// Set by `job stop`: the job stays for history but all its allocations stop.
    pub stop: bool,
    pub submit_time: Timestamp,
    pub create_index: Index,
    pub modify_index: Index,
    /// Index of the last change to the spec itself (not status).
    pub job_modify_index: Index,
}

impl Job {
    pub const DEFAULT_PRIORITY: u8 = 50;
    pub const MAX_PRIORITY: u8 = 100;

    /// A job with drover's defaults in the `default` namespace and `dc1`.
    pub fn new(id: impl AsRef<str>, job_type: JobType, groups: Vec<TaskGroup>) -> Self {
        let id = JobId::new(id);
        Self {
            name: id.to_string(),
            id,
            namespace: crate::DEFAULT_NAMESPACE.into(),
            job_type,
            priority: Self::DEFAULT_PRIORITY,
            datacenters: vec!["*".into()],
            constraints: Vec::new(),
            groups,
            update: UpdateStrategy::default(),
            periodic: None,
            parameterized: None,
            parent_id: None,
            payload: Vec::new(),
            meta: BTreeMap::new(),
            version: 0,
            stable: false,
            status: JobStatus::Pending,
            stop: false,
            submit_time: Timestamp::ZERO,
            create_index: 0,
            modify_index: 0,
            job_modify_index: 0,
        }
    }

    pub fn key(&self) -> JobKey {
        JobKey {
            namespace: self.namespace.as_str().into(),
            id: self.id.clone(),
        }
    }

    pub fn group(&self, name: &str) -> Option<&TaskGroup> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// Periodic and parameterized parents are templates: they are never placed themselves.
    pub fn is_template(&self) -> bool {
        self.periodic.as_ref().is_some_and(|p| p.enabled) || self.parameterized.is_some()
    }

    /// Whether `other` differs from `self` in what the user submitted (ignores indexes,
    /// version, status and submit time). Registering an unchanged spec is not a new version.
    pub fn spec_differs(&self, other: &Job) -> bool {
        let strip = |j: &Job| {
            let mut j = j.clone();
            j.version = 0;
            j.stable = false;
            j.status = JobStatus::Pending;
            j.submit_time = Timestamp::ZERO;
            j.create_index = 0;
            j.modify_index = 0;
            j.job_modify_index = 0;
            j
        };
        strip(self) != strip(other)
    }
}
