//! Nodes, and what agents send through `NodeService`.

use super::allocs::task_states;
use super::resources::required_resources;
use super::{ConvertError, Problem, Result, WireEnum, Within, each, parse_id, required};
use crate::v1 as pb;
use drover_core::fsm::AllocClientUpdate;
use drover_core::node_health::Readiness;
use drover_core::*;
use std::collections::BTreeMap;

// --- Core → proto ---------------------------------------------------------------------------

impl From<&DrainStrategy> for pb::DrainStrategy {
    fn from(d: &DrainStrategy) -> Self {
        pb::DrainStrategy {
            deadline_ms: d.deadline.map(super::to_ms),
            force: d.force,
            ignore_system_jobs: d.ignore_system_jobs,
            started_at_unix_ms: d.started_at.as_millis(),
        }
    }
}

impl From<&NodeEvent> for pb::NodeEvent {
    fn from(e: &NodeEvent) -> Self {
        pb::NodeEvent {
            time_unix_ms: e.time.as_millis(),
            subsystem: e.subsystem.clone(),
            message: e.message.clone(),
        }
    }
}

impl From<&Node> for pb::NodeRegistration {
    /// What an agent of this node sends to join: no id or secret (the server assigns them),
    /// and the node's own description.
    fn from(n: &Node) -> Self {
        pb::NodeRegistration {
            node_id: String::new(),
            secret_id: String::new(),
            name: n.name.clone(),
            datacenter: n.datacenter.clone(),
            node_class: n.node_class.clone(),
            attributes: n.attributes.clone(),
            meta: n.meta.clone(),
            resources: Some((&n.resources).into()),
            reserved: Some((&n.reserved).into()),
            networks: Some((&n.networks).into()),
        }
    }
}

impl From<&Node> for pb::Node {
    /// Leaves the secret out: it is handed to the agent once, at registration, and no read
    /// may reveal it (whoever holds it can act as the node).
    fn from(n: &Node) -> Self {
        pb::Node {
            id: n.id.to_string(),
            name: n.name.clone(),
            datacenter: n.datacenter.clone(),
            node_class: n.node_class.clone(),
            attributes: n.attributes.clone(),
            meta: n.meta.clone(),
            resources: Some((&n.resources).into()),
            reserved: Some((&n.reserved).into()),
            status: n.status.to_wire(),
            status_description: n.status_description.clone(),
            status_updated_at_unix_ms: n.status_updated_at.as_millis(),
            eligibility: n.eligibility.to_wire(),
            drain: n.drain.as_ref().map(Into::into),
            health: n.health.to_wire(),
            health_since_unix_ms: n.health_since.as_millis(),
            last_snapshot: n.last_snapshot.clone(),
            events: n.events.iter().map(Into::into).collect(),
            create_index: n.create_index,
            modify_index: n.modify_index,
            networks: Some((&n.networks).into()),
        }
    }
}

// --- Proto → core ---------------------------------------------------------------------------

fn drain(p: pb::DrainStrategy) -> DrainStrategy {
    DrainStrategy {
        deadline: p.deadline_ms.map(super::from_ms),
        force: p.force,
        ignore_system_jobs: p.ignore_system_jobs,
        started_at: Timestamp::from_millis(p.started_at_unix_ms),
    }
}

fn node_event(p: pb::NodeEvent) -> NodeEvent {
    NodeEvent {
        time: Timestamp::from_millis(p.time_unix_ms),
        subsystem: p.subsystem,
        message: p.message,
    }
}

/// A node as the servers describe it. The secret is not on the wire, so it comes back empty.
pub(crate) fn node(p: pb::Node) -> Result<Node> {
    Ok(Node {
        id: parse_id("id", &p.id)?,
        secret_id: String::new(),
        name: p.name,
        datacenter: p.datacenter,
        node_class: p.node_class,
        attributes: p.attributes,
        meta: p.meta,
        resources: required_resources("resources", p.resources)?,
        reserved: required_resources("reserved", p.reserved)?,
        networks: super::network::optional_node_networks(p.networks)?,
        status: NodeStatus::from_wire("status", p.status)?,
        status_description: p.status_description,
        status_updated_at: Timestamp::from_millis(p.status_updated_at_unix_ms),
        eligibility: Eligibility::from_wire("eligibility", p.eligibility)?,
        drain: p.drain.map(drain),
        health: NodeHealth::from_wire("health", p.health)?,
        health_since: Timestamp::from_millis(p.health_since_unix_ms),
        last_snapshot: p.last_snapshot,
        events: p.events.into_iter().map(node_event).collect(),
        create_index: p.create_index,
        modify_index: p.modify_index,
        stored_class_key: Default::default(),
    })
}

