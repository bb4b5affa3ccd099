//! A node: one machine (or one simulated machine) that runs allocations.
//!
//! Two views of its life are kept side by side. `status` and `eligibility` are Nomad's, and
//! are what the schedulers read; `health` is Scoot's, and is what operators read and act on.
//! Placements go only to nodes that are `ready`, `eligible`, not draining, and `healthy`.

use super::{Index, NodeId, NodeNetworks, Resources, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The most recent node events kept on a node; older ones fall off.
pub const MAX_NODE_EVENTS: usize = 10;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum NodeStatus {
    Initializing,
    Ready,
    Down,
    Disconnected,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Initializing => "initializing",
            NodeStatus::Ready => "ready",
            NodeStatus::Down => "down",
            NodeStatus::Disconnected => "disconnected",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Initializing,
            Self::Ready,
            Self::Down,
            Self::Disconnected,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Eligibility {
    Eligible,
    Ineligible,
}

impl Eligibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Eligibility::Eligible => "eligible",
            Eligibility::Ineligible => "ineligible",
        }
    }
}

/// Why a node is suspended (Scoot's sub-states).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub enum SuspendReason {
    /// Registered, readiness not yet passed.
    New,
    /// Missed heartbeats; recovers if it returns inside the lost grace, deleted after it.
    Lost,
    /// Too many infrastructure failures; rejoins after the cool-down and a readiness check.
    Flaky,
}

/// Scoot's health sets. Disjoint: a node is in exactly one.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub enum NodeHealth {
    Healthy,
    Suspended(SuspendReason),
    /// Taken out by an operator; left only by `node online`.
    Offlined,
}

impl NodeHealth {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeHealth::Healthy => "healthy",
            NodeHealth::Suspended(SuspendReason::New) => "suspended:new",
            NodeHealth::Suspended(SuspendReason::Lost) => "suspended:lost",
            NodeHealth::Suspended(SuspendReason::Flaky) => "suspended:flaky",
            NodeHealth::Offlined => "offlined",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        use NodeHealth::*;
        use SuspendReason::*;
        [
            Healthy,
            Suspended(New),
            Suspended(Lost),
            Suspended(Flaky),
            Offlined,
        ]
        .into_iter()
        .find(|h| h.as_str() == s)
    }
}

/// A drain in progress: allocations migrate off the node until done or the deadline.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct DrainStrategy {
    /// After this, remaining allocations are stopped outright. `None`: no deadline.
    pub deadline: Option<Duration>,
    /// Stop everything now rather than migrating gradually.
    pub force: bool,
    /// Leave system job allocations in place.
    pub ignore_system_jobs: bool,
    pub started_at: Timestamp,
}

impl DrainStrategy {
    /// The time by which the drain must be complete, if it has a deadline.
    pub fn deadline_at(&self) -> Option<Timestamp> {
        self.deadline.map(|d| self.started_at.saturating_add(d))
    }
}

/// Something that happened to a node, kept for operators (the last few only).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct NodeEvent {
    pub time: Timestamp,
    pub subsystem: String,
    pub message: String,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Node {
    pub id: NodeId,
    /// Shared secret the agent proves itself with on every RPC after register.
    pub secret_id: String,
    pub name: String,
    pub datacenter: String,
    /// The operator's class. Blocked evals are keyed by it: nodes of one class are assumed
    /// to share the attributes constraints look at (constraints on `unique.*` escape).
    pub node_class: String,
    pub attributes: BTreeMap<String, String>,
    pub meta: BTreeMap<String, String>,
    /// Total capacity the node offers.
    pub resources: Resources,
    /// Held back for the OS and the agent; never allocated.
    pub reserved: Resources,
    /// The addresses ports are offered on, the reserved ports and the dynamic range.
    pub networks: NodeNetworks,
    pub status: NodeStatus,
    pub status_description: String,
    pub status_updated_at: Timestamp,
    pub eligibility: Eligibility,
    pub drain: Option<DrainStrategy>,
    pub health: NodeHealth,
    pub health_since: Timestamp,
    /// The snapshot (artifact) this node last ran; drives snapshot affinity.
    pub last_snapshot: Option<String>,
    pub events: Vec<NodeEvent>,
    pub create_index: Index,
    pub modify_index: Index,
    /// This node's [`ComputedClassKey`] as the state store last wrote it, so a scheduler
    /// reads the key with the node instead of hashing every attribute (about a microsecond)
    /// or searching a second table (as slow, at 50,000 nodes). Derived data: never
    /// serialized and equal in every comparison; the store sets it on every write and its
    /// consistency check recomputes it.
    #[serde(skip)]
    pub stored_class_key: StoredClassKey,
}

/// See [`Node::stored_class_key`]: `None` on a node the state store has not written.
#[derive(Clone, Copy, Default, Debug)]
pub struct StoredClassKey(pub Option<ComputedClassKey>);

