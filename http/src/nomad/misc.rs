//! The smaller shapes: job list stubs and summaries, write answers, the scheduler
//! configuration, and the agent's self-description.

use super::{algorithm, job_status, job_type, time_ns};
use drover_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Nomad's `JobListStub`, borrowed from the gRPC answer: a list of thousands of jobs is
/// written without copying a string of it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct JobListStub<'a> {
    #[serde(rename = "ID")]
    pub id: &'a str,
    #[serde(rename = "ParentID")]
    pub parent_id: &'a str,
    pub name: &'a str,
    pub namespace: &'a str,
    #[serde(rename = "Type")]
    pub job_type: &'static str,
    pub priority: u32,
    pub periodic: bool,
    pub parameterized_job: bool,
    pub stop: bool,
    pub status: &'static str,
    pub status_description: &'static str,
    pub job_summary: Option<JobSummary<'a>>,
    pub version: u64,
    pub submit_time: u64,
    pub modify_index: u64,
}

impl<'a> From<&'a pb::JobListEntry> for JobListStub<'a> {
    fn from(j: &'a pb::JobListEntry) -> Self {
        JobListStub {
            id: &j.id,
            parent_id: &j.parent_id,
            name: &j.name,
            namespace: &j.namespace,
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

/// Nomad's `JobSummary`, borrowed from the gRPC answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct JobSummary<'a> {
    #[serde(rename = "JobID")]
    pub job_id: &'a str,
    pub namespace: &'a str,
    #[serde(serialize_with = "group_summaries")]
    pub summary: &'a BTreeMap<String, pb::GroupSummary>,
    pub children: Children,
    pub create_index: u64,
    pub modify_index: u64,
}

/// Nomad's per-group counts, written straight from drover's.
fn group_summaries<S: serde::Serializer>(
    groups: &&BTreeMap<String, pb::GroupSummary>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(groups.iter().map(|(g, c)| {
        let counts = GroupSummary {
            queued: c.queued,
            complete: c.complete,
            failed: c.failed,
            running: c.running,
            starting: c.starting,
            lost: c.lost,
            unknown: c.unknown,
        };
        (g, counts)
    }))
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

impl<'a> From<&'a pb::JobSummary> for JobSummary<'a> {
    fn from(s: &'a pb::JobSummary) -> Self {
        let (job_id, namespace) = s
            .job
            .as_ref()
            .map_or(("", ""), |j| (j.id.as_str(), j.namespace.as_str()));
        JobSummary {
            job_id,
            namespace,
            summary: &s.groups,
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