super::rooted_try_from!(pb::Node => Node, "node", node);

/// What an agent sends to `NodeService.Register`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRegistration {
    /// The id and secret of an earlier registration, kept across agent restarts; `None` on
    /// a first registration. Invariant: an id never comes without its secret.
    pub previous: Option<NodeCredentials>,
    pub name: String,
    pub datacenter: String,
    pub node_class: String,
    pub attributes: BTreeMap<String, String>,
    pub meta: BTreeMap<String, String>,
    pub resources: Resources,
    pub reserved: Resources,
    pub networks: NodeNetworks,
}

impl NodeRegistration {
    /// The node to register under the id and secret the server settled on, with core's
    /// defaults for everything the servers own (status, health, indexes), which the FSM
    /// sets on registration.
    pub fn into_node(self, id: NodeId, secret_id: String) -> Node {
        let mut node = Node::new(id, self.name, self.resources);
        node.secret_id = secret_id;
        node.datacenter = self.datacenter;
        node.node_class = self.node_class;
        node.attributes = self.attributes;
        node.meta = self.meta;
        node.reserved = self.reserved;
        node.networks = self.networks;
        node
    }
}

fn registration(p: pb::NodeRegistration) -> Result<NodeRegistration> {
    let previous = match (p.node_id.is_empty(), p.secret_id.is_empty()) {
        (true, true) => None,
        (false, false) => Some(NodeCredentials {
            node_id: parse_id("node_id", &p.node_id)?,
            secret_id: p.secret_id,
        }),
        (false, true) => {
            return Err(ConvertError::new(
                "secret_id",
                Problem::Invalid("required with node_id (re-registration proves the node)"),
            ));
        }
        (true, false) => {
            return Err(ConvertError::new(
                "node_id",
                Problem::Invalid("required with secret_id"),
            ));
        }
    };
    Ok(NodeRegistration {
        previous,
        name: p.name,
        datacenter: p.datacenter,
        node_class: p.node_class,
        attributes: p.attributes,
        meta: p.meta,
        resources: required_resources("resources", p.resources)?,
        reserved: required_resources("reserved", p.reserved)?,
        networks: super::network::optional_node_networks(p.networks)?,
    })
}

impl TryFrom<pb::RegisterNodeRequest> for NodeRegistration {
    type Error = ConvertError;
    fn try_from(p: pb::RegisterNodeRequest) -> std::result::Result<Self, ConvertError> {
        registration(required("node", p.node)?).within("node")
    }
}

super::rooted_try_from!(pb::NodeRegistration => NodeRegistration, "node", registration);

/// The id and secret a node proves itself with on every call after registration.
#[derive(Clone, PartialEq, Eq)]
pub struct NodeCredentials {
    pub node_id: NodeId,
    pub secret_id: String,
}

impl std::fmt::Debug for NodeCredentials {
    /// Never prints the secret, so credentials can be logged.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCredentials")
            .field("node_id", &self.node_id)
            .field("secret_id", &"<redacted>")
            .finish()
    }
}

fn credentials(p: pb::NodeAuth) -> Result<NodeCredentials> {
    if p.secret_id.is_empty() {
        return Err(ConvertError::new("secret_id", Problem::Missing));
    }
    Ok(NodeCredentials {
        node_id: parse_id("node_id", &p.node_id)?,
        secret_id: p.secret_id,
    })
}

super::rooted_try_from!(pb::NodeAuth => NodeCredentials, "auth", credentials);

fn required_auth(p: Option<pb::NodeAuth>) -> Result<NodeCredentials> {
    credentials(required("auth", p)?).within("auth")
}

/// A decoded heartbeat (`NodeService.UpdateStatus`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    pub auth: NodeCredentials,
    pub readiness: Readiness,
    /// The snapshot the node ran most recently, when it changed; `None`: unchanged.
    pub last_snapshot: Option<String>,
}

