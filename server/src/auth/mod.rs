//! Who is calling, and may they: ACL tokens on every API call.
//!
//! [`layer::Authenticate`] runs before every service: it resolves the call's
//! `authorization: Bearer <secret>` (an ACL token, or a node's secret with the
//! `drover-node-id` header) into a [`Caller`] in the request's extensions, refusing an
//! unknown or expired token with UNAUTHENTICATED. It refuses nothing else: each RPC then
//! says what it needs with [`authorize`] (core's [`Need`]), so the check sits next to the
//! code it guards and an RPC that forgets it fails the all-RPC ACL test.

mod layer;
mod resolver;

pub use layer::{AuthLayer, Authenticate};
pub use resolver::Authenticator;

use drover_core::acl::{Acl, Need};
use std::sync::Arc;
use tonic::Status;

pub use drover_proto::bearer::NODE_ID_HEADER;

/// The caller of one request, as the auth layer resolved it.
#[derive(Clone, Debug)]
pub enum Caller {
    /// ACLs are on and the call carries no credential.
    Anonymous,
    /// A token, a node identity, or anyone when ACLs are off ([`Acl::Disabled`]).
    Known(Arc<Acl>),
}

pub(crate) fn missing_token() -> Status {
    Status::unauthenticated(
        "missing acl token: pass one with -token or DROVER_TOKEN (sent as authorization: Bearer <secret>)",
    )
}

/// The caller of `req`; UNAUTHENTICATED when it presented nothing and ACLs are on. A
/// request the layer never saw (no extension) is refused too: the check fails closed.
pub fn caller<T>(req: &tonic::Request<T>) -> Result<Arc<Acl>, Status> {
    match req.extensions().get::<Caller>() {
        Some(Caller::Known(acl)) => Ok(acl.clone()),
        Some(Caller::Anonymous) | None => Err(missing_token()),
    }
}

/// The caller of `req`, if it may do what `need` says: UNAUTHENTICATED without a
/// credential, PERMISSION_DENIED naming the capability without the grant.
pub fn authorize<T>(req: &tonic::Request<T>, need: Need<'_>) -> Result<Arc<Acl>, Status> {
    let acl = caller(req)?;
    acl.check(&need)
        .map_err(|d| Status::permission_denied(d.to_string()))?;
    Ok(acl)
}

/// `ns` as a request spells it: empty means the default namespace.
pub fn namespace_or_default(ns: &str) -> &str {
    if ns.is_empty() {
        drover_core::DEFAULT_NAMESPACE
    } else {
        ns
    }
}
