//! How a server started outside any cluster ([`Bootstrap::Join`]) gets into one.
//!
//! Each round asks every `--join` address who it is (the Raft listener's `Info`, behind
//! the cluster secret). If one of them is in a cluster, this server asks it to be taken in
//! (`Join`; a follower passes it on to the leader, which adds this server as a learner,
//! waits until it has caught up, and makes it a voter). With `--bootstrap-expect N` and no
//! cluster anywhere, the servers that found each other form one once there are N of them:
//! only the one with the lowest id initializes it, with every server it found as a voter,
//! so two servers can never form two clusters from one set. The others are reached by the
//! new leader like any follower. Rounds repeat with backoff until this server is in a
//! cluster; a server restarted with history never runs this (its log has the membership).
//!
//! [`Bootstrap::Join`]: crate::raft::Bootstrap::Join

use crate::raft::{GrpcTransport, JoinPlan, RaftNode, ServerId};
use backon::{ExponentialBuilder, Retryable};
use drover_proto::v1 as pb;
use openraft::BasicNode;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How long one `Join` may take: the leader answers only once this server caught up,
/// which can take a snapshot install.
const JOIN_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a round did not get this server into a cluster (the round is repeated).
#[derive(Debug, thiserror::Error)]
enum NotYet {
    #[error("found {found} of the {expect} servers bootstrap_expect waits for: {ids:?}")]
    Waiting {
        found: usize,
        expect: usize,
        ids: Vec<ServerId>,
    },
    #[error("no server at {addrs:?} is in a cluster yet")]
    NoCluster { addrs: Vec<String> },
    #[error("server {lowest} (the lowest id found) forms the cluster; waiting to hear from it")]
    LowerIdForms { lowest: ServerId },
    #[error("the cluster at {addr} did not take this server in: {reason}")]
    Refused { addr: String, reason: String },
    #[error("cannot form the cluster: {reason}")]
    Initialize { reason: String },
}

/// Runs rounds until this server is in a cluster; spawn it and abort it on shutdown.
pub async fn run(raft: Arc<RaftNode>, transport: GrpcTransport, plan: JoinPlan) {
    let round = || one_round(&raft, &transport, &plan);
    let joined = round
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(200))
                .with_max_delay(Duration::from_secs(2))
                .without_max_times(),
        )
        .notify(|e: &NotYet, next: Duration| {
            tracing::info!(reason = %e, retry_in = ?next, "not in a cluster yet");
        })
        .await;
    if joined.is_ok() {
        tracing::info!(server_id = raft.node_id(), "in the cluster");
    }
}

fn in_cluster(raft: &RaftNode) -> bool {
    raft.metrics()
        .borrow()
        .membership_config
        .membership()
        .nodes()
        .next()
        .is_some()
}

async fn one_round(
    raft: &RaftNode,
    transport: &GrpcTransport,
    plan: &JoinPlan,
) -> Result<(), NotYet> {
    if in_cluster(raft) {
        return Ok(());
    }
    let me = raft.node_id();
    let asked = futures::future::join_all(
        plan.addrs
            .iter()
            .map(|addr| async move { (addr, transport.server_info(0, addr).await) }),
    )
    .await;
    let mut found = BTreeMap::from([(me, raft.addr().to_string())]);
    let mut refusal = None;
    for (addr, info) in asked {
        let info = match info {
            Ok(info) => info,
            Err(e) => {
                tracing::debug!(addr, error = %e, "join address does not answer");
                continue;
            }
        };
        if info.in_cluster {
            let join = pb::JoinRequest {
                server_id: me,
                raft_addr: raft.addr().to_string(),
            };
            match transport.join(addr, join, JOIN_TIMEOUT, false).await {
                Ok(answer) => {
                    tracing::info!(
                        leader_id = answer.leader_id,
                        index = answer.index,
                        addr,
                        "taken into the cluster"
                    );
                    return Ok(());
                }
                Err(status) => {
                    refusal = Some(NotYet::Refused {
                        addr: addr.clone(),
                        reason: status.message().to_string(),
                    });
                    continue;
                }
            }
        }
        let raft_addr = if info.raft_addr.is_empty() {
            addr.clone()
        } else {
            info.raft_addr
        };
        if let Some(other) = found.insert(info.server_id, raft_addr.clone())
            && other != raft_addr
        {
            tracing::warn!(
                server_id = info.server_id,
                raft_addr,
                other,
                "two servers share one server id: give each its own --server-id"
            );
        }
    }
    if let Some(refusal) = refusal {
        return Err(refusal);
    }
    let Some(expect) = plan.expect else {
        return Err(NotYet::NoCluster {
            addrs: plan.addrs.clone(),
        });
    };
    if found.len() < expect {
        return Err(NotYet::Waiting {
            found: found.len(),
            expect,
            ids: found.keys().copied().collect(),
        });
    }
    let lowest = *found.keys().next().unwrap_or(&me);
    if lowest != me {
        return Err(NotYet::LowerIdForms { lowest });
    }
    let members = found
        .into_iter()
        .map(|(id, addr)| (id, BasicNode::new(addr)))
        .collect();
    raft.initialize(members)
        .await
        .map_err(|e| NotYet::Initialize {
            reason: e.to_string(),
        })?;
    Ok(())
}
