//! Who may use the agent's endpoint: a server, for what it granted. The agent holds no ACL
//! state and never sees an operator's token: a server checks the caller's token itself and
//! sends a grant for one allocation and task, signed with a key derived from this node's
//! secret (`drover_proto::grant`), which only the servers and this node can compute. With
//! TLS the caller must also present a certificate naming the server role.

use drover_core::types::{AllocId, NodeId};
use drover_proto::grant::{self, Asked, GrantError};
use drover_proto::v1 as pb;
use std::time::{SystemTime, UNIX_EPOCH};
use tonic::Status;

/// What the endpoint checks calls against.
pub struct Gate {
    pub node_id: NodeId,
    /// The node's secret, from which the grants' key is derived.
    pub secret: String,
    /// Callers must present a certificate naming the server role (the endpoint serves TLS).
    pub require_server_certificate: bool,
}

impl std::fmt::Debug for Gate {
    /// Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("node_id", &self.node_id)
            .field(
                "require_server_certificate",
                &self.require_server_certificate,
            )
            .finish_non_exhaustive()
    }
}

fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl Gate {
    /// OK when `req` comes from a server (its certificate, under TLS) with a grant of
    /// `access` to `task` of `alloc_id` on this node; PERMISSION_DENIED (UNAUTHENTICATED
    /// without any grant) naming what is wrong otherwise.
    pub fn check<T>(
        &self,
        req: &tonic::Request<T>,
        alloc_id: AllocId,
        task: &str,
        access: pb::AllocAccess,
    ) -> Result<(), Status> {
        if self.require_server_certificate
            && !drover_proto::tls::peer_has_name(req, drover_proto::tls::SERVER_NAME)
        {
            return Err(Status::permission_denied(format!(
                "the agent's endpoint serves only servers: the caller's certificate does not name {}",
                drover_proto::tls::SERVER_NAME
            )));
        }
        let header = req
            .metadata()
            .get(grant::GRANT_HEADER)
            .and_then(|v| v.to_str().ok());
        let alloc = alloc_id.to_string();
        let asked = Asked {
            alloc_id: &alloc,
            task,
            access,
        };
        grant::verify(
            header,
            &self.secret,
            &self.node_id.to_string(),
            asked,
            now_unix_ms(),
        )
        .map(|_| ())
        .map_err(|e| match e {
            GrantError::Missing => Status::unauthenticated(e.to_string()),
            _ => Status::permission_denied(e.to_string()),
        })
    }
}
