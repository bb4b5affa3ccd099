//! The errors the server's handle returns. Each maps to one gRPC status code, so a gRPC
//! method is a thin call: `handle.op(req).await.map_err(tonic::Status::from)`.

use crate::raft::{RaftError, ServerId, WriteError};
use drover_core::Index;
use drover_core::fsm::ApplyError;
use drover_core::node_health::NodeHealthError;
use drover_core::validate::{NodeLimitError, ValidationError};
use std::time::Duration;

/// The gRPC metadata key of a RESOURCE_EXHAUSTED answer saying how many milliseconds to
/// wait before retrying.
pub const RETRY_AFTER_MS: &str = "retry-after-ms";

/// Why a server call failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ServerError {
    /// The job failed validation; every problem is listed.
    #[error(transparent)]
    InvalidJob(#[from] ValidationError),
    /// A request argument is wrong (not a job validation problem).
    #[error("invalid argument: {reason}")]
    InvalidArgument { reason: String },
    /// No such object.
    #[error("{kind} {id} not found")]
    NotFound { kind: &'static str, id: String },
    /// The caller proved an identity that is not allowed to do this (a node acting on
    /// another node's allocations).
    #[error("permission denied: {reason}")]
    PermissionDenied { reason: String },
    /// The caller's credentials are wrong (a node's secret does not match).
    #[error("unauthenticated: {reason}")]
    Unauthenticated { reason: String },
    /// The call is valid but the system is not in a state to accept it (an allocation
    /// update from a node that is not ready; pause of a worker that is stopping).
    #[error("failed precondition: {reason}")]
    FailedPrecondition { reason: String },
    /// Too much outstanding work; retry after the hint.
    #[error("resource exhausted: {reason}; retry in {retry_after:?}")]
    ResourceExhausted {
        reason: String,
        retry_after: Duration,
    },
    /// This server is not the leader (forwarding comes with the multi-server work).
    #[error("{}", not_leader_text(*leader_id, leader_addr.as_deref()))]
    NotLeader {
        leader_id: Option<ServerId>,
        leader_addr: Option<String>,
    },
    /// The FSM refused a committed entry (the state is unchanged).
    #[error("write at index {index} refused: {error}")]
    Refused { index: Index, error: ApplyError },
    /// Raft could not take the write, or the server is going away.
    #[error("unavailable: {reason}")]
    Unavailable { reason: String },
    /// The server shut down while the call was in flight.
    #[error("server is shutting down")]
    ShuttingDown,
}

impl ServerError {
    pub(crate) fn not_found(kind: &'static str, id: impl ToString) -> Self {
        ServerError::NotFound {
            kind,
            id: id.to_string(),
        }
    }

    pub(crate) fn precondition(reason: impl Into<String>) -> Self {
        ServerError::FailedPrecondition {
            reason: reason.into(),
        }
    }
}

impl From<WriteError> for ServerError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::ForwardToLeader {
                leader_id,
                leader_addr,
            } => ServerError::NotLeader {
                leader_id,
                leader_addr,
            },
            WriteError::Refused { reason } | WriteError::Stopped { reason } => {
                ServerError::Unavailable { reason }
            }
        }
    }
}

impl From<NodeHealthError> for ServerError {
    fn from(e: NodeHealthError) -> Self {
        match e {
            NodeHealthError::NotTracked(id) | NodeHealthError::NodeNotFound(id) => {
                ServerError::not_found("node", id)
            }
            other => ServerError::InvalidArgument {
                reason: other.to_string(),
            },
        }
    }
}

impl From<ServerError> for tonic::Status {
    fn from(e: ServerError) -> Self {
        let msg = e.to_string();
        match e {
            ServerError::InvalidJob(_) | ServerError::InvalidArgument { .. } => {
                tonic::Status::invalid_argument(msg)
            }
            ServerError::NotFound { .. } => tonic::Status::not_found(msg),
            ServerError::PermissionDenied { .. } => tonic::Status::permission_denied(msg),
            ServerError::Unauthenticated { .. } => tonic::Status::unauthenticated(msg),
            ServerError::Refused {
                error:
                    ApplyError::NodeNotFound(_)
                    | ApplyError::JobNotFound(_)
                    | ApplyError::AllocNotFound(_)
                    | ApplyError::AclPolicyNotFound(_)
                    | ApplyError::AclTokenNotFound(_),
                ..
            } => tonic::Status::not_found(msg),
            ServerError::FailedPrecondition { .. } | ServerError::Refused { .. } => {
                tonic::Status::failed_precondition(msg)
            }
            ServerError::ResourceExhausted { retry_after, .. } => {
                let mut status = tonic::Status::resource_exhausted(msg);
                // Machine-readable too, so clients can back off without parsing text.
                let ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
                if let Ok(v) = ms.to_string().parse() {
                    status.metadata_mut().insert(RETRY_AFTER_MS, v);
                }
                status
            }
            ServerError::NotLeader { .. }
            | ServerError::Unavailable { .. }
            | ServerError::ShuttingDown => tonic::Status::unavailable(msg),
        }
    }
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Raft(#[from] RaftError),
    #[error("invalid server config: {reason}")]
    Config { reason: String },
    /// A listener's address cannot be bound (most often: it is in use).
    #[error("cannot bind the {listener} address {addr}: {source}")]
    Bind {
        /// Which listener: `raft` or `metrics`.
        listener: &'static str,
        addr: String,
        source: std::io::Error,
    },
}

impl StartError {
    pub(crate) fn bind(listener: &'static str, addr: &str) -> impl FnOnce(std::io::Error) -> Self {
        move |source| StartError::Bind {
            listener,
            addr: addr.to_string(),
            source,
        }
    }
}

/// A node field beyond the server's limits is the caller's mistake: INVALID_ARGUMENT, with
/// the field and the limit named.
impl From<NodeLimitError> for ServerError {
    fn from(e: NodeLimitError) -> Self {
        ServerError::InvalidArgument {
            reason: e.to_string(),
        }
    }
}

fn not_leader_text(leader_id: Option<ServerId>, leader_addr: Option<&str>) -> String {
    match (leader_id, leader_addr) {
        (Some(id), Some(addr)) => format!("not the leader: forward to server {id} at {addr}"),
        (Some(id), None) => format!("not the leader: forward to server {id} (address unknown)"),
        _ => "not the leader, and no leader is known yet".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::{JobKey, mock};

    /// An FSM refusal keeps its kind all the way to the gRPC code.
    #[test]
    fn fsm_refusals_map_to_the_code_that_fits() {
        let refused = |error| ServerError::Refused { index: 7, error };
        let cases = [
            (
                refused(ApplyError::NodeNotFound(mock::node_id(1))),
                tonic::Code::NotFound,
            ),
            (
                refused(ApplyError::JobNotFound(JobKey::default_ns("web"))),
                tonic::Code::NotFound,
            ),
            (
                refused(ApplyError::JobIndexMismatch {
                    job: JobKey::default_ns("web"),
                    expected: 3,
                    actual: 5,
                }),
                tonic::Code::FailedPrecondition,
            ),
            (
                refused(ApplyError::CasMismatch {
                    expected: 1,
                    actual: 2,
                }),
                tonic::Code::FailedPrecondition,
            ),
        ];
        for (error, code) in cases {
            let text = error.to_string();
            let status = tonic::Status::from(error);
            assert_eq!(status.code(), code, "{text}");
            assert!(text.starts_with("write at index 7 refused: "), "{text}");
        }
    }
}
