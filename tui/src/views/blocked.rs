//! Evaluations waiting for capacity, oldest first, with what would release each.

use super::format::age;
use super::{Cell, Column, Ctx, DetailLine, KeyHelp, TableView, Tone, ViewKind, col};
use crate::kinds::{RowKey, SortKey};
use crate::model::BlockedRow;

pub struct BlockedView;

fn blocked<'a>(ctx: &Ctx<'a>, key: &RowKey) -> Option<&'a BlockedRow> {
    match key {
        RowKey::Blocked(id) => ctx.cluster.blocked.iter().find(|b| &b.eval_id == id),
        _ => None,
    }
}

/// `a ok, windows no`: which classes had a feasible node.
fn classes(b: &BlockedRow) -> String {
    if b.class_eligibility.is_empty() {
        return "-".to_owned();
    }
    b.class_eligibility
        .iter()
        .map(|(class, ok)| format!("{class} {}", if *ok { "ok" } else { "no" }))
        .collect::<Vec<_>>()
        .join(", ")
}

const COLUMNS: &[Column] = &[
    col("JOB", 16, 0),
    col("KIND", 8, 1),
    col("CLASSES", 18, 2),
    col("ESCAPED", 7, 3),
    col("SINCE", 5, 1),
    col("UNBLOCKED BY", 30, 0),
    col("EVAL", 8, 4),
];

const KEYS: &[KeyHelp] = &[];

impl TableView for BlockedView {
    fn kind(&self) -> ViewKind {
        ViewKind::Blocked
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn rows(&self, ctx: &Ctx) -> Vec<RowKey> {
        ctx.cluster
            .blocked
            .iter()
            .map(|b| RowKey::Blocked(b.eval_id.clone()))
            .collect()
    }

    /// Longest blocked first.
    fn natural_rank(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<SortKey>> {
        let b = blocked(ctx, key).filter(|b| ctx.in_namespace(&b.job.namespace))?;
        Some(vec![SortKey::Num(b.blocked_since.as_millis())])
    }

    fn cells(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<Cell>> {
        let b = blocked(ctx, key)?;
        Some(vec![
            Cell::name(b.job.id.to_string()),
            Cell::new(b.kind.as_str()),
            Cell::new(classes(b)),
            Cell::tone(
                if b.escaped { "yes" } else { "no" },
                if b.escaped { Tone::Warn } else { Tone::Normal },
            ),
            Cell::new(age(b.blocked_since, ctx.now)),
            Cell::new(b.unblocked_by.clone()),
            Cell::tone(b.eval_id.chars().take(8).collect::<String>(), Tone::Dim),
        ])
    }

    fn sort_key(&self, ctx: &Ctx, key: &RowKey, column: usize) -> SortKey {
        let Some(b) = blocked(ctx, key) else {
            return SortKey::Num(0);
        };
        match column {
            0 => SortKey::text(b.job.id.to_string()),
            1 => SortKey::text(b.kind.as_str()),
            2 => SortKey::text(classes(b)),
            3 => SortKey::Num(b.escaped.into()),
            4 => SortKey::Num(u64::MAX - b.blocked_since.as_millis()),
            5 => SortKey::text(&b.unblocked_by),
            _ => SortKey::text(&b.eval_id),
        }
    }

    fn detail(&self, ctx: &Ctx, key: &RowKey) -> Vec<DetailLine> {
        let Some(b) = blocked(ctx, key) else {
            return Vec::new();
        };
        // What would release it and why it waits first: on a small terminal they are what
        // must be in sight.
        let mut lines = vec![
            DetailLine::field("job", b.job.to_string()),
            DetailLine::toned("unblocked by", b.unblocked_by.clone(), Tone::Warn),
        ];
        let eval = b
            .eval_id
            .parse::<drover_core::EvalId>()
            .ok()
            .and_then(|id| ctx.cluster.evals.get(&id));
        lines.extend(match eval {
            Some(eval) => super::evals::why_pending_lines(
                &eval.queued_allocations,
                ctx.cluster.failures_behind(eval),
                ctx.now,
            ),
            // Not loaded (older than the evaluations read at connect): the job's reasons.
            None => super::evals::why_pending_lines(
                &Default::default(),
                ctx.cluster.pending_reasons(&b.job),
                ctx.now,
            ),
        });
        lines.extend([
            DetailLine::field("eval", b.eval_id.clone()),
            DetailLine::field("kind", b.kind.as_str()),
            DetailLine::field("triggered by", b.triggered_by.clone()),
            DetailLine::field("blocked for", age(b.blocked_since, ctx.now)),
        ]);
        if !b.node_id.is_empty() {
            lines.push(DetailLine::field("waits on node", b.node_id.clone()));
        }
        lines.push(DetailLine::field(
            "escaped",
            if b.escaped {
                "yes: any capacity change releases it"
            } else {
                "no"
            },
        ));
        for (class, ok) in &b.class_eligibility {
            lines.push(DetailLine::toned(
                format!("class {class}"),
                if *ok {
                    "feasible but full"
                } else {
                    "ineligible"
                },
                if *ok { Tone::Warn } else { Tone::Dim },
            ));
        }
        lines
    }

    fn keys(&self) -> &'static [KeyHelp] {
        KEYS
    }
}
