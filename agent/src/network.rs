//! What the node offers for ports: the address of its default host network (the
//! `network_interface` of the config, else the interface of the default route), the
//! addresses of named host networks (`host_network "public" { interface | cidr }`), the
//! reserved ports and the dynamic range.
//!
//! Deciding is separate from looking: [`node_networks`] works on a list of interfaces and
//! the default route's interface, so it is tested without a machine; [`fingerprint`] reads
//! them from the host.

use crate::AgentError;
use drover_core::types::{DEFAULT_HOST_NETWORK, HostAddress, NodeNetworks, PortRanges};
use std::net::IpAddr;

/// The `client` settings about ports (Nomad's names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkConfig {
    /// `network_interface`: whose address is the default host network's; `None`: the
    /// default route's interface.
    pub interface: Option<String>,
    /// `reserved { reserved_ports = "22,80,8000-8100" }`: never given to allocations.
    pub reserved_ports: PortRanges,
    /// `min_dynamic_port` / `max_dynamic_port`.
    pub min_dynamic_port: u16,
    pub max_dynamic_port: u16,
    /// `host_network "name" { ... }` blocks, in the order written.
    pub host_networks: Vec<HostNetworkConfig>,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        let d = NodeNetworks::default();
        Self {
            interface: None,
            reserved_ports: PortRanges::default(),
            min_dynamic_port: d.min_dynamic_port,
            max_dynamic_port: d.max_dynamic_port,
            host_networks: Vec::new(),
        }
    }
}

/// One `host_network "name" { interface = "eth1" }` (or `cidr = "10.1.0.0/16"`): the
/// address of that interface, or the node's address inside that network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostNetworkConfig {
    pub name: String,
    pub interface: Option<String>,
    pub cidr: Option<String>,
}

/// The interface of the default route (destination and mask 0) in `/proc/net/route`.
pub fn parse_default_route(text: &str) -> Option<String> {
    text.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [iface, "00000000", _, _, _, _, _, "00000000", ..] => Some((*iface).to_string()),
            _ => None,
        }
    })
}

/// Whether `ip` lies in `cidr` (`10.1.0.0/16`, `fd00::/8`); `Err` names what is wrong.
pub fn in_cidr(ip: IpAddr, cidr: &str) -> Result<bool, String> {
    let (net, len) = cidr
        .split_once('/')
        .ok_or_else(|| format!("{cidr:?} is not a cidr (address/prefix)"))?;
    let net: IpAddr = net
        .parse()
        .map_err(|_| format!("{net:?} in {cidr:?} is not an address"))?;
    let len: u32 = len
        .parse()
        .map_err(|_| format!("{len:?} in {cidr:?} is not a prefix length"))?;
    let (a, b, bits) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(a.to_bits()), u128::from(b.to_bits()), 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (a.to_bits(), b.to_bits(), 128),
        (_, IpAddr::V4(_)) if len <= 32 => return Ok(false),
        (_, IpAddr::V6(_)) if len <= 128 => return Ok(false),
        _ => return Err(format!("prefix {len} is too long in {cidr:?}")),
    };
    if len > bits {
        return Err(format!("prefix {len} is too long in {cidr:?}"));
    }
    let shift = bits - len;
    Ok(len == 0 || (a >> shift) == (b >> shift))
}

/// The first address of `interface` among `interfaces`, IPv4 before IPv6.
fn address_of(interfaces: &[(String, IpAddr)], interface: &str) -> Option<IpAddr> {
    let mut on = interfaces.iter().filter(|(i, _)| i == interface);
    on.clone()
        .find(|(_, ip)| ip.is_ipv4())
        .or_else(|| on.next())
        .map(|(_, ip)| *ip)
}

/// What the node offers, from its interfaces (name, address) and the default route's
/// interface. The default host network is the configured interface, else the default
/// route's, else the first interface with a non-loopback IPv4 address, else loopback.
pub fn node_networks(
    config: &NetworkConfig,
    interfaces: &[(String, IpAddr)],
    default_route: Option<&str>,
) -> Result<NodeNetworks, AgentError> {
    let invalid = |field, problem: String| AgentError::ConfigInvalid { field, problem };
    let (interface, address) = match config.interface.as_deref() {
        Some(name) => {
            let ip = address_of(interfaces, name).ok_or_else(|| {
                invalid(
                    "network_interface",
                    format!("interface {name:?} has no address on this host"),
                )
            })?;
            (name.to_string(), ip)
        }
        None => default_route
            .and_then(|name| address_of(interfaces, name).map(|ip| (name.to_string(), ip)))
            .or_else(|| {
                interfaces
                    .iter()
                    .find(|(_, ip)| ip.is_ipv4() && !ip.is_loopback())
                    .cloned()
            })
            .unwrap_or_else(|| ("lo".into(), IpAddr::from([127, 0, 0, 1]))),
    };
    let mut addresses = vec![HostAddress {
        host_network: DEFAULT_HOST_NETWORK.into(),
        address,
        interface,
    }];
    for net in &config.host_networks {
        let found = match (&net.interface, &net.cidr) {
            (Some(name), _) => address_of(interfaces, name).map(|ip| (name.clone(), ip)),
            (None, Some(cidr)) => {
                let mut hit = None;
                for (name, ip) in interfaces {
                    if in_cidr(*ip, cidr).map_err(|e| invalid("host_network", e))? {
                        hit = Some((name.clone(), *ip));
                        break;
                    }
                }
                hit
            }
            (None, None) => {
                return Err(invalid(
                    "host_network",
                    format!(
                        "host network {:?} names neither interface nor cidr",
                        net.name
                    ),
                ));
            }
        };
        let (interface, address) = found.ok_or_else(|| {
            invalid(
                "host_network",
                format!(
                    "host network {:?} matches no address on this host",
                    net.name
                ),
            )
        })?;
        addresses.push(HostAddress {
            host_network: net.name.as_str().into(),
            address,
            interface,
        });
    }
    Ok(NodeNetworks {
        addresses,
        reserved_ports: config.reserved_ports.clone(),
        min_dynamic_port: config.min_dynamic_port,
        max_dynamic_port: config.max_dynamic_port,
    })
}

