//! Deployments, newest first: each job version's rollout under an `update` block, how far
//! each of its groups got, and the allocations it placed. Loaded with the cluster and kept
//! by the `Deployment` topic; promote, pause, resume and fail act on the selected one.

use super::format::{age, clock, duration_short, sentence};
use super::{Cell, Column, Ctx, DetailLine, KeyHelp, TableView, Tone, ViewKind, action, col, key};
use crate::kinds::{RowKey, SortKey, natural_cmp};
use drover_core::{ClientStatus, Deployment, DeploymentGroup, DeploymentStatus};

pub struct DeploymentsView;

fn deployment<'a>(ctx: &Ctx<'a>, key: &RowKey) -> Option<&'a Deployment> {
    match key {
        RowKey::Deployment(id) => ctx.cluster.deployments.get(id),
        _ => None,
    }
}

pub(super) fn status_tone(status: DeploymentStatus) -> Tone {
    match status {
        DeploymentStatus::Running => Tone::Good,
        DeploymentStatus::Paused => Tone::Warn,
        DeploymentStatus::Successful => Tone::Normal,
        DeploymentStatus::Failed => Tone::Bad,
        DeploymentStatus::Cancelled => Tone::Dim,
    }
}

/// `web 2/3 healthy, 1 canary`: one group's progress, as an operator scans for it.
fn group_progress(name: &str, g: &DeploymentGroup) -> String {
    let mut text = format!("{name} {}/{} healthy", g.healthy, g.desired_total);
    if g.unhealthy > 0 {
        text.push_str(&format!(", {} unhealthy", g.unhealthy));
    }
    if g.desired_canaries > 0 {
        let placed = g.placed_canaries.len();
        let noun = if placed == 1 { "canary" } else { "canaries" };
        text.push_str(&format!(", {placed} {noun}"));
        if g.promoted {
            text.push_str(" promoted");
        }
    }
    text
}

/// Every group's progress, in group order.
fn progress(d: &Deployment) -> String {
    if d.groups.is_empty() {
        return "-".to_owned();
    }
    d.groups
        .iter()
        .map(|(name, g)| group_progress(name, g))
        .collect::<Vec<_>>()
        .join("; ")
}

const COLUMNS: &[Column] = &[
    col("ID", 8, 0),
    col("JOB", 14, 0),
    col("VER", 3, 2),
    col("STATUS", 10, 0),
    col("DESCRIPTION", 20, 3),
    col("PROGRESS", 20, 1),
    col("NAMESPACE", 9, 5),
    col("AGE", 5, 2),
];

const KEYS: &[KeyHelp] = &[
    key(
        "enter / i",
        "each group's progress and the allocations it placed",
    ),
    action("p", "promote the canaries (once they are healthy)"),
    action("P", "pause: nothing more of it is placed until resumed"),
    action("R", "resume a paused deployment"),
    action("f", "fail it (with auto_revert, its job goes back)"),
];

