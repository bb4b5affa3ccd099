//! A deployment: one job version's rollout under an `update` block, gated on the health of
//! the allocations it places.
//!
//! The scheduler creates it with the plan that first places the new version; the FSM counts
//! what it places and what turns healthy or unhealthy (the counts are never decided
//! anywhere else); the leader's deployment watcher (`crate::leader::deployments`) promotes,
//! fails and completes it.

use super::{AllocId, DeploymentId, HealthCheck, Index, JobId, JobKey, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum DeploymentStatus {
    Running,
    /// An operator paused it: nothing more is placed until it is resumed.
    Paused,
    Successful,
    Failed,
    /// Superseded by a newer version, or its job was stopped.
    Cancelled,
}

impl DeploymentStatus {
    pub const ALL: [DeploymentStatus; 5] = [
        DeploymentStatus::Running,
        DeploymentStatus::Paused,
        DeploymentStatus::Successful,
        DeploymentStatus::Failed,
        DeploymentStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentStatus::Running => "running",
            DeploymentStatus::Paused => "paused",
            DeploymentStatus::Successful => "successful",
            DeploymentStatus::Failed => "failed",
            DeploymentStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// Running and paused deployments may still change; the others never do.
    pub fn is_active(self) -> bool {
        matches!(self, DeploymentStatus::Running | DeploymentStatus::Paused)
    }
}

/// Why a deployment is in its status, in Nomad's words.
pub mod deployment_describe {
    pub const RUNNING: &str = "Deployment is running";
    pub const RUNNING_NEEDS_PROMOTION: &str = "Deployment is running but requires manual promotion";
    pub const PAUSED: &str = "Deployment is paused";
    pub const SUCCESSFUL: &str = "Deployment completed successfully";
    pub const UNHEALTHY: &str = "Failed due to unhealthy allocations";
    pub const UNHEALTHY_REVERTED: &str =
        "Failed due to unhealthy allocations - rolling back to job version";
    pub const PROGRESS_DEADLINE: &str = "Failed due to progress deadline";
    pub const PROGRESS_DEADLINE_REVERTED: &str =
        "Failed due to progress deadline - rolling back to job version";
    pub const FAILED_BY_USER: &str = "Deployment marked as failed";
    pub const NEWER_JOB: &str = "Cancelled due to newer version of job";
    pub const STOPPED_JOB: &str = "Cancelled because job is stopped";
    pub const PROMOTED: &str = "Deployment is running";
}

/// The health half of Nomad's `update` block: what a deployment waits for.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct DeploymentStrategy {
    /// Only `task_states` is accepted until services and their checks exist (issue 33).
    pub health_check: HealthCheck,
    /// How long every task must have run for the allocation to be healthy.
    pub min_healthy_time: Duration,
    /// An allocation not healthy by then is unhealthy.
    pub healthy_deadline: Duration,
    /// A group with no allocation turning healthy for this long fails the deployment;
    /// zero: no deadline.
    pub progress_deadline: Duration,
    /// New-version allocations placed beside the old ones until promotion.
    pub canary: u32,
    pub auto_promote: bool,
    /// A failed deployment registers the job's last stable version again.
    pub auto_revert: bool,
}

impl Default for DeploymentStrategy {
    /// Nomad's defaults.
    fn default() -> Self {
        Self {
            health_check: HealthCheck::Checks,
            min_healthy_time: Duration::from_secs(10),
            healthy_deadline: Duration::from_secs(300),
            progress_deadline: Duration::from_secs(600),
            canary: 0,
            auto_promote: false,
            auto_revert: false,
        }
    }
}

/// One group's rollout.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct DeploymentGroup {
    /// The group's count in this version.
    pub desired_total: u32,
    pub desired_canaries: u32,
    /// The canaries placed so far (replacements of failed canaries included).
    pub placed_canaries: Vec<AllocId>,
    /// Allocations of this version placed for the deployment (canaries included).
    pub placed: u32,
    pub healthy: u32,
    pub unhealthy: u32,
    /// Canaries were promoted: the rest of the group may roll.
    pub promoted: bool,
    pub auto_promote: bool,
    pub auto_revert: bool,
    /// Zero: no deadline.
    pub progress_deadline: Duration,
    /// When the group must next show progress (an allocation turning healthy), or fail the
    /// deployment; set from the first placement and moved on by each healthy allocation.
    pub require_progress_by: Option<Timestamp>,
}

impl DeploymentGroup {
    /// Canaries that are placed and not yet promoted hold the rest of the group back.
    pub fn awaits_promotion(&self) -> bool {
        self.desired_canaries > 0 && !self.promoted
    }

    /// Every allocation the group wants of this version is placed and healthy.
    pub fn is_complete(&self) -> bool {
        !self.awaits_promotion() && self.healthy >= self.desired_total
    }
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Deployment {
    pub id: DeploymentId,
    pub namespace: String,
    pub job_id: JobId,
    pub job_version: u64,
    /// The job's create index: a job purged and registered again is another job.
    pub job_create_index: Index,
    pub status: DeploymentStatus,
    pub description: String,
    pub groups: BTreeMap<String, DeploymentGroup>,
    pub create_time: Timestamp,
    pub create_index: Index,
    pub modify_index: Index,
}

impl Deployment {
    pub fn job_key(&self) -> JobKey {
        JobKey {
            namespace: self.namespace.as_str().into(),
            id: self.job_id.clone(),
        }
    }

    pub fn is_active(&self) -> bool {
        self.status.is_active()
    }

    /// Whether any group has canaries waiting for promotion.
    pub fn requires_promotion(&self) -> bool {
        self.groups.values().any(DeploymentGroup::awaits_promotion)
    }

    pub fn has_auto_promote(&self) -> bool {
        self.groups
            .values()
            .filter(|g| g.desired_canaries > 0)
            .all(|g| g.auto_promote)
            && self.groups.values().any(|g| g.desired_canaries > 0)
    }

    /// The next progress deadline of any group, for the leader's timers.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.groups
            .values()
            .filter(|g| !g.is_complete())
            .filter_map(|g| g.require_progress_by)
            .min()
    }
}

/// What an allocation's deployment knows of it: kept in its links (see [`super::Links`]).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct AllocDeployment {
    pub id: DeploymentId,
    pub canary: bool,
    /// Set once by the agent's report: healthy once every task ran for `min_healthy_time`,
    /// unhealthy when a task failed or `healthy_deadline` passed first.
    pub health: Option<DeploymentHealth>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct DeploymentHealth {
    pub healthy: bool,
    pub time: Timestamp,
}

/// One deployment's new status and why.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct DeploymentStatusUpdate {
    pub deployment_id: DeploymentId,
    pub status: DeploymentStatus,
    pub description: String,
}
