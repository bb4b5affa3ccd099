//! Nomad's `Deployment` and `DeploymentUpdateResponse`. What drover does not keep
//! (`JobModifyIndex`, `JobSpecModifyIndex`, `ModifyTime`, a reverted version) is written
//! as Nomad's zero value, never guessed.

use super::{rfc3339, time_ns};
use drover_proto::v1 as pb;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Deployment {
    #[serde(rename = "ID")]
    pub id: String,
    pub namespace: String,
    #[serde(rename = "JobID")]
    pub job_id: String,
    pub job_version: u64,
    pub job_modify_index: u64,
    pub job_spec_modify_index: u64,
    pub job_create_index: u64,
    pub is_multiregion: bool,
    pub task_groups: BTreeMap<String, DeploymentState>,
    pub status: &'static str,
    pub status_description: String,
    pub create_index: u64,
    pub modify_index: u64,
    pub create_time: u64,
    pub modify_time: u64,
}

/// One group's rollout, as Nomad's `DeploymentState`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeploymentState {
    pub auto_revert: bool,
    pub auto_promote: bool,
    pub promoted: bool,
    pub placed_canaries: Vec<String>,
    pub desired_canaries: u32,
    pub desired_total: u32,
    pub placed_allocs: u32,
    pub healthy_allocs: u32,
    pub unhealthy_allocs: u32,
    /// Nanoseconds; 0: no progress deadline.
    pub progress_deadline: u64,
    /// RFC 3339; Go's zero time until the deadline is set.
    pub require_progress_by: String,
}

/// Nomad's spelling of a deployment's status (lower case, as its API writes it).
pub fn status(v: i32) -> &'static str {
    match pb::DeploymentStatus::try_from(v) {
        Ok(pb::DeploymentStatus::Running) => "running",
        Ok(pb::DeploymentStatus::Paused) => "paused",
        Ok(pb::DeploymentStatus::Successful) => "successful",
        Ok(pb::DeploymentStatus::Failed) => "failed",
        Ok(pb::DeploymentStatus::Cancelled) => "cancelled",
        Ok(pb::DeploymentStatus::Unspecified) | Err(_) => "",
    }
}

impl From<&pb::DeploymentGroup> for DeploymentState {
    fn from(g: &pb::DeploymentGroup) -> Self {
        DeploymentState {
            auto_revert: g.auto_revert,
            auto_promote: g.auto_promote,
            promoted: g.promoted,
            placed_canaries: g.placed_canaries.clone(),
            desired_canaries: g.desired_canaries,
            desired_total: g.desired_total,
            placed_allocs: g.placed,
            healthy_allocs: g.healthy,
            unhealthy_allocs: g.unhealthy,
            progress_deadline: g.progress_deadline_ms.saturating_mul(1_000_000),
            require_progress_by: rfc3339(g.require_progress_by_unix_ms),
        }
    }
}

impl From<&pb::Deployment> for Deployment {
    fn from(d: &pb::Deployment) -> Self {
        Deployment {
            id: d.id.clone(),
            namespace: d.namespace.clone(),
            job_id: d.job_id.clone(),
            job_version: d.job_version,
            job_modify_index: 0,
            job_spec_modify_index: 0,
            job_create_index: d.job_create_index,
            is_multiregion: false,
            task_groups: d
                .groups
                .iter()
                .map(|(name, g)| (name.clone(), g.into()))
                .collect(),
            status: status(d.status),
            status_description: d.description.clone(),
            create_index: d.create_index,
            modify_index: d.modify_index,
            create_time: time_ns(d.create_time_unix_ms),
            modify_time: 0,
        }
    }
}

/// What a deployment action answers, as Nomad's `DeploymentUpdateResponse`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeploymentUpdateResponse {
    #[serde(rename = "EvalID")]
    pub eval_id: String,
    /// The action's index when it created an evaluation (written with it); 0 otherwise.
    pub eval_create_index: u64,
    pub deployment_modify_index: u64,
    /// drover's answer does not say whether a failure reverted the job.
    pub reverted_job_version: Option<u64>,
    pub index: u64,
}

