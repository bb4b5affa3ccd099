//! Nomad's `Allocation` (lists answer the same shape: it holds every field of Nomad's
//! `AllocationListStub`) and its metrics.

use super::{client_status, desired_status, rfc3339, task_state, time_ns};
use drover_proto::v1 as pb;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Allocation {
    #[serde(rename = "ID")]
    pub id: String,
    #[serde(rename = "EvalID")]
    pub eval_id: String,
    pub name: String,
    pub namespace: String,
    #[serde(rename = "NodeID")]
    pub node_id: String,
    pub node_name: String,
    #[serde(rename = "JobID")]
    pub job_id: String,
    pub job_type: &'static str,
    pub job_version: u64,
    pub task_group: String,
    pub allocated_resources: AllocatedResources,
    pub desired_status: &'static str,
    pub desired_description: String,
    pub desired_transition: BTreeMap<String, bool>,
    pub client_status: &'static str,
    pub client_description: String,
    pub task_states: BTreeMap<String, TaskState>,
    #[serde(rename = "FollowupEvalID")]
    pub followup_eval_id: String,
    pub previous_allocation: String,
    pub next_allocation: String,
    pub reschedule_tracker: Option<RescheduleTracker>,
    pub preempted_allocations: Vec<String>,
    pub preempted_by_allocation: String,
    #[serde(rename = "DeploymentID")]
    pub deployment_id: String,
    /// Absent (null) for an allocation no deployment placed.
    pub deployment_status: Option<AllocDeploymentStatus>,
    pub metrics: AllocationMetric,
    pub create_index: u64,
    pub modify_index: u64,
    pub alloc_modify_index: u64,
    pub create_time: u64,
    pub modify_time: u64,
    /// drover: every client-status change, oldest first (what reconnects are judged by).
    pub client_status_history: Vec<StateEntry>,
}

/// Nomad's `AllocDeploymentStatus`: what the allocation's deployment knows of it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct AllocDeploymentStatus {
    /// Null until the agent decided.
    pub healthy: Option<bool>,
    /// When the agent decided; Go's zero time until then.
    pub timestamp: String,
    pub canary: bool,
    /// drover keeps no index of its own for the status: 0.
    pub modify_index: u64,
}

