//! Networks and ports: what a group asks for (its `network` block), what a node offers (its
//! addresses, reserved ports and dynamic range), and what an allocation holds once placed.
//!
//! drover runs host networking only: a task binds one of its node's own addresses, so a
//! port is a node resource, held by at most one allocation per node address (the plan
//! applier refuses a plan that would break that). A port is either *static* (the job names
//! the host port) or *dynamic* (the scheduler picks a free one in the node's dynamic range).

use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// The dynamic range nodes use unless their agent says otherwise (Nomad's default).
pub const DEFAULT_MIN_DYNAMIC_PORT: u16 = 20000;
pub const DEFAULT_MAX_DYNAMIC_PORT: u16 = 32000;

/// The host network a port lands on when it names none: the node's default address.
pub const DEFAULT_HOST_NETWORK: &str = "default";

/// A group's `network` block (host mode).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct GroupNetwork {
    /// Labels are unique within the group (validation checks it).
    pub ports: Vec<PortAsk>,
}

impl GroupNetwork {
    /// How many ports the scheduler must pick.
    pub fn dynamic_count(&self) -> usize {
        self.ports
            .iter()
            .filter(|p| p.static_port.is_none())
            .count()
    }
}

/// One `port "label" { ... }` of a group.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct PortAsk {
    /// Names the port in the task environment (`NOMAD_PORT_<label>`): a valid env name.
    pub label: String,
    /// `static`: exactly this host port; `None`: a dynamic one.
    pub static_port: Option<u16>,
    /// `to`: the port the task is told to bind (`NOMAD_PORT_<label>`) when it differs from
    /// the host port, for drivers that map ports; `None`: the host port.
    pub to: Option<u16>,
    /// Which of the node's host networks the port is on.
    pub host_network: String,
}

impl PortAsk {
    /// A dynamic port on the default host network.
    pub fn dynamic(label: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            static_port: None,
            to: None,
            host_network: DEFAULT_HOST_NETWORK.into(),
        }
    }

    /// A static port on the default host network.
    pub fn fixed(label: impl Into<String>, port: u16) -> Self {
        Self {
            static_port: Some(port),
            ..Self::dynamic(label)
        }
    }
}

/// Port numbers as sorted, disjoint, non-adjacent inclusive ranges: `22,80,8000-8100`.
///
/// Invariant: the ranges are sorted, each `lo <= hi`, and no two overlap or touch, so each
/// set has exactly one form (equality and the text are canonical).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct PortRanges(Vec<(u16, u16)>);

/// Why a port list did not parse.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum PortRangesError {
    #[error("{0:?} is not a port (1-65535)")]
    NotAPort(String),
    #[error("range {0:?} ends before it starts")]
    Backwards(String),
}

impl PortRanges {
    /// Parses Nomad's `reserved_ports` syntax: comma-separated ports and `lo-hi` ranges,
    /// spaces allowed, empty for none.
    pub fn parse(text: &str) -> Result<Self, PortRangesError> {
        let port = |s: &str| -> Result<u16, PortRangesError> {
            s.trim()
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| PortRangesError::NotAPort(s.trim().to_owned()))
        };
        let mut ranges = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let range = match part.split_once('-') {
                Some((lo, hi)) => {
                    let (lo, hi) = (port(lo)?, port(hi)?);
                    if hi < lo {
                        return Err(PortRangesError::Backwards(part.to_owned()));
                    }
                    (lo, hi)
                }
                None => {
                    let p = port(part)?;
                    (p, p)
                }
            };
            ranges.push(range);
        }
        Ok(Self::from_ranges(ranges))
    }

    /// The set covering `ranges` (in any order, overlapping or not); a range with
    /// `lo > hi` is empty.
    pub fn from_ranges(mut ranges: Vec<(u16, u16)>) -> Self {
        ranges.retain(|(lo, hi)| lo <= hi);
        ranges.sort_unstable();
        let mut merged: Vec<(u16, u16)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if u32::from(lo) <= u32::from(last.1) + 1 => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        Self(merged)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn ranges(&self) -> &[(u16, u16)] {
        &self.0
    }

    pub fn contains(&self, port: u16) -> bool {
        // Few ranges: a binary search on the starts.
        let i = self.0.partition_point(|(lo, _)| *lo <= port);
        i > 0 && self.0[i - 1].1 >= port
    }

    /// How many ports of `lo..=hi` the set holds.
    pub fn count_in(&self, lo: u16, hi: u16) -> usize {
        self.0
            .iter()
            .map(|&(a, b)| {
                let (a, b) = (a.max(lo), b.min(hi));
                if a <= b { usize::from(b - a) + 1 } else { 0 }
            })
            .sum()
    }
}

impl fmt::Display for PortRanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (lo, hi)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

/// One address a node offers ports on.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct HostAddress {
    /// The host network it belongs to (`default` for the node's main address). Inline (a
    /// name up to 24 bytes is kept in place): every port check of a node compares it.
    pub host_network: CompactString,
    pub address: IpAddr,
    /// The interface it was found on (informational).
    pub interface: String,
}

