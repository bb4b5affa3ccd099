//! One node's ports as a plan leaves them, and what a group's ask gets from them.

use super::{NodePorts, PortDemand};
use crate::types::{AllocatedPort, NodeNetworks, PortShortage};
use rustc_hash::FxHashSet;
use std::net::IpAddr;
use thin_vec::ThinVec;

/// Random draws per dynamic port before the range is scanned (Nomad's figure): on a
/// lightly used range one draw almost always does, and the scan bounds a crowded one.
pub const MAX_RANDOM_TRIES: usize = 20;

/// Changes to a node's holders of ports: `(address, port, +1 taken | -1 released)`.
pub type PortChanges = Vec<(IpAddr, u16, i32)>;

/// Records the ports of an allocation that stops holding them.
pub fn release(changes: &mut PortChanges, ports: &[AllocatedPort]) {
    changes.extend(ports.iter().map(|p| (p.host_ip, p.value, -1)));
}

/// Records the ports of an allocation that starts holding them.
pub fn take(changes: &mut PortChanges, ports: &[AllocatedPort]) {
    changes.extend(ports.iter().map(|p| (p.host_ip, p.value, 1)));
}

/// A node's ports: the state's holders of each port, adjusted by what a plan so far
/// releases (stops, evictions, the allocations a placement preempts) and takes
/// (placements), plus the node's reserved ports and dynamic range.
#[derive(Clone, Debug)]
pub struct PortsView<'a> {
    networks: &'a NodeNetworks,
    held: &'a NodePorts,
    /// What the plan changes on the node: empty for a node the plan left alone, and
    /// borrowed, so a caller can keep it across checks while the plan does not change.
    plan: &'a [(IpAddr, u16, i32)],
    /// Further changes of this view alone (the evictions of one candidate placement).
    extra: PortChanges,
    /// `held.len()` when the caller had it at hand, so the bound of the free dynamic ports
    /// does not read the index.
    holds: Option<usize>,
}

impl<'a> PortsView<'a> {
    pub fn new(networks: &'a NodeNetworks, held: &'a NodePorts) -> Self {
        Self::with_plan(networks, held, &[])
    }

    /// A view with the plan's changes on the node.
    pub fn with_plan(
        networks: &'a NodeNetworks,
        held: &'a NodePorts,
        plan: &'a [(IpAddr, u16, i32)],
    ) -> Self {
        Self {
            networks,
            held,
            plan,
            extra: Vec::new(),
            holds: None,
        }
    }

    /// The same view, told how many holds `held` has ([`NodePorts::len`]; the state keeps
    /// it beside the node's usage), so checks of a lightly used node never read the index.
    pub fn with_holds(mut self, holds: usize) -> Self {
        debug_assert_eq!(holds, self.held.len());
        self.holds = Some(holds);
        self
    }

