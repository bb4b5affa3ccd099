//! The ports held on one node.

use crate::types::AllocatedPort;
use std::net::IpAddr;

/// The ports held on one node by allocations that use resources, as `(address, port)`.
///
/// Invariant: sorted, and a port appears once per holder. Committed plans never let two
/// allocations hold one port, so a count above one only shows in a state some other path
/// produced; the index still counts both, so removing one holder leaves the port held by
/// the other. One flat list: most nodes have one address, and a list is one allocation to
/// copy when a write changes a node a snapshot still shares.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct NodePorts {
    held: Vec<(IpAddr, u16)>,
}

/// No ports held, for readers of nodes that hold none.
pub static NO_PORTS: NodePorts = NodePorts { held: Vec::new() };

impl NodePorts {
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Records the ports of one more holder.
    pub fn add(&mut self, ports: &[AllocatedPort]) {
        for p in ports {
            let key = (p.host_ip, p.value);
            let at = self.held.partition_point(|k| *k < key);
            self.held.insert(at, key);
        }
    }

    /// Forgets the ports of one holder (each once).
    pub fn remove(&mut self, ports: &[AllocatedPort]) {
        for p in ports {
            if let Ok(at) = self.held.binary_search(&(p.host_ip, p.value)) {
                self.held.remove(at);
            }
        }
    }

    /// Holders of `port` on `ip`.
    pub fn count(&self, ip: IpAddr, port: u16) -> usize {
        self.count_in(ip, port, port)
    }

    /// Holders of ports in `lo..=hi` on `ip`, each port counted once per holder.
    pub fn count_in(&self, ip: IpAddr, lo: u16, hi: u16) -> usize {
        if lo > hi {
            return 0;
        }
        let h = &self.held;
        h.partition_point(|k| *k <= (ip, hi)) - h.partition_point(|k| *k < (ip, lo))
    }

    /// Every `(address, port)` held, once per holder, in order.
    pub fn iter(&self) -> impl Iterator<Item = (IpAddr, u16)> + '_ {
        self.held.iter().copied()
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
    }
}
