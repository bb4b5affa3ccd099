//! Every server schedules: a follower's workers dequeue from the leader's eval broker,
//! submit plans to the leader's plan applier and write their evals through the leader,
//! over the server transport (`RaftService.Scheduling`, behind the cluster secret), as
//! Nomad's workers do on every server. Adding servers adds scheduling capacity; the
//! leader's applier still checks every plan against its latest state, so two workers on
//! two servers can never over-commit a node between them.
//!
//! [`AnySource`] is the [`EvalSource`] every server's workers use: this server's own
//! [`Leadership`] while it leads, the leader's over a [`LeaderLink`] otherwise. A worker
//! on a follower schedules against its local state once that has reached the delivery's
//! wait index, as on the leader. If the follower or its link dies mid-delivery the
//! broker's nack timer gives the eval to another worker.

use crate::error::ServerError;
use crate::leader::Leadership;
use crate::raft::codec::{decode_rpc, encode_rpc};
use crate::raft::{GrpcTransport, RaftNode};
use crate::worker::{BoxFuture, EvalSource, SourceError};
use drover_core::broker::{Dequeued, Token};
use drover_core::fsm::{ApplyError, Command};
use drover_core::{EvalId, Evaluation, Index, Plan, PlanResult, SchedulerType};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// How much longer than its own wait a remote call may take (the round trip, a busy
/// leader).
const CALL_MARGIN: Duration = Duration::from_secs(5);

/// What a follower asks of the leader.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum LinkCall {
    Dequeue {
        types: Vec<SchedulerType>,
        timeout: Duration,
    },
    Ack {
        eval_id: EvalId,
        token: Token,
    },
    Nack {
        eval_id: EvalId,
        token: Token,
    },
    Touch {
        eval_id: EvalId,
        token: Token,
    },
    SubmitPlan(Box<Plan>),
    Write(Box<Command>),
}

/// Why an entry a follower sent was not written.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum WriteFailure {
    Refused { index: Index, error: ApplyError },
    NotLeader,
    Failed { reason: String },
}

/// The leader's answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum LinkAnswer {
    Dequeued(Option<(Box<Evaluation>, Token, Index)>),
    Done,
    Planned(Box<PlanResult>),
    Written(Result<Index, WriteFailure>),
    Failed(SourceError),
}

/// Reaches the leader's `Scheduling` RPC from this server.
#[derive(Clone, Debug)]
pub struct LeaderLink {
    raft: Arc<RaftNode>,
    transport: GrpcTransport,
}

impl LeaderLink {
    pub fn new(raft: Arc<RaftNode>, transport: GrpcTransport) -> Self {
        Self { raft, transport }
    }

    /// The leader's Raft address, when another server leads.
    fn leader_addr(&self) -> Option<String> {
        let m = self.raft.metrics().borrow().clone();
        let leader = m.current_leader.filter(|l| *l != self.raft.node_id())?;
        m.membership_config
            .membership()
            .get_node(&leader)
            .map(|n| n.addr.clone())
    }

    /// Sends `call` to the leader, waiting up to `wait` plus a margin. Unreachable, no
    /// leader, or an answer that does not decode: `NotLeader` (the worker backs off).
    pub async fn call(&self, call: &LinkCall, wait: Duration) -> Result<LinkAnswer, SourceError> {
        let addr = self.leader_addr().ok_or(SourceError::NotLeader)?;
        let payload = encode_rpc("scheduling call", call).map_err(|e| {
            tracing::warn!(error = %e, "cannot encode a scheduling call");
            SourceError::NotLeader
        })?;
        let answer = self
            .transport
            .scheduling(&addr, payload, wait + CALL_MARGIN)
            .await
            .map_err(|e| {
                tracing::debug!(addr, error = %e, "scheduling call to the leader failed");
                SourceError::NotLeader
            })?;
        decode_rpc("scheduling answer", &answer).map_err(|e| {
            tracing::warn!(addr, error = %e, "the leader's scheduling answer does not decode");
            SourceError::NotLeader
        })
    }

    /// Writes `cmd` through the leader; for this server's workers when it does not lead.
    pub async fn write(&self, cmd: Command) -> Result<Index, ServerError> {
        let answer = self
            .call(&LinkCall::Write(Box::new(cmd)), Duration::from_secs(10))
            .await;
        match answer {
            Ok(LinkAnswer::Written(Ok(index))) => Ok(index),
            Ok(LinkAnswer::Written(Err(WriteFailure::Refused { index, error }))) => {
                Err(ServerError::Refused { index, error })
            }
            Ok(LinkAnswer::Written(Err(WriteFailure::Failed { reason }))) => {
                Err(ServerError::Unavailable { reason })
            }
            _ => Err(ServerError::NotLeader {
                leader_id: None,
                leader_addr: None,
            }),
        }
    }
}

/// Answers a follower's call on the leader. Never forwards: a server that no longer
/// leads answers `NotLeader` and the follower asks again once it knows the new leader.
pub async fn serve(leadership: &Leadership, raft: &RaftNode, payload: &[u8]) -> Vec<u8> {
    let answer = match decode_rpc::<LinkCall>("scheduling call", payload) {
        Ok(call) => answer(leadership, raft, call).await,
        Err(e) => {
            tracing::warn!(error = %e, "a scheduling call does not decode");
            LinkAnswer::Failed(SourceError::NotLeader)
        }
    };
    encode_rpc("scheduling answer", &answer).unwrap_or_default()
}

