//! An evaluation: a request to reconcile one job (or one node's share of a job) with what
//! runs, handled by one scheduler. Evals are the unit of work of the broker and workers.

use super::{AllocMetric, EvalId, Index, JobId, JobType, NodeId, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The scheduler type of internal maintenance evals (GC and the like).
pub const CORE_SCHEDULER: &str = "_core";

/// Which scheduler handles an eval: one of the four job types, or `_core`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub enum SchedulerType {
    Service,
    Batch,
    System,
    SysBatch,
    Core,
}

impl SchedulerType {
    pub const ALL: [SchedulerType; 5] = [
        SchedulerType::Service,
        SchedulerType::Batch,
        SchedulerType::System,
        SchedulerType::SysBatch,
        SchedulerType::Core,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SchedulerType::Service => "service",
            SchedulerType::Batch => "batch",
            SchedulerType::System => "system",
            SchedulerType::SysBatch => "sysbatch",
            SchedulerType::Core => CORE_SCHEDULER,
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl From<JobType> for SchedulerType {
    fn from(t: JobType) -> Self {
        match t {
            JobType::Service => SchedulerType::Service,
            JobType::Batch => SchedulerType::Batch,
            JobType::System => SchedulerType::System,
            JobType::SysBatch => SchedulerType::SysBatch,
        }
    }
}

impl std::fmt::Display for SchedulerType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! string_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $s:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s),+ }
            }

            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_enum!(
    /// Why an eval was created.
    TriggeredBy {
        JobRegister => "job-register",
        JobDeregister => "job-deregister",
        NodeUpdate => "node-update",
        NodeDrain => "node-drain",
        AllocStop => "alloc-stop",
        AllocFailure => "alloc-failure",
        RollingUpdate => "rolling-update",
        PeriodicJob => "periodic-job",
        JobDispatch => "job-dispatch",
        FailedFollowUp => "failed-follow-up",
        MaxPlanAttempts => "max-plan-attempts",
        QueuedAllocs => "queued-allocs",
        RetryFailedAlloc => "alloc-failure-retry",
        Reconnect => "reconnect",
        MaxDisconnectTimeout => "max-disconnect-timeout",
        Preemption => "preemption",
        Scaling => "job-scaling",
        Scheduled => "scheduled",
        DeploymentWatcher => "deployment-watcher",
    }
);

string_enum!(
    EvalStatus {
        Pending => "pending",
        Blocked => "blocked",
        Complete => "complete",
        Failed => "failed",
        Canceled => "canceled",
    }
);

impl EvalStatus {
    /// Complete, failed and canceled evals are done: the broker never tracks them again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            EvalStatus::Complete | EvalStatus::Failed | EvalStatus::Canceled
        )
    }
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct Evaluation {
    pub id: EvalId,
    pub namespace: Arc<str>,
    pub priority: u8,
    pub scheduler: SchedulerType,
    pub triggered_by: TriggeredBy,
    pub job_id: JobId,
    /// The job's modify index when the eval was made.
    pub job_modify_index: Index,
    /// Set for node-triggered evals (and per-node system evals).
    pub node_id: Option<NodeId>,
    pub status: EvalStatus,
    pub status_description: String,
    /// Delay before the eval may be dequeued, counted from when the broker sees it.
    pub wait: Option<Duration>,
    /// Absolute time before which the eval may not be dequeued.
    pub wait_until: Option<Timestamp>,
    pub previous_eval: Option<EvalId>,
    pub next_eval: Option<EvalId>,
    pub blocked_eval: Option<EvalId>,
    /// Node class -> whether any node of it was feasible (captured by blocked evals).
    pub class_eligibility: BTreeMap<String, bool>,
    /// A constraint could not be captured by class: any capacity change may help.
    pub escaped_computed_class: bool,
    /// Per group, why its placements failed.
    pub failed_tg_allocs: BTreeMap<String, AllocMetric>,
    /// Per group, allocations still waiting to be placed.
    pub queued_allocations: BTreeMap<String, u32>,
    /// The state index the scheduler worked from.
    pub snapshot_index: Index,
    /// An alloc whose failure or disconnect this eval follows up on, if any.
    pub related_alloc: Option<super::AllocId>,
    pub create_index: Index,
    pub modify_index: Index,
    pub create_time: Timestamp,
    pub modify_time: Timestamp,
}

impl Evaluation {
    /// A pending eval for a job; ids come from the caller so core stays deterministic.
    pub fn new(
        id: EvalId,
        job: &super::Job,
        triggered_by: TriggeredBy,
        now: Timestamp,
    ) -> Evaluation {
        Evaluation {
            id,
            namespace: Arc::from(job.namespace.as_str()),
            priority: job.priority,
            scheduler: job.job_type.into(),
            triggered_by,
            job_id: job.id.clone(),
            job_modify_index: job.job_modify_index,
            node_id: None,
            status: EvalStatus::Pending,
            status_description: String::new(),
            wait: None,
            wait_until: None,
            previous_eval: None,
            next_eval: None,
            blocked_eval: None,
            class_eligibility: BTreeMap::new(),
            escaped_computed_class: false,
            failed_tg_allocs: BTreeMap::new(),
            queued_allocations: BTreeMap::new(),
            snapshot_index: 0,
            related_alloc: None,
            create_index: 0,
            modify_index: 0,
            create_time: now,
            modify_time: now,
        }
    }

    /// A fresh pending eval of the same job and scheduler, chained after this one
    /// (`previous_eval`): failed follow-ups, and anything else that retries an eval later.
    pub fn follow_up(&self, id: EvalId, triggered_by: TriggeredBy, now: Timestamp) -> Evaluation {
        Evaluation {
            id,
            namespace: self.namespace.clone(),
            priority: self.priority,
            scheduler: self.scheduler,
            triggered_by,
            job_id: self.job_id.clone(),
            job_modify_index: self.job_modify_index,
            node_id: None,
            status: EvalStatus::Pending,
            status_description: String::new(),
            wait: None,
            wait_until: None,
            previous_eval: Some(self.id),
            next_eval: None,
            blocked_eval: None,
            class_eligibility: BTreeMap::new(),
            escaped_computed_class: false,
            failed_tg_allocs: BTreeMap::new(),
            queued_allocations: BTreeMap::new(),
            snapshot_index: 0,
            related_alloc: None,
            create_index: 0,
            modify_index: 0,
            create_time: now,
            modify_time: now,
        }
    }

    pub fn job_key(&self) -> super::JobKey {
        super::JobKey {
            namespace: self.namespace.clone(),
            id: self.job_id.clone(),
        }
    }

    /// Whether the eval must wait before it is ready (`wait` or `wait_until`).
    pub fn is_delayed(&self) -> bool {
        self.wait.is_some_and(|w| !w.is_zero()) || self.wait_until.is_some()
    }

    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }
}
