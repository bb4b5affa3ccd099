//! Changing which servers form the cluster, on the leader: adding a server (as a learner
//! that catches up by log or snapshot, then as a voter), removing one, and handing
//! leadership to another voter.
//!
//! Every change goes through openraft's joint consensus, so the cluster keeps serving
//! while it happens. The operator API (`ClusterService`) and the Raft listener's `Join`
//! both end here; a follower passes them on to the leader first.
//!
//! openraft 0.9 has no leadership transfer of its own, so [`Membership::transfer`] builds
//! one from what it has: the leader stops sending heartbeats, waits until the followers'
//! leader lease (one maximum election timeout) has lapsed, and asks the target to start an
//! election at once. New writes are held back meanwhile (each replicated entry would renew
//! the leases). The target's log is at least as new as any other voter's (it is checked
//! caught up first) and it starts before anyone else's election timer fires, so it wins;
//! should it not, the attempt is repeated.

use crate::raft::{GrpcTransport, RaftMetrics, RaftNode, ServerId, TransportError};
use drover_proto::v1::{JoinRequest, JoinResponse};
use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tonic::Status;

/// How many times a leadership transfer is tried before giving up.
const TRANSFER_ATTEMPTS: u32 = 3;

/// Why a membership change was not made.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    #[error("this server is not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<ServerId> },
    #[error("server {id} is not a member of the cluster")]
    NotMember { id: ServerId },
    #[error("server {id} is a learner, not a voter: it cannot lead")]
    NotVoter { id: ServerId },
    #[error("server {id} is already a member at {existing}, not {requested}: remove it first")]
    AddressConflict {
        id: ServerId,
        existing: String,
        requested: String,
    },
    #[error("raft_address {addr:?} is not host:port")]
    BadAddress { addr: String },
    #[error("cannot remove server {id}: it is the last voter")]
    LastVoter { id: ServerId },
    #[error("no other voter to hand leadership to")]
    NoOtherVoter,
    #[error("cannot reach server at {addr}: {reason}")]
    Unreachable { addr: String, reason: String },
    #[error("server {id} did not become leader after {attempts} attempts (leader now: {leader:?})")]
    TransferFailed {
        id: ServerId,
        attempts: u32,
        leader: Option<ServerId>,
    },
    #[error("raft refused the membership change: {reason}")]
    Refused { reason: String },
}

impl From<MembershipError> for Status {
    fn from(e: MembershipError) -> Status {
        let text = e.to_string();
        match e {
            MembershipError::NotLeader { .. } | MembershipError::Unreachable { .. } => {
                Status::unavailable(text)
            }
            MembershipError::NotMember { .. } => Status::not_found(text),
            MembershipError::BadAddress { .. } => Status::invalid_argument(text),
            MembershipError::NotVoter { .. }
            | MembershipError::AddressConflict { .. }
            | MembershipError::LastVoter { .. }
            | MembershipError::NoOtherVoter
            | MembershipError::TransferFailed { .. }
            | MembershipError::Refused { .. } => Status::failed_precondition(text),
        }
    }
}

fn refused(e: RaftError<ServerId, ClientWriteError<ServerId, BasicNode>>) -> MembershipError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => MembershipError::NotLeader {
            leader: f.leader_id,
        },
        other => MembershipError::Refused {
            reason: other.to_string(),
        },
    }
}

/// One server of the membership, as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerState {
    pub id: ServerId,
    pub raft_addr: String,
    pub voter: bool,
    pub leader: bool,
    /// The newest index replicated to it; for the leader itself, its last log index.
    pub matched_index: Option<u64>,
}

/// The membership of `m`, with replication progress where `m` is the leader's.
pub fn peers_of(m: &RaftMetrics) -> Vec<PeerState> {
    let membership = m.membership_config.membership();
    let voters: BTreeSet<ServerId> = membership.voter_ids().collect();
    membership
        .nodes()
        .map(|(id, node)| PeerState {
            id: *id,
            raft_addr: node.addr.clone(),
            voter: voters.contains(id),
            leader: m.current_leader == Some(*id),
            matched_index: if *id == m.id {
                m.last_log_index
            } else {
                m.replication
                    .as_ref()
                    .and_then(|r| r.get(id))
                    .and_then(|l| l.map(|l| l.index))
            },
        })
        .collect()
}

/// Makes membership changes on the leader.
#[derive(Debug)]
pub struct Membership {
    raft: Arc<RaftNode>,
    transport: GrpcTransport,
    /// The followers' leader lease: how long a silent leader must wait before another
    /// server can win an election.
    lease: Duration,
    heartbeat: Duration,
    /// How long adding a server may wait for it to catch up.
    catch_up_timeout: Duration,
}

