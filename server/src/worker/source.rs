//! Where a worker gets its evals and sends its plans: the leader's broker and plan queue.
//!
//! On the leader the source is in-process ([`crate::leader::Leadership`] implements it); a
//! follower's workers make the same calls to the leader over the server transport
//! ([`crate::leader_link`]). Nothing in the worker depends on which one it has. Futures are boxed so the trait
//! can be used as `Arc<dyn EvalSource>`.

use crate::error::ServerError;
use crate::raft::WaitTimeout;
use drover_core::Index;
use drover_core::broker::{BrokerError, Dequeued, Token};
use drover_core::fsm::ApplyError;
use drover_core::plan_check::ApplierError;
use drover_core::{EvalId, Plan, PlanResult, SchedulerType};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A boxed, sendable future, for the object-safe async trait below.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why the source could not serve a worker's call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum SourceError {
    /// This server does not lead (or stopped leading while the call waited).
    #[error("not the leader")]
    NotLeader,
    #[error(transparent)]
    Broker(#[from] BrokerError),
    /// The plan applier could not commit the plan.
    #[error("plan not applied: {0}")]
    Plan(#[from] PlanApplyError),
    /// The plan's token does not parse.
    #[error("invalid eval token {0:?}")]
    BadToken(String),
}

/// Why the plan applier could not commit a plan; the worker retries or nacks by kind.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum PlanApplyError {
    /// The state did not reach the index the plan must be checked at, in time.
    #[error(transparent)]
    StateBehind(#[from] WaitTimeout),
    /// The applier refused the call (a check it cannot honour).
    #[error(transparent)]
    Applier(#[from] ApplierError),
    /// This server stopped leading before the plan committed.
    #[error("not the leader: {reason}")]
    NotLeader { reason: String },
    /// The FSM refused the plan's entry.
    #[error("plan refused at index {index}: {error}")]
    Refused { index: Index, error: ApplyError },
    /// Raft could not take the write.
    #[error("plan write failed: {reason}")]
    Write { reason: String },
    /// The task writing the plan panicked or was cancelled.
    #[error("plan write task failed: {reason}")]
    WriteTask { reason: String },
}

impl From<ServerError> for PlanApplyError {
    fn from(e: ServerError) -> Self {
        match e {
            ServerError::Refused { index, error } => PlanApplyError::Refused { index, error },
            e @ ServerError::NotLeader { .. } => PlanApplyError::NotLeader {
                reason: e.to_string(),
            },
            e => PlanApplyError::Write {
                reason: e.to_string(),
            },
        }
    }
}

/// The leader's side of a worker's loop.
pub trait EvalSource: Send + Sync + fmt::Debug {
    /// The next eval for any of `types`, waiting up to `timeout`; `None` if none came.
    fn dequeue<'a>(
        &'a self,
        types: &'a [SchedulerType],
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Option<Dequeued>, SourceError>>;

    /// The eval was processed: it leaves the broker.
    fn ack(&self, eval_id: EvalId, token: Token) -> BoxFuture<'_, Result<(), SourceError>>;

    /// The eval could not be processed: the broker redelivers it later.
    fn nack(&self, eval_id: EvalId, token: Token) -> BoxFuture<'_, Result<(), SourceError>>;

    /// The worker is making progress on the eval: restart its nack timer.
    fn touch(&self, eval_id: EvalId, token: Token) -> BoxFuture<'_, Result<(), SourceError>>;

    /// Submits a plan to the plan applier and waits for its result (the committed part,
    /// refused nodes and a refresh index).
    fn submit_plan(&self, plan: Plan) -> BoxFuture<'_, Result<PlanResult, SourceError>>;
}