async fn answer(leadership: &Leadership, raft: &RaftNode, call: LinkCall) -> LinkAnswer {
    let done =
        |r: Result<(), SourceError>| r.map_or_else(LinkAnswer::Failed, |()| LinkAnswer::Done);
    match call {
        LinkCall::Dequeue { types, timeout } => {
            match leadership
                .dequeue(&types, timeout.min(Duration::from_secs(60)))
                .await
            {
                Ok(d) => LinkAnswer::Dequeued(
                    d.map(|d| (Box::new((*d.eval).clone()), d.token, d.wait_index)),
                ),
                Err(e) => LinkAnswer::Failed(e),
            }
        }
        LinkCall::Ack { eval_id, token } => done(leadership.ack(eval_id, token).await),
        LinkCall::Nack { eval_id, token } => done(leadership.nack(eval_id, token).await),
        LinkCall::Touch { eval_id, token } => done(leadership.touch(eval_id, token).await),
        LinkCall::SubmitPlan(plan) => match leadership.submit_plan(*plan).await {
            Ok(result) => LinkAnswer::Planned(Box::new(result)),
            Err(e) => LinkAnswer::Failed(e),
        },
        LinkCall::Write(cmd) => {
            if !raft.is_leader() {
                return LinkAnswer::Written(Err(WriteFailure::NotLeader));
            }
            LinkAnswer::Written(match leadership.writer.write_here(*cmd).await {
                Ok(index) => Ok(index),
                Err(ServerError::Refused { index, error }) => {
                    Err(WriteFailure::Refused { index, error })
                }
                Err(ServerError::NotLeader { .. }) => Err(WriteFailure::NotLeader),
                Err(e) => Err(WriteFailure::Failed {
                    reason: e.to_string(),
                }),
            })
        }
    }
}

/// The eval source of every server's workers: the local leadership while this server
/// leads, the leader's over the link otherwise.
#[derive(Debug)]
pub struct AnySource {
    local: Arc<Leadership>,
    raft: Arc<RaftNode>,
    link: LeaderLink,
}

impl AnySource {
    pub fn new(local: Arc<Leadership>, raft: Arc<RaftNode>, link: LeaderLink) -> Self {
        Self { local, raft, link }
    }

    fn remote(&self) -> bool {
        !self.raft.is_leader()
    }

    async fn remote_done(&self, call: LinkCall) -> Result<(), SourceError> {
        match self.link.call(&call, Duration::ZERO).await? {
            LinkAnswer::Done => Ok(()),
            LinkAnswer::Failed(e) => Err(e),
            _ => Err(SourceError::NotLeader),
        }
    }
}

impl EvalSource for AnySource {
    fn dequeue<'a>(
        &'a self,
        types: &'a [SchedulerType],
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Option<Dequeued>, SourceError>> {
        if !self.remote() {
            return self.local.dequeue(types, timeout);
        }
        Box::pin(async move {
            let call = LinkCall::Dequeue {
                types: types.to_vec(),
                timeout,
            };
            match self.link.call(&call, timeout).await? {
                LinkAnswer::Dequeued(d) => Ok(d.map(|(eval, token, wait_index)| Dequeued {
                    eval: Arc::new(*eval),
                    token,
                    wait_index,
                })),
                LinkAnswer::Failed(e) => Err(e),
                _ => Err(SourceError::NotLeader),
            }
        })
    }

    fn ack(&self, eval_id: EvalId, token: Token) -> BoxFuture<'_, Result<(), SourceError>> {
        if !self.remote() {
            return self.local.ack(eval_id, token);
        }
        Box::pin(self.remote_done(LinkCall::Ack { eval_id, token }))
    }

    fn nack(&self, eval_id: EvalId, token: Token) -> BoxFuture<'_, Result<(), SourceError>> {
        if !self.remote() {
            return self.local.nack(eval_id, token);
        }
        Box::pin(self.remote_done(LinkCall::Nack { eval_id, token }))
    }

    fn touch(&self, eval_id: EvalId, token: Token) -> BoxFuture<'_, Result<(), SourceError>> {
        if !self.remote() {
            return self.local.touch(eval_id, token);
        }
        Box::pin(self.remote_done(LinkCall::Touch { eval_id, token }))
    }

    fn submit_plan(&self, plan: Plan) -> BoxFuture<'_, Result<PlanResult, SourceError>> {
        if !self.remote() {
            return self.local.submit_plan(plan);
        }
        Box::pin(async move {
            // The plan waits in the leader's applier queue: allow it the worker's patience.
            match self
                .link
                .call(
                    &LinkCall::SubmitPlan(Box::new(plan)),
                    Duration::from_secs(30),
                )
                .await?
            {
                LinkAnswer::Planned(result) => Ok(*result),
                LinkAnswer::Failed(e) => Err(e),
                _ => Err(SourceError::NotLeader),
            }
        })
    }
}
