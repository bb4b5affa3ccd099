//! `drover.v1.StatusService`: the leader and this server's Raft status.

use super::Api;
use crate::raft::RaftMetrics;
use drover_core::acl::{Area, Level, Need};
use drover_core::node_health::gauges_of;
use drover_proto::v1 as pb;
use drover_proto::v1::status_service_server::StatusService;
use openraft::ServerState;
use tonic::{Request, Response, Status};

/// The StatusService implementation.
#[derive(Clone, Debug)]
pub struct StatusApi(pub(crate) Api);

fn role(s: ServerState) -> pb::RaftRole {
    match s {
        ServerState::Leader => pb::RaftRole::Leader,
        ServerState::Follower => pb::RaftRole::Follower,
        ServerState::Candidate => pb::RaftRole::Candidate,
        ServerState::Learner => pb::RaftRole::Learner,
        ServerState::Shutdown => pb::RaftRole::Shutdown,
    }
}

fn address(m: &RaftMetrics, id: u64) -> String {
    m.membership_config
        .membership()
        .get_node(&id)
        .map(|n| n.addr.clone())
        .unwrap_or_default()
}

#[tonic::async_trait]
impl StatusService for StatusApi {
    async fn leader(
        &self,
        _req: Request<pb::LeaderRequest>,
    ) -> Result<Response<pb::LeaderResponse>, Status> {
        let m = self.0.handle.raft_metrics();
        let Some(leader) = m.current_leader else {
            return Err(Status::unavailable("no leader is known right now; retry"));
        };
        Ok(Response::new(pb::LeaderResponse {
            leader_id: leader.to_string(),
            leader_address: address(&m, leader),
            term: m.current_term,
            index: self.0.handle.applied_index(),
        }))
    }

    async fn peers(
        &self,
        _req: Request<pb::PeersRequest>,
    ) -> Result<Response<pb::PeersResponse>, Status> {
        let m = self.0.handle.raft_metrics();
        let membership = m.membership_config.membership();
        let peers = membership
            .nodes()
            .map(|(id, node)| pb::Peer {
                id: id.to_string(),
                address: node.addr.clone(),
                voter: membership.voter_ids().any(|v| v == *id),
                leader: m.current_leader == Some(*id),
            })
            .collect();
        Ok(Response::new(pb::PeersResponse {
            peers,
            index: self.0.handle.applied_index(),
        }))
    }

    async fn cluster_status(
        &self,
        req: Request<pb::ClusterStatusRequest>,
    ) -> Result<Response<pb::ClusterStatusResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Read))?;
        let m = self.0.handle.raft_metrics();
        let applied = self.0.handle.applied_index();
        Ok(Response::new(pb::ClusterStatusResponse {
            server_id: self.0.handle.server_id().to_string(),
            role: role(m.state).into(),
            term: m.current_term,
            leader_id: m.current_leader.map(|l| l.to_string()).unwrap_or_default(),
            last_log_index: m.last_log_index.unwrap_or_default(),
            // openraft 0.9's metrics carry no commit index; what is applied is committed.
            committed_index: m.last_applied.map_or(0, |l| l.index),
            applied_index: applied,
            snapshot_index: m.snapshot.map_or(0, |l| l.index),
            purged_index: m.purged.map_or(0, |l| l.index),
            nodes: Some((&gauges_of(&self.0.handle.snapshot())).into()),
            index: applied,
        }))
    }

    async fn members(
        &self,
        req: Request<pb::MembersRequest>,
    ) -> Result<Response<pb::MembersResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Read))?;
        let handle = &self.0.handle;
        let m = handle.raft_metrics();
        let me = handle.server_id();
        // A peer the leader has not heard from for this long is reported unreachable.
        let stale_ms = u64::try_from(handle.config().raft.election_timeout_max.as_millis())
            .unwrap_or(u64::MAX);
        let membership = m.membership_config.membership();
        let asked: Vec<(u64, String)> = membership
            .nodes()
            .map(|(id, node)| (*id, node.addr.clone()))
            .collect();
        let infos = handle
            .inner
            .membership
            .ask_all(&asked, std::time::Duration::from_millis(stale_ms.max(200)))
            .await;
        let members = membership
            .nodes()
            .map(|(id, node)| {
                let voter = membership.voter_ids().any(|v| v == *id);
                let member_role = if *id == me {
                    role(m.state)
                } else if m.current_leader == Some(*id) {
                    pb::RaftRole::Leader
                } else if voter {
                    pb::RaftRole::Follower
                } else {
                    pb::RaftRole::Learner
                };
                let info = infos.get(id).cloned().flatten();
                let (status, last_contact_ms) = peer_status(&m, me, *id, stale_ms, info.is_some());
                let (name, version) = match info {
                    Some(i) => (i.name, i.version),
                    None if *id == me => (
                        handle.config().display_name(),
                        handle.config().advertised_version.clone(),
                    ),
                    None => (String::new(), String::new()),
                };
                pb::Member {
                    id: id.to_string(),
                    name,
                    address: node.addr.clone(),
                    role: member_role.into(),
                    status: status.into(),
                    last_contact_ms,
                    version,
                }
            })
            .collect();
        Ok(Response::new(pb::MembersResponse {
            members,
            index: handle.applied_index(),
        }))
    }
}

/// What this server knows of a peer's liveness: itself is alive; a leader knows each
/// follower from replication (alive while replicated to and the quorum acked recently);
/// a follower knows its current leader, alive while it is recognised; any other peer is
/// alive when its Raft listener just answered (`answered`).
fn peer_status(
    m: &RaftMetrics,
    me: u64,
    id: u64,
    stale_ms: u64,
    answered: bool,
) -> (pb::MemberStatus, u64) {
    if id == me {
        return (pb::MemberStatus::Alive, 0);
    }
    if m.current_leader == Some(me) {
        let since_ack = m.millis_since_quorum_ack.unwrap_or(u64::MAX);
        let replicated = m
            .replication
            .as_ref()
            .and_then(|r| r.get(&id))
            .is_some_and(|matched| matched.is_some());
        return if replicated && since_ack <= stale_ms {
            (pb::MemberStatus::Alive, since_ack)
        } else {
            (pb::MemberStatus::Unreachable, 0)
        };
    }
    if m.current_leader == Some(id) || answered {
        return (pb::MemberStatus::Alive, 0);
    }
    (pb::MemberStatus::Unreachable, 0)
}
