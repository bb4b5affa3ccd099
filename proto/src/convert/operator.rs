//! The scheduler configuration and the operator service's requests.

use super::enums::optional_enum;
use super::{ConvertError, Problem, Result, WireEnum, Within, from_ms, parse_id, required};
use crate::v1 as pb;
use drover_core::*;
use std::time::Duration;

impl From<&PreemptionConfig> for pb::PreemptionConfig {
    fn from(p: &PreemptionConfig) -> Self {
        pb::PreemptionConfig {
            system: p.system,
            sysbatch: p.sysbatch,
            batch: p.batch,
            service: p.service,
        }
    }
}

impl From<&SchedulerConfig> for pb::SchedulerConfig {
    fn from(c: &SchedulerConfig) -> Self {
        pb::SchedulerConfig {
            algorithm: c.algorithm.to_wire(),
            preemption: Some((&c.preemption).into()),
            pause_eval_broker: c.pause_eval_broker,
            reject_job_registration: c.reject_job_registration,
            modify_index: c.modify_index,
        }
    }
}

pub(crate) fn scheduler_config(p: pb::SchedulerConfig) -> Result<SchedulerConfig> {
    let pre = required("preemption", p.preemption)?;
    Ok(SchedulerConfig {
        algorithm: SchedulerAlgorithm::from_wire("algorithm", p.algorithm)?,
        preemption: PreemptionConfig {
            system: pre.system,
            sysbatch: pre.sysbatch,
            batch: pre.batch,
            service: pre.service,
        },
        pause_eval_broker: p.pause_eval_broker,
        reject_job_registration: p.reject_job_registration,
        modify_index: p.modify_index,
    })
}

super::rooted_try_from!(pb::SchedulerConfig => SchedulerConfig, "config", scheduler_config);

/// A decoded `OperatorService.SchedulerSetConfig` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerConfigUpdate {
    /// Its `modify_index` is whatever the client sent; the FSM stamps the real one.
    pub config: SchedulerConfig,
    /// Apply only if the stored configuration's modify index still equals this.
    pub cas_index: Option<Index>,
}

impl TryFrom<pb::SchedulerSetConfigRequest> for SchedulerConfigUpdate {
    type Error = ConvertError;
    fn try_from(p: pb::SchedulerSetConfigRequest) -> std::result::Result<Self, ConvertError> {
        Ok(SchedulerConfigUpdate {
            config: scheduler_config(required("config", p.config)?).within("config")?,
            cas_index: p.cas_index,
        })
    }
}

/// The filters of `OperatorService.NodeList`; `None` (or empty) matches anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeFilter {
    pub health: Option<NodeHealth>,
    pub status: Option<NodeStatus>,
    pub datacenter: Option<String>,
    pub node_class: Option<String>,
    /// Matched against the hyphenated id text, so an operator can paste a short id.
    pub id_prefix: Option<String>,
}

impl NodeFilter {
    pub fn matches(&self, node: &Node) -> bool {
        self.health.is_none_or(|h| node.health == h)
            && self.status.is_none_or(|s| node.status == s)
            && self
                .datacenter
                .as_ref()
                .is_none_or(|dc| node.datacenter == *dc)
            && self
                .node_class
                .as_ref()
                .is_none_or(|c| node.node_class == *c)
            && self
                .id_prefix
                .as_ref()
                .is_none_or(|p| node.id.to_string().starts_with(p.as_str()))
    }
}

impl TryFrom<&pb::NodeListRequest> for NodeFilter {
    type Error = ConvertError;
    fn try_from(p: &pb::NodeListRequest) -> std::result::Result<Self, ConvertError> {
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Ok(NodeFilter {
            health: optional_enum("health", p.health)?,
            status: optional_enum("status", p.status)?,
            datacenter: non_empty(&p.datacenter),
            node_class: non_empty(&p.node_class),
            id_prefix: non_empty(&p.id_prefix.to_ascii_lowercase()),
        })
    }
}

/// A decoded `OperatorService.NodeDrain` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrainRequest {
    pub node_id: NodeId,
    /// `Some` starts (or replaces) a drain with these settings, `None` ends it.
    pub drain: Option<DrainSettings>,
    /// When ending a drain: make the node eligible again.
    pub mark_eligible: bool,
}

/// A drain's settings before the server stamps its start time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrainSettings {
    pub deadline: Option<Duration>,
    pub force: bool,
    pub ignore_system_jobs: bool,
}

impl DrainSettings {
    /// The drain strategy to store, started at `now`.
    pub fn start(&self, now: Timestamp) -> DrainStrategy {
        DrainStrategy {
            deadline: self.deadline,
            force: self.force,
            ignore_system_jobs: self.ignore_system_jobs,
            started_at: now,
        }
    }
}

impl TryFrom<pb::NodeDrainRequest> for DrainRequest {
    type Error = ConvertError;
    fn try_from(p: pb::NodeDrainRequest) -> std::result::Result<Self, ConvertError> {
        let node_id = parse_id("node_id", &p.node_id)?;
        if !p.enable && (p.deadline_ms.is_some() || p.force || p.ignore_system_jobs) {
            return Err(ConvertError::new(
                "enable",
                Problem::Invalid(
                    "false ends a drain, so deadline_ms, force and ignore_system_jobs must be unset",
                ),
            ));
        }
        if p.enable && p.mark_eligible {
            return Err(ConvertError::new(
                "mark_eligible",
                Problem::Invalid("only applies when ending a drain (enable = false)"),
            ));
        }
        Ok(DrainRequest {
            node_id,
            drain: p.enable.then(|| DrainSettings {
                deadline: p.deadline_ms.map(from_ms),
                force: p.force,
                ignore_system_jobs: p.ignore_system_jobs,
            }),
            mark_eligible: p.mark_eligible,
        })
    }
}

/// A decoded `OperatorService.NodeEligibility` request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EligibilityChange {
    pub node_id: NodeId,
    pub eligibility: Eligibility,
}

impl TryFrom<pb::NodeEligibilityRequest> for EligibilityChange {
    type Error = ConvertError;
    fn try_from(p: pb::NodeEligibilityRequest) -> std::result::Result<Self, ConvertError> {
        Ok(EligibilityChange {
            node_id: parse_id("node_id", &p.node_id)?,
            eligibility: Eligibility::from_wire("eligibility", p.eligibility)?,
        })
    }
}