impl TableView for DeploymentsView {
    fn kind(&self) -> ViewKind {
        ViewKind::Deployments
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn rows(&self, ctx: &Ctx) -> Vec<RowKey> {
        ctx.cluster
            .deployments
            .iter()
            .map(|d| RowKey::Deployment(d.id))
            .collect()
    }

    /// Newest first, as `drover deployment list`.
    fn natural_rank(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<SortKey>> {
        let d = deployment(ctx, key).filter(|d| ctx.in_namespace(&d.namespace))?;
        Some(vec![SortKey::Num(u64::MAX - d.create_index)])
    }

    fn cells(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<Cell>> {
        let d = deployment(ctx, key)?;
        Some(vec![
            Cell::tone(d.id.short(), Tone::Dim),
            Cell::name(d.job_id.to_string()),
            Cell::new(d.job_version.to_string()),
            Cell::tone(d.status.as_str(), status_tone(d.status)),
            Cell::new(sentence(&d.description)),
            Cell::new(progress(d)),
            Cell::tone(d.namespace.clone(), Tone::Dim),
            Cell::new(age(d.create_time, ctx.now)),
        ])
    }

    fn sort_key(&self, ctx: &Ctx, key: &RowKey, column: usize) -> SortKey {
        let Some(d) = deployment(ctx, key) else {
            return SortKey::Num(0);
        };
        match column {
            0 => SortKey::text(d.id.to_string()),
            1 => SortKey::text(d.job_id.as_str()),
            2 => SortKey::Num(d.job_version),
            3 => SortKey::text(d.status.as_str()),
            4 => SortKey::text(&d.description),
            5 => SortKey::text(progress(d)),
            6 => SortKey::text(&d.namespace),
            _ => SortKey::Num(u64::MAX - d.create_time.as_millis()),
        }
    }

    fn detail(&self, ctx: &Ctx, key: &RowKey) -> Vec<DetailLine> {
        let Some(d) = deployment(ctx, key) else {
            return Vec::new();
        };
        let mut lines = vec![
            DetailLine::field("deployment", d.id.to_string()),
            DetailLine::field("job", d.job_key().to_string()),
            DetailLine::field("version", d.job_version.to_string()),
            DetailLine::toned("status", d.status.as_str(), status_tone(d.status)),
            DetailLine::field("description", sentence(&d.description)),
            DetailLine::field(
                "created",
                format!(
                    "{} ago ({}), index {}",
                    age(d.create_time, ctx.now),
                    clock(d.create_time, ctx.clock_offset),
                    d.create_index
                ),
            ),
        ];
        for (name, g) in &d.groups {
            lines.extend(group_lines(ctx, d, name, g));
        }
        lines.extend(alloc_lines(ctx, d));
        lines
    }

    fn keys(&self) -> &'static [KeyHelp] {
        KEYS
    }
}

fn group_lines(ctx: &Ctx, d: &Deployment, name: &str, g: &DeploymentGroup) -> Vec<DetailLine> {
    let mut lines = vec![
        DetailLine::heading(format!("group {name}")),
        DetailLine::field("desired", g.desired_total.to_string()),
        DetailLine::field("placed", g.placed.to_string()),
        DetailLine::toned(
            "healthy",
            g.healthy.to_string(),
            if g.healthy >= g.desired_total {
                Tone::Good
            } else {
                Tone::Normal
            },
        ),
        DetailLine::toned(
            "unhealthy",
            g.unhealthy.to_string(),
            if g.unhealthy > 0 {
                Tone::Bad
            } else {
                Tone::Normal
            },
        ),
    ];
    if g.desired_canaries > 0 {
        lines.push(DetailLine::field(
            "canaries",
            format!("{}/{}", g.placed_canaries.len(), g.desired_canaries),
        ));
        let promoted = match (g.promoted, g.auto_promote) {
            (true, _) => "yes".to_owned(),
            (false, true) => "no (automatically once the canaries are healthy)".to_owned(),
            (false, false) if d.is_active() => "no (waits for an operator: p)".to_owned(),
            (false, false) => "no".to_owned(),
        };
        lines.push(DetailLine::toned(
            "promoted",
            promoted,
            if g.promoted || !d.is_active() {
                Tone::Normal
            } else {
                Tone::Warn
            },
        ));
    }
    lines.push(DetailLine::field("deadline", deadline_text(ctx, d, g)));
    if g.auto_revert {
        lines.push(DetailLine::field(
            "auto revert",
            "yes: a failure brings back the last stable version",
        ));
    }
    lines
}

/// The group's progress deadline, `10m, by 12:34:56 (in 7m)` while it counts; `none` for
/// a group without one.
fn deadline_text(ctx: &Ctx, d: &Deployment, g: &DeploymentGroup) -> String {
    if g.progress_deadline.is_zero() {
        return "none".to_owned();
    }
    let deadline = duration_short(g.progress_deadline);
    match g.require_progress_by {
        Some(by) if d.is_active() && !g.is_complete() => {
            let when = clock(by, ctx.clock_offset);
            if by > ctx.now {
                format!(
                    "{deadline}, by {when} (in {})",
                    duration_short(by.since(ctx.now))
                )
            } else {
                format!("{deadline}, by {when} (passed)")
            }
        }
        _ => deadline,
    }
}

/// The allocations the deployment placed: a heading, then one line each, by name: its
/// short id, then `web[1] on node-3, healthy, canary` (the client status too when it is
/// not running).
fn alloc_lines(ctx: &Ctx, d: &Deployment) -> Vec<DetailLine> {
    let mut allocs: Vec<_> = ctx
        .cluster
        .deployments
        .allocs_of(&d.id)
        .filter_map(|id| ctx.cluster.allocs.get(id))
        .collect();
    allocs.sort_by(|a, b| natural_cmp(&a.name(), &b.name()).then(a.id.cmp(&b.id)));
    let mut lines = vec![DetailLine::heading(format!(
        "allocations ({})",
        allocs.len()
    ))];
    let job_prefix = format!("{}.", d.job_id);
    for a in allocs {
        let name = a.name();
        let mut text = format!(
            "{} on {}",
            name.strip_prefix(&job_prefix).unwrap_or(&name),
            ctx.cluster
                .nodes
                .get(&a.node_id)
                .map(|n| n.name.clone())
                .unwrap_or_else(|| a.node_id.short())
        );
        if a.client != ClientStatus::Running {
            text.push_str(&format!(", {}", a.client.as_str()));
        }
        let healthy = a.deployment.and_then(|p| p.healthy);
        text.push_str(match healthy {
            Some(true) => ", healthy",
            Some(false) => ", unhealthy",
            None => ", health pending",
        });
        if a.deployment.is_some_and(|p| p.canary) {
            text.push_str(", canary");
        }
        let tone = match healthy {
            Some(false) => Tone::Bad,
            _ if matches!(a.client, ClientStatus::Failed | ClientStatus::Lost) => Tone::Bad,
            Some(true) => Tone::Good,
            None => Tone::Normal,
        };
        lines.push(DetailLine::toned(a.id.short(), text, tone));
    }
    lines
}
