//! The ports held on one node.

use crate::types::AllocatedPort;
use std::net::IpAddr;

/// The ports held on one node by allocations that use resources, as `(address, port)`.
///
/// Invariant: `addresses` is sorted and holds exactly the addresses some port is held on;
/// `held` is sorted and has each hold once per holder, as the address's index in
/// `addresses` over the port (`index << 16 | port`). So equal sets of holds are equal
/// values, and a lookup is a binary search over plain integers: the placement path does
/// two per candidate node, and comparing `(IpAddr, u16)` pairs there cost more than the
/// rest of a port check. One flat list: most nodes have one address, and a list is one
/// allocation to copy when a write changes a node a snapshot still shares.
///
/// An address's index fits the key's upper 16 bits: a node offers at most
/// `limits.max_node_addresses` addresses (64 by default), and its allocations hold ports
/// only on those.
///
/// Committed plans never let two allocations hold one port, so a count above one only
/// shows in a state some other path produced; the index still counts both, so removing one
/// holder leaves the port held by the other.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct NodePorts {
    addresses: Vec<IpAddr>,
    held: Vec<u32>,
}

/// No ports held, for readers of nodes that hold none.
pub static NO_PORTS: NodePorts = NodePorts {
    addresses: Vec::new(),
    held: Vec::new(),
};

/// One address's step in a key of `held`.
const ADDRESS: u32 = 1 << 16;

impl NodePorts {
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    fn address(&self, ip: IpAddr) -> Option<u32> {
        self.addresses
            .iter()
            .position(|a| *a == ip)
            .map(|i| i as u32)
    }

    /// Records the ports of one more holder.
    pub fn add(&mut self, ports: &[AllocatedPort]) {
        for p in ports {
            let index = match self.addresses.binary_search(&p.host_ip) {
                Ok(i) => i as u32,
                Err(i) => {
                    // A new address between others: the holds on those after it move up.
                    self.addresses.insert(i, p.host_ip);
                    let i = i as u32;
                    for k in self.held.iter_mut().filter(|k| **k >> 16 >= i) {
                        *k += ADDRESS;
                    }
                    i
                }
            };
            let key = index << 16 | u32::from(p.value);
            let at = self.held.partition_point(|k| *k < key);
            self.held.insert(at, key);
        }
    }

    /// Forgets the ports of one holder (each once).
    pub fn remove(&mut self, ports: &[AllocatedPort]) {
        for p in ports {
            let Some(index) = self.address(p.host_ip) else {
                continue;
            };
            let Ok(at) = self.held.binary_search(&(index << 16 | u32::from(p.value))) else {
                continue;
            };
            self.held.remove(at);
            if self.count_at(index, 0, u16::MAX) == 0 {
                // Its last hold went: so does the address, and those after it move down.
                self.addresses.remove(index as usize);
                for k in self.held.iter_mut().filter(|k| **k >> 16 > index) {
                    *k -= ADDRESS;
                }
            }
        }
    }

    /// Holders of `port` on `ip`.
    pub fn count(&self, ip: IpAddr, port: u16) -> usize {
        self.count_in(ip, port, port)
    }

    /// Holders of ports in `lo..=hi` on `ip`, each port counted once per holder.
    pub fn count_in(&self, ip: IpAddr, lo: u16, hi: u16) -> usize {
        match self.address(ip) {
            Some(index) if lo <= hi => self.count_at(index, lo, hi),
            _ => 0,
        }
    }

    fn count_at(&self, index: u32, lo: u16, hi: u16) -> usize {
        let (lo, hi) = (index << 16 | u32::from(lo), index << 16 | u32::from(hi));
        let h = &self.held;
        h.partition_point(|k| *k <= hi) - h.partition_point(|k| *k < lo)
    }

    /// Every `(address, port)` held, once per holder, in order.
    pub fn iter(&self) -> impl Iterator<Item = (IpAddr, u16)> + '_ {
        self.held
            .iter()
            .map(|k| (self.addresses[(k >> 16) as usize], *k as u16))
    }

    /// How many `(address, port)` holds there are.
    pub fn len(&self) -> usize {
        self.held.len()
    }
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
        assert_eq!(ports.count_in(b, 1, 65535), 0);
        assert_eq!(
            ports.iter().collect::<Vec<_>>(),
            vec![(a, 8080), (a, 20001)]
        );
        ports.remove(&[port("10.0.0.1", 8080), port("10.0.0.1", 20001)]);
        assert!(ports.is_empty());
        assert_eq!(ports, NodePorts::default(), "no address is left behind");
    }

    /// The same holds make the same index whatever order they came and went in, which is
    /// what the state's consistency check compares against a rebuild.
    #[test]
    fn equal_holds_are_equal_whatever_their_order() {
        let mut one = NodePorts::default();
        one.add(&[port("10.0.0.9", 9000)]);
        one.add(&[port("10.0.0.2", 80), port("::1", 443)]);
        one.add(&[port("10.0.0.5", 7)]);
        one.remove(&[port("10.0.0.5", 7)]);
        let mut two = NodePorts::default();
        two.add(&[port("::1", 443)]);
        two.add(&[port("10.0.0.2", 80)]);
        two.add(&[port("10.0.0.9", 9000)]);
        assert_eq!(one, two);
        let nine: IpAddr = "10.0.0.9".parse().expect("ip");
        let v6: IpAddr = "::1".parse().expect("ip");
        assert_eq!(one.count(nine, 9000), 1);
        assert_eq!(one.count(v6, 443), 1);
        assert_eq!(one.count_in("10.0.0.5".parse().expect("ip"), 1, 65535), 0);
        assert_eq!(
            one.iter()
                .map(|(ip, p)| format!("{ip}:{p}"))
                .collect::<Vec<_>>(),
            ["10.0.0.2:80", "10.0.0.9:9000", "::1:443"]
        );
    }
}
