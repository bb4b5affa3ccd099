//! Every scheduler worker of every server, with the eval broker's and plan queue's gauges
//! above them.

use super::format::age;
use super::{Cell, Column, Ctx, KeyHelp, TableView, Tone, ViewKind, action, col};
use crate::kinds::{RowKey, SortKey};
use crate::model::{WorkerRow, WorkerStatusLabel};

pub struct WorkersView;

fn worker<'a>(ctx: &Ctx<'a>, key: &RowKey) -> Option<&'a WorkerRow> {
    match key {
        RowKey::Worker(server, id) => ctx
            .cluster
            .workers
            .iter()
            .find(|w| &w.server_id == server && &w.id == id),
        _ => None,
    }
}

fn status_tone(s: WorkerStatusLabel) -> Tone {
    match s {
        WorkerStatusLabel::Started => Tone::Good,
        WorkerStatusLabel::Starting | WorkerStatusLabel::Resuming => Tone::Normal,
        WorkerStatusLabel::Pausing | WorkerStatusLabel::Paused => Tone::Warn,
        WorkerStatusLabel::Stopping | WorkerStatusLabel::Stopped | WorkerStatusLabel::Unknown => {
            Tone::Bad
        }
    }
}

const COLUMNS: &[Column] = &[
    col("SERVER", 10, 1),
    col("WORKER", 12, 0),
    col("STATUS", 9, 0),
    col("WORKLOAD", 18, 0),
    col("SCHEDULERS", 32, 2),
    col("UP", 5, 3),
];

const KEYS: &[KeyHelp] = &[
    action("p", "pause the worker"),
    action("r", "resume the worker"),
    action("P", "pause every worker"),
    action("R", "resume every worker"),
    action("c", "set the worker count of the selected worker's server"),
];

impl TableView for WorkersView {
    fn kind(&self) -> ViewKind {
        ViewKind::Workers
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn rows(&self, ctx: &Ctx) -> Vec<RowKey> {
        ctx.cluster
            .workers
            .iter()
            .map(|w| RowKey::Worker(w.server_id.clone(), w.id.clone()))
            .collect()
    }

    /// By server, then worker id: the row key's own order.
    fn natural_rank(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<SortKey>> {
        worker(ctx, key).map(|_| Vec::new())
    }

    fn cells(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<Cell>> {
        let w = worker(ctx, key)?;
        Some(vec![
            Cell::new(w.server_id.clone()),
            Cell::new(w.id.clone()),
            Cell::tone(w.status.as_str(), status_tone(w.status)),
            Cell::new(w.workload),
            Cell::tone(w.schedulers.join(","), Tone::Dim),
            Cell::new(age(w.started, ctx.now)),
        ])
    }

    fn sort_key(&self, ctx: &Ctx, key: &RowKey, column: usize) -> SortKey {
        let Some(w) = worker(ctx, key) else {
            return SortKey::Num(0);
        };
        match column {
            0 => SortKey::text(&w.server_id),
            1 => SortKey::text(&w.id),
            2 => SortKey::text(w.status.as_str()),
            3 => SortKey::text(w.workload),
            4 => SortKey::text(w.schedulers.join(",")),
            _ => SortKey::Num(u64::MAX - w.started.as_millis()),
        }
    }

    fn summary(&self, ctx: &Ctx) -> Vec<Vec<Cell>> {
        let s = &ctx.cluster.stats;
        let gauge = |label: &str, v: u64, bad: bool| {
            [
                Cell::tone(format!("{label} "), Tone::Dim),
                Cell::tone(
                    format!("{v}  "),
                    if v > 0 && bad {
                        Tone::Bad
                    } else {
                        Tone::Normal
                    },
                ),
            ]
        };
        let mut broker = vec![Cell::tone(
            if s.broker_enabled {
                "broker      "
            } else {
                "broker off  "
            },
            Tone::Dim,
        )];
        for (label, v, bad) in [
            ("ready", s.ready, false),
            ("unacked", s.unacked, false),
            ("pending", s.pending, false),
            ("waiting", s.waiting, false),
            ("blocked", s.blocked, true),
            ("failed", s.failed, true),
        ] {
            broker.extend(gauge(label, v, bad));
        }
        let mut plans = vec![Cell::tone("plan queue  ", Tone::Dim)];
        for (label, v) in [
            ("depth", s.plan_depth),
            ("peak", s.plan_peak),
            ("queued", s.plans_enqueued),
            ("applied", s.plans_dequeued),
        ] {
            plans.extend(gauge(label, v, false));
        }
        vec![broker, plans]
    }

    fn keys(&self) -> &'static [KeyHelp] {
        KEYS
    }
}
