//! `drover.v1.ClusterService`: the Raft membership, read and changed on the leader
//! (followers forward these calls; see [`crate::forward`]).

use super::Api;
use crate::membership::peers_of;
use drover_core::acl::{Area, Level, Need};
use drover_proto::v1 as pb;
use drover_proto::v1::cluster_service_server::ClusterService;
use std::time::Duration;
use tonic::{Request, Response, Status};

/// How long listing the peers waits for each to say who it is.
const ASK_TIMEOUT: Duration = Duration::from_millis(800);

/// The ClusterService implementation.
#[derive(Clone, Debug)]
pub struct ClusterApi(pub(crate) Api);

fn server_id(field: &str, id: u64) -> Result<u64, Status> {
    if id == 0 {
        return Err(Status::invalid_argument(format!(
            "{field}: a server id is at least 1"
        )));
    }
    Ok(id)
}

#[tonic::async_trait]
impl ClusterService for ClusterApi {
    async fn list_peers(
        &self,
        req: Request<pb::ListPeersRequest>,
    ) -> Result<Response<pb::ListPeersResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Read))?;
        let handle = &self.0.handle;
        let m = handle.raft_metrics();
        let peers = peers_of(&m);
        let asked: Vec<(u64, String)> = peers.iter().map(|p| (p.id, p.raft_addr.clone())).collect();
        let infos = handle.inner.membership.ask_all(&asked, ASK_TIMEOUT).await;
        let peers = peers
            .into_iter()
            .map(|p| {
                let info = infos.get(&p.id).cloned().flatten();
                pb::RaftPeer {
                    id: p.id,
                    name: info.as_ref().map(|i| i.name.clone()).unwrap_or_default(),
                    raft_address: p.raft_addr,
                    api_address: info
                        .as_ref()
                        .map(|i| i.api_addr.clone())
                        .unwrap_or_default(),
                    voter: p.voter,
                    leader: p.leader,
                    matched_index: p.matched_index.unwrap_or(0),
                    reachable: info.is_some(),
                    version: info.map(|i| i.version).unwrap_or_default(),
                }
            })
            .collect();
        Ok(Response::new(pb::ListPeersResponse {
            peers,
            last_log_index: m.last_log_index.unwrap_or(0),
            term: m.current_term,
            index: handle.applied_index(),
        }))
    }

    async fn add_peer(
        &self,
        req: Request<pb::AddPeerRequest>,
    ) -> Result<Response<pb::AddPeerResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Write))?;
        let req = req.into_inner();
        if req.raft_address.is_empty() {
            return Err(Status::invalid_argument(
                "raft_address: the new server's raft address (host:port) is required",
            ));
        }
        let id = (req.id != 0).then_some(req.id);
        let (id, index) = self
            .0
            .handle
            .inner
            .membership
            .add(id, &req.raft_address, !req.non_voter)
            .await?;
        Ok(Response::new(pb::AddPeerResponse { id, index }))
    }

    async fn remove_peer(
        &self,
        req: Request<pb::RemovePeerRequest>,
    ) -> Result<Response<pb::RemovePeerResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Write))?;
        let id = server_id("id", req.get_ref().id)?;
        let index = self.0.handle.inner.membership.remove(id).await?;
        Ok(Response::new(pb::RemovePeerResponse { index }))
    }

    async fn transfer_leadership(
        &self,
        req: Request<pb::TransferLeadershipRequest>,
    ) -> Result<Response<pb::TransferLeadershipResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Write))?;
        let target = (req.get_ref().id != 0).then_some(req.get_ref().id);
        let (leader_id, term) = self.0.handle.inner.membership.transfer(target).await?;
        Ok(Response::new(pb::TransferLeadershipResponse {
            leader_id,
            term,
        }))
    }
}