impl From<&pb::DeploymentActionResponse> for DeploymentUpdateResponse {
    fn from(r: &pb::DeploymentActionResponse) -> Self {
        DeploymentUpdateResponse {
            eval_id: r.eval_id.clone(),
            eval_create_index: if r.eval_id.is_empty() { 0 } else { r.index },
            deployment_modify_index: r.deployment.as_ref().map_or(0, |d| d.modify_index),
            reverted_job_version: None,
            index: r.index,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> pb::Deployment {
        let group = pb::DeploymentGroup {
            desired_total: 3,
            desired_canaries: 1,
            placed_canaries: vec!["a1".into()],
            placed: 2,
            healthy: 1,
            unhealthy: 1,
            promoted: false,
            auto_promote: true,
            auto_revert: true,
            progress_deadline_ms: 60_000,
            require_progress_by_unix_ms: 1_700_000_000_123,
        };
        pb::Deployment {
            id: "d1".into(),
            namespace: "default".into(),
            job_id: "web".into(),
            job_version: 4,
            job_create_index: 9,
            status: pb::DeploymentStatus::Paused as i32,
            description: "Deployment is paused".into(),
            groups: [("web".to_string(), group)].into_iter().collect(),
            create_time_unix_ms: 1_700_000_000_000,
            create_index: 20,
            modify_index: 25,
        }
    }

    #[test]
    fn a_deployment_is_written_with_nomads_field_names() {
        let json = serde_json::to_value(Deployment::from(&deployment())).expect("json");
        let want = serde_json::json!({
            "ID": "d1",
            "Namespace": "default",
            "JobID": "web",
            "JobVersion": 4,
            "JobModifyIndex": 0,
            "JobSpecModifyIndex": 0,
            "JobCreateIndex": 9,
            "IsMultiregion": false,
            "TaskGroups": {
                "web": {
                    "AutoRevert": true,
                    "AutoPromote": true,
                    "Promoted": false,
                    "PlacedCanaries": ["a1"],
                    "DesiredCanaries": 1,
                    "DesiredTotal": 3,
                    "PlacedAllocs": 2,
                    "HealthyAllocs": 1,
                    "UnhealthyAllocs": 1,
                    "ProgressDeadline": 60_000_000_000u64,
                    "RequireProgressBy": "2023-11-14T22:13:20.123Z",
                }
            },
            "Status": "paused",
            "StatusDescription": "Deployment is paused",
            "CreateIndex": 20,
            "ModifyIndex": 25,
            "CreateTime": 1_700_000_000_000_000_000u64,
            "ModifyTime": 0,
        });
        assert_eq!(json, want);
    }

    #[test]
    fn statuses_are_spelled_as_nomad_spells_them() {
        let table = [
            (pb::DeploymentStatus::Running, "running"),
            (pb::DeploymentStatus::Paused, "paused"),
            (pb::DeploymentStatus::Successful, "successful"),
            (pb::DeploymentStatus::Failed, "failed"),
            (pb::DeploymentStatus::Cancelled, "cancelled"),
            (pb::DeploymentStatus::Unspecified, ""),
        ];
        for (wire, want) in table {
            assert_eq!(status(wire as i32), want, "{wire:?}");
        }
        assert_eq!(status(99), "");
    }

    #[test]
    fn an_unset_progress_deadline_is_gos_zero_time() {
        let mut d = deployment();
        let group = d.groups.get_mut("web").expect("group");
        group.require_progress_by_unix_ms = 0;
        group.progress_deadline_ms = 0;
        let json = serde_json::to_value(Deployment::from(&d)).expect("json");
        let web = &json["TaskGroups"]["web"];
        assert_eq!(web["RequireProgressBy"], "0001-01-01T00:00:00Z");
        assert_eq!(web["ProgressDeadline"], 0);
    }

    #[test]
    fn an_action_answers_its_eval_and_indexes() {
        let table = [
            ("e1", 30, serde_json::json!(30)),
            ("", 31, serde_json::json!(0)),
        ];
        for (eval_id, index, eval_index) in table {
            let r = pb::DeploymentActionResponse {
                deployment: Some(pb::Deployment {
                    modify_index: index,
                    ..deployment()
                }),
                eval_id: eval_id.into(),
                index,
            };
            let json = serde_json::to_value(DeploymentUpdateResponse::from(&r)).expect("json");
            assert_eq!(
                json,
                serde_json::json!({
                    "EvalID": eval_id,
                    "EvalCreateIndex": eval_index,
                    "DeploymentModifyIndex": index,
                    "RevertedJobVersion": null,
                    "Index": index,
                }),
                "{eval_id:?}"
            );
        }
    }
}
