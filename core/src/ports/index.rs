//! The ports held on one node, per address.

use crate::types::AllocatedPort;
use std::net::IpAddr;

/// The ports held on one node by allocations that use resources, per address.
///
/// Invariant: the addresses are sorted and each appears once; each address's ports are
/// sorted, and a port appears once per holder. Committed plans never let two allocations
/// hold one port, so a count above one only shows in a state some other path produced; the
/// index still counts both, so removing one holder leaves the port held by the other.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct NodePorts {
    by_address: Vec<(IpAddr, Vec<u16>)>,
}

impl NodePorts {
    /// No ports held.
    pub const EMPTY: NodePorts = NodePorts {
        by_address: Vec::new(),
    };

    pub fn is_empty(&self) -> bool {
        self.by_address.is_empty()
    }

    /// Records the ports of one more holder.
    pub fn add(&mut self, ports: &[AllocatedPort]) {
        for p in ports {
            let list = match self
                .by_address
                .binary_search_by(|(ip, _)| ip.cmp(&p.host_ip))
            {
                Ok(i) => &mut self.by_address[i].1,
                Err(i) => {
                    self.by_address.insert(i, (p.host_ip, Vec::new()));
                    &mut self.by_address[i].1
                }
            };
            let at = list.partition_point(|v| *v < p.value);
            list.insert(at, p.value);
        }
    }

    /// Forgets the ports of one holder (each once); an address left without ports goes.
    pub fn remove(&mut self, ports: &[AllocatedPort]) {
        for p in ports {
            let Ok(i) = self
                .by_address
                .binary_search_by(|(ip, _)| ip.cmp(&p.host_ip))
            else {
                continue;
            };
            let list = &mut self.by_address[i].1;
            if let Ok(at) = list.binary_search(&p.value) {
                list.remove(at);
            }
            if list.is_empty() {
                self.by_address.remove(i);
            }
        }
    }

    /// The ports held on `ip`, sorted, once per holder.
    pub fn on(&self, ip: IpAddr) -> &[u16] {
        self.by_address
            .binary_search_by(|(a, _)| a.cmp(&ip))
            .map_or(&[], |i| &self.by_address[i].1)
    }

    /// Holders of `port` on `ip`.
    pub fn count(&self, ip: IpAddr, port: u16) -> usize {
        count_in(self.on(ip), port, port)
    }

    /// Holders of ports in `lo..=hi` on `ip`, each port counted once per holder.
    pub fn count_in(&self, ip: IpAddr, lo: u16, hi: u16) -> usize {
        count_in(self.on(ip), lo, hi)
    }

    /// Every `(address, port)` held, once per holder, in order.
    pub fn iter(&self) -> impl Iterator<Item = (IpAddr, u16)> + '_ {
        self.by_address
            .iter()
            .flat_map(|(ip, ports)| ports.iter().map(move |p| (*ip, *p)))
    }

    /// How many `(address, port)` holds there are.
    pub fn len(&self) -> usize {
        self.by_address.iter().map(|(_, p)| p.len()).sum()
    }
}

fn count_in(sorted: &[u16], lo: u16, hi: u16) -> usize {
    if lo > hi {
        return 0;
    }
    sorted.partition_point(|v| *v <= hi) - sorted.partition_point(|v| *v < lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(ip: &str, value: u16) -> AllocatedPort {
        AllocatedPort {
            label: "p".into(),
            value,
            to: 0,
            host_ip: ip.parse().expect("ip"),
        }
    }

    #[test]
    fn counts_holders_per_address_and_forgets_them_one_at_a_time() {
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        let mut ports = NodePorts::default();
        ports.add(&[port("10.0.0.1", 8080), port("10.0.0.1", 20001)]);
        ports.add(&[port("10.0.0.2", 8080)]);
        ports.add(&[port("10.0.0.1", 8080)]);
        assert_eq!(ports.count(a, 8080), 2);
        assert_eq!(ports.count(b, 8080), 1);
        assert_eq!(ports.count(b, 20001), 0);
        assert_eq!(ports.count_in(a, 8000, 30000), 3);
        assert_eq!(ports.count_in(a, 8081, 20000), 0);
        assert_eq!(ports.count_in(a, 30000, 8000), 0);
        assert_eq!(ports.len(), 4);

        ports.remove(&[port("10.0.0.1", 8080)]);
        assert_eq!(ports.count(a, 8080), 1, "the other holder keeps it");
        ports.remove(&[port("10.0.0.2", 8080), port("10.0.0.2", 9999)]);
        assert!(ports.on(b).is_empty());
        assert_eq!(
            ports.iter().collect::<Vec<_>>(),
            vec![(a, 8080), (a, 20001)]
        );
        ports.remove(&[port("10.0.0.1", 8080), port("10.0.0.1", 20001)]);
        assert!(ports.is_empty(), "an address without ports goes");
    }
}
