//! Bounds on what a node may send (registration and heartbeat), so one node cannot bloat
//! the state: every field a node controls is capped, and its resources must be sane.
//! The limits are the server's config (`limits { ... }`); the checks are pure.

use crate::types::{Node, Resources};

/// The most a node may send. Each limit names its HCL key in errors, so an operator who
/// hits one knows what to raise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLimits {
    /// Bytes of a node's name, datacenter and class (`limits.max_node_name_bytes`).
    pub max_name_bytes: usize,
    /// Attributes per node (`limits.max_node_attributes`).
    pub max_attributes: usize,
    /// Meta entries per node (`limits.max_node_meta`).
    pub max_meta: usize,
    /// Bytes of one attribute or meta key or value (`limits.max_node_entry_bytes`).
    pub max_entry_bytes: usize,
    /// Bytes of the snapshot id a node reports (`limits.max_snapshot_id_bytes`).
    pub max_snapshot_id_bytes: usize,
    /// CPU a node may declare, MHz (`limits.max_node_cpu_mhz`).
    pub max_cpu_mhz: u64,
    /// Memory a node may declare, MB (`limits.max_node_memory_mb`).
    pub max_memory_mb: u64,
    /// Disk a node may declare, MB (`limits.max_node_disk_mb`).
    pub max_disk_mb: u64,
    /// Addresses a node may offer ports on (`limits.max_node_addresses`).
    pub max_addresses: usize,
}

impl Default for NodeLimits {
    fn default() -> Self {
        Self {
            max_name_bytes: 256,
            max_attributes: 512,
            max_meta: 256,
            max_entry_bytes: 1024,
            max_snapshot_id_bytes: 256,
            // 1,000 cores at 10 GHz, 64 TiB of memory, 1 EB of disk: beyond any machine.
            max_cpu_mhz: 10_000_000,
            max_memory_mb: 64 * 1024 * 1024,
            max_disk_mb: 1024 * 1024 * 1024 * 1024,
            max_addresses: 64,
        }
    }
}

/// A node field beyond its limit, or resources that cannot be true.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NodeLimitError {
    #[error("{field}: {len} bytes are above the limit of {max} (limits.{key})")]
    TooLong {
        field: String,
        len: usize,
        max: usize,
        key: &'static str,
    },
    #[error("{field}: {len} entries are above the limit of {max} (limits.{key})")]
    TooMany {
        field: &'static str,
        len: usize,
        max: usize,
        key: &'static str,
    },
    #[error("{field}: {value} is above the limit of {max} (limits.{key})")]
    TooLarge {
        field: String,
        value: u64,
        max: u64,
        key: &'static str,
    },
    #[error(
        "{field}: {value:?} contains the invisible or text-direction character U+{code:04X}: two names could look the same"
    )]
    Invisible {
        field: &'static str,
        value: String,
        code: u32,
    },
    #[error(
        "networks: the dynamic port range {min}-{max} is empty (min_dynamic_port is above max_dynamic_port)"
    )]
    EmptyDynamicRange { min: u16, max: u16 },
    #[error("reserved.{dimension}: {reserved} is above the node's total of {total}")]
    ReservedAboveTotal {
        dimension: &'static str,
        reserved: u64,
        total: u64,
    },
}

fn text(field: &str, value: &str, max: usize, key: &'static str) -> Result<(), NodeLimitError> {
    if value.len() > max {
        return Err(NodeLimitError::TooLong {
            field: field.to_owned(),
            len: value.len(),
            max,
            key,
        });
    }
    Ok(())
}

fn map(
    field: &'static str,
    m: &std::collections::BTreeMap<String, String>,
    max: usize,
    key: &'static str,
    limits: &NodeLimits,
) -> Result<(), NodeLimitError> {
    if m.len() > max {
        return Err(NodeLimitError::TooMany {
            field,
            len: m.len(),
            max,
            key,
        });
    }
    let entry = limits.max_entry_bytes;
    for (k, v) in m {
        // The key is shown only when short enough to be worth showing.
        let name = if k.len() <= entry {
            k.as_str()
        } else {
            "<key>"
        };
        text(&format!("{field} key"), k, entry, "max_node_entry_bytes")?;
        text(
            &format!("{field}[{name:?}]"),
            v,
            entry,
            "max_node_entry_bytes",
        )?;
    }
    Ok(())
}

fn resources(field: &str, r: &Resources, limits: &NodeLimits) -> Result<(), NodeLimitError> {
    for (dim, value, max, key) in [
        ("cpu", r.cpu_mhz, limits.max_cpu_mhz, "max_node_cpu_mhz"),
        (
            "memory",
            r.memory_mb,
            limits.max_memory_mb,
            "max_node_memory_mb",
        ),
        ("disk", r.disk_mb, limits.max_disk_mb, "max_node_disk_mb"),
    ] {
        if value > max {
            return Err(NodeLimitError::TooLarge {
                field: format!("{field}.{dim}"),
                value,
                max,
                key,
            });
        }
    }
    Ok(())
}