impl Membership {
    pub fn new(
        raft: Arc<RaftNode>,
        transport: GrpcTransport,
        lease: Duration,
        heartbeat: Duration,
        catch_up_timeout: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            raft,
            transport,
            lease,
            heartbeat,
            catch_up_timeout,
        })
    }

    /// The node whose membership this changes.
    pub fn raft(&self) -> &RaftNode {
        &self.raft
    }

    fn metrics(&self) -> RaftMetrics {
        self.raft.metrics().borrow().clone()
    }

    fn ensure_leader(&self) -> Result<RaftMetrics, MembershipError> {
        let m = self.metrics();
        if m.current_leader == Some(self.raft.node_id()) {
            Ok(m)
        } else {
            Err(MembershipError::NotLeader {
                leader: m.current_leader,
            })
        }
    }

    /// What each of `peers` (id, Raft address) says of itself, asked at once; `None` for
    /// one that does not answer within `timeout`.
    pub async fn ask_all(
        &self,
        peers: &[(ServerId, String)],
        timeout: Duration,
    ) -> BTreeMap<ServerId, Option<drover_proto::v1::ServerInfo>> {
        let asked = futures::future::join_all(peers.iter().map(|(id, addr)| async move {
            let info = tokio::time::timeout(timeout, self.transport.server_info(*id, addr))
                .await
                .ok()
                .and_then(Result::ok)
                .filter(|info| info.server_id == *id);
            (*id, info)
        }))
        .await;
        asked.into_iter().collect()
    }

    /// Refuses (FAILED_PRECONDITION) unless every member runs a version that supports
    /// `feature` (see [`crate::versions`]).
    pub async fn require(&self, feature: crate::versions::Feature) -> Result<(), Status> {
        let m = self.metrics();
        let peers: Vec<(ServerId, String)> = m
            .membership_config
            .membership()
            .nodes()
            .map(|(id, n)| (*id, n.addr.clone()))
            .collect();
        let infos = self.ask_all(&peers, self.lease).await;
        crate::versions::check(
            feature,
            infos
                .iter()
                .map(|(id, info)| (*id, info.as_ref().map(|i| i.version.as_str()))),
        )
        .map_err(|e| Status::failed_precondition(e.to_string()))
    }

    /// Who the server at `raft_addr` says it is.
    pub async fn ask(
        &self,
        raft_addr: &str,
    ) -> Result<drover_proto::v1::ServerInfo, MembershipError> {
        self.transport
            .server_info(0, raft_addr)
            .await
            .map_err(|e| MembershipError::Unreachable {
                addr: raft_addr.to_string(),
                reason: transport_reason(e),
            })
    }

    /// Adds the server at `raft_addr` (its id asked of it when `id` is `None`): as a
    /// learner, waiting until it has caught up, then as a voter unless `voter` is false.
    /// Adding a server that is already what was asked changes nothing.
    pub async fn add(
        &self,
        id: Option<ServerId>,
        raft_addr: &str,
        voter: bool,
    ) -> Result<(ServerId, u64), MembershipError> {
        if raft_addr
            .rsplit_once(':')
            .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        {
            return Err(MembershipError::BadAddress {
                addr: raft_addr.to_string(),
            });
        }
        let m = self.ensure_leader()?;
        let id = match id {
            Some(id) => id,
            None => self.ask(raft_addr).await?.server_id,
        };
        let current = peers_of(&m).into_iter().find(|p| p.id == id);
        if let Some(p) = &current
            && p.raft_addr != raft_addr
        {
            return Err(MembershipError::AddressConflict {
                id,
                existing: p.raft_addr.clone(),
                requested: raft_addr.to_string(),
            });
        }
        let mut index = m.membership_config.log_id().map_or(0, |l| l.index);
        if current.is_none() {
            tracing::info!(server_id = id, raft_addr, "adding server as a learner");
            let added = tokio::time::timeout(
                self.catch_up_timeout,
                self.raft
                    .raft()
                    .add_learner(id, BasicNode::new(raft_addr), true),
            )
            .await
            .map_err(|_| MembershipError::Refused {
                reason: format!(
                    "server {id} did not catch up within {:?}",
                    self.catch_up_timeout
                ),
            })?
            .map_err(refused)?;
            index = added.log_id.index;
        }
        if voter && !current.as_ref().is_some_and(|p| p.voter) {
            tracing::info!(server_id = id, "promoting server to voter");
            let promoted = self
                .raft
                .raft()
                .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
                .await
                .map_err(refused)?;
            index = promoted.log_id.index;
        }
        Ok((id, index))
    }

    /// Takes a server that asks to join in (the Raft listener's `Join`): on the leader by
    /// [`Membership::add`]; on a follower by passing the call on to the leader once.
    pub async fn join(&self, req: JoinRequest, forwarded: bool) -> Result<JoinResponse, Status> {
        if req.server_id == 0 {
            return Err(Status::invalid_argument("server_id: must be at least 1"));
        }
        let m = self.metrics();
        let me = self.raft.node_id();
        match m.current_leader {
            Some(leader) if leader == me => {
                let (_, index) = self.add(Some(req.server_id), &req.raft_addr, true).await?;
                Ok(JoinResponse {
                    leader_id: me,
                    index,
                })
            }
            Some(leader) if !forwarded => {
                let Some(addr) = m
                    .membership_config
                    .membership()
                    .get_node(&leader)
                    .map(|n| n.addr.clone())
                else {
                    return Err(Status::unavailable(format!(
                        "leader {leader} is not in this server's membership yet; retry"
                    )));
                };
                self.transport
                    .join(&addr, req, self.catch_up_timeout + self.lease, true)
                    .await
            }
            _ => Err(Status::unavailable(
                "this server knows no leader to take the server in; retry",
            )),
        }
    }

    /// Removes server `id` from the membership. When it is this leader, it steps down once
    /// the change is committed and the remaining voters elect a new one.
    pub async fn remove(&self, id: ServerId) -> Result<u64, MembershipError> {
        let m = self.ensure_leader()?;
        let peers = peers_of(&m);
        let Some(peer) = peers.iter().find(|p| p.id == id) else {
            return Err(MembershipError::NotMember { id });
        };
        let change = if peer.voter {
            if peers.iter().filter(|p| p.voter).count() == 1 {
                return Err(MembershipError::LastVoter { id });
            }
            ChangeMembers::RemoveVoters(BTreeSet::from([id]))
        } else {
            ChangeMembers::RemoveNodes(BTreeSet::from([id]))
        };
        tracing::info!(server_id = id, voter = peer.voter, "removing server");
        let done = self
            .raft
            .raft()
            .change_membership(change, false)
            .await
            .map_err(refused)?;
        Ok(done.log_id.index)
    }

    /// Hands leadership to voter `target`, or to the most caught-up other voter.
    pub async fn transfer(
        &self,
        target: Option<ServerId>,
    ) -> Result<(ServerId, u64), MembershipError> {
        let me = self.raft.node_id();
        let m = self.ensure_leader()?;
        let peers = peers_of(&m);
        let target = match target {
            Some(id) if id == me => return Ok((me, m.current_term)),
            Some(id) => {
                let p = peers
                    .iter()
                    .find(|p| p.id == id)
                    .ok_or(MembershipError::NotMember { id })?;
                if !p.voter {
                    return Err(MembershipError::NotVoter { id });
                }
                p.clone()
            }
            None => peers
                .iter()
                .filter(|p| p.voter && p.id != me)
                .max_by_key(|p| (p.matched_index, std::cmp::Reverse(p.id)))
                .cloned()
                .ok_or(MembershipError::NoOtherVoter)?,
        };
        for attempt in 1..=TRANSFER_ATTEMPTS {
            self.wait_caught_up(target.id).await;
            let quiet = Quiet::new(self.raft.clone());
            tokio::time::sleep(self.lease + self.heartbeat).await;
            tracing::info!(server_id = target.id, attempt, "handing leadership over");
            self.transport
                .start_election(target.id, &target.raft_addr)
                .await
                .map_err(|e| MembershipError::Unreachable {
                    addr: target.raft_addr.clone(),
                    reason: transport_reason(e),
                })?;
            let mut rx = self.raft.metrics();
            let settled = tokio::time::timeout(
                self.lease * 2,
                rx.wait_for(|m| m.current_leader.is_some_and(|l| l != me)),
            )
            .await;
            drop(quiet);
            if let Ok(Ok(m)) = settled
                && m.current_leader == Some(target.id)
            {
                return Ok((target.id, m.current_term));
            }
            if self.metrics().current_leader != Some(me) {
                break;
            }
        }
        Err(MembershipError::TransferFailed {
            id: target.id,
            attempts: TRANSFER_ATTEMPTS,
            leader: self.metrics().current_leader,
        })
    }

    /// Waits (briefly) until `id` has replicated this leader's whole log, so that its
    /// election cannot be refused for a shorter log.
    async fn wait_caught_up(&self, id: ServerId) {
        let mut rx = self.raft.metrics();
        let _ = tokio::time::timeout(
            self.lease,
            rx.wait_for(|m| {
                let matched: BTreeMap<ServerId, Option<u64>> = peers_of(m)
                    .into_iter()
                    .map(|p| (p.id, p.matched_index))
                    .collect();
                matched.get(&id).copied().flatten() >= m.last_log_index
            }),
        )
        .await;
    }
}

fn transport_reason(e: TransportError) -> String {
    match e {
        TransportError::Unreachable { reason, .. } | TransportError::Failed { reason, .. } => {
            reason
        }
    }
}

/// Stops this leader's heartbeats and holds new writes back while it lives, so followers'
/// leases lapse; dropping it turns both back on (also when the transfer fails half way).
struct Quiet {
    raft: Arc<RaftNode>,
    _writes: crate::raft::WriteHold,
}

impl Quiet {
    fn new(raft: Arc<RaftNode>) -> Self {
        let _writes = raft.hold_writes();
        raft.raft().runtime_config().heartbeat(false);
        Self { raft, _writes }
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        self.raft.raft().runtime_config().heartbeat(true);
    }
}
