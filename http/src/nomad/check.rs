//! An allocation's check results as Nomad's `/v1/client/allocation/:id/checks` answers
//! them: an object keyed by check id, each a `structs.CheckQueryResult`.
//!
//! Nomad's statuses are ternary: drover's passing is `success`, pending `pending`, and
//! warning and critical are `failure` (a warning is not a pass to Nomad's clients).
//! Timestamps are unix seconds, as Nomad writes them.

use drover_proto::v1 as pb;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "PascalCase")]
pub struct NomadCheckResult {
    #[serde(rename = "ID")]
    pub id: String,
    pub check: String,
    /// The allocation's name (`job.group[n]`), as Nomad fills it.
    pub group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub task: String,
    pub service: String,
    pub mode: &'static str,
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u32>,
    pub output: String,
    pub timestamp: u64,
}

fn status(wire: i32) -> &'static str {
    match pb::CheckStatus::try_from(wire) {
        Ok(pb::CheckStatus::Passing) => "success",
        Ok(pb::CheckStatus::Warning | pb::CheckStatus::Critical) => "failure",
        _ => "pending",
    }
}

/// Nomad's mode of a check: one whose results a deployment ignores (`on_update =
/// "ignore"`) only says whether the task is ready for traffic.
fn mode(on_update: &str) -> &'static str {
    match on_update {
        "ignore" => "readiness",
        _ => "healthiness",
    }
}

/// Every check of `instances` (the allocation named `alloc_name`'s registrations), by id:
/// `<registration id>-check-<n>`, unique within the allocation.
pub fn alloc_checks(
    alloc_name: &str,
    instances: &[pb::ServiceRegistration],
) -> BTreeMap<String, NomadCheckResult> {
    instances
        .iter()
        .flat_map(|r| {
            r.checks.iter().enumerate().map(move |(i, c)| {
                let id = format!("{}-check-{i}", r.id);
                let result = NomadCheckResult {
                    id: id.clone(),
                    check: c.name.clone(),
                    group: alloc_name.to_owned(),
                    task: r.task.clone(),
                    service: r.service_name.clone(),
                    mode: mode(&c.on_update),
                    status: status(c.status),
                    status_code: c.http_status,
                    output: c.output.clone(),
                    timestamp: c.time_ms / 1000,
                };
                (id, result)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_are_keyed_by_id_with_nomads_statuses() {
        let check = |name: &str, status: pb::CheckStatus, code: Option<u32>| pb::CheckState {
            name: name.into(),
            check_type: "http".into(),
            status: status as i32,
            output: format!("{name} said so"),
            http_status: code,
            time_ms: 1_700_000_000_999,
            on_update: match name {
                "new" => "ignore".into(),
                _ => "require_healthy".into(),
            },
        };
        let reg = pb::ServiceRegistration {
            id: "a1-task-web-0".into(),
            service_name: "web".into(),
            task: "web".into(),
            checks: vec![
                check("up", pb::CheckStatus::Passing, Some(200)),
                check("slow", pb::CheckStatus::Warning, Some(429)),
                check("new", pb::CheckStatus::Pending, None),
            ],
            ..Default::default()
        };
        let group = pb::ServiceRegistration {
            id: "a1-group-0".into(),
            service_name: "db".into(),
            checks: vec![check("alive", pb::CheckStatus::Critical, None)],
            ..Default::default()
        };
        let got = alloc_checks("shop.web[0]", &[reg, group]);
        let summary: Vec<(&str, &str, &str, Option<u32>, &str)> = got
            .iter()
            .map(|(id, r)| {
                let (check, status, code) = (r.check.as_str(), r.status, r.status_code);
                (id.as_str(), check, status, code, r.mode)
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "a1-group-0-check-0",
                    "alive",
                    "failure",
                    None,
                    "healthiness"
                ),
                (
                    "a1-task-web-0-check-0",
                    "up",
                    "success",
                    Some(200),
                    "healthiness"
                ),
                (
                    "a1-task-web-0-check-1",
                    "slow",
                    "failure",
                    Some(429),
                    "healthiness"
                ),
                ("a1-task-web-0-check-2", "new", "pending", None, "readiness"),
            ]
        );
        let json = serde_json::to_value(&got["a1-group-0-check-0"]).expect("json");
        assert_eq!(
            json,
            serde_json::json!({
                "ID": "a1-group-0-check-0",
                "Check": "alive",
                "Group": "shop.web[0]",
                "Service": "db",
                "Mode": "healthiness",
                "Status": "failure",
                "Output": "alive said so",
                "Timestamp": 1_700_000_000u64,
            }),
            "a group check has no Task, a check without an answer no StatusCode"
        );
        assert_eq!(got["a1-task-web-0-check-0"].task, "web");
    }
}
