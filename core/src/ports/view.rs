//! One node's ports as a plan leaves them, and what a group's ask gets from them.

use super::NodePorts;
use crate::types::{AllocatedPort, GroupNetwork, NodeNetworks, PortAsk, PortShortage};
use rustc_hash::FxHashSet;
use std::net::IpAddr;
use thin_vec::ThinVec;

/// Random draws per dynamic port before the range is scanned (Nomad's figure): on a
/// lightly used range one draw almost always does, and the scan bounds a crowded one.
pub const MAX_RANDOM_TRIES: usize = 20;

/// A node's ports: the state's holders of each port, adjusted by what a plan so far
/// releases (stops, evictions, the allocations a placement preempts) and takes
/// (placements), plus the node's reserved ports and dynamic range.
#[derive(Clone, Debug)]
pub struct PortsView<'a> {
    networks: &'a NodeNetworks,
    held: &'a NodePorts,
    /// `(address, port, +1 taken | -1 released)`; empty for a node the plan left alone.
    delta: Vec<(IpAddr, u16, i32)>,
}

impl<'a> PortsView<'a> {
    pub fn new(networks: &'a NodeNetworks, held: &'a NodePorts) -> Self {
        Self {
            networks,
            held,
            delta: Vec::new(),
        }
    }

    /// The ports of an allocation that stops holding them.
    pub fn release(&mut self, ports: &[AllocatedPort]) {
        self.delta
            .extend(ports.iter().map(|p| (p.host_ip, p.value, -1)));
    }

    /// The ports of an allocation that starts holding them.
    pub fn take(&mut self, ports: &[AllocatedPort]) {
        self.delta
            .extend(ports.iter().map(|p| (p.host_ip, p.value, 1)));
    }

    /// Holders of `port` on `ip` once the plan is applied.
    pub fn holders(&self, ip: IpAddr, port: u16) -> i64 {
        let base = self.held.count(ip, port) as i64;
        base + self
            .delta
            .iter()
            .filter(|(a, p, _)| *a == ip && *p == port)
            .map(|(_, _, d)| i64::from(*d))
            .sum::<i64>()
    }

    /// Holds of ports in `lo..=hi` on `ip` once the plan is applied (a port counted once
    /// per holder).
    fn held_in(&self, ip: IpAddr, lo: u16, hi: u16) -> i64 {
        let base = self.held.count_in(ip, lo, hi) as i64;
        base + self
            .delta
            .iter()
            .filter(|(a, p, _)| *a == ip && (lo..=hi).contains(p))
            .map(|(_, _, d)| i64::from(*d))
            .sum::<i64>()
    }

