//! Allocations: every one in the cluster (newest first), or those of the node or job an
//! operator drilled into (by name). The detail shows the task states and events, fetched
//! from the server when it opens.

use super::format::age;
use super::{
    AllocScope, Cell, Column, Ctx, DetailLine, KeyHelp, TableView, Tone, ViewKind, action, col, key,
};
use crate::kinds::{RowKey, SortKey};
use crate::model::AllocRow;
use drover_core::{ClientStatus, DesiredStatus};

pub struct AllocsView;

fn alloc<'a>(ctx: &Ctx<'a>, key: &RowKey) -> Option<&'a AllocRow> {
    match key {
        RowKey::Alloc(id) => ctx.cluster.allocs.get(id),
        _ => None,
    }
}

fn client_tone(s: ClientStatus) -> Tone {
    match s {
        ClientStatus::Running => Tone::Good,
        ClientStatus::Pending => Tone::Warn,
        ClientStatus::Complete => Tone::Dim,
        ClientStatus::Failed | ClientStatus::Lost | ClientStatus::Unknown => Tone::Bad,
    }
}

fn node_name(ctx: &Ctx, a: &AllocRow) -> String {
    ctx.cluster
        .nodes
        .get(&a.node_id)
        .map(|n| n.name.clone())
        .unwrap_or_else(|| a.node_id.short())
}

/// Whether the view's scope holds `a`.
fn in_scope(scope: &AllocScope, a: &AllocRow) -> bool {
    match scope {
        AllocScope::All => true,
        AllocScope::Job(job) => a.job == *job,
        AllocScope::Node(node) => a.node_id == *node,
    }
}

const COLUMNS: &[Column] = &[
    col("ID", 8, 0),
    col("NAME", 22, 0),
    col("JOB", 14, 3),
    col("GROUP", 10, 4),
    col("NODE", 14, 1),
    col("DESIRED", 7, 2),
    col("STATUS", 8, 0),
    col("AGE", 5, 2),
];

const KEYS: &[KeyHelp] = &[
    key(
        "enter / i",
        "the allocation's detail: its tasks and their events",
    ),
    key(
        "l",
        "the task's output, followed (j/k scroll, e stderr, t task)",
    ),
    action("r", "restart the allocation's tasks in place"),
    action(
        "ctrl-k",
        "stop the allocation (its job places a replacement)",
    ),
];

