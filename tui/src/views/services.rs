//! Service registrations, one row per instance: where each allocation offers a service
//! and whether its checks pass. Loaded with the cluster and kept by the `Service` topic.

use super::{Cell, Column, Ctx, DetailLine, KeyHelp, TableView, Tone, ViewKind, col, key};
use crate::kinds::{RowKey, SortKey};
use drover_core::{ServiceHealth, ServiceRegistration};

pub struct ServicesView;

fn registration<'a>(ctx: &Ctx<'a>, key: &RowKey) -> Option<&'a ServiceRegistration> {
    match key {
        RowKey::Service(id) => ctx.cluster.services.get(id),
        _ => None,
    }
}

pub(super) fn health_tone(health: ServiceHealth) -> Tone {
    match health {
        ServiceHealth::Passing => Tone::Good,
        ServiceHealth::Warning => Tone::Warn,
        ServiceHealth::Critical => Tone::Bad,
    }
}

/// `10.0.0.7:23517`; `-` for a part the service does not name.
pub(super) fn address_text(r: &ServiceRegistration) -> String {
    let address = r.address.map_or_else(|| "-".to_owned(), |a| a.to_string());
    let port = if r.port == 0 {
        "-".to_owned()
    } else {
        r.port.to_string()
    };
    format!("{address}:{port}")
}

fn node_name(ctx: &Ctx, r: &ServiceRegistration) -> String {
    ctx.cluster
        .nodes
        .get(&r.node_id)
        .map(|n| n.name.clone())
        .unwrap_or_else(|| r.node_id.short())
}

fn tags_text(r: &ServiceRegistration) -> String {
    if r.tags.is_empty() {
        "-".to_owned()
    } else {
        r.tags.join(",")
    }
}

const COLUMNS: &[Column] = &[
    col("SERVICE", 14, 0),
    col("NAMESPACE", 9, 5),
    col("JOB", 14, 2),
    col("ALLOC", 8, 3),
    col("NODE", 12, 3),
    col("ADDRESS", 21, 0),
    col("TAGS", 12, 4),
    col("HEALTH", 8, 0),
];

const KEYS: &[KeyHelp] = &[key(
    "i",
    "the registration's detail: where it is offered, its health",
)];

impl TableView for ServicesView {
    fn kind(&self) -> ViewKind {
        ViewKind::Services
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn rows(&self, ctx: &Ctx) -> Vec<RowKey> {
        ctx.cluster
            .services
            .iter()
            .map(|r| RowKey::Service(r.id.clone()))
            .collect()
    }

    /// By namespace, then service, then job and allocation: a service's instances together.
    fn natural_rank(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<SortKey>> {
        let r = registration(ctx, key).filter(|r| ctx.in_namespace(&r.namespace))?;
        Some(vec![
            SortKey::text(&r.namespace),
            SortKey::text(&r.service_name),
            SortKey::text(&r.job_id),
        ])
    }

    fn cells(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<Cell>> {
        let r = registration(ctx, key)?;
        Some(vec![
            Cell::name(r.service_name.clone()),
            Cell::tone(r.namespace.clone(), Tone::Dim),
            Cell::name(r.job_id.clone()),
            Cell::tone(r.alloc_id.short(), Tone::Dim),
            Cell::name(node_name(ctx, r)),
            Cell::new(address_text(r)),
            Cell::new(tags_text(r)),
            Cell::tone(r.health.as_str(), health_tone(r.health)),
        ])
    }

    fn sort_key(&self, ctx: &Ctx, key: &RowKey, column: usize) -> SortKey {
        let Some(r) = registration(ctx, key) else {
            return SortKey::Num(0);
        };
        match column {
            0 => SortKey::text(&r.service_name),
            1 => SortKey::text(&r.namespace),
            2 => SortKey::text(&r.job_id),
            3 => SortKey::text(r.alloc_id.to_string()),
            4 => SortKey::text(node_name(ctx, r)),
            5 => SortKey::text(address_text(r)),
            6 => SortKey::text(tags_text(r)),
            // Worst first.
            _ => SortKey::Num(2 - r.health as u64),
        }
    }

    fn detail(&self, ctx: &Ctx, key: &RowKey) -> Vec<DetailLine> {
        let Some(r) = registration(ctx, key) else {
            return Vec::new();
        };
        // The catalog keeps a registration's health, the worst of its checks; each check's
        // own result stays on the agent that runs it.
        let mut lines = vec![
            DetailLine::field("service", r.service_name.clone()),
            DetailLine::toned("health", r.health.as_str(), health_tone(r.health)),
            DetailLine::field("address", address_text(r)),
            DetailLine::field("namespace", r.namespace.clone()),
            DetailLine::field("job", r.job_id.clone()),
            DetailLine::field("allocation", r.alloc_id.to_string()),
            DetailLine::field("node", format!("{} ({})", node_name(ctx, r), r.node_id)),
            DetailLine::field(
                "offered by",
                match &r.task {
                    Some(task) => format!("task {task}"),
                    None => "the group".to_owned(),
                },
            ),
            DetailLine::field("tags", tags_text(r)),
            DetailLine::field("registration", r.id.clone()),
            DetailLine::field(
                "index",
                format!("created {}, modified {}", r.create_index, r.modify_index),
            ),
        ];
        if let Some(alloc) = ctx.cluster.allocs.get(&r.alloc_id) {
            lines.push(DetailLine::field(
                "alloc status",
                format!("{}/{}", alloc.desired.as_str(), alloc.client.as_str()),
            ));
        }
        lines
    }

    fn keys(&self) -> &'static [KeyHelp] {
        KEYS
    }
}