/// What a node offers for ports.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct NodeNetworks {
    /// The default host network's address first. A node without addresses takes no group
    /// that asks for ports.
    pub addresses: Vec<HostAddress>,
    /// Never given to an allocation, static or dynamic (`reserved { reserved_ports }`).
    pub reserved_ports: PortRanges,
    /// Dynamic ports are picked in `min_dynamic_port..=max_dynamic_port`.
    pub min_dynamic_port: u16,
    pub max_dynamic_port: u16,
}

impl Default for NodeNetworks {
    fn default() -> Self {
        Self {
            addresses: Vec::new(),
            reserved_ports: PortRanges::default(),
            min_dynamic_port: DEFAULT_MIN_DYNAMIC_PORT,
            max_dynamic_port: DEFAULT_MAX_DYNAMIC_PORT,
        }
    }
}

impl NodeNetworks {
    /// A node with one address on the default host network and the default range.
    pub fn single(address: IpAddr, interface: impl Into<String>) -> Self {
        Self {
            addresses: vec![HostAddress {
                host_network: DEFAULT_HOST_NETWORK.into(),
                address,
                interface: interface.into(),
            }],
            ..Self::default()
        }
    }

    /// The first address of `host_network`, if the node has that host network.
    pub fn address_of(&self, host_network: &str) -> Option<IpAddr> {
        self.addresses
            .iter()
            .find(|a| a.host_network == host_network)
            .map(|a| a.address)
    }

    /// The dynamic range, `None` when it is empty (`min > max`).
    pub fn dynamic_range(&self) -> Option<(u16, u16)> {
        (self.min_dynamic_port <= self.max_dynamic_port)
            .then_some((self.min_dynamic_port, self.max_dynamic_port))
    }
}

/// A port an allocation holds on its node.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct AllocatedPort {
    pub label: CompactString,
    /// The host port.
    pub value: u16,
    /// The port the task binds when mapped (`to`); 0: the host port.
    pub to: u16,
    pub host_ip: IpAddr,
}

impl AllocatedPort {
    /// The port the task is told to bind (`NOMAD_PORT_<label>`): `to` when set, else the
    /// host port.
    pub fn task_port(&self) -> u16 {
        if self.to == 0 { self.value } else { self.to }
    }

    /// Where the port is reached from outside the node.
    pub fn socket(&self) -> SocketAddr {
        SocketAddr::new(self.host_ip, self.value)
    }
}

/// Why a node could not give a group its ports: counted per reason in
/// `AllocMetric::ports_exhausted`, which is what "why is this pending" prints.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub enum PortShortage {
    /// A static port another allocation holds.
    Taken(u16),
    /// A static port among the node's reserved ports.
    Reserved(u16),
    /// The dynamic range has fewer free ports than the group asks for.
    DynamicExhausted,
    /// The node has no address on this host network.
    NoHostNetwork(String),
}

impl fmt::Display for PortShortage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortShortage::Taken(p) => write!(f, "port {p} taken"),
            PortShortage::Reserved(p) => write!(f, "port {p} reserved"),
            PortShortage::DynamicExhausted => f.write_str("dynamic ports exhausted"),
            PortShortage::NoHostNetwork(n) => write!(f, "no host network {n:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_ports_parse_merge_and_print() {
        let cases: [(&str, Result<&str, PortRangesError>); 8] = [
            ("", Ok("")),
            ("22,80,8000-8100", Ok("22,80,8000-8100")),
            (" 80 , 22 ,81", Ok("22,80-81")),
            ("8000-8100,8050-8200,1", Ok("1,8000-8200")),
            ("7-7", Ok("7")),
            ("0", Err(PortRangesError::NotAPort("0".into()))),
            ("70000", Err(PortRangesError::NotAPort("70000".into()))),
            ("9-3", Err(PortRangesError::Backwards("9-3".into()))),
        ];
        for (text, want) in cases {
            let got = PortRanges::parse(text).map(|r| r.to_string());
            assert_eq!(got, want.map(str::to_owned), "{text:?}");
        }
    }

    #[test]
    fn reserved_ports_answer_membership_and_counts() {
        let r = PortRanges::parse("22,80,8000-8100,65535").expect("parses");
        for (port, want) in [
            (21, false),
            (22, true),
            (23, false),
            (80, true),
            (7999, false),
            (8000, true),
            (8050, true),
            (8100, true),
            (8101, false),
            (65535, true),
            (1, false),
        ] {
            assert_eq!(r.contains(port), want, "{port}");
        }
        assert_eq!(r.count_in(1, 65535), 1 + 1 + 101 + 1);
        assert_eq!(r.count_in(8050, 8060), 11);
        assert_eq!(r.count_in(81, 7999), 0);
        assert_eq!(r.count_in(9000, 100), 0);
    }

    #[test]
    fn a_port_binds_to_when_mapped() {
        let p = AllocatedPort {
            label: "http".into(),
            value: 21000,
            to: 0,
            host_ip: "10.0.0.1".parse().expect("ip"),
        };
        assert_eq!(p.task_port(), 21000);
        assert_eq!(p.socket().to_string(), "10.0.0.1:21000");
        let mapped = AllocatedPort { to: 8080, ..p };
        assert_eq!(mapped.task_port(), 8080);
    }
}