    /// The node's addresses, reserved ports and range.
    pub fn networks(&self) -> &'a NodeNetworks {
        self.networks
    }

    /// The ports of an allocation that stops holding them.
    pub fn release(&mut self, ports: &[AllocatedPort]) {
        release(&mut self.extra, ports);
    }

    /// The ports of an allocation that starts holding them.
    pub fn take(&mut self, ports: &[AllocatedPort]) {
        take(&mut self.extra, ports);
    }

    fn changes(&self) -> impl Iterator<Item = &(IpAddr, u16, i32)> {
        self.plan.iter().chain(&self.extra)
    }

    /// Holders of `port` on `ip` once the plan is applied.
    pub fn holders(&self, ip: IpAddr, port: u16) -> i64 {
        let base = self.held.count(ip, port) as i64;
        if self.plan.is_empty() && self.extra.is_empty() {
            return base;
        }
        base + self
            .changes()
            .filter(|(a, p, _)| *a == ip && *p == port)
            .map(|(_, _, d)| i64::from(*d))
            .sum::<i64>()
    }

    /// Holds of ports in `lo..=hi` on `ip` once the plan is applied (a port counted once
    /// per holder).
    fn held_in(&self, ip: IpAddr, lo: u16, hi: u16) -> i64 {
        let base = self.held.count_in(ip, lo, hi) as i64;
        if self.plan.is_empty() && self.extra.is_empty() {
            return base;
        }
        base + self
            .changes()
            .filter(|(a, p, _)| *a == ip && (lo..=hi).contains(p))
            .map(|(_, _, d)| i64::from(*d))
            .sum::<i64>()
    }

    /// At least [`PortsView::held_in`] for any address and range: every hold on the node
    /// plus every port the plan takes, without searching the index.
    fn held_bound(&self) -> i64 {
        let taken: i64 = self
            .changes()
            .filter(|(_, _, d)| *d > 0)
            .map(|(_, _, d)| i64::from(*d))
            .sum();
        self.holds.unwrap_or_else(|| self.held.len()) as i64 + taken
    }

    /// What checks of `demand` read of the node, found once: the address of each host
    /// network the demand names (or the first it lacks), the dynamic range and how many of
    /// its ports are reserved. The placement stack keeps it per node and group, so the many
    /// checks of one node touch none of the node's own memory.
    pub fn resolve(&self, demand: &PortDemand) -> Result<Resolved, PortShortage> {
        let mut ips = Addresses::Few([IpAddr::from([0, 0, 0, 0]); 4], 0);
        for n in &demand.networks {
            let ip = self
                .networks
                .address_of(&n.name)
                .ok_or_else(|| PortShortage::NoHostNetwork(n.name.clone()))?;
            ips.push(ip);
        }
        let range = self.networks.dynamic_range();
        let reserved_in_range = range.map_or(0, |(lo, hi)| {
            self.networks.reserved_ports.count_in(lo, hi) as i64
        });
        Ok(Resolved {
            ips,
            range,
            reserved_in_range,
        })
    }

    /// Whether the demand fits: every host network it names exists here, every static port
    /// is neither reserved nor held, and each address's dynamic range has room for the
    /// dynamic ports on it. The first shortage found, network by network in order of
    /// mention (static ports before dynamic room), says why not.
    ///
    /// The room is counted conservatively (a held port counts once per holder, and is
    /// counted even when also reserved), so [`PortsView::assign`] never runs short where
    /// this said yes.
    pub fn check(&self, demand: &PortDemand) -> Result<(), PortShortage> {
        self.check_resolved(demand, &self.resolve(demand)?)
    }

    /// [`PortsView::check`] with what [`PortsView::resolve`] found for this node. Allocates
    /// nothing: it runs for every candidate node.
    pub fn check_resolved(&self, demand: &PortDemand, node: &Resolved) -> Result<(), PortShortage> {
        let ips = node.ips.as_slice();
        for (n, ip) in demand.networks.iter().zip(ips) {
            for &port in &n.statics {
                if self.networks.reserved_ports.contains(port) {
                    return Err(PortShortage::Reserved(port));
                }
                if self.holders(*ip, port) > 0 {
                    return Err(PortShortage::Taken(port));
                }
            }
        }
        let in_range = |port: &u16| node.range.is_some_and(|(lo, hi)| (lo..=hi).contains(port));
        for (i, ip) in ips.iter().enumerate() {
            // Networks sharing an address share its room: counted at the first of them.
            if ips[..i].contains(ip) {
                continue;
            }
            let (mut dynamic, mut statics) = (0i64, 0i64);
            for (n, _) in demand.networks.iter().zip(ips).filter(|(_, a)| *a == ip) {
                dynamic += n.dynamic as i64;
                statics += n.statics.iter().filter(|p| in_range(p)).count() as i64;
            }
            if dynamic == 0 {
                continue;
            }
            let Some((lo, hi)) = node.range else {
                return Err(PortShortage::DynamicExhausted);
            };
            let size = i64::from(hi - lo) + 1;
            let room = size - node.reserved_in_range - statics;
            // Every hold on the node, and every port the plan takes, bounds the holds in
            // the range on this address: while that leaves room, so does the exact count,
            // and the index is not searched (most checks of a lightly used node end here).
            if room - self.held_bound() >= dynamic {
                continue;
            }
            if room - self.held_in(*ip, lo, hi) < dynamic {
                return Err(PortShortage::DynamicExhausted);
            }
        }
        Ok(())
    }

    /// The ports the demand gets here, in ask order: static ports as asked, dynamic ones
    /// drawn at random among the free ports of the dynamic range (never two alike on one
    /// address). Fails only where [`PortsView::check`] would.
    pub fn assign(
        &self,
        demand: &PortDemand,
        rng: &mut impl rand::Rng,
    ) -> Result<ThinVec<AllocatedPort>, PortShortage> {
        self.assign_resolved(demand, &self.resolve(demand)?, rng)
    }

    /// [`PortsView::assign`] with what [`PortsView::resolve`] found for this node.
    pub fn assign_resolved(
        &self,
        demand: &PortDemand,
        node: &Resolved,
        rng: &mut impl rand::Rng,
    ) -> Result<ThinVec<AllocatedPort>, PortShortage> {
        self.check_resolved(demand, node)?;
        let ip_of = |i: usize| node.ips.as_slice()[demand.network_of[i]];
        let mut out = ThinVec::with_capacity(demand.ports.len());
        let mut chosen = Chosen::new(demand.ports.len());
        for (i, p) in demand.ports.iter().enumerate() {
            if let Some(port) = p.static_port {
                chosen.insert(ip_of(i), port);
            }
        }
        for (i, p) in demand.ports.iter().enumerate() {
            let ip = ip_of(i);
            let value = match p.static_port {
                Some(port) => port,
                None => {
                    let port = self.draw(ip, node.range, &chosen, rng)?;
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
        range: Option<(u16, u16)>,
        chosen: &Chosen,
        rng: &mut impl rand::Rng,
    ) -> Result<u16, PortShortage> {
        let (lo, hi) = range.ok_or(PortShortage::DynamicExhausted)?;
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

/// What [`PortsView::resolve`] found of a node for one demand.
#[derive(Clone, Debug)]
pub struct Resolved {
    ips: Addresses,
    range: Option<(u16, u16)>,
    /// The node's reserved ports inside `range`.
    reserved_in_range: i64,
}

/// The addresses of a demand's host networks, in its order: inline for up to four, so
/// nothing is allocated for the asks groups make.
#[derive(Clone, Debug)]
enum Addresses {
    Few([IpAddr; 4], usize),
    Many(Vec<IpAddr>),
}

impl Addresses {
    fn push(&mut self, ip: IpAddr) {
        match self {
            Addresses::Few(array, len) if *len < array.len() => {
                array[*len] = ip;
                *len += 1;
            }
            Addresses::Few(array, len) => {
                let mut v = array[..*len].to_vec();
                v.push(ip);
                *self = Addresses::Many(v);
            }
            Addresses::Many(v) => v.push(ip),
        }
    }

    fn as_slice(&self) -> &[IpAddr] {
        match self {
            Addresses::Few(array, len) => &array[..*len],
            Addresses::Many(v) => v,
        }
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
