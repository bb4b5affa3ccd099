//! Nodes, grouped by health (healthy, suspended new / lost / flaky, offlined), with the
//! time a lost node has left before it is forgotten and a flaky one before it may rejoin.

use super::format::{age, duration_short, percent};
use super::{Cell, Column, Ctx, DetailLine, KeyHelp, TableView, Tone, ViewKind, action, col, key};
use crate::app::{RowKey, SortKey};
use drover_core::node_health::HealthConfig;
use drover_core::{Eligibility, Node, NodeHealth, NodeStatus, SuspendReason, Timestamp};
use std::time::Duration;

pub struct NodesView;

/// Which health group the nodes view shows (`g` cycles).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HealthFilter {
    #[default]
    All,
    Only(NodeHealth),
}

impl HealthFilter {
    const CYCLE: [HealthFilter; 6] = [
        HealthFilter::All,
        HealthFilter::Only(NodeHealth::Healthy),
        HealthFilter::Only(NodeHealth::Suspended(SuspendReason::New)),
        HealthFilter::Only(NodeHealth::Suspended(SuspendReason::Lost)),
        HealthFilter::Only(NodeHealth::Suspended(SuspendReason::Flaky)),
        HealthFilter::Only(NodeHealth::Offlined),
    ];

    pub fn next(self) -> Self {
        let i = Self::CYCLE.iter().position(|h| *h == self).unwrap_or(0);
        Self::CYCLE[(i + 1) % Self::CYCLE.len()]
    }

    pub fn label(self) -> &'static str {
        match self {
            HealthFilter::All => "all",
            HealthFilter::Only(h) => h.as_str(),
        }
    }

    fn admits(self, health: NodeHealth) -> bool {
        match self {
            HealthFilter::All => true,
            HealthFilter::Only(h) => h == health,
        }
    }
}

/// The groups in the order the view lists them: what needs attention after what works.
fn health_rank(h: NodeHealth) -> u64 {
    match h {
        NodeHealth::Healthy => 0,
        NodeHealth::Suspended(SuspendReason::New) => 1,
        NodeHealth::Suspended(SuspendReason::Lost) => 2,
        NodeHealth::Suspended(SuspendReason::Flaky) => 3,
        NodeHealth::Offlined => 4,
    }
}

/// How long until a lost node is deleted, or a flaky node's cool-down ends. The servers do
/// not send their configured periods, so the defaults are assumed (the servers' own
/// defaults, which operators rarely change).
pub fn time_left(node: &Node, now: Timestamp) -> Option<Duration> {
    let config = HealthConfig::default();
    let period = match node.health {
        NodeHealth::Suspended(SuspendReason::Lost) => config.lost_grace,
        NodeHealth::Suspended(SuspendReason::Flaky) => config.flaky_cool_down,
        _ => return None,
    };
    Some(period.saturating_sub(now.since(node.health_since)))
}

fn health_cell(node: &Node, now: Timestamp) -> Cell {
    let (label, tone) = match node.health {
        NodeHealth::Healthy => ("healthy", Tone::Good),
        NodeHealth::Suspended(SuspendReason::New) => ("new", Tone::Warn),
        NodeHealth::Suspended(SuspendReason::Lost) => ("lost", Tone::Bad),
        NodeHealth::Suspended(SuspendReason::Flaky) => ("flaky", Tone::Bad),
        NodeHealth::Offlined => ("offlined", Tone::Dim),
    };
    match time_left(node, now) {
        Some(left) => Cell::tone(format!("{label} {} left", duration_short(left)), tone),
        None => Cell::tone(label, tone),
    }
}

fn status_tone(status: NodeStatus) -> Tone {
    match status {
        NodeStatus::Ready => Tone::Normal,
        NodeStatus::Initializing => Tone::Warn,
        NodeStatus::Down | NodeStatus::Disconnected => Tone::Bad,
    }
}

fn allocatable(node: &Node) -> drover_core::Resources {
    drover_core::Resources {
        cpu_mhz: node.resources.cpu_mhz.saturating_sub(node.reserved.cpu_mhz),
        memory_mb: node
            .resources
            .memory_mb
            .saturating_sub(node.reserved.memory_mb),
        disk_mb: node.resources.disk_mb.saturating_sub(node.reserved.disk_mb),
    }
}

fn node<'a>(ctx: &Ctx<'a>, key: &RowKey) -> Option<&'a Node> {
    match key {
        RowKey::Node(id) => ctx.cluster.nodes.get(id),
        _ => None,
    }
}

fn drain_text(node: &Node, now: Timestamp) -> String {
    match &node.drain {
        None => "-".to_owned(),
        Some(d) => match d.deadline {
            Some(deadline) => {
                let left = deadline.saturating_sub(now.since(d.started_at));
                format!("{} left", duration_short(left))
            }
            None => "yes".to_owned(),
        },
    }
}

const COLUMNS: &[Column] = &[
    col("NAME", 14, 0),
    col("HEALTH", 15, 0),
    col("STATUS", 12, 1),
    col("ELIG", 4, 3),
    col("DRAIN", 8, 4),
    col("DC", 8, 5),
    col("CLASS", 8, 6),
    col("ALLOCS", 6, 1),
    col("CPU", 4, 2),
    col("MEM", 4, 2),
    col("ID", 8, 7),
];

