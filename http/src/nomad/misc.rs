//! The smaller shapes: job list stubs and summaries, write answers, the scheduler
//! configuration, and the agent's self-description.

use super::{algorithm, job_status, job_type, time_ns};
use drover_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct JobListStub {
    #[serde(rename = "ID")]
    pub id: String,
    #[serde(rename = "ParentID")]
    pub parent_id: String,
    pub name: String,
    pub namespace: String,
    #[serde(rename = "Type")]
    pub job_type: &'static str,
    pub priority: u32,
    pub periodic: bool,
    pub parameterized_job: bool,
    pub stop: bool,
    pub status: &'static str,
    pub status_description: &'static str,
    pub job_summary: Option<JobSummary>,
    pub version: u64,
    pub submit_time: u64,
    pub modify_index: u64,
}

impl From<&pb::JobListEntry> for JobListStub {
    fn from(j: &pb::JobListEntry) -> Self {
        JobListStub {
            id: j.id.clone(),
            parent_id: j.parent_id.clone(),
            name: j.name.clone(),
            namespace: j.namespace.clone(),
            job_type: job_type(j.job_type),
            priority: j.priority,
            // A template is periodic or parameterized; the list does not say which.
            periodic: false,
            parameterized_job: j.is_template,
            stop: j.stop,
            status: job_status(j.status),
            status_description: "",
            job_summary: j.summary.as_ref().map(JobSummary::from),
            version: j.version,
            submit_time: time_ns(j.submit_time_unix_ms),
            modify_index: j.modify_index,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct JobSummary {
    #[serde(rename = "JobID")]
    pub job_id: String,
    pub namespace: String,
    pub summary: BTreeMap<String, GroupSummary>,
    pub children: Children,
    pub create_index: u64,
    pub modify_index: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct GroupSummary {
    pub queued: u32,
    pub complete: u32,
    pub failed: u32,
    pub running: u32,
    pub starting: u32,
    pub lost: u32,
    pub unknown: u32,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Children {
    pub pending: u64,
    pub running: u64,
    pub dead: u64,
}

impl From<&pb::JobSummary> for JobSummary {
    fn from(s: &pb::JobSummary) -> Self {
        let job = s.job.clone().unwrap_or_default();
        JobSummary {
            job_id: job.id,
            namespace: job.namespace,
            summary: s
                .groups
                .iter()
                .map(|(g, c)| {
                    let counts = GroupSummary {
                        queued: c.queued,
                        complete: c.complete,
                        failed: c.failed,
                        running: c.running,
                        starting: c.starting,
                        lost: c.lost,
                        unknown: c.unknown,
                    };
                    (g.clone(), counts)
                })
                .collect(),
            children: Children::default(),
            create_index: s.modify_index,
            modify_index: s.modify_index,
        }
    }
}

/// Nomad's `JobRegisterResponse` (also what scale, revert and evaluate answer).
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct JobRegisterResponse {
    #[serde(rename = "EvalID")]
    pub eval_id: String,
    pub eval_create_index: u64,
    pub job_modify_index: u64,
    pub warnings: String,
    pub index: u64,
}

/// Nomad's `JobDeregisterResponse`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct JobDeregisterResponse {
    #[serde(rename = "EvalID")]
    pub eval_id: String,
    pub eval_create_index: u64,
    pub job_modify_index: u64,
    pub index: u64,
}

/// What node drain and eligibility answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NodeUpdateResponse {
    #[serde(rename = "EvalIDs")]
    pub eval_ids: Vec<String>,
    pub eval_create_index: u64,
    pub node_modify_index: u64,
    pub index: u64,
}

/// Nomad's `SchedulerConfiguration`, both ways.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct SchedulerConfig {
    pub scheduler_algorithm: String,
    pub preemption_config: PreemptionConfig,
    pub memory_oversubscription_enabled: bool,
    pub reject_job_registration: bool,
    pub pause_eval_broker: bool,
    pub create_index: u64,
    pub modify_index: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct PreemptionConfig {
    pub system_scheduler_enabled: bool,
    pub sys_batch_scheduler_enabled: bool,
    pub batch_scheduler_enabled: bool,
    pub service_scheduler_enabled: bool,
}

impl From<&pb::SchedulerConfig> for SchedulerConfig {
    fn from(c: &pb::SchedulerConfig) -> Self {
        let p = c.preemption.unwrap_or_default();
        SchedulerConfig {
            scheduler_algorithm: algorithm(c.algorithm).to_string(),
            preemption_config: PreemptionConfig {
                system_scheduler_enabled: p.system,
                sys_batch_scheduler_enabled: p.sysbatch,
                batch_scheduler_enabled: p.batch,
                service_scheduler_enabled: p.service,
            },
            memory_oversubscription_enabled: false,
            reject_job_registration: c.reject_job_registration,
            pause_eval_broker: c.pause_eval_broker,
            create_index: c.modify_index,
            modify_index: c.modify_index,
        }
    }
}

/// One server as `agent/members` lists it (Nomad's serf member).
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct AgentMember {
    pub name: String,
    pub addr: String,
    pub port: u16,
    pub tags: BTreeMap<String, String>,
    pub status: &'static str,
}

impl From<&pb::Member> for AgentMember {
    fn from(m: &pb::Member) -> Self {
        let (host, port) = m
            .address
            .rsplit_once(':')
            .map_or((m.address.as_str(), 0), |(h, p)| {
                (h, p.parse().unwrap_or(0))
            });
        let tags = [
            ("role", "nomad"),
            ("region", "global"),
            ("dc", "dc1"),
            ("build", m.version.as_str()),
            ("id", m.id.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        AgentMember {
            name: m.name.clone(),
            addr: host.to_string(),
            port,
            tags,
            status: match pb::MemberStatus::try_from(m.status) {
                Ok(pb::MemberStatus::Alive) => "alive",
                Ok(pb::MemberStatus::Unreachable) => "failed",
                _ => "unknown",
            },
        }
    }
}
