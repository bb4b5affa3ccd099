//! Calls from a server to agents' own endpoints (AgentService): task logs and restarts.
//!
//! An agent registers its endpoint's address as the node attribute
//! [`drover_proto::AGENT_ADDRESS_ATTRIBUTE`]. Calls carry the operator's own token (the
//! `authorization` header of the call that reached this server), which the agent has a
//! server check before serving, so an agent trusts no caller for being a server. With TLS,
//! the server presents its certificate and requires the agent's to name the client role.

use crate::tls::ServerTls;
use drover_core::types::Node;
use drover_proto::v1::agent_service_client::AgentServiceClient;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tonic::Status;
use tonic::metadata::MetadataMap;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

/// How long connecting to an agent may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Agents kept connected at once; the cache starts over past it.
const MAX_CHANNELS: usize = 256;

/// Lazily connected channels to agents, by address.
#[derive(Debug)]
pub struct AgentLinks {
    tls: Option<ServerTls>,
    channels: Mutex<HashMap<String, Channel>>,
}

/// The header that carries the caller's token (see `drover_proto::bearer`).
const AUTHORIZATION: &str = "authorization";

impl AgentLinks {
    pub fn new(tls: Option<ServerTls>) -> Self {
        Self {
            tls,
            channels: Mutex::new(HashMap::new()),
        }
    }

    /// A client of `node`'s agent; UNAVAILABLE when the node registered no endpoint (a
    /// simulated node, or an agent older than its endpoint).
    pub fn client(&self, node: &Node) -> Result<AgentServiceClient<Channel>, Status> {
        let address = node
            .attributes
            .get(drover_proto::AGENT_ADDRESS_ATTRIBUTE)
            .ok_or_else(|| {
                Status::failed_precondition(format!(
                    "node {} registered no agent endpoint ({} is not set): it cannot serve logs or restarts",
                    node.id,
                    drover_proto::AGENT_ADDRESS_ATTRIBUTE
                ))
            })?;
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(channel) = channels.get(address) {
            return Ok(AgentServiceClient::new(channel.clone()));
        }
        let channel = self.endpoint(address)?.connect_lazy();
        if channels.len() >= MAX_CHANNELS {
            channels.clear();
        }
        channels.insert(address.clone(), channel.clone());
        Ok(AgentServiceClient::new(channel))
    }

    fn endpoint(&self, address: &str) -> Result<Endpoint, Status> {
        let bad = |e: String| {
            Status::failed_precondition(format!("agent address {address:?} is not usable: {e}"))
        };
        let endpoint = Endpoint::from_shared(address.to_string())
            .map_err(|e| bad(e.to_string()))?
            .connect_timeout(CONNECT_TIMEOUT);
        let Some(tls) = &self.tls else {
            return Ok(endpoint);
        };
        let files = tls.files();
        let ca = files.ca().map_err(|e| bad(e.to_string()))?;
        let identity = files.identity().map_err(|e| bad(e.to_string()))?;
        let mut config =
            ClientTlsConfig::new().domain_name(drover_proto::tls::CLIENT_NAME.to_string());
        if let Some(ca) = ca {
            config = config.ca_certificate(ca);
        }
        if let Some(identity) = identity {
            config = config.identity(identity);
        }
        endpoint.tls_config(config).map_err(|e| bad(e.to_string()))
    }
}

/// `message` as a request to an agent, carrying the caller's token from `from`.
pub fn forwarded<T>(from: &MetadataMap, message: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    if let Some(token) = from.get(AUTHORIZATION) {
        req.metadata_mut().insert(AUTHORIZATION, token.clone());
    }
    req
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
