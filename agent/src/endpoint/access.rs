//! Who may use the agent's endpoint: whoever a server says may. The agent holds no ACL
//! state, so each call's token (its `authorization` header) goes to a server's
//! `AllocService.CheckAccess`, which answers as it would for a call to itself; and the
//! allocation must be on this node.

use crate::rpc::{Servers, request};
use drover_core::types::{AllocId, NodeId};
use drover_proto::v1 as pb;
use tonic::Status;
use tonic::metadata::MetadataMap;

const AUTHORIZATION: &str = "authorization";

/// OK when a server lets the caller behind `metadata` have `access` to `alloc_id` and the
/// allocation is this node's; the server's refusal otherwise.
pub async fn check(
    servers: &Servers,
    metadata: &MetadataMap,
    alloc_id: AllocId,
    access: pb::AllocAccess,
    own: NodeId,
) -> Result<(), Status> {
    let mut req = request(pb::AllocAccessRequest {
        alloc_id: alloc_id.to_string(),
        access: access.into(),
    });
    if let Some(token) = metadata.get(AUTHORIZATION) {
        req.metadata_mut().insert(AUTHORIZATION, token.clone());
    }
    let answer = servers
        .allocs()
        .check_access(req)
        .await
        .inspect_err(|s| servers.on_error(s))
        .map_err(|s| match s.code() {
            tonic::Code::Unauthenticated
            | tonic::Code::PermissionDenied
            | tonic::Code::NotFound
            | tonic::Code::InvalidArgument => s,
            _ => Status::unavailable(format!(
                "cannot check the caller's access with the servers: {}",
                s.message()
            )),
        })?
        .into_inner();
    if answer.node_id != own.to_string() {
        return Err(Status::not_found(format!(
            "allocation {alloc_id} is on node {}, not this one ({own})",
            answer.node_id
        )));
    }
    Ok(())
}
