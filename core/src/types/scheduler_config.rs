//! Cluster-wide scheduler settings an operator can change at run time.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum SchedulerAlgorithm {
    /// Fill nodes before using new ones (fewer, fuller nodes).
    #[default]
    Binpack,
    /// Spread load evenly across nodes.
    Spread,
}

impl SchedulerAlgorithm {
    pub fn as_str(self) -> &'static str {
        match self {
            SchedulerAlgorithm::Binpack => "binpack",
            SchedulerAlgorithm::Spread => "spread",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "binpack" => Some(Self::Binpack),
            "spread" => Some(Self::Spread),
            _ => None,
        }
    }
}

/// Which job types may preempt lower-priority allocations when a node is full.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct PreemptionConfig {
    pub system: bool,
    pub sysbatch: bool,
    pub batch: bool,
    pub service: bool,
}

impl Default for PreemptionConfig {
    /// Nomad's default: on for system jobs only.
    fn default() -> Self {
        Self {
            system: true,
            sysbatch: true,
            batch: false,
            service: false,
        }
    }
}

#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct SchedulerConfig {
    pub algorithm: SchedulerAlgorithm,
    pub preemption: PreemptionConfig,
    /// Pause all scheduling cluster-wide: the leader's broker still takes evals in but hands
    /// none to the workers until this is cleared (Nomad's `pause_eval_broker`).
    pub pause_eval_broker: bool,
    /// Refuse job registrations and dispatches with FAILED_PRECONDITION; stopping jobs still
    /// works (Nomad's `reject_job_registration`).
    pub reject_job_registration: bool,
    pub modify_index: super::Index,
}
