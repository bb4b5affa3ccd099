//! The connection to the servers: one lazily connected channel per configured address, a
//! current one that calls use, and failover to the next address when the current one is
//! unreachable. Whichever server answers is fine: followers forward writes to the leader.

use crate::AgentError;
use drover_proto::bearer::BearerChannel;
use drover_proto::v1::alloc_service_client::AllocServiceClient;
use drover_proto::v1::job_service_client::JobServiceClient;
use drover_proto::v1::node_service_client::NodeServiceClient;
use drover_proto::v1::service_service_client::ServiceServiceClient;
use std::sync::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tonic::transport::Channel;
use tonic::{Code, Status};

/// How long a unary call may take before it counts as a failure (and fails over).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub struct Servers {
    endpoints: Vec<(String, Channel)>,
    current: AtomicUsize,
    /// The join credential node registration presents.
    token: Option<String>,
    /// The node's id and secret once registered: what the agent reads its jobs with.
    identity: RwLock<Option<(String, String)>>,
}

/// Whether a call failed because the server could not be reached or did not answer (try
/// another), as opposed to a refusal (which another server would repeat).
pub fn is_unreachable(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown
    )
}

impl Servers {
    /// Channels to every address; nothing connects until the first call. Must be called
    /// inside a tokio runtime.
    pub fn new(addresses: &[String]) -> Result<Self, AgentError> {
        Self::with_tls(addresses, &drover_proto::tls::TlsFiles::default())
    }

    /// [`Self::new`], over TLS when `tls` names a CA.
    pub fn with_tls(
        addresses: &[String],
        tls: &drover_proto::tls::TlsFiles,
    ) -> Result<Self, AgentError> {
        let mut endpoints = Vec::with_capacity(addresses.len());
        for address in addresses {
            let endpoint = drover_proto::tls::endpoint(address, tls)
                .map_err(|e| AgentError::ServerAddress {
                    address: address.clone(),
                    problem: e.to_string(),
                })?
                .connect_timeout(Duration::from_secs(2))
                .http2_keep_alive_interval(Duration::from_secs(5))
                .keep_alive_timeout(Duration::from_secs(5))
                .keep_alive_while_idle(true);
            endpoints.push((address.clone(), endpoint.connect_lazy()));
        }
        if endpoints.is_empty() {
            return Err(AgentError::ConfigInvalid {
                field: "servers",
                problem: "must name at least one server".into(),
            });
        }
        Ok(Self {
            endpoints,
            current: AtomicUsize::new(0),
            token: None,
            identity: RwLock::new(None),
        })
    }

    /// Presents `token` when registering the node.
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.token = token.filter(|t| !t.trim().is_empty());
        self
    }

    /// From now on, job reads present the node's own identity.
    pub fn set_identity(&self, node_id: &str, secret: &str) {
        let mut slot = self.identity.write().unwrap_or_else(|p| p.into_inner());
        *slot = Some((node_id.to_string(), secret.to_string()));
    }

    fn current(&self) -> &(String, Channel) {
        &self.endpoints[self.current.load(Ordering::Relaxed) % self.endpoints.len()]
    }

    /// The address calls currently go to.
    pub fn address(&self) -> &str {
        &self.current().0
    }

    /// Node calls; registration carries the join token, the rest prove the node by the
    /// secret in their messages.
    pub fn nodes(&self) -> NodeServiceClient<BearerChannel> {
        let channel = self.current().1.clone();
        let channel = BearerChannel::new(channel.clone(), self.token.as_deref())
            .unwrap_or_else(|_| BearerChannel::plain(channel));
        NodeServiceClient::new(channel)
    }

    /// Job reads, as the node (servers with ACLs let a node read jobs by its identity).
    pub fn jobs(&self) -> JobServiceClient<BearerChannel> {
        JobServiceClient::new(self.as_node()).max_decoding_message_size(64 << 20)
    }

    /// Service catalog reads, as the node (for its tasks' templates).
    pub fn services(&self) -> ServiceServiceClient<BearerChannel> {
        ServiceServiceClient::new(self.as_node()).max_decoding_message_size(64 << 20)
    }

    /// The current server's channel presenting the node's identity once it has one.
    fn as_node(&self) -> BearerChannel {
        let channel = self.current().1.clone();
        let identity = self
            .identity
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match identity {
            Some((id, secret)) => BearerChannel::for_node(channel.clone(), &id, &secret)
                .unwrap_or_else(|_| BearerChannel::plain(channel)),
            None => BearerChannel::plain(channel),
        }
    }

    /// Allocation calls; each carries the credential of the operator it is made for.
    pub fn allocs(&self) -> AllocServiceClient<Channel> {
        AllocServiceClient::new(self.current().1.clone())
    }

    /// Records a failed call: an unreachable server is left for the next address.
    pub fn on_error(&self, status: &Status) {
        if is_unreachable(status) && self.endpoints.len() > 1 {
            let from = self.address().to_string();
            self.current.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(from = %from, to = %self.address(), code = ?status.code(), "failing over to another server");
        }
    }
}

/// A request with the unary-call timeout set.
pub fn request<T>(message: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.set_timeout(CALL_TIMEOUT);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unreachable_servers_fail_over_in_order_and_refusals_do_not() {
        let servers = Servers::new(&["a:1".into(), "http://b:2".into()]).expect("valid");
        assert_eq!(servers.address(), "a:1");
        servers.on_error(&Status::invalid_argument("refused"));
        assert_eq!(servers.address(), "a:1");
        servers.on_error(&Status::unavailable("down"));
        assert_eq!(servers.address(), "http://b:2");
        servers.on_error(&Status::deadline_exceeded("slow"));
        assert_eq!(servers.address(), "a:1");
        let err = Servers::new(&["bad url with spaces".into()]).expect_err("invalid");
        assert!(err.to_string().contains("bad url with spaces"), "{err}");
    }
}
