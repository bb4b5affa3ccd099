//! Evaluations, the eval list filter, and the leader's broker, blocked-eval and plan-queue
//! gauges.

use super::allocs::alloc_metric;
use super::enums::optional_enum;
use super::{
    ConvertError, Problem, Result, WireEnum, count, each_value, from_ms, narrow_u8, opt_id_text,
    parse_id, parse_opt_id, to_ms,
};
use crate::v1 as pb;
use drover_core::blocked::{BlockedEvalInfo, BlockedKind, BlockedStats};
use drover_core::broker::{BrokerStats, QueueCounts};
use drover_core::plan_check::PlanQueueStats;
use drover_core::*;

// --- Evaluations ----------------------------------------------------------------------------

impl From<&Evaluation> for pb::Evaluation {
    fn from(e: &Evaluation) -> Self {
        pb::Evaluation {
            id: e.id.to_string(),
            namespace: e.namespace.to_string(),
            priority: e.priority.into(),
            scheduler: e.scheduler.to_wire(),
            triggered_by: e.triggered_by.to_wire(),
            job_id: e.job_id.to_string(),
            job_modify_index: e.job_modify_index,
            node_id: opt_id_text(&e.node_id),
            status: e.status.to_wire(),
            status_description: e.status_description.clone(),
            wait_ms: e.wait.map(to_ms),
            wait_until_unix_ms: e.wait_until.map(Timestamp::as_millis),
            previous_eval: opt_id_text(&e.previous_eval),
            next_eval: opt_id_text(&e.next_eval),
            blocked_eval: opt_id_text(&e.blocked_eval),
            class_eligibility: e.class_eligibility.clone(),
            escaped_computed_class: e.escaped_computed_class,
            failed_tg_allocs: e
                .failed_tg_allocs
                .iter()
                .map(|(g, m)| (g.clone(), m.into()))
                .collect(),
            queued_allocations: e.queued_allocations.clone(),
            snapshot_index: e.snapshot_index,
            related_alloc: opt_id_text(&e.related_alloc),
            create_index: e.create_index,
            modify_index: e.modify_index,
            create_time_unix_ms: e.create_time.as_millis(),
            modify_time_unix_ms: e.modify_time.as_millis(),
        }
    }
}

pub(crate) fn evaluation(p: pb::Evaluation) -> Result<Evaluation> {
    if p.job_id.is_empty() {
        return Err(ConvertError::new("job_id", Problem::Missing));
    }
    Ok(Evaluation {
        id: parse_id("id", &p.id)?,
        namespace: p.namespace.into(),
        priority: narrow_u8("priority", p.priority)?,
        scheduler: SchedulerType::from_wire("scheduler", p.scheduler)?,
        triggered_by: TriggeredBy::from_wire("triggered_by", p.triggered_by)?,
        job_id: JobId::new(&p.job_id),
        job_modify_index: p.job_modify_index,
        node_id: parse_opt_id("node_id", &p.node_id)?,
        status: EvalStatus::from_wire("status", p.status)?,
        status_description: p.status_description,
        wait: p.wait_ms.map(from_ms),
        wait_until: p.wait_until_unix_ms.map(Timestamp::from_millis),
        previous_eval: parse_opt_id("previous_eval", &p.previous_eval)?,
        next_eval: parse_opt_id("next_eval", &p.next_eval)?,
        blocked_eval: parse_opt_id("blocked_eval", &p.blocked_eval)?,
        class_eligibility: p.class_eligibility,
        escaped_computed_class: p.escaped_computed_class,
        failed_tg_allocs: each_value("failed_tg_allocs", p.failed_tg_allocs, alloc_metric)?,
        queued_allocations: p.queued_allocations,
        snapshot_index: p.snapshot_index,
        related_alloc: parse_opt_id("related_alloc", &p.related_alloc)?,
        create_index: p.create_index,
        modify_index: p.modify_index,
        create_time: Timestamp::from_millis(p.create_time_unix_ms),
        modify_time: Timestamp::from_millis(p.modify_time_unix_ms),
    })
}

super::rooted_try_from!(pb::Evaluation => Evaluation, "eval", evaluation);

/// The filters of `EvalService.List`; `None` matches anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EvalFilter {
    pub status: Option<EvalStatus>,
    pub scheduler: Option<SchedulerType>,
    /// Set when the request named a job (an empty namespace meaning `default`).
    pub job: Option<JobKey>,
    pub triggered_by: Option<TriggeredBy>,
    /// Only ids starting with this (empty: any).
    pub id_prefix: String,
    /// Only this namespace (empty: any).
    pub in_namespace: String,
    /// At most this many, newest first; `None`: no limit.
    pub limit: Option<usize>,
}

