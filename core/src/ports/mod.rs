//! Ports as a node resource: the per-node index of ports in use ([`NodePorts`], kept by the
//! state store beside CPU and memory), a node's ports as a plan leaves them
//! ([`PortsView`]), whether a group's ask ([`PortDemand`], built once per group) fits them
//! ([`PortsView::check`]) and the choice of its dynamic ports ([`PortsView::assign`]).
//!
//! A port is held per node *address*: the same number on two addresses of one node is two
//! ports. A node's reserved ports are held on every address. Dynamic ports are drawn at
//! random in the node's dynamic range, as Nomad does, from the caller's seeded generator,
//! so a scheduling run replays exactly.
//!
//! Costs, for a node with `n` ports in use and a plan that touched it `m` times: a static
//! port costs a binary search plus `m`; the count of free dynamic ports two binary searches
//! plus `m`; drawing a dynamic port a binary search per try. Nothing is proportional to
//! the cluster, and nothing is copied per check, so placing with ports stays linear in
//! placements.

mod demand;
mod index;
mod view;

pub use demand::PortDemand;
pub use index::{NO_PORTS, NodePorts};
pub use view::{MAX_RANDOM_TRIES, PortChanges, PortsView, Resolved, release, take};
