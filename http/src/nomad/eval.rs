//! Nomad's `Evaluation`.

use super::alloc::AllocationMetric;
use super::{eval_status, rfc3339, scheduler_type, time_ns, triggered_by};
use drover_proto::v1 as pb;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Evaluation {
    #[serde(rename = "ID")]
    pub id: String,
    pub priority: u32,
    #[serde(rename = "Type")]
    pub scheduler: &'static str,
    pub triggered_by: &'static str,
    pub namespace: String,
    #[serde(rename = "JobID")]
    pub job_id: String,
    pub job_modify_index: u64,
    #[serde(rename = "NodeID")]
    pub node_id: String,
    pub status: &'static str,
    pub status_description: String,
    pub wait: u64,
    pub wait_until: String,
    pub next_eval: String,
    pub previous_eval: String,
    pub blocked_eval: String,
    #[serde(rename = "FailedTGAllocs")]
    pub failed_tg_allocs: BTreeMap<String, AllocationMetric>,
    pub class_eligibility: BTreeMap<String, bool>,
    pub escaped_computed_class: bool,
    pub queued_allocations: BTreeMap<String, u32>,
    pub snapshot_index: u64,
    #[serde(rename = "RelatedAllocID")]
    pub related_alloc: String,
    pub create_index: u64,
    pub modify_index: u64,
    pub create_time: u64,
    pub modify_time: u64,
}

impl From<&pb::Evaluation> for Evaluation {
    fn from(e: &pb::Evaluation) -> Self {
        Evaluation {
            id: e.id.clone(),
            priority: e.priority,
            scheduler: scheduler_type(e.scheduler),
            triggered_by: triggered_by(e.triggered_by),
            namespace: e.namespace.clone(),
            job_id: e.job_id.clone(),
            job_modify_index: e.job_modify_index,
            node_id: e.node_id.clone(),
            status: eval_status(e.status),
            status_description: e.status_description.clone(),
            wait: e.wait_ms.unwrap_or(0).saturating_mul(1_000_000),
            wait_until: e.wait_until_unix_ms.map(rfc3339).unwrap_or_default(),
            next_eval: e.next_eval.clone(),
            previous_eval: e.previous_eval.clone(),
            blocked_eval: e.blocked_eval.clone(),
            failed_tg_allocs: e
                .failed_tg_allocs
                .iter()
                .map(|(g, m)| (g.clone(), m.into()))
                .collect(),
            class_eligibility: e
                .class_eligibility
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            escaped_computed_class: e.escaped_computed_class,
            queued_allocations: e
                .queued_allocations
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            snapshot_index: e.snapshot_index,
            related_alloc: e.related_alloc.clone(),
            create_index: e.create_index,
            modify_index: e.modify_index,
            create_time: time_ns(e.create_time_unix_ms),
            modify_time: time_ns(e.modify_time_unix_ms),
        }
    }
}
