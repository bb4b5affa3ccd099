//! Evaluations, newest first; the detail answers "why is this pending": per group, which
//! constraint filtered how many nodes and which resource ran out where.

use super::format::age;
use super::{Cell, Column, Ctx, DetailLine, KeyHelp, TableView, Tone, ViewKind, col};
use crate::kinds::{RowKey, SortKey};
use drover_core::{AllocMetric, EvalStatus, Evaluation, Timestamp};
use std::collections::BTreeMap;

pub struct EvalsView;

fn eval<'a>(ctx: &Ctx<'a>, key: &RowKey) -> Option<&'a Evaluation> {
    match key {
        RowKey::Eval(id) => ctx.cluster.evals.get(id),
        _ => None,
    }
}

pub(super) fn status_tone(status: EvalStatus) -> Tone {
    match status {
        EvalStatus::Pending => Tone::Warn,
        EvalStatus::Blocked | EvalStatus::Failed => Tone::Bad,
        EvalStatus::Complete => Tone::Good,
        EvalStatus::Canceled => Tone::Dim,
    }
}

/// "Why is this pending", for a job's or an evaluation's detail: what waits per group
/// (from the evaluation whose queued counts are current), then the placement failures
/// behind it (from `reasons`, which may be another evaluation: a blocked one records
/// none itself). Empty when nothing waits and nothing failed.
pub(super) fn why_pending_lines(
    queued: &BTreeMap<String, u32>,
    reasons: Option<&Evaluation>,
    now: Timestamp,
) -> Vec<DetailLine> {
    let mut lines: Vec<DetailLine> = queued
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(group, n)| {
            DetailLine::toned(
                "queued",
                format!("{group}: {n} allocation(s) not placed"),
                Tone::Warn,
            )
        })
        .collect();
    if let Some(e) = reasons {
        lines.push(DetailLine::heading(format!(
            "why not placed (eval {}, {} ago)",
            e.id.short(),
            age(e.modify_time, now)
        )));
        for (group, metric) in &e.failed_tg_allocs {
            lines.extend(failure_lines(group, metric));
        }
    }
    lines
}

/// Lines explaining one group's failed placements, most telling first.
pub(super) fn failure_lines(group: &str, m: &AllocMetric) -> Vec<DetailLine> {
    let mut lines = vec![DetailLine::heading(format!(
        "group {group}: {} placement(s) failed",
        m.coalesced_failures
    ))];
    lines.push(DetailLine::field(
        "nodes",
        format!(
            "{} evaluated, {} filtered, {} exhausted",
            m.nodes_evaluated, m.nodes_filtered, m.nodes_exhausted
        ),
    ));
    if m.nodes_evaluated == 0 {
        let available: u32 = m.nodes_available.values().sum();
        lines.push(DetailLine::toned(
            "why",
            if available == 0 {
                "no ready node in the job's datacenters".to_owned()
            } else {
                format!("{available} ready node(s), none evaluated")
            },
            Tone::Bad,
        ));
    }
    for (constraint, n) in &m.constraint_filtered {
        lines.push(DetailLine::toned(
            "constraint",
            format!("{constraint} filtered {n} node(s)"),
            Tone::Warn,
        ));
    }
    for (class, n) in &m.class_filtered {
        lines.push(DetailLine::toned(
            "class",
            format!("{class} filtered {n} node(s)"),
            Tone::Warn,
        ));
    }
    for (dimension, n) in &m.dimension_exhausted {
        lines.push(DetailLine::toned(
            "exhausted",
            format!("{dimension} on {n} node(s)"),
            Tone::Bad,
        ));
    }
    for (shortage, n) in &m.ports_exhausted {
        lines.push(DetailLine::toned(
            "ports",
            format!("{shortage} on {n} node(s)"),
            Tone::Bad,
        ));
    }
    for (class, n) in &m.class_exhausted {
        lines.push(DetailLine::toned(
            "full class",
            format!("{class}: {n} node(s) without room"),
            Tone::Bad,
        ));
    }
    lines
}

