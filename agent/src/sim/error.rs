//! Why the simulator could not start or act.

use drover_core::types::NodeId;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid simulator setting {field}: {reason}")]
    Config { field: &'static str, reason: String },
    #[error("invalid server url {url:?}: {reason}")]
    ServerUrl { url: String, reason: String },
    #[error("cannot reach the servers at {urls}: {source}")]
    Connect {
        urls: String,
        source: tonic::transport::Error,
    },
    #[error("node {name} could not register: {status}")]
    Register { name: String, status: tonic::Status },
    #[error("node {name} could not send its first heartbeat: {status}")]
    FirstHeartbeat { name: String, status: tonic::Status },
    #[error("the server answered node {name} with an invalid node id {value:?}")]
    BadNodeId { name: String, value: String },
    #[error("node {0} is not one of this simulator's nodes")]
    UnknownNode(NodeId),
    #[error("the simulator has stopped")]
    Stopped,
}