/// The host's interfaces with their addresses.
pub fn interfaces() -> Vec<(String, IpAddr)> {
    nix::ifaddrs::getifaddrs()
        .map(|all| {
            all.filter_map(|i| {
                let a = i.address?;
                let ip = a
                    .as_sockaddr_in()
                    .map(|v4| IpAddr::V4(v4.ip()))
                    .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))?;
                Some((i.interface_name, ip))
            })
            .collect()
        })
        .unwrap_or_default()
}

/// The name of the interface holding `127.0.0.1` (`lo` on Linux), if any: where a
/// development agent offers ports, as `nomad agent -dev` does.
pub fn loopback_interface() -> Option<String> {
    interfaces()
        .into_iter()
        .find(|(_, ip)| *ip == IpAddr::from([127, 0, 0, 1]))
        .map(|(name, _)| name)
}

/// What this host offers for ports under `config`.
pub fn fingerprint(config: &NetworkConfig) -> Result<NodeNetworks, AgentError> {
    let route = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    node_networks(
        config,
        &interfaces(),
        parse_default_route(&route).as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifs() -> Vec<(String, IpAddr)> {
        [
            ("lo", "127.0.0.1"),
            ("eth0", "fe80::1"),
            ("eth0", "192.0.2.2"),
            ("eth1", "10.1.2.3"),
        ]
        .iter()
        .map(|(i, a)| (i.to_string(), a.parse().expect("ip")))
        .collect()
    }

    #[test]
    fn the_default_route_names_its_interface() {
        let table = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
            eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
            eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
        assert_eq!(parse_default_route(table).as_deref(), Some("eth0"));
        assert_eq!(parse_default_route("Iface\tDestination\n"), None);
    }

    #[test]
    fn cidrs_hold_their_addresses() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        for (addr, cidr, want) in [
            ("10.1.2.3", "10.1.0.0/16", Ok(true)),
            ("10.2.2.3", "10.1.0.0/16", Ok(false)),
            ("10.2.2.3", "0.0.0.0/0", Ok(true)),
            ("fd00::5", "fd00::/8", Ok(true)),
            ("fd00::5", "10.0.0.0/8", Ok(false)),
            ("10.0.0.1", "10.0.0.0/33", Err(())),
            ("10.0.0.1", "10.0.0.0", Err(())),
            ("10.0.0.1", "ten/8", Err(())),
        ] {
            assert_eq!(
                in_cidr(ip(addr), cidr).map_err(|_| ()),
                want,
                "{addr} in {cidr}"
            );
        }
    }

    #[test]
    fn the_default_network_follows_config_then_route_then_any_address() {
        let with = |interface: Option<&str>| NetworkConfig {
            interface: interface.map(str::to_owned),
            ..NetworkConfig::default()
        };
        for (config, route, want) in [
            (with(None), Some("eth0"), Ok(("eth0", "192.0.2.2"))),
            (with(None), Some("eth1"), Ok(("eth1", "10.1.2.3"))),
            (with(None), None, Ok(("eth0", "192.0.2.2"))),
            (with(Some("lo")), Some("eth0"), Ok(("lo", "127.0.0.1"))),
            (with(Some("wlan0")), Some("eth0"), Err("network_interface")),
        ] {
            let got = node_networks(&config, &ifs(), route).map_err(|e| e.to_string());
            match want {
                Ok((iface, addr)) => {
                    let got = got.expect("offers an address");
                    let a = &got.addresses[0];
                    assert_eq!(a.host_network, "default");
                    assert_eq!(
                        (a.interface.as_str(), a.address.to_string().as_str()),
                        (iface, addr)
                    );
                }
                Err(field) => assert!(got.expect_err("refused").contains(field)),
            }
        }
        let lonely = node_networks(&with(None), &[], None).expect("loopback at worst");
        assert_eq!(lonely.addresses[0].address, IpAddr::from([127, 0, 0, 1]));
    }

    #[test]
    fn host_networks_are_found_by_interface_or_cidr() {
        let mut config = NetworkConfig {
            reserved_ports: PortRanges::parse("22").expect("ports"),
            min_dynamic_port: 21000,
            max_dynamic_port: 21999,
            ..NetworkConfig::default()
        };
        config.host_networks = vec![
            HostNetworkConfig {
                name: "private".into(),
                interface: None,
                cidr: Some("10.0.0.0/8".into()),
            },
            HostNetworkConfig {
                name: "local".into(),
                interface: Some("lo".into()),
                cidr: None,
            },
        ];
        let n = node_networks(&config, &ifs(), Some("eth0")).expect("found");
        let found: Vec<_> = n
            .addresses
            .iter()
            .map(|a| (a.host_network.as_str(), a.address.to_string()))
            .collect();
        assert_eq!(
            found,
            [
                ("default", "192.0.2.2".to_string()),
                ("private", "10.1.2.3".to_string()),
                ("local", "127.0.0.1".to_string())
            ]
        );
        assert!(n.reserved_ports.contains(22));
        assert_eq!(n.dynamic_range(), Some((21000, 21999)));

        config.host_networks[0].cidr = Some("172.16.0.0/12".into());
        let err = node_networks(&config, &ifs(), Some("eth0")).expect_err("no match");
        assert!(
            err.to_string().contains("\"private\" matches no address"),
            "{err}"
        );
    }
}