impl EvalFilter {
    /// Whether `eval` passes every filter that is set (the limit is the caller's to apply).
    pub fn matches(&self, eval: &Evaluation) -> bool {
        self.status.is_none_or(|s| eval.status == s)
            && self.scheduler.is_none_or(|s| eval.scheduler == s)
            && self.triggered_by.is_none_or(|t| eval.triggered_by == t)
            && (self.id_prefix.is_empty() || eval.id.to_string().starts_with(&self.id_prefix))
            && (self.in_namespace.is_empty() || *eval.namespace == *self.in_namespace)
            && self
                .job
                .as_ref()
                .is_none_or(|k| *k.namespace == *eval.namespace && k.id == eval.job_id)
    }
}

impl TryFrom<&pb::ListEvalsRequest> for EvalFilter {
    type Error = ConvertError;
    /// UNSPECIFIED filters mean "any"; numbers this build does not know are refused, since
    /// ignoring them would answer a different question than the one asked.
    fn try_from(p: &pb::ListEvalsRequest) -> std::result::Result<Self, ConvertError> {
        let job = if p.job_id.is_empty() {
            if !p.namespace.is_empty() {
                return Err(ConvertError::new(
                    "job_id",
                    Problem::Invalid("required when namespace is set"),
                ));
            }
            None
        } else {
            Some(super::job_key(&p.namespace, &p.job_id)?)
        };
        Ok(EvalFilter {
            status: optional_enum("status", p.status)?,
            scheduler: optional_enum("scheduler", p.scheduler)?,
            job,
            triggered_by: optional_enum("triggered_by", p.triggered_by)?,
            id_prefix: p.id_prefix.to_ascii_lowercase(),
            in_namespace: p.in_namespace.clone(),
            limit: (p.limit > 0).then(|| usize::try_from(p.limit).unwrap_or(usize::MAX)),
        })
    }
}

// --- Broker, blocked evals, plan queue (core → proto only: only servers produce them) -----

impl From<&QueueCounts> for pb::QueueCounts {
    fn from(c: &QueueCounts) -> Self {
        pb::QueueCounts {
            ready: count(c.ready),
            unacked: count(c.unacked),
            pending: count(c.pending),
            waiting: count(c.waiting),
            cancelable: count(c.cancelable),
            failed: count(c.failed),
        }
    }
}

impl From<&BrokerStats> for pb::BrokerStats {
    fn from(s: &BrokerStats) -> Self {
        pb::BrokerStats {
            total: Some((&s.total).into()),
            by_scheduler: s
                .iter()
                .map(|(t, c)| pb::SchedulerQueueCounts {
                    scheduler: t.to_wire(),
                    counts: Some(c.into()),
                })
                .collect(),
            peak_job_evals: count(s.peak_job_evals),
        }
    }
}

impl From<&BlockedStats> for pb::BlockedStats {
    fn from(s: &BlockedStats) -> Self {
        pb::BlockedStats {
            total_blocked: count(s.total_blocked),
            total_captured: count(s.total_captured),
            total_escaped: count(s.total_escaped),
            total_system: count(s.total_system),
            total_failed: count(s.total_failed),
            duplicates: count(s.duplicates),
            by_class: s
                .by_class
                .iter()
                .map(|(c, n)| (c.clone(), count(*n)))
                .collect(),
        }
    }
}

impl From<&BlockedEvalInfo> for pb::BlockedEval {
    fn from(b: &BlockedEvalInfo) -> Self {
        let (kind, node_id) = match b.kind {
            BlockedKind::Captured => (pb::BlockedKind::Captured, String::new()),
            BlockedKind::Escaped => (pb::BlockedKind::Escaped, String::new()),
            BlockedKind::System { node } => (pb::BlockedKind::System, node.to_string()),
        };
        pb::BlockedEval {
            eval_id: b.eval_id.to_string(),
            job: Some((&b.job).into()),
            kind: kind.into(),
            node_id,
            class_eligibility: b.class_eligibility.clone(),
            escaped: b.escaped,
            triggered_by: b.triggered_by.to_wire(),
            snapshot_index: b.snapshot_index,
            blocked_since_unix_ms: b.blocked_since.as_millis(),
            outstanding: b.outstanding,
            unblocked_by: b.unblocked_by.clone(),
        }
    }
}

impl From<&PlanQueueStats> for pb::PlanQueueStats {
    fn from(s: &PlanQueueStats) -> Self {
        pb::PlanQueueStats {
            depth: count(s.depth),
            peak_depth: count(s.peak_depth),
            enqueued: s.enqueued,
            dequeued: s.dequeued,
        }
    }
}