impl PartialEq for StoredClassKey {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for StoredClassKey {}

/// Attribute and meta keys under `unique.` differ from node to node by definition
/// (hostnames, addresses): they are left out of the computed class.
pub fn is_unique_key(key: &str) -> bool {
    key.starts_with("unique.")
}

/// A node's computed class (Nomad's `ComputedClass`): a fingerprint of everything a
/// class-stable constraint can read (class, datacenter, attributes and meta apart from
/// `unique.*` keys). Nodes with equal keys pass and fail the same class-stable
/// constraints, so a scheduler checks those once per key. 128 bits: two nodes that differ
/// share a key with a probability of about 2^-128, so no key is ever compared field by
/// field.
pub type ComputedClassKey = u128;

impl Node {
    /// This node's [`ComputedClassKey`], hashed from its fields now; a scheduler reads
    /// [`Node::computed_class_key`] instead.
    pub fn hash_class_key(&self) -> ComputedClassKey {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let half = |seed: u8| {
            let mut h = DefaultHasher::new();
            seed.hash(&mut h);
            self.node_class.hash(&mut h);
            self.datacenter.hash(&mut h);
            for (tag, map) in [(1u8, &self.attributes), (2u8, &self.meta)] {
                for (k, v) in map.iter().filter(|(k, _)| !is_unique_key(k)) {
                    (tag, k, v).hash(&mut h);
                }
            }
            h.finish()
        };
        (u128::from(half(0)) << 64) | u128::from(half(1))
    }

    /// The key the state store wrote with the node, or hashed now for a node it has not.
    pub fn computed_class_key(&self) -> ComputedClassKey {
        self.stored_class_key
            .0
            .unwrap_or_else(|| self.hash_class_key())
    }

    /// The eligibility as operators read it: offlining leaves the flag as it was (onlining
    /// must give the node back as it was), but an offlined node takes no placements, so an
    /// eligible flag reads `ineligible (offlined)` there.
    pub fn eligibility_label(&self) -> &'static str {
        match (self.eligibility, self.health) {
            (Eligibility::Eligible, NodeHealth::Offlined) => "ineligible (offlined)",
            (e, _) => e.as_str(),
        }
    }

    /// A ready, eligible, healthy node in `dc1` with no class; for tests and the simulator.
    pub fn new(id: NodeId, name: impl Into<String>, resources: Resources) -> Self {
        Self {
            id,
            secret_id: String::new(),
            name: name.into(),
            datacenter: "dc1".into(),
            node_class: String::new(),
            attributes: BTreeMap::new(),
            meta: BTreeMap::new(),
            resources,
            reserved: Resources::ZERO,
            networks: NodeNetworks::default(),
            status: NodeStatus::Ready,
            status_description: String::new(),
            status_updated_at: Timestamp::ZERO,
            eligibility: Eligibility::Eligible,
            drain: None,
            health: NodeHealth::Healthy,
            health_since: Timestamp::ZERO,
            last_snapshot: None,
            events: Vec::new(),
            create_index: 0,
            modify_index: 0,
            stored_class_key: StoredClassKey::default(),
        }
    }

    /// Capacity that allocations may use: total less reserved.
    pub fn allocatable(&self) -> Resources {
        self.resources.saturating_sub(&self.reserved)
    }

    /// The class key used for blocked-eval eligibility (`default` when unset).
    pub fn class_key(&self) -> &str {
        if self.node_class.is_empty() {
            "default"
        } else {
            &self.node_class
        }
    }

    /// Whether new work may be placed here: ready, eligible, not draining, healthy.
    pub fn is_schedulable(&self) -> bool {
        self.status == NodeStatus::Ready
            && self.eligibility == Eligibility::Eligible
            && self.drain.is_none()
            && self.health == NodeHealth::Healthy
    }

    /// Whether the allocations here need the reconciler's attention because of the node: it
    /// is down, disconnected or draining (Nomad's "tainted" nodes). An untainted node's
    /// allocations are kept as they are whatever else differs between nodes.
    pub fn is_tainted(&self) -> bool {
        !matches!(self.status, NodeStatus::Ready | NodeStatus::Initializing) || self.drain.is_some()
    }

    /// Whether the node has left for good as far as its allocations are concerned.
    pub fn is_terminal_status(&self) -> bool {
        self.status == NodeStatus::Down
    }

    /// Appends an event, keeping only the newest [`MAX_NODE_EVENTS`].
    pub fn push_event(&mut self, event: NodeEvent) {
        self.events.push(event);
        if self.events.len() > MAX_NODE_EVENTS {
            let excess = self.events.len() - MAX_NODE_EVENTS;
            self.events.drain(..excess);
        }
    }
}
