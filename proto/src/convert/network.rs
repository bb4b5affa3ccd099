//! Networks and ports: a group's `network` block, a node's addresses and port ranges, the
//! ports an allocation holds, and the port shortages of placement metrics.

use super::{ConvertError, Problem, Result, Within, each, required};
use crate::v1 as pb;
use drover_core::*;
use std::collections::BTreeMap;
use std::net::IpAddr;

// --- Core → proto ---------------------------------------------------------------------------

impl From<&PortAsk> for pb::PortAsk {
    fn from(p: &PortAsk) -> Self {
        pb::PortAsk {
            label: p.label.clone(),
            static_port: p.static_port.map(u32::from),
            to: p.to.map(u32::from),
            host_network: p.host_network.clone(),
        }
    }
}

impl From<&GroupNetwork> for pb::GroupNetwork {
    fn from(n: &GroupNetwork) -> Self {
        pb::GroupNetwork {
            mode: "host".into(),
            ports: n.ports.iter().map(Into::into).collect(),
        }
    }
}

impl From<&NodeNetworks> for pb::NodeNetworks {
    fn from(n: &NodeNetworks) -> Self {
        pb::NodeNetworks {
            addresses: n
                .addresses
                .iter()
                .map(|a| pb::HostAddress {
                    host_network: a.host_network.to_string(),
                    address: a.address.to_string(),
                    interface: a.interface.clone(),
                })
                .collect(),
            reserved_ports: n.reserved_ports.to_string(),
            min_dynamic_port: n.min_dynamic_port.into(),
            max_dynamic_port: n.max_dynamic_port.into(),
        }
    }
}

impl From<&AllocatedPort> for pb::AllocatedPort {
    fn from(p: &AllocatedPort) -> Self {
        pb::AllocatedPort {
            label: p.label.to_string(),
            value: p.value.into(),
            to: p.to.into(),
            host_ip: p.host_ip.to_string(),
        }
    }
}

/// The metrics' port shortages, in the core map's order.
pub(crate) fn shortages_to(m: &BTreeMap<PortShortage, u32>) -> Vec<pb::PortShortage> {
    use pb::port_shortage::Reason;
    m.iter()
        .map(|(s, n)| pb::PortShortage {
            reason: Some(match s {
                PortShortage::Taken(p) => Reason::Taken((*p).into()),
                PortShortage::Reserved(p) => Reason::Reserved((*p).into()),
                PortShortage::DynamicExhausted => Reason::DynamicExhausted(true),
                PortShortage::NoHostNetwork(name) => Reason::NoHostNetwork(name.clone()),
            }),
            nodes: *n,
        })
        .collect()
}

// --- Proto → core ---------------------------------------------------------------------------

/// A port number: 1-65535.
fn port(field: &str, value: u32) -> Result<u16> {
    u16::try_from(value)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| ConvertError::new(field, Problem::Invalid("not a port (1-65535)")))
}

fn ip(field: &str, text: &str) -> Result<IpAddr> {
    if text.is_empty() {
        return Err(ConvertError::new(field, Problem::Missing));
    }
    text.parse()
        .map_err(|_| ConvertError::new(field, Problem::Invalid("not an IP address")))
}

fn port_ask(p: pb::PortAsk) -> Result<PortAsk> {
    Ok(PortAsk {
        label: p.label,
        static_port: p.static_port.map(|v| port("static_port", v)).transpose()?,
        to: p.to.map(|v| port("to", v)).transpose()?,
        host_network: if p.host_network.is_empty() {
            DEFAULT_HOST_NETWORK.into()
        } else {
            p.host_network
        },
    })
}

/// A group's network: host mode only. Any other mode is refused here, by name, rather than
/// accepted and run as host networking.
pub(crate) fn group_network(p: pb::GroupNetwork) -> Result<GroupNetwork> {
    if !(p.mode.is_empty() || p.mode == "host") {
        return Err(ConvertError::new(
            "mode",
            Problem::Refused(format!(
                "network mode {:?}: drover runs host networking only (mode \"host\")",
                p.mode
            )),
        ));
    }
    Ok(GroupNetwork {
        ports: each("ports", p.ports, port_ask)?,
    })
}

pub(crate) fn node_networks(p: pb::NodeNetworks) -> Result<NodeNetworks> {
    let addresses = each("addresses", p.addresses, |a| {
        Ok(HostAddress {
            address: ip("address", &a.address)?,
            host_network: a.host_network.into(),
            interface: a.interface,
        })
    })?;
    let reserved_ports = PortRanges::parse(&p.reserved_ports)
        .map_err(|e| ConvertError::new("reserved_ports", Problem::Refused(e.to_string())))?;
    let (min_dynamic_port, max_dynamic_port) = match (p.min_dynamic_port, p.max_dynamic_port) {
        (0, 0) => (DEFAULT_MIN_DYNAMIC_PORT, DEFAULT_MAX_DYNAMIC_PORT),
        (lo, hi) => (port("min_dynamic_port", lo)?, port("max_dynamic_port", hi)?),
    };
    Ok(NodeNetworks {
        addresses,
        reserved_ports,
        min_dynamic_port,
        max_dynamic_port,
    })
}

/// An optional `networks` field: absent is the default (no addresses, default range).
pub(crate) fn optional_node_networks(p: Option<pb::NodeNetworks>) -> Result<NodeNetworks> {
    p.map(node_networks)
        .transpose()
        .within("networks")
        .map(Option::unwrap_or_default)
}

/// A port an allocation holds, as the servers sent it.
pub fn allocated_port(p: pb::AllocatedPort) -> Result<AllocatedPort> {
    Ok(AllocatedPort {
        label: p.label.into(),
        value: port("value", p.value)?,
        to: match p.to {
            0 => 0,
            to => port("to", to)?,
        },
        host_ip: ip("host_ip", &p.host_ip)?,
    })
}

pub(crate) fn shortages(p: Vec<pb::PortShortage>) -> Result<BTreeMap<PortShortage, u32>> {
    use pb::port_shortage::Reason;
    let mut out = BTreeMap::new();
    for (i, s) in p.into_iter().enumerate() {
        let reason =
            match required("reason", s.reason).within(format_args!("ports_exhausted[{i}]"))? {
                Reason::Taken(v) => PortShortage::Taken(
                    port("taken", v).within(format_args!("ports_exhausted[{i}]"))?,
                ),
                Reason::Reserved(v) => PortShortage::Reserved(
                    port("reserved", v).within(format_args!("ports_exhausted[{i}]"))?,
                ),
                Reason::DynamicExhausted(_) => PortShortage::DynamicExhausted,
                Reason::NoHostNetwork(name) => PortShortage::NoHostNetwork(name),
            };
        *out.entry(reason).or_default() += s.nodes;
    }
    Ok(out)
}
