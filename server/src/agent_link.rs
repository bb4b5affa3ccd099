//! Calls from a server to agents' own endpoints (AgentService): task logs and restarts.
//!
//! An agent registers its endpoint's address as the node attribute
//! [`drover_proto::AGENT_ADDRESS_ATTRIBUTE`]. The operator's token never goes there: the
//! server authorizes the caller itself, then sends a grant for the one allocation and task
//! (`drover_proto::grant`), signed with a key only this node and the servers can derive.
//! With TLS the server presents its own certificate (the agent requires the server role)
//! and requires the agent's to name the node (`<node name>.client.global.drover`), so an
//! address a node registered reaches that node's agent or nothing.

use crate::tls::ServerTls;
use drover_core::types::{AllocId, Node, Timestamp};
use drover_proto::v1 as pb;
use drover_proto::v1::agent_service_client::AgentServiceClient;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tonic::Status;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

/// How long connecting to an agent may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Agents kept connected at once; the cache starts over past it.
const MAX_CHANNELS: usize = 256;

/// Lazily connected channels to agents, by node and address (an address is reused only
/// for the node that registered it, so a TLS channel is never shared across node names).
#[derive(Debug)]
pub struct AgentLinks {
    tls: Option<ServerTls>,
    channels: Mutex<HashMap<(String, String), Channel>>,
}

impl AgentLinks {
    pub fn new(tls: Option<ServerTls>) -> Self {
        Self {
            tls,
            channels: Mutex::new(HashMap::new()),
        }
    }

    /// A client of `node`'s agent; FAILED_PRECONDITION when the node registered no endpoint
    /// (a simulated node, or an agent older than its endpoint).
    pub fn client(&self, node: &Node) -> Result<AgentServiceClient<Channel>, Status> {
        let address = node
            .attributes
            .get(drover_proto::AGENT_ADDRESS_ATTRIBUTE)
            .ok_or_else(|| {
                Status::failed_precondition(format!(
                    "node {} ({}) registered no agent endpoint ({} is not set): it cannot serve logs or restarts",
                    node.id,
                    node.name,
                    drover_proto::AGENT_ADDRESS_ATTRIBUTE
                ))
            })?;
        let key = (node.name.to_string(), address.clone());
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(channel) = channels.get(&key) {
            return Ok(AgentServiceClient::new(channel.clone()));
        }
        let channel = self.endpoint(node, address)?.connect_lazy();
        if channels.len() >= MAX_CHANNELS {
            channels.clear();
        }
        channels.insert(key, channel.clone());
        Ok(AgentServiceClient::new(channel))
    }

    fn endpoint(&self, node: &Node, address: &str) -> Result<Endpoint, Status> {
        let bad = |e: String| {
            Status::failed_precondition(format!(
                "agent address {address:?} of node {} is not usable: {e}",
                node.name
            ))
        };
        let endpoint = Endpoint::from_shared(address.to_string())
            .map_err(|e| bad(e.to_string()))?
            .connect_timeout(CONNECT_TIMEOUT);
        let Some(tls) = &self.tls else {
            return Ok(endpoint);
        };
        let name = drover_proto::tls::agent_name(&node.name).map_err(|e| bad(e.to_string()))?;
        let files = tls.files();
        let ca = files.ca().map_err(|e| bad(e.to_string()))?;
        let identity = files.identity().map_err(|e| bad(e.to_string()))?;
        let mut config = ClientTlsConfig::new().domain_name(name);
        if let Some(ca) = ca {
            config = config.ca_certificate(ca);
        }
        if let Some(identity) = identity {
            config = config.identity(identity);
        }
        endpoint.tls_config(config).map_err(|e| bad(e.to_string()))
    }
}

/// `message` as a request to `node`'s agent for `alloc_id`, carrying a grant of `access`
/// (to `task`, or every task when empty) that expires [`drover_proto::grant::GRANT_LIFETIME`]
/// after `now`. Carries no credential of the caller's.
pub fn granted<T>(
    node: &Node,
    alloc_id: AllocId,
    task: &str,
    access: pb::AllocAccess,
    now: Timestamp,
    message: T,
) -> Result<tonic::Request<T>, Status> {
    let lifetime = u64::try_from(drover_proto::grant::GRANT_LIFETIME.as_millis()).unwrap_or(0);
    let grant = pb::AgentGrant {
        node_id: node.id.to_string(),
        alloc_id: alloc_id.to_string(),
        task: task.to_string(),
        access: access.into(),
        expires_unix_ms: now.as_millis().saturating_add(lifetime),
    };
    let digest = drover_proto::secret::stored_digest(&node.secret_id);
    let value = MetadataValue::try_from(drover_proto::grant::sign(&digest, &grant))
        .map_err(|_| Status::internal("a signed grant is not a valid header"))?;
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert(drover_proto::grant::GRANT_HEADER, value);
    Ok(req)
}

/// An agent's refusal or failure as this server's answer: its own status when it answered,
/// UNAVAILABLE naming the node when it could not be reached.
pub fn agent_status(node: &Node, status: Status) -> Status {
    match status.code() {
        tonic::Code::Unavailable | tonic::Code::Unknown => Status::unavailable(format!(
            "cannot reach the agent of node {} ({}): {}",
            node.id,
            node.name,
            status.message()
        )),
        _ => status,
    }
}