/// The deployment status of an allocation a deployment placed.
fn deployment_status(a: &pb::Allocation) -> Option<AllocDeploymentStatus> {
    if a.deployment_id.is_empty() && !a.canary && a.deployment_health.is_none() {
        return None;
    }
    let health = a.deployment_health.as_ref();
    Some(AllocDeploymentStatus {
        healthy: health.map(|h| h.healthy),
        timestamp: rfc3339(health.map_or(0, |h| h.time_unix_ms)),
        canary: a.canary,
        modify_index: 0,
    })
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct StateEntry {
    pub client_status: &'static str,
    pub time: u64,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct AllocatedResources {
    pub shared: SharedResources,
}

#[derive(Debug, Default, Serialize)]
pub struct SharedResources {
    #[serde(rename = "CPU")]
    pub cpu: u64,
    #[serde(rename = "MemoryMB")]
    pub memory_mb: u64,
    #[serde(rename = "DiskMB")]
    pub disk_mb: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct TaskState {
    pub state: &'static str,
    pub failed: bool,
    pub restarts: u32,
    pub started_at: String,
    pub finished_at: String,
    pub events: Vec<TaskEvent>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct TaskEvent {
    #[serde(rename = "Type")]
    pub kind: String,
    pub time: u64,
    pub message: String,
    pub display_message: String,
    pub exit_code: i32,
    pub fails_task: bool,
    /// drover: the failure was the node's, not the task's.
    pub infra_failure: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct RescheduleTracker {
    pub events: Vec<RescheduleEvent>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct RescheduleEvent {
    pub reschedule_time: u64,
    #[serde(rename = "PrevAllocID")]
    pub prev_alloc_id: String,
    #[serde(rename = "PrevNodeID")]
    pub prev_node_id: String,
    pub delay: u64,
}

/// Nomad's `AllocationMetric`: what the scheduler saw placing (or failing to place).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct AllocationMetric {
    pub nodes_evaluated: u32,
    pub nodes_filtered: u32,
    pub nodes_available: BTreeMap<String, u32>,
    pub class_filtered: BTreeMap<String, u32>,
    pub constraint_filtered: BTreeMap<String, u32>,
    pub nodes_exhausted: u32,
    pub class_exhausted: BTreeMap<String, u32>,
    pub dimension_exhausted: BTreeMap<String, u32>,
    pub coalesced_failures: u32,
}

impl From<&pb::AllocMetric> for AllocationMetric {
    fn from(m: &pb::AllocMetric) -> Self {
        let map = |m: &BTreeMap<String, u32>| m.iter().map(|(k, v)| (k.clone(), *v)).collect();
        AllocationMetric {
            nodes_evaluated: m.nodes_evaluated,
            nodes_filtered: m.nodes_filtered,
            nodes_available: map(&m.nodes_available),
            class_filtered: map(&m.class_filtered),
            constraint_filtered: map(&m.constraint_filtered),
            nodes_exhausted: m.nodes_exhausted,
            class_exhausted: map(&m.class_exhausted),
            dimension_exhausted: map(&m.dimension_exhausted),
            // Nomad counts the failures besides the one described; drover counts them all.
            coalesced_failures: m.coalesced_failures.saturating_sub(1),
        }
    }
}

fn task_states(states: &BTreeMap<String, pb::TaskState>) -> BTreeMap<String, TaskState> {
    states
        .iter()
        .map(|(name, s)| {
            let state = TaskState {
                state: task_state(s.state),
                failed: s.failed,
                restarts: s.restarts,
                started_at: rfc3339(s.started_at_unix_ms.unwrap_or(0)),
                finished_at: rfc3339(s.finished_at_unix_ms.unwrap_or(0)),
                events: s
                    .events
                    .iter()
                    .map(|e| TaskEvent {
                        kind: e.kind.clone(),
                        time: time_ns(e.time_unix_ms),
                        message: e.message.clone(),
                        display_message: e.message.clone(),
                        exit_code: e.exit_code.unwrap_or(0),
                        fails_task: s.failed && e.exit_code.is_some_and(|c| c != 0),
                        infra_failure: e.infra_failure,
                    })
                    .collect(),
            };
            (name.clone(), state)
        })
        .collect()
}

/// An allocation; `job_type` and `node_name` come from elsewhere when the caller has them.
pub fn allocation(a: &pb::Allocation, job_type: &'static str, node_name: &str) -> Allocation {
    let resources = a.resources.unwrap_or_default();
    let metric = a.metrics.unwrap_or_default();
    Allocation {
        id: a.id.clone(),
        eval_id: a.eval_id.clone(),
        name: a.name.clone(),
        namespace: a.namespace.clone(),
        node_id: a.node_id.clone(),
        node_name: node_name.to_string(),
        job_id: a.job_id.clone(),
        job_type,
        job_version: a.job_version,
        task_group: a.task_group.clone(),
        allocated_resources: AllocatedResources {
            shared: SharedResources {
                cpu: resources.cpu_mhz.unwrap_or(0),
                memory_mb: resources.memory_mb.unwrap_or(0),
                disk_mb: resources.disk_mb.unwrap_or(0),
            },
        },
        desired_status: desired_status(a.desired_status),
        desired_description: a.desired_description.clone(),
        desired_transition: BTreeMap::new(),
        client_status: client_status(a.client_status),
        client_description: a.client_description.clone(),
        task_states: task_states(&a.task_states),
        followup_eval_id: a.follow_up_eval_id.clone(),
        previous_allocation: a.previous_allocation.clone(),
        next_allocation: a.next_allocation.clone(),
        reschedule_tracker: a.reschedule_tracker.as_ref().map(|t| RescheduleTracker {
            events: t
                .events
                .iter()
                .map(|e| RescheduleEvent {
                    reschedule_time: time_ns(e.time_unix_ms),
                    prev_alloc_id: e.prev_alloc_id.clone(),
                    prev_node_id: e.prev_node_id.clone(),
                    delay: e.delay_ms.saturating_mul(1_000_000),
                })
                .collect(),
        }),
        preempted_allocations: a.preempted_allocations.clone(),
        preempted_by_allocation: a.preempted_by.clone(),
        deployment_id: a.deployment_id.clone(),
        deployment_status: deployment_status(a),
        metrics: AllocationMetric {
            nodes_evaluated: metric.nodes_evaluated,
            nodes_filtered: metric.nodes_filtered,
            nodes_exhausted: metric.nodes_exhausted,
            ..AllocationMetric::default()
        },
        create_index: a.create_index,
        modify_index: a.modify_index,
        alloc_modify_index: a.alloc_modify_index,
        create_time: time_ns(a.create_time_unix_ms),
        modify_time: time_ns(a.modify_time_unix_ms),
        client_status_history: a
            .state_history
            .iter()
            .map(|s| StateEntry {
                client_status: client_status(s.client_status),
                time: time_ns(s.time_unix_ms),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocation_carries_its_deployment_status() {
        let placed = |deployment_id: &str, canary, health| pb::Allocation {
            deployment_id: deployment_id.into(),
            canary,
            deployment_health: health,
            ..Default::default()
        };
        let decided = Some(pb::AllocDeploymentHealth {
            healthy: true,
            time_unix_ms: 1_700_000_000_123,
        });
        let table = [
            (placed("", false, None), serde_json::json!(null)),
            (
                placed("d1", true, None),
                serde_json::json!({
                    "Healthy": null,
                    "Timestamp": "0001-01-01T00:00:00Z",
                    "Canary": true,
                    "ModifyIndex": 0,
                }),
            ),
            (
                placed("d1", false, decided),
                serde_json::json!({
                    "Healthy": true,
                    "Timestamp": "2023-11-14T22:13:20.123Z",
                    "Canary": false,
                    "ModifyIndex": 0,
                }),
            ),
        ];
        for (alloc, want) in table {
            let json = serde_json::to_value(allocation(&alloc, "", "")).expect("json");
            assert_eq!(json["DeploymentStatus"], want, "{alloc:?}");
            assert_eq!(json["DeploymentID"], alloc.deployment_id.as_str());
        }
    }
}