const COLUMNS: &[Column] = &[
    col("ID", 8, 0),
    col("STATUS", 9, 0),
    col("TYPE", 8, 3),
    col("JOB", 18, 0),
    col("TRIGGERED BY", 18, 1),
    col("PRIO", 4, 4),
    col("AGE", 5, 2),
];

const KEYS: &[KeyHelp] = &[];

impl TableView for EvalsView {
    fn kind(&self) -> ViewKind {
        ViewKind::Evals
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn rows(&self, ctx: &Ctx) -> Vec<RowKey> {
        ctx.cluster
            .evals
            .keys()
            .map(|id| RowKey::Eval(*id))
            .collect()
    }

    /// Newest first.
    fn natural_rank(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<SortKey>> {
        let e = eval(ctx, key).filter(|e| ctx.in_namespace(&e.namespace))?;
        Some(vec![SortKey::Num(u64::MAX - e.create_index)])
    }

    fn cells(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<Cell>> {
        let e = eval(ctx, key)?;
        Some(vec![
            Cell::tone(e.id.short(), Tone::Dim),
            Cell::tone(e.status.as_str(), status_tone(e.status)),
            Cell::new(e.scheduler.as_str()),
            Cell::name(e.job_id.to_string()),
            Cell::new(e.triggered_by.as_str()),
            Cell::new(e.priority.to_string()),
            Cell::new(age(e.create_time, ctx.now)),
        ])
    }

    fn sort_key(&self, ctx: &Ctx, key: &RowKey, column: usize) -> SortKey {
        let Some(e) = eval(ctx, key) else {
            return SortKey::Num(0);
        };
        match column {
            0 => SortKey::text(e.id.to_string()),
            1 => SortKey::text(e.status.as_str()),
            2 => SortKey::text(e.scheduler.as_str()),
            3 => SortKey::text(e.job_id.to_string()),
            4 => SortKey::text(e.triggered_by.as_str()),
            5 => SortKey::Num(e.priority.into()),
            // Older first when ascending, like any age column.
            _ => SortKey::Num(u64::MAX - e.create_time.as_millis()),
        }
    }

    fn detail(&self, ctx: &Ctx, key: &RowKey) -> Vec<DetailLine> {
        let Some(e) = eval(ctx, key) else {
            return Vec::new();
        };
        let mut lines = vec![
            DetailLine::field("job", format!("{}/{}", e.namespace, e.job_id)),
            DetailLine::toned("status", e.status.as_str(), status_tone(e.status)),
        ];
        if !e.status_description.is_empty() {
            lines.push(DetailLine::field(
                "description",
                e.status_description.clone(),
            ));
        }
        // "Why is this pending" first: on a small terminal it is what must be in sight. A
        // blocked evaluation shows the failures of the evaluation that created it.
        let reasons = if e.failed_tg_allocs.is_empty() && e.status != EvalStatus::Blocked {
            None
        } else {
            ctx.cluster.failures_behind(e)
        };
        lines.extend(why_pending_lines(&e.queued_allocations, reasons, ctx.now));
        if reasons.is_none() {
            lines.push(DetailLine::heading("no placement failures"));
        }
        lines.extend([
            DetailLine::field("id", e.id.to_string()),
            DetailLine::field("triggered by", e.triggered_by.as_str()),
            DetailLine::field("scheduler", e.scheduler.as_str()),
            DetailLine::field("priority", e.priority.to_string()),
            DetailLine::field("snapshot index", e.snapshot_index.to_string()),
        ]);
        if let Some(node) = e.node_id {
            lines.push(DetailLine::field("node", node.to_string()));
        }
        if let Some(blocked) = e.blocked_eval {
            lines.push(DetailLine::toned(
                "blocked eval",
                blocked.to_string(),
                Tone::Warn,
            ));
        }
        lines
    }

    fn keys(&self) -> &'static [KeyHelp] {
        KEYS
    }
}