/// Checks every field a node controls at registration.
pub fn check_node(node: &Node, limits: &NodeLimits) -> Result<(), NodeLimitError> {
    let name_max = limits.max_name_bytes;
    text("name", &node.name, name_max, "max_node_name_bytes")?;
    if let Some(c) = node
        .name
        .chars()
        .find(|c| super::is_invisible(*c) || c.is_control())
    {
        return Err(NodeLimitError::Invisible {
            field: "name",
            value: node.name.clone(),
            code: u32::from(c),
        });
    }
    text(
        "datacenter",
        &node.datacenter,
        name_max,
        "max_node_name_bytes",
    )?;
    text(
        "node_class",
        &node.node_class,
        name_max,
        "max_node_name_bytes",
    )?;
    map(
        "attributes",
        &node.attributes,
        limits.max_attributes,
        "max_node_attributes",
        limits,
    )?;
    map("meta", &node.meta, limits.max_meta, "max_node_meta", limits)?;
    resources("resources", &node.resources, limits)?;
    for (dimension, reserved, total) in [
        ("cpu", node.reserved.cpu_mhz, node.resources.cpu_mhz),
        ("memory", node.reserved.memory_mb, node.resources.memory_mb),
        ("disk", node.reserved.disk_mb, node.resources.disk_mb),
    ] {
        if reserved > total {
            return Err(NodeLimitError::ReservedAboveTotal {
                dimension,
                reserved,
                total,
            });
        }
    }
    if let Some(s) = &node.last_snapshot {
        check_snapshot_id(s, limits)?;
    }
    networks(&node.networks, limits)
}

/// The addresses a node offers and its reserved ports: bounded like its attributes, and a
/// dynamic range that is not empty.
fn networks(n: &crate::types::NodeNetworks, limits: &NodeLimits) -> Result<(), NodeLimitError> {
    if n.addresses.len() > limits.max_addresses {
        return Err(NodeLimitError::TooMany {
            field: "networks.addresses",
            len: n.addresses.len(),
            max: limits.max_addresses,
            key: "max_node_addresses",
        });
    }
    let entry = limits.max_entry_bytes;
    for (i, a) in n.addresses.iter().enumerate() {
        let at = format!("networks.addresses[{i}]");
        text(
            &format!("{at}.host_network"),
            &a.host_network,
            entry,
            "max_node_entry_bytes",
        )?;
        text(
            &format!("{at}.interface"),
            &a.interface,
            entry,
            "max_node_entry_bytes",
        )?;
    }
    text(
        "networks.reserved_ports",
        &n.reserved_ports.to_string(),
        entry,
        "max_node_entry_bytes",
    )?;
    if n.dynamic_range().is_none() {
        return Err(NodeLimitError::EmptyDynamicRange {
            min: n.min_dynamic_port,
            max: n.max_dynamic_port,
        });
    }
    Ok(())
}

/// Checks the snapshot id a heartbeat reports.
pub fn check_snapshot_id(id: &str, limits: &NodeLimits) -> Result<(), NodeLimitError> {
    text(
        "last_snapshot",
        id,
        limits.max_snapshot_id_bytes,
        "max_snapshot_id_bytes",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock;

    #[test]
    fn every_node_field_is_bounded_and_named() {
        let limits = NodeLimits::default();
        let ok = mock::node(1);
        check_node(&ok, &limits).unwrap();
        let cases: Vec<(fn(&mut Node), &str)> = vec![
            (
                |n| n.name = "x".repeat(1 << 20),
                "name: 1048576 bytes are above the limit of 256 (limits.max_node_name_bytes)",
            ),
            (
                |n| {
                    n.attributes = (0..100_000)
                        .map(|i| (format!("a{i}"), "v".into()))
                        .collect()
                },
                "attributes: 100000 entries are above the limit of 512 (limits.max_node_attributes)",
            ),
            (
                |n| {
                    n.meta.insert("k".into(), "v".repeat(2000));
                },
                "meta[\"k\"]: 2000 bytes are above the limit of 1024 (limits.max_node_entry_bytes)",
            ),
            (
                |n| n.name = "web\u{200b}-1".into(),
                "name: \"web\\u{200b}-1\" contains the invisible or text-direction character U+200B",
            ),
            (
                |n| n.resources.cpu_mhz = u64::MAX,
                "resources.cpu: 18446744073709551615 is above the limit of 10000000 (limits.max_node_cpu_mhz)",
            ),
            (
                |n| n.reserved.memory_mb = n.resources.memory_mb + 1,
                "reserved.memory: ",
            ),
            (
                |n| {
                    n.networks.addresses = (0..100)
                        .map(|i| crate::types::HostAddress {
                            host_network: compact_str::format_compact!("n{i}"),
                            address: std::net::IpAddr::from([10, 0, 0, i]),
                            interface: "eth0".into(),
                        })
                        .collect()
                },
                "networks.addresses: 100 entries are above the limit of 64 (limits.max_node_addresses)",
            ),
            (
                |n| {
                    n.networks.reserved_ports = crate::types::PortRanges::from_ranges(
                        (1..2000).map(|p| (p * 2, p * 2)).collect(),
                    )
                },
                "networks.reserved_ports: ",
            ),
            (
                |n| (n.networks.min_dynamic_port, n.networks.max_dynamic_port) = (30000, 20000),
                "networks: the dynamic port range 30000-20000 is empty",
            ),
            (
                |n| n.last_snapshot = Some("s".repeat(10 << 20)),
                "last_snapshot: 10485760 bytes are above the limit of 256 (limits.max_snapshot_id_bytes)",
            ),
        ];
        for (mutate, expected) in cases {
            let mut n = ok.clone();
            mutate(&mut n);
            let err = check_node(&n, &limits).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{err} vs {expected}");
        }
    }
}
