//! Jobs with their allocation counts; `enter` drills into a job's allocations.

use super::format::age;
use super::{Cell, Column, Ctx, DetailLine, KeyHelp, TableView, Tone, ViewKind, action, col, key};
use crate::kinds::{RowKey, SortKey};
use crate::model::{JobRow, job_status_text};
use drover_core::JobStatus;

pub struct JobsView;

fn job<'a>(ctx: &Ctx<'a>, key: &RowKey) -> Option<&'a JobRow> {
    match key {
        RowKey::Job(k) => ctx.cluster.jobs.get(k),
        _ => None,
    }
}

fn status_cell(j: &JobRow) -> Cell {
    let tone = match j.status {
        _ if j.stop => Tone::Dim,
        JobStatus::Pending => Tone::Warn,
        JobStatus::Running => Tone::Good,
        JobStatus::Dead => Tone::Dim,
    };
    Cell::tone(job_status_text(j.status, j.stop), tone)
}

/// Allocations not placed yet, a warning when there are any: a job whose whole count waits
/// shows it here rather than as nothing pending.
fn queued_cell(n: u32) -> Cell {
    Cell::tone(n.to_string(), if n > 0 { Tone::Warn } else { Tone::Normal })
}

const COLUMNS: &[Column] = &[
    col("JOB", 20, 0),
    col("TYPE", 8, 2),
    col("PRIO", 4, 4),
    col("STATUS", 8, 0),
    col("QUEUED", 6, 1),
    col("RUNNING", 7, 1),
    col("PENDING", 7, 3),
    col("FAILED", 6, 2),
    col("ALLOCS", 6, 1),
    col("VER", 3, 5),
    col("AGE", 5, 3),
    col("NAMESPACE", 10, 6),
];

const KEYS: &[KeyHelp] = &[
    key("enter", "the job's allocations"),
    key("i", "the job's detail: why allocations are not placed"),
    action("x", "stop the job"),
];

impl TableView for JobsView {
    fn kind(&self) -> ViewKind {
        ViewKind::Jobs
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn rows(&self, ctx: &Ctx) -> Vec<RowKey> {
        ctx.cluster.jobs.keys().cloned().map(RowKey::Job).collect()
    }

    fn natural_rank(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<SortKey>> {
        let j = job(ctx, key).filter(|j| ctx.in_namespace(&j.key.namespace))?;
        Some(vec![
            SortKey::text(&j.key.namespace),
            SortKey::text(j.key.id.as_str()),
        ])
    }

    fn cells(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<Cell>> {
        let j = job(ctx, key)?;
        let c = ctx.cluster.job_counts(&j.key);
        Some(vec![
            Cell::name(j.key.id.to_string()),
            Cell::new(j.job_type.as_str()),
            Cell::new(j.priority.to_string()),
            status_cell(j),
            queued_cell(ctx.cluster.queued(&j.key)),
            Cell::tone(c.running.to_string(), Tone::Good),
            Cell::new(c.pending.to_string()),
            Cell::tone(
                c.failed.to_string(),
                if c.failed > 0 {
                    Tone::Bad
                } else {
                    Tone::Normal
                },
            ),
            Cell::new(c.total.to_string()),
            Cell::new(j.version.to_string()),
            Cell::new(age(j.submit_time, ctx.now)),
            Cell::tone(j.key.namespace.to_string(), Tone::Dim),
        ])
    }

    fn sort_key(&self, ctx: &Ctx, key: &RowKey, column: usize) -> SortKey {
        let Some(j) = job(ctx, key) else {
            return SortKey::Num(0);
        };
        let c = ctx.cluster.job_counts(&j.key);
        match column {
            0 => SortKey::text(j.key.id.to_string()),
            1 => SortKey::text(j.job_type.as_str()),
            2 => SortKey::Num(j.priority.into()),
            3 => SortKey::text(status_cell(j).text),
            4 => SortKey::Num(ctx.cluster.queued(&j.key).into()),
            5 => SortKey::Num(c.running.into()),
            6 => SortKey::Num(c.pending.into()),
            7 => SortKey::Num(c.failed.into()),
            8 => SortKey::Num(c.total.into()),
            9 => SortKey::Num(j.version),
            10 => SortKey::Num(u64::MAX - j.submit_time.as_millis()),
            _ => SortKey::text(&j.key.namespace),
        }
    }

    fn detail(&self, ctx: &Ctx, key: &RowKey) -> Vec<DetailLine> {
        let Some(j) = job(ctx, key) else {
            return Vec::new();
        };
        let c = ctx.cluster.job_counts(&j.key);
        let mut lines = vec![
            DetailLine::field("job", j.key.to_string()),
            DetailLine::toned("status", status_cell(j).text, status_cell(j).tone),
        ];
        // Why it is pending first: on a small terminal it is what must be in sight.
        let queued = ctx
            .cluster
            .job_evals(&j.key)
            .newest
            .and_then(|(_, id)| ctx.cluster.evals.get(&id))
            .map(|e| e.queued_allocations.clone())
            .unwrap_or_default();
        lines.extend(super::evals::why_pending_lines(
            &queued,
            ctx.cluster.pending_reasons(&j.key),
            ctx.now,
        ));
        lines.extend([
            DetailLine::field("type", j.job_type.as_str()),
            DetailLine::field("version", j.version.to_string()),
            DetailLine::field("priority", j.priority.to_string()),
            DetailLine::field(
                "allocations",
                format!(
                    "{} running, {} pending, {} failed or lost, {} in all",
                    c.running, c.pending, c.failed, c.total
                ),
            ),
        ]);
        if let Some(parent) = &j.parent_id {
            lines.push(DetailLine::field("parent", parent.clone()));
        }
        if let Some(d) = ctx.cluster.deployments.latest_of(&j.key) {
            lines.push(DetailLine::toned(
                "deployment",
                format!(
                    "{} v{} {}: {}",
                    d.id.short(),
                    d.job_version,
                    d.status.as_str(),
                    super::format::sentence(&d.description)
                ),
                super::deployments::status_tone(d.status),
            ));
        }
        lines
    }

    fn keys(&self) -> &'static [KeyHelp] {
        KEYS
    }
}