const KEYS: &[KeyHelp] = &[
    key("g", "cycle the health group shown"),
    key(
        "space",
        "mark / unmark the node (actions apply to marked nodes)",
    ),
    action("o", "offline the node(s)"),
    action("O", "online the node(s)"),
    action("d", "drain the node(s), with a deadline"),
    action("D", "end the drain of the node(s)"),
    action("e", "toggle eligibility"),
];

impl TableView for NodesView {
    fn kind(&self) -> ViewKind {
        ViewKind::Nodes
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn rows(&self, ctx: &Ctx) -> Vec<RowKey> {
        ctx.cluster
            .nodes
            .keys()
            .map(|id| RowKey::Node(*id))
            .collect()
    }

    fn natural_rank(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<SortKey>> {
        let n = node(ctx, key).filter(|n| ctx.health.admits(n.health))?;
        Some(vec![
            SortKey::Num(health_rank(n.health)),
            SortKey::text(&n.name),
        ])
    }

    fn cells(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<Cell>> {
        let n = node(ctx, key)?;
        let usage = ctx.cluster.usage(&n.id);
        let cap = allocatable(n);
        let eligible = n.eligibility == Eligibility::Eligible;
        Some(vec![
            Cell::new(n.name.clone()),
            health_cell(n, ctx.now),
            Cell::tone(n.status.as_str(), status_tone(n.status)),
            Cell::tone(
                if eligible { "yes" } else { "no" },
                if eligible { Tone::Normal } else { Tone::Warn },
            ),
            Cell::tone(
                drain_text(n, ctx.now),
                if n.drain.is_some() {
                    Tone::Warn
                } else {
                    Tone::Dim
                },
            ),
            Cell::new(n.datacenter.clone()),
            Cell::new(n.node_class.clone()),
            Cell::new(usage.live_allocs.to_string()),
            Cell::new(percent(usage.used.cpu_mhz, cap.cpu_mhz)),
            Cell::new(percent(usage.used.memory_mb, cap.memory_mb)),
            Cell::tone(n.id.short(), Tone::Dim),
        ])
    }

    fn sort_key(&self, ctx: &Ctx, key: &RowKey, column: usize) -> SortKey {
        let Some(n) = node(ctx, key) else {
            return SortKey::Num(0);
        };
        let usage = ctx.cluster.usage(&n.id);
        let ratio = |used: u64, total: u64| used.saturating_mul(10_000) / total.max(1);
        let cap = allocatable(n);
        match column {
            0 => SortKey::text(&n.name),
            1 => SortKey::Num(health_rank(n.health)),
            2 => SortKey::text(n.status.as_str()),
            3 => SortKey::text(n.eligibility.as_str()),
            4 => SortKey::Num(u64::from(n.drain.is_some())),
            5 => SortKey::text(&n.datacenter),
            6 => SortKey::text(&n.node_class),
            7 => SortKey::Num(usage.live_allocs.into()),
            8 => SortKey::Num(ratio(usage.used.cpu_mhz, cap.cpu_mhz)),
            9 => SortKey::Num(ratio(usage.used.memory_mb, cap.memory_mb)),
            _ => SortKey::text(n.id.to_string()),
        }
    }

    fn detail(&self, ctx: &Ctx, key: &RowKey) -> Vec<DetailLine> {
        let Some(n) = node(ctx, key) else {
            return Vec::new();
        };
        let usage = ctx.cluster.usage(&n.id);
        let cap = allocatable(n);
        let mut lines = vec![
            DetailLine::field("id", n.id.to_string()),
            DetailLine::field("name", n.name.clone()),
            DetailLine::toned(
                "health",
                health_cell(n, ctx.now).text,
                health_cell(n, ctx.now).tone,
            ),
            DetailLine::field("health since", age(n.health_since, ctx.now) + " ago"),
            DetailLine::field(
                "status",
                if n.status_description.is_empty() {
                    n.status.as_str().to_owned()
                } else {
                    format!("{} ({})", n.status.as_str(), n.status_description)
                },
            ),
            DetailLine::field("eligibility", n.eligibility.as_str()),
            DetailLine::field("drain", drain_text(n, ctx.now)),
            DetailLine::field("datacenter", n.datacenter.clone()),
            DetailLine::field("class", n.node_class.clone()),
            DetailLine::field(
                "last snapshot",
                n.last_snapshot.clone().unwrap_or_else(|| "-".to_owned()),
            ),
            DetailLine::field("allocations", usage.live_allocs.to_string()),
            DetailLine::field(
                "cpu",
                format!("{} / {} MHz", usage.used.cpu_mhz, cap.cpu_mhz),
            ),
            DetailLine::field(
                "memory",
                format!("{} / {} MB", usage.used.memory_mb, cap.memory_mb),
            ),
            DetailLine::field(
                "disk",
                format!("{} / {} MB", usage.used.disk_mb, cap.disk_mb),
            ),
        ];
        if !n.events.is_empty() {
            lines.push(DetailLine::heading("events (newest last)"));
            for e in &n.events {
                lines.push(DetailLine::field(
                    format!("{} ago {}", age(e.time, ctx.now), e.subsystem),
                    e.message.clone(),
                ));
            }
        }
        lines
    }

    fn keys(&self) -> &'static [KeyHelp] {
        KEYS
    }
}
