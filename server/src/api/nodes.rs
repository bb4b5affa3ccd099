//! `drover.v1.NodeService`: what node agents call.

use super::Api;
use drover_core::acl::{Area, Level, Need};
use drover_proto::WireEnum;
use drover_proto::convert::{AllocUpdates, Heartbeat, NodeRegistration, WatchRequest};
use drover_proto::v1 as pb;
use drover_proto::v1::node_service_server::NodeService;
use std::pin::Pin;
use std::time::Duration;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// The NodeService implementation.
#[derive(Clone, Debug)]
pub struct NodeApi(pub(crate) Api);

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One heartbeat, however it came (the unary call or the stream): the only place a
/// heartbeat request is decoded and handled.
pub(super) async fn heartbeat(
    api: &Api,
    req: pb::UpdateNodeStatusRequest,
) -> Result<pb::UpdateNodeStatusResponse, Status> {
    let hb = Heartbeat::try_from(req)?;
    let ack = api.handle.heartbeat(hb).await?;
    Ok(pb::UpdateNodeStatusResponse {
        heartbeat_ttl_ms: ms(ack.heartbeat_ttl),
        status: ack.status.to_wire(),
        health: ack.health.to_wire(),
        index: ack.index,
    })
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::WatchAllocationsResponse, Status>> + Send>>;

#[tonic::async_trait]
impl NodeService for NodeApi {
    async fn register(
        &self,
        req: Request<pb::RegisterNodeRequest>,
    ) -> Result<Response<pb::RegisterNodeResponse>, Status> {
        // The join credential: a token that may register nodes, or (with mutual TLS) a
        // certificate the cluster CA made for the client role, which must then name the
        // node: a certificate binds its holder to one node name.
        let client_certificate =
            crate::tls::roles::peer_has_role(&req, drover_proto::tls::CLIENT_NAME);
        if !client_certificate {
            let acl = crate::auth::authorize(&req, Need::Area(Area::Agent, Level::Write))?;
            // A new node under a join token: at the token's rate. (Re-registrations prove
            // the node's own secret; with ACLs off there is no credential to hold back.)
            let new_node = req
                .get_ref()
                .node
                .as_ref()
                .is_none_or(|n| n.node_id.is_empty());
            if new_node && !matches!(*acl, drover_core::acl::Acl::Disabled) {
                let bearer = req
                    .metadata()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                self.0
                    .registrations
                    .take(&crate::secrets::digest(bearer), std::time::Instant::now())?;
            }
        }
        let peer = (!req
            .metadata()
            .contains_key(crate::forward::FORWARDED_HEADER))
        .then(|| req.remote_addr().map(|a| a.ip()))
        .flatten();
        let named = |name: &str| {
            drover_proto::tls::agent_name(name)
                .is_ok_and(|n| drover_proto::tls::peer_has_name(&req, &n))
        };
        let name = req.get_ref().node.as_ref().map(|r| r.name.clone());
        if client_certificate
            && let Some(name) = name
            && !named(&name)
        {
            return Err(Status::permission_denied(format!(
                "name: the agent's certificate does not name node {name:?}; make one with `drover tls cert create -client -node {name}`"
            )));
        }
        let reg = NodeRegistration::try_from(req.into_inner())?;
        super::agent_address::check(&reg.attributes, peer)?;
        let r = self.0.handle.register_node(reg).await?;
        Ok(Response::new(pb::RegisterNodeResponse {
            node_id: r.node_id.to_string(),
            secret_id: r.secret_id,
            heartbeat_ttl_ms: ms(r.heartbeat_ttl),
            index: r.index,
        }))
    }

    async fn update_status(
        &self,
        req: Request<pb::UpdateNodeStatusRequest>,
    ) -> Result<Response<pb::UpdateNodeStatusResponse>, Status> {
        heartbeat(&self.0, req.into_inner())
            .await
            .map(Response::new)
    }

    type HeartbeatsStream = super::heartbeat_stream::Answers;

    async fn heartbeats(
        &self,
        req: Request<tonic::Streaming<pb::UpdateNodeStatusRequest>>,
    ) -> Result<Response<Self::HeartbeatsStream>, Status> {
        Ok(Response::new(super::heartbeat_stream::answers(
            self.0.clone(),
            req,
        )))
    }

    type WatchAllocationsStream = WatchStream;

    async fn watch_allocations(
        &self,
        req: Request<pb::WatchAllocationsRequest>,
    ) -> Result<Response<Self::WatchAllocationsStream>, Status> {
        let WatchRequest {
            auth,
            min_index,
            known,
        } = WatchRequest::try_from(req.into_inner())?;
        let handle = self.0.handle.clone();
        // Authenticate before the stream starts, so a wrong secret is the call's status.
        handle.node_snapshot(&auth)?;
        if min_index > 0 {
            self.0.check_min_index(min_index)?;
            handle
                .wait_for_index(min_index, self.0.opts.max_query_wait)
                .await
                .map_err(|_| {
                    Status::unavailable(format!("state did not reach index {min_index}; retry"))
                })?;
        }
        Ok(Response::new(Box::pin(super::alloc_watch::watch_stream(
            handle,
            auth,
            known,
            self.0.node_wakeups.clone(),
        ))))
    }

    async fn update_allocations(
        &self,
        req: Request<pb::UpdateAllocationsRequest>,
    ) -> Result<Response<pb::UpdateAllocationsResponse>, Status> {
        let updates = AllocUpdates::try_from(req.into_inner())?;
        let index = self.0.handle.update_allocs(updates).await?;
        Ok(Response::new(pb::UpdateAllocationsResponse { index }))
    }
}
