//! The [`Planner`] a worker hands the scheduler: plans go to the leader's plan applier
//! through the [`EvalSource`], eval updates, creations and reblocks go through Raft.
//!
//! Schedulers are synchronous, so the worker runs them on a blocking thread and this
//! planner drives its async calls with the runtime handle (`Handle::block_on`).

use super::source::{EvalSource, PlanApplyError, SourceError};
use super::{StatusCell, WorkloadStatus};
use crate::error::ServerError;
use crate::raft::StateHandle;
use crate::write::Writer;
use drover_core::broker::Token;
use drover_core::fsm::Command;
use drover_core::scheduler::{PlanError, Planner, PlannerError, Submitted};
use drover_core::{EvalId, Evaluation, Index, Plan};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::runtime::Handle;

pub(crate) struct WorkerPlanner {
    pub rt: Handle,
    pub source: Arc<dyn EvalSource>,
    pub writer: Writer,
    pub state: StateHandle,
    pub eval_id: EvalId,
    pub token: Token,
    pub wait_limit: Duration,
    /// The index of the last plan this worker committed, shared with its loop.
    pub last_plan_index: Arc<AtomicU64>,
    pub status: StatusCell,
}

impl fmt::Debug for WorkerPlanner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerPlanner")
            .field("eval_id", &self.eval_id)
            .finish_non_exhaustive()
    }
}

/// A failed write of the worker's, by kind.
fn plan_error(e: ServerError) -> PlanError {
    match e {
        ServerError::Refused { error, .. } => PlanError::Refused(error),
        e @ ServerError::NotLeader { .. } => PlanError::NotLeader {
            reason: e.to_string(),
        },
        e => PlanError::Unavailable {
            reason: e.to_string(),
        },
    }
}

/// A plan the leader's applier could not commit, by kind.
fn source_plan_error(e: SourceError) -> PlanError {
    match e {
        SourceError::Plan(PlanApplyError::Refused { error, .. }) => PlanError::Refused(error),
        SourceError::Plan(PlanApplyError::StateBehind(t)) => {
            PlanError::StateBehind { index: t.wanted }
        }
        e @ (SourceError::NotLeader | SourceError::Plan(PlanApplyError::NotLeader { .. })) => {
            PlanError::NotLeader {
                reason: e.to_string(),
            }
        }
        e => PlanError::Unavailable {
            reason: e.to_string(),
        },
    }
}

impl WorkerPlanner {
    fn write_eval(&mut self, eval: Evaluation, what: &'static str) -> Result<(), PlannerError> {
        let eval_id = eval.id;
        let writer = self.writer.clone();
        let written: Result<Index, _> = self
            .rt
            .block_on(writer.write(Command::EvalUpsert { evals: vec![eval] }));
        if let Err(e) = written {
            return Err(PlannerError::EvalWrite {
                eval_id,
                cause: plan_error(e),
            });
        }
        tracing::debug!(%eval_id, what, "eval written");
        // Progress: restart the nack timer of the delivery this worker holds.
        let source = self.source.clone();
        if let Err(e) = self.rt.block_on(source.touch(self.eval_id, self.token)) {
            tracing::debug!(eval_id = %self.eval_id, error = %e, "nack timer reset refused");
        }
        Ok(())
    }
}

impl Planner for WorkerPlanner {
    fn submit_plan(&mut self, mut plan: Plan) -> Result<Submitted, PlannerError> {
        plan.eval_token = self.token.to_string();
        let eval_id = plan.eval_id;
        self.status.set_workload(WorkloadStatus::Submitting);
        let source = self.source.clone();
        let submitted = self.rt.block_on(source.submit_plan(plan));
        self.status.set_workload(WorkloadStatus::Scheduling);
        let result = submitted.map_err(|e| PlannerError::PlanNotApplied {
            eval_id,
            cause: source_plan_error(e),
        })?;
        if result.alloc_index > 0 {
            self.last_plan_index
                .fetch_max(result.alloc_index, Ordering::SeqCst);
        }
        let refused = result.refresh_index > 0 || !result.rejected_nodes.is_empty();
        let refreshed = if refused {
            let index = result.refresh_index.max(result.alloc_index);
            self.status.set_workload(WorkloadStatus::WaitingForRaft);
            let snap = self
                .rt
                .block_on(self.state.wait_for_index(index, self.wait_limit));
            self.status.set_workload(WorkloadStatus::Scheduling);
            Some(snap.map_err(|e| PlannerError::PlanNotApplied {
                eval_id,
                cause: PlanError::StateBehind { index: e.wanted },
            })?)
        } else {
            None
        };
        Ok(Submitted { result, refreshed })
    }

    fn update_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.write_eval(eval, "update")
    }

    fn create_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.write_eval(eval, "create")
    }

    fn reblock_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        // The leader sees the blocked eval while this delivery is outstanding and reblocks
        // it under this worker's token.
        self.write_eval(eval, "reblock")
    }
}