impl TryFrom<pb::UpdateNodeStatusRequest> for Heartbeat {
    type Error = ConvertError;
    fn try_from(p: pb::UpdateNodeStatusRequest) -> std::result::Result<Self, ConvertError> {
        Ok(Heartbeat {
            auth: required_auth(p.auth)?,
            readiness: Readiness::from_wire("readiness", p.readiness)?,
            last_snapshot: p.last_snapshot,
        })
    }
}

/// A decoded `NodeService.WatchAllocations` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchRequest {
    pub auth: NodeCredentials,
    pub min_index: Index,
    /// What the agent holds from an earlier stream: `(id, alloc_modify_index)`, sorted by
    /// id and unique. `None`: nothing (the first message is the whole set).
    pub known: Option<Vec<(AllocId, Index)>>,
}

impl TryFrom<pb::WatchAllocationsRequest> for WatchRequest {
    type Error = ConvertError;
    fn try_from(p: pb::WatchAllocationsRequest) -> std::result::Result<Self, ConvertError> {
        let auth = required_auth(p.auth)?;
        let mut known = BTreeMap::new();
        for (i, k) in p.known.into_iter().enumerate() {
            let id: AllocId = parse_id("id", &k.id).within(format_args!("known[{i}]"))?;
            // Two indexes for one allocation would leave the first message up to which one
            // the server kept.
            if known.insert(id, k.alloc_modify_index).is_some() {
                return Err(ConvertError::new(
                    format!("known[{i}].id"),
                    Problem::Invalid("names an allocation an earlier entry names"),
                ));
            }
        }
        Ok(WatchRequest {
            auth,
            min_index: p.min_index,
            known: (!known.is_empty()).then(|| known.into_iter().collect()),
        })
    }
}

/// An allocation an agent holds, as [`WatchRequest::known`] reads it back.
pub fn known_allocation(id: AllocId, alloc_modify_index: Index) -> pb::KnownAllocation {
    pb::KnownAllocation {
        id: id.to_string(),
        alloc_modify_index,
    }
}

pub use drover_core::client_report::ClientAllocUpdate;

fn client_update(p: pb::AllocClientUpdate) -> Result<ClientAllocUpdate> {
    Ok(ClientAllocUpdate {
        update: AllocClientUpdate {
            deployment_health: p.deployment_health,
            alloc_id: parse_id("alloc_id", &p.alloc_id)?,
            client_status: ClientStatus::from_wire("client_status", p.client_status)?,
            client_description: p.client_description.into(),
            task_states: task_states(p.task_states)?,
        },
        infra_failure: p.infra_failure,
        services: p
            .services
            .map(|set| {
                super::each(
                    "registrations",
                    set.registrations,
                    super::service::service_registration,
                )
            })
            .transpose()
            .within("services")?,
    })
}

impl From<&ClientAllocUpdate> for pb::AllocClientUpdate {
    fn from(u: &ClientAllocUpdate) -> Self {
        pb::AllocClientUpdate {
            alloc_id: u.update.alloc_id.to_string(),
            client_status: u.update.client_status.to_wire(),
            client_description: u.update.client_description.to_string(),
            task_states: u
                .update
                .task_states
                .iter()
                .map(|(k, t)| (k.to_owned(), t.into()))
                .collect(),
            infra_failure: u.infra_failure,
            services: u.services.as_ref().map(|regs| pb::ServiceSet {
                registrations: regs.iter().map(Into::into).collect(),
            }),
            deployment_health: u.update.deployment_health,
        }
    }
}

/// A decoded `NodeService.UpdateAllocations` batch.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocUpdates {
    pub auth: NodeCredentials,
    pub updates: Vec<ClientAllocUpdate>,
}

impl TryFrom<pb::UpdateAllocationsRequest> for AllocUpdates {
    type Error = ConvertError;
    fn try_from(p: pb::UpdateAllocationsRequest) -> std::result::Result<Self, ConvertError> {
        Ok(AllocUpdates {
            auth: required_auth(p.auth)?,
            updates: each("updates", p.updates, client_update)?,
        })
    }
}