    /// The address of each asked port, in ask order.
    fn addresses<'g>(
        &self,
        ask: &'g GroupNetwork,
    ) -> impl Iterator<Item = (&'g PortAsk, Result<IpAddr, PortShortage>)> + use<'g, '_> {
        ask.ports.iter().map(|p| {
            let ip = self
                .networks
                .address_of(&p.host_network)
                .ok_or_else(|| PortShortage::NoHostNetwork(p.host_network.clone()));
            (p, ip)
        })
    }

    /// Whether `ask` fits: every port's host network exists here, every static port is
    /// neither reserved nor held, and each address's dynamic range has room for the dynamic
    /// ports on it. The first shortage found, in ask order (static ports before dynamic
    /// room), says why not.
    ///
    /// The room is counted conservatively (a held port counts once per holder, and is
    /// counted even when also reserved), so [`PortsView::assign`] never runs short where
    /// this said yes.
    pub fn check(&self, ask: &GroupNetwork) -> Result<(), PortShortage> {
        // (address, dynamic ports asked there, static ports of the ask in the range there)
        let mut per_address: Vec<(IpAddr, usize, usize)> = Vec::new();
        let range = self.networks.dynamic_range();
        for (p, ip) in self.addresses(ask) {
            let ip = ip?;
            let entry = match per_address.iter().position(|(a, _, _)| *a == ip) {
                Some(i) => &mut per_address[i],
                None => {
                    per_address.push((ip, 0, 0));
                    per_address.last_mut().expect("just pushed")
                }
            };
            match p.static_port {
                Some(port) => {
                    if self.networks.reserved_ports.contains(port) {
                        return Err(PortShortage::Reserved(port));
                    }
                    if self.holders(ip, port) > 0 {
                        return Err(PortShortage::Taken(port));
                    }
                    if range.is_some_and(|(lo, hi)| (lo..=hi).contains(&port)) {
                        entry.2 += 1;
                    }
                }
                None => entry.1 += 1,
            }
        }
        for (ip, dynamic, statics) in per_address {
            if dynamic == 0 {
                continue;
            }
            let Some((lo, hi)) = range else {
                return Err(PortShortage::DynamicExhausted);
            };
            let size = i64::from(hi - lo) + 1;
            let reserved = self.networks.reserved_ports.count_in(lo, hi) as i64;
            let free = size - reserved - self.held_in(ip, lo, hi) - statics as i64;
            if free < dynamic as i64 {
                return Err(PortShortage::DynamicExhausted);
            }
        }
        Ok(())
    }

    /// The ports `ask` gets here, in ask order: static ports as asked, dynamic ones drawn
    /// at random among the free ports of the dynamic range (never two alike on one
    /// address). Fails only where [`PortsView::check`] would.
    pub fn assign(
        &self,
        ask: &GroupNetwork,
        rng: &mut impl rand::Rng,
    ) -> Result<ThinVec<AllocatedPort>, PortShortage> {
        self.check(ask)?;
        let mut out = ThinVec::with_capacity(ask.ports.len());
        let mut chosen = Chosen::new(ask.ports.len());
        for (p, ip) in self.addresses(ask) {
            if let (Some(port), Ok(ip)) = (p.static_port, &ip) {
                chosen.insert(*ip, port);
            }
        }
        for (p, ip) in self.addresses(ask) {
            let ip = ip?;
            let value = match p.static_port {
                Some(port) => port,
                None => {
                    let port = self.draw(ip, &chosen, rng)?;
                    chosen.insert(ip, port);
                    port
                }
            };
            out.push(AllocatedPort {
                label: p.label.as_str().into(),
                value,
                to: p.to.unwrap_or(0),
                host_ip: ip,
            });
        }
        Ok(out)
    }

    /// A free dynamic port on `ip`: random draws first, then a scan from a random start.
    fn draw(
        &self,
        ip: IpAddr,
        chosen: &Chosen,
        rng: &mut impl rand::Rng,
    ) -> Result<u16, PortShortage> {
        let (lo, hi) = self
            .networks
            .dynamic_range()
            .ok_or(PortShortage::DynamicExhausted)?;
        let free = |port: u16| {
            !self.networks.reserved_ports.contains(port)
                && !chosen.contains(ip, port)
                && self.holders(ip, port) <= 0
        };
        for _ in 0..MAX_RANDOM_TRIES {
            let port = rng.random_range(lo..=hi);
            if free(port) {
                return Ok(port);
            }
        }
        let start = rng.random_range(lo..=hi);
        (start..=hi)
            .chain(lo..start)
            .find(|p| free(*p))
            .ok_or(PortShortage::DynamicExhausted)
    }
}

/// The ports one assignment has given out so far: a short list for the usual few ports, a
/// set for a group that asks for many.
enum Chosen {
    Few(Vec<(IpAddr, u16)>),
    Many(FxHashSet<(IpAddr, u16)>),
}

impl Chosen {
    const FEW: usize = 16;

    fn new(asked: usize) -> Self {
        if asked <= Self::FEW {
            Chosen::Few(Vec::with_capacity(asked))
        } else {
            Chosen::Many(FxHashSet::default())
        }
    }

    fn insert(&mut self, ip: IpAddr, port: u16) {
        match self {
            Chosen::Few(v) => v.push((ip, port)),
            Chosen::Many(s) => {
                s.insert((ip, port));
            }
        }
    }

    fn contains(&self, ip: IpAddr, port: u16) -> bool {
        match self {
            Chosen::Few(v) => v.contains(&(ip, port)),
            Chosen::Many(s) => s.contains(&(ip, port)),
        }
    }
}

#[cfg(test)]
mod tests;