impl TableView for AllocsView {
    fn kind(&self) -> ViewKind {
        ViewKind::Allocs
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn rows(&self, ctx: &Ctx) -> Vec<RowKey> {
        ctx.cluster
            .allocs
            .values()
            .filter(|a| in_scope(ctx.alloc_scope, a))
            .map(|a| RowKey::Alloc(a.id))
            .collect()
    }

    /// A node's or job's allocations by name; the whole cluster's newest first (a number
    /// per row: a million rows sort by it in a blink, by their names they would not).
    fn natural_rank(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<SortKey>> {
        let a = alloc(ctx, key).filter(|a| in_scope(ctx.alloc_scope, a))?;
        let newest_first = SortKey::Num(u64::MAX - a.create_time.as_millis());
        Some(match ctx.alloc_scope {
            AllocScope::All => vec![newest_first],
            _ => vec![SortKey::text(a.name()), newest_first],
        })
    }

    fn cells(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<Cell>> {
        let a = alloc(ctx, key)?;
        Some(vec![
            Cell::tone(a.id.short(), Tone::Dim),
            Cell::name(a.name()),
            Cell::name(a.job.id.to_string()),
            Cell::new(&*a.task_group),
            Cell::new(node_name(ctx, a)),
            Cell::tone(
                a.desired.as_str(),
                if a.desired == DesiredStatus::Run {
                    Tone::Normal
                } else {
                    Tone::Dim
                },
            ),
            Cell::tone(a.client.as_str(), client_tone(a.client)),
            Cell::new(age(a.create_time, ctx.now)),
        ])
    }

    fn sort_key(&self, ctx: &Ctx, key: &RowKey, column: usize) -> SortKey {
        let Some(a) = alloc(ctx, key) else {
            return SortKey::Num(0);
        };
        match column {
            0 => SortKey::text(a.id.to_string()),
            1 => SortKey::text(a.name()),
            2 => SortKey::text(a.job.id.as_str()),
            3 => SortKey::text(&a.task_group),
            4 => SortKey::text(node_name(ctx, a)),
            5 => SortKey::text(a.desired.as_str()),
            6 => SortKey::text(a.client.as_str()),
            _ => SortKey::Num(u64::MAX - a.create_time.as_millis()),
        }
    }

    fn detail(&self, ctx: &Ctx, key: &RowKey) -> Vec<DetailLine> {
        let Some(a) = alloc(ctx, key) else {
            return Vec::new();
        };
        let mut lines = vec![
            DetailLine::field("id", a.id.to_string()),
            DetailLine::field("name", a.name()),
            DetailLine::field("job", a.job.to_string()),
            DetailLine::field("group", &*a.task_group),
            DetailLine::field("node", format!("{} ({})", node_name(ctx, a), a.node_id)),
            DetailLine::field("desired", a.desired.as_str()),
            DetailLine::toned("status", a.client.as_str(), client_tone(a.client)),
            DetailLine::field(
                "resources",
                format!(
                    "{} MHz, {} MB memory, {} MB disk",
                    a.resources.cpu_mhz, a.resources.memory_mb, a.resources.disk_mb
                ),
            ),
        ];
        match ctx.alloc_detail.filter(|full| full.id == a.id) {
            None => lines.push(DetailLine::heading("loading task states…")),
            Some(full) => {
                if !full.client_description.is_empty() {
                    lines.push(DetailLine::field(
                        "description",
                        super::format::sentence(&full.client_description),
                    ));
                }
                // What its tasks use against what it asked, from the agent's last samples.
                if a.client == ClientStatus::Running {
                    lines.push(DetailLine::field("used", used_text(full, a.resources)));
                }
                // Where each of its ports is reached (and the port the task binds, when
                // mapped).
                for p in &full.ports {
                    let mapped = if p.to == 0 {
                        String::new()
                    } else {
                        format!(" (task port {})", p.to)
                    };
                    lines.push(DetailLine::field(
                        format!("port {}", p.label),
                        format!("{}{mapped}", p.socket()),
                    ));
                }
                for (task, state) in &full.task_states {
                    lines.push(DetailLine::heading(format!(
                        "task {task}: {}{}, {} restart(s)",
                        format!("{:?}", state.state).to_lowercase(),
                        if state.failed { ", failed" } else { "" },
                        state.restarts
                    )));
                    for e in &state.events {
                        let mut text = e.message().to_string();
                        if let Some(code) = e.exit_code() {
                            text.push_str(&format!(" (exit {code})"));
                        }
                        lines.push(DetailLine::toned(
                            format!("{} ago {}", age(e.time(), ctx.now), e.kind()),
                            text,
                            if e.infra_failure() {
                                Tone::Bad
                            } else {
                                Tone::Normal
                            },
                        ));
                    }
                }
            }
        }
        // Where it offers its services, from the console's catalog (kept by events;
        // after the task states, which a small terminal must show first).
        for r in ctx.cluster.services.of_alloc(a.id) {
            lines.push(DetailLine::toned(
                format!("service {}", r.service_name),
                format!("{} {}", super::services::address_text(r), r.health.as_str()),
                super::services::health_tone(r.health),
            ));
            // Each check's status and the first line of what it said.
            for c in &r.checks {
                let said = c.output.lines().next().unwrap_or_default();
                lines.push(DetailLine::toned(
                    format!("  check {}", c.name),
                    format!("{} {said}", c.status.as_str())
                        .trim_end()
                        .to_owned(),
                    super::services::health_tone(c.status.health()),
                ));
            }
        }
        lines
    }

    fn keys(&self) -> &'static [KeyHelp] {
        KEYS
    }
}

/// The allocation's sampled CPU and memory against its ask (k9s shows a pod's usage so):
/// the sum of its tasks' latest samples, or that none has come yet.
fn used_text(full: &drover_core::Allocation, asked: drover_core::Resources) -> String {
    drover_core::SampledUsage::of_alloc(full)
        .map_or_else(|| "no samples yet".to_owned(), |u| u.against(asked))
}
