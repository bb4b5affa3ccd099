//! Nomad's `Node` and `NodeListStub`, with Scoot's health as drover's extra fields.

use super::{eligibility, node_health, node_status, rfc3339};
use drover_proto::v1 as pb;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Node {
    #[serde(rename = "ID")]
    pub id: String,
    pub name: String,
    pub datacenter: String,
    pub node_class: String,
    pub node_pool: &'static str,
    pub address: String,
    pub attributes: BTreeMap<String, String>,
    pub meta: BTreeMap<String, String>,
    pub node_resources: NodeResources,
    pub reserved_resources: NodeResources,
    pub drain: bool,
    pub drain_strategy: Option<DrainStrategy>,
    pub scheduling_eligibility: &'static str,
    pub status: &'static str,
    pub status_description: String,
    /// Unix seconds, as Nomad writes it.
    pub status_updated_at: u64,
    pub events: Vec<NodeEvent>,
    pub version: String,
    pub create_index: u64,
    pub modify_index: u64,
    /// drover: Scoot's health (`healthy`, `suspended:new|lost|flaky`, `offlined`).
    pub health: &'static str,
    /// drover: allocations not yet terminal on the node.
    pub live_allocs: u32,
    /// drover: the snapshot (artifact) the node last ran.
    pub last_snapshot: Option<String>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NodeResources {
    pub cpu: Cpu,
    pub memory: Memory,
    pub disk: Disk,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Cpu {
    pub cpu_shares: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct Memory {
    #[serde(rename = "MemoryMB")]
    pub memory_mb: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct Disk {
    #[serde(rename = "DiskMB")]
    pub disk_mb: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DrainStrategy {
    pub drain_spec: DrainSpec,
    pub force_deadline: String,
    pub started_at: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DrainSpec {
    /// Nanoseconds; -1 forces, 0 has no deadline.
    pub deadline: i64,
    pub ignore_system_jobs: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NodeEvent {
    pub message: String,
    pub subsystem: String,
    pub timestamp: String,
}

fn resources(r: Option<&pb::Resources>) -> NodeResources {
    let r = r.cloned().unwrap_or_default();
    NodeResources {
        cpu: Cpu {
            cpu_shares: r.cpu_mhz.unwrap_or(0),
        },
        memory: Memory {
            memory_mb: r.memory_mb.unwrap_or(0),
        },
        disk: Disk {
            disk_mb: r.disk_mb.unwrap_or(0),
        },
    }
}

/// A node as lists and reads answer it.
pub fn node(entry: &pb::NodeListEntry) -> Node {
    let n = entry.node.clone().unwrap_or_default();
    let drain = n.drain.as_ref().map(|d| {
        let deadline_ms = d.deadline_ms.unwrap_or(0);
        DrainStrategy {
            drain_spec: DrainSpec {
                deadline: if d.force {
                    -1
                } else {
                    i64::try_from(deadline_ms.saturating_mul(1_000_000)).unwrap_or(i64::MAX)
                },
                ignore_system_jobs: d.ignore_system_jobs,
            },
            force_deadline: rfc3339(if deadline_ms > 0 {
                d.started_at_unix_ms.saturating_add(deadline_ms)
            } else {
                0
            }),
            started_at: rfc3339(d.started_at_unix_ms),
        }
    });
    Node {
        address: n
            .attributes
            .get("unique.network.ip-address")
            .cloned()
            .unwrap_or_else(|| "127.0.0.1".into()),
        version: n
            .attributes
            .get("nomad.version")
            .or_else(|| n.attributes.get("drover.version"))
            .cloned()
            .unwrap_or_default(),
        id: n.id.clone(),
        name: n.name.clone(),
        datacenter: n.datacenter.clone(),
        node_class: n.node_class.clone(),
        node_pool: "default",
        attributes: n
            .attributes
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        meta: n.meta.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        node_resources: resources(n.resources.as_ref()),
        reserved_resources: resources(n.reserved.as_ref()),
        drain: drain.is_some(),
        drain_strategy: drain,
        scheduling_eligibility: eligibility(n.eligibility),
        status: node_status(n.status),
        status_description: n.status_description.clone(),
        status_updated_at: n.status_updated_at_unix_ms / 1000,
        events: n
            .events
            .iter()
            .map(|e| NodeEvent {
                message: e.message.clone(),
                subsystem: e.subsystem.clone(),
                timestamp: rfc3339(e.time_unix_ms),
            })
            .collect(),
        create_index: n.create_index,
        modify_index: n.modify_index,
        health: node_health(n.health),
        live_allocs: entry.live_allocs,
        last_snapshot: n.last_snapshot.clone(),
    }
}
