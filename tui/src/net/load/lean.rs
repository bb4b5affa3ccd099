//! Read RPCs whose answers the load decodes as lean messages of its own
//! ([`ListedNodePage`](crate::model::ListedNodePage),
//! [`ListedAllocPage`](crate::model::ListedAllocPage)): the same calls as the generated
//! clients', on the same channel, with a decoder that skips what the console does not keep.

use drover_proto::bearer::BearerChannel as Channel;
use tonic::codegen::http::uri::PathAndQuery;

/// A read RPC, named as the generated client names it.
#[derive(Clone, Copy, Debug)]
pub(super) struct LeanRpc {
    service: &'static str,
    method: &'static str,
    path: &'static str,
}

pub(super) const NODE_LIST: LeanRpc = LeanRpc {
    service: "drover.v1.OperatorService",
    method: "NodeList",
    path: "/drover.v1.OperatorService/NodeList",
};

pub(super) const JOB_ALLOCATIONS: LeanRpc = LeanRpc {
    service: "drover.v1.JobService",
    method: "Allocations",
    path: "/drover.v1.JobService/Allocations",
};

/// Calls `rpc` as the generated client would, with the lean answer's decoder (the wire
/// format is the generated answer's).
pub(super) async fn call<Q, A>(
    grpc: &mut tonic::client::Grpc<Channel>,
    rpc: LeanRpc,
    request: Q,
) -> Result<A, tonic::Status>
where
    Q: prost::Message + Send + 'static,
    A: prost::Message + Default + Send + 'static,
{
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unknown(format!("service was not ready: {e}")))?;
    let mut request = tonic::Request::new(request);
    request
        .extensions_mut()
        .insert(tonic::GrpcMethod::new(rpc.service, rpc.method));
    let path = PathAndQuery::from_static(rpc.path);
    let codec = tonic_prost::ProstCodec::<Q, A>::default();
    Ok(grpc.unary(request, path, codec).await?.into_inner())
}
