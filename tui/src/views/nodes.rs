//! Nodes, grouped by health (healthy, suspended new / lost / flaky, offlined), with the
//! time a lost node has left before it is forgotten and a flaky one before it may rejoin.

use super::format::{age, duration_short, percent};
use super::{Cell, Column, Ctx, DetailLine, KeyHelp, TableView, Tone, ViewKind, action, col, key};
use crate::kinds::{RowKey, SortKey};
use crate::model::HealthPeriods;
use drover_core::node_health;
use drover_core::{Eligibility, Node, NodeHealth, NodeStatus, SuspendReason, Timestamp};
use std::time::Duration;

pub struct NodesView;

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

/// How long until a lost node is deleted, or a flaky node's cool-down ends, counted from
/// when it entered that set with the server's periods. Without them (a server that does not
/// send them) the defaults are assumed and the figure is marked approximate (`true`).
pub fn time_left(
    node: &Node,
    periods: Option<&HealthPeriods>,
    now: Timestamp,
) -> Option<(Duration, bool)> {
    let left = node_health::time_left(node, periods.unwrap_or(&HealthPeriods::default()), now)?;
    Some((left, periods.is_none()))
}

fn health_cell(node: &Node, ctx: &Ctx) -> Cell {
    let (label, tone) = match node.health {
        NodeHealth::Healthy => ("healthy", Tone::Good),
        NodeHealth::Suspended(SuspendReason::New) => ("new", Tone::Warn),
        NodeHealth::Suspended(SuspendReason::Lost) => ("lost", Tone::Bad),
        NodeHealth::Suspended(SuspendReason::Flaky) => ("flaky", Tone::Bad),
        NodeHealth::Offlined => ("offlined", Tone::Dim),
    };
    match time_left(node, ctx.cluster.health_periods.as_ref(), ctx.now) {
        Some((left, approximate)) => {
            let about = if approximate { "~" } else { "" };
            Cell::tone(
                format!("{label} {about}{} left", duration_short(left)),
                tone,
            )
        }
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

/// Whether new placements may go to the node as far as the operator decided: its
/// eligibility flag, and not offlined. Offlining leaves the flag as it was (onlining must
/// give the node back as it was), but an offlined node takes no placements whatever the
/// flag says, so it must not read as eligible.
fn eligible(node: &Node) -> bool {
    node.eligibility == Eligibility::Eligible && node.health != NodeHealth::Offlined
}

/// A node's class as the schedulers name it (`default` when the node set none): the name
/// blocked evaluations list classes by, so the two views read alike. Dim when unset.
fn class_cell(node: &Node) -> Cell {
    let tone = if node.node_class.is_empty() {
        Tone::Dim
    } else {
        Tone::Normal
    };
    Cell::tone(node.class_key(), tone)
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
    key("enter", "the node's allocations (esc comes back)"),
    key("i", "the node's detail"),
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
        let eligible = eligible(n);
        Some(vec![
            Cell::name(n.name.clone()),
            health_cell(n, ctx),
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
            class_cell(n),
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
            3 => SortKey::Num(u64::from(eligible(n))),
            4 => SortKey::Num(u64::from(n.drain.is_some())),
            5 => SortKey::text(&n.datacenter),
            6 => SortKey::text(n.class_key()),
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
            {
                let health = health_cell(n, ctx);
                DetailLine::toned("health", health.text, health.tone)
            },
            DetailLine::field("health since", age(n.health_since, ctx.now) + " ago"),
            DetailLine::field(
                "status",
                if n.status_description.is_empty() {
                    n.status.as_str().to_owned()
                } else {
                    format!(
                        "{} ({})",
                        n.status.as_str(),
                        super::format::sentence(&n.status_description)
                    )
                },
            ),
            DetailLine::field("eligibility", n.eligibility_label().to_owned()),
            DetailLine::field("drain", drain_text(n, ctx.now)),
            DetailLine::field("datacenter", n.datacenter.clone()),
            DetailLine::field("class", n.class_key()),
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
            // What the allocations use, from the agent's samples, beside what they asked.
            DetailLine::field(
                "used",
                match ctx.node_usage.filter(|(id, _)| *id == n.id) {
                    None => "loading".to_owned(),
                    Some((_, None)) => "no samples yet".to_owned(),
                    Some((_, Some(sampled))) => sampled.summary(),
                },
            ),
        ];
        let net = &n.networks;
        if net.addresses.is_empty() {
            lines.push(DetailLine::toned(
                "addresses",
                "none: no group that asks for ports is placed here",
                Tone::Warn,
            ));
        }
        // The default host network's address reads as just the address; any other is
        // followed by its host network, the name `port { host_network }` uses.
        for a in &net.addresses {
            let network = if a.host_network == drover_core::DEFAULT_HOST_NETWORK {
                String::new()
            } else {
                format!(", {}", a.host_network)
            };
            lines.push(DetailLine::field(
                "address",
                format!("{} ({}{network})", a.address, a.interface),
            ));
        }
        lines.push(DetailLine::field(
            "dynamic ports",
            format!("{}-{}", net.min_dynamic_port, net.max_dynamic_port),
        ));
        if !net.reserved_ports.is_empty() {
            lines.push(DetailLine::field(
                "reserved ports",
                net.reserved_ports.to_string(),
            ));
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Cluster;
    use drover_core::mock;

    /// The health cell of a node that entered `health` `ago` before now, on a console that
    /// loaded `periods` from its server.
    fn shown(health: NodeHealth, periods: Option<HealthPeriods>, ago: Duration) -> String {
        let now = Timestamp::from_millis(10_000_000);
        let mut node = mock::node(1);
        node.health = health;
        node.health_since = Timestamp::from_millis(now.as_millis() - ago.as_millis() as u64);
        let mut cluster = Cluster::default();
        cluster.health_periods = periods;
        let ctx = Ctx::new(&cluster, now);
        health_cell(&node, &ctx).text
    }

    /// An offlined node takes no placements whatever its eligibility flag says (offlining
    /// leaves the flag alone), so it reads ineligible in the table and the detail.
    #[test]
    fn an_offlined_node_reads_ineligible() {
        // (health, eligibility flag, ELIG cell, detail)
        let cases = [
            (
                NodeHealth::Healthy,
                Eligibility::Eligible,
                "yes",
                "eligible",
            ),
            (
                NodeHealth::Healthy,
                Eligibility::Ineligible,
                "no",
                "ineligible",
            ),
            (
                NodeHealth::Offlined,
                Eligibility::Eligible,
                "no",
                "ineligible (offlined)",
            ),
            (
                NodeHealth::Offlined,
                Eligibility::Ineligible,
                "no",
                "ineligible",
            ),
        ];
        for (health, flag, cell, detail) in cases {
            let mut node = mock::node(1);
            node.health = health;
            node.eligibility = flag;
            let mut cluster = Cluster::default();
            let key = RowKey::Node(node.id);
            cluster.nodes.insert(node.id, node);
            let ctx = Ctx::new(&cluster, Timestamp::from_millis(0));
            let cells = NodesView.cells(&ctx, &key).expect("the node's row");
            assert_eq!(cells[3].text, cell, "{health:?} {flag:?}");
            let lines = NodesView.detail(&ctx, &key);
            let shown = lines.iter().find(|l| l.label == "eligibility");
            assert_eq!(shown.map(|l| l.value.text.as_str()), Some(detail));
        }
    }

    /// A node without a class reads as the schedulers name its class, as blocked
    /// evaluations list it.
    #[test]
    fn a_node_without_a_class_reads_default() {
        let mut cluster = Cluster::default();
        for (n, class) in [(1, ""), (2, "gpu")] {
            let mut node = mock::node(n);
            node.node_class = class.into();
            cluster.nodes.insert(node.id, node);
        }
        let ctx = Ctx::new(&cluster, Timestamp::from_millis(0));
        for (n, want) in [(1, "default"), (2, "gpu")] {
            let key = RowKey::Node(mock::node(n).id);
            let cells = NodesView.cells(&ctx, &key).expect("the node's row");
            assert_eq!(cells[6].text, want);
        }
    }

    /// The countdown follows the server's periods (here not the defaults of 1m and 15m); a
    /// server that sent none gets the defaults, marked approximate.
    #[test]
    fn time_left_counts_down_the_servers_periods() {
        let lost = NodeHealth::Suspended(SuspendReason::Lost);
        let flaky = NodeHealth::Suspended(SuspendReason::Flaky);
        let server = Some(HealthPeriods {
            lost_grace: Duration::from_secs(5 * 60),
            flaky_cool_down: Duration::from_secs(40 * 60),
        });
        let min = |m: u64| Duration::from_secs(m * 60);
        let cases = [
            (lost, server, min(1), "lost 4m left"),
            (flaky, server, min(10), "flaky 30m left"),
            (lost, server, min(9), "lost 0s left"),
            (lost, None, Duration::from_secs(20), "lost ~40s left"),
            (flaky, None, min(5), "flaky ~10m left"),
            (NodeHealth::Healthy, server, min(1), "healthy"),
            (NodeHealth::Offlined, None, min(1), "offlined"),
        ];
        for (health, periods, ago, want) in cases {
            assert_eq!(shown(health, periods, ago), want, "{health:?} {periods:?}");
        }
    }
}
