//! A group's ask, arranged for checking many nodes: its ports grouped by host network,
//! built once per group and placement run rather than per candidate node.

use crate::types::{GroupNetwork, PortAsk};

/// What a group asks of a node's ports. Invariant: `networks` holds each host network the
/// ask names once, in order of first mention; `network_of[i]` is the index there of
/// `ports[i]`'s network; each network's static ports are in ask order.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PortDemand {
    pub(super) ports: Vec<PortAsk>,
    pub(super) network_of: Vec<usize>,
    pub(super) networks: Vec<NetworkDemand>,
}

/// The part of an ask on one host network.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(super) struct NetworkDemand {
    pub(super) name: String,
    pub(super) statics: Vec<u16>,
    pub(super) dynamic: usize,
}

impl PortDemand {
    pub fn new(ask: &GroupNetwork) -> Self {
        let mut networks: Vec<NetworkDemand> = Vec::new();
        let mut network_of = Vec::with_capacity(ask.ports.len());
        for p in &ask.ports {
            // An ask names one host network or a few: a scan beats a map.
            let i = match networks.iter().position(|n| n.name == p.host_network) {
                Some(i) => i,
                None => {
                    networks.push(NetworkDemand {
                        name: p.host_network.clone(),
                        statics: Vec::new(),
                        dynamic: 0,
                    });
                    networks.len() - 1
                }
            };
            match p.static_port {
                Some(port) => networks[i].statics.push(port),
                None => networks[i].dynamic += 1,
            }
            network_of.push(i);
        }
        Self {
            ports: ask.ports.clone(),
            network_of,
            networks,
        }
    }

    /// The ask it was built from, in order.
    pub fn ports(&self) -> &[PortAsk] {
        &self.ports
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_the_ask_by_host_network_in_order_of_mention() {
        let mut public = PortAsk::fixed("admin", 8080);
        public.host_network = "public".into();
        let ask = GroupNetwork {
            ports: vec![
                PortAsk::dynamic("http"),
                public,
                PortAsk::fixed("dns", 53),
                PortAsk::dynamic("grpc"),
            ],
        };
        let d = PortDemand::new(&ask);
        assert_eq!(d.network_of, vec![0, 1, 0, 0]);
        let summary: Vec<_> = d
            .networks
            .iter()
            .map(|n| (n.name.as_str(), n.statics.clone(), n.dynamic))
            .collect();
        assert_eq!(
            summary,
            vec![("default", vec![53], 2), ("public", vec![8080], 0)]
        );
        assert_eq!(d.ports(), &ask.ports[..]);
    }
}
