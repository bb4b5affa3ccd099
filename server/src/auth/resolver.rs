//! Resolving a presented secret into an [`Acl`], with a small cache: most calls come from
//! a few tokens, and a resolved token stays valid until a token or policy changes.

use super::Caller;
use crate::raft::StateHandle;
use drover_core::acl::Acl;
use drover_core::state::StateSnapshot;
use drover_core::types::{Index, NodeId, Timestamp};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tonic::Status;

/// Resolved tokens kept; the cache is emptied when it would grow past this, so a flood of
/// distinct secrets cannot grow memory.
const CACHE_CAPACITY: usize = 1024;

/// Turns credentials into callers, for the auth layer.
#[derive(Debug)]
pub struct Authenticator {
    enabled: bool,
    state: StateHandle,
    /// Secret digest → (ACL index it was resolved at, expiry, resolved ACL).
    cache: Mutex<HashMap<String, (Index, Option<Timestamp>, Arc<Acl>)>>,
    disabled: Arc<Acl>,
}

impl Authenticator {
    pub fn new(enabled: bool, state: StateHandle) -> Self {
        Self {
            enabled,
            state,
            cache: Mutex::new(HashMap::new()),
            disabled: Arc::new(Acl::Disabled),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The caller presenting `bearer` (and, for a node's secret, `node_id`) at `now`.
    pub fn resolve(
        &self,
        bearer: Option<&str>,
        node_id: Option<&str>,
        now: Timestamp,
    ) -> Result<Caller, Status> {
        if !self.enabled {
            return Ok(Caller::Known(self.disabled.clone()));
        }
        let Some(secret) = bearer else {
            return Ok(Caller::Anonymous);
        };
        let snap = self.state.snapshot();
        if let Some(node_id) = node_id {
            return node_caller(&snap, node_id, secret);
        }
        let digest = crate::secrets::digest(secret);
        let index = snap.acl_index();
        if let Some((at, expiry, acl)) = self.lock().get(&digest)
            && *at == index
        {
            if expiry.is_some_and(|e| e <= now) {
                return Err(Status::unauthenticated("acl token expired"));
            }
            return Ok(Caller::Known(acl.clone()));
        }
        let Some(token) = snap.acl_token_by_digest(&digest) else {
            return Err(Status::unauthenticated("acl token not found"));
        };
        if token.is_expired(now) {
            return Err(Status::unauthenticated(format!(
                "acl token {} expired",
                token.accessor_id
            )));
        }
        let acl = Arc::new(Acl::for_token(token, |p| {
            snap.acl_policy(p).map(|p| p.as_ref())
        }));
        let mut cache = self.lock();
        if cache.len() >= CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(digest, (index, token.expiry, acl.clone()));
        Ok(Caller::Known(acl))
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (Index, Option<Timestamp>, Arc<Acl>)>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn node_caller(snap: &StateSnapshot, node_id: &str, secret: &str) -> Result<Caller, Status> {
    let refused =
        || Status::unauthenticated(format!("node {node_id:?}: unknown node or wrong secret"));
    let id: NodeId = node_id.parse().map_err(|_| refused())?;
    let node = snap.node(&id).ok_or_else(refused)?;
    if !crate::secrets::matches(&node.secret_id, secret) {
        return Err(refused());
    }
    Ok(Caller::Known(Arc::new(Acl::node_identity(id))))
}
