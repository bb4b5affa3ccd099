//! The plan applier: one plan at a time from the plan queue (priority, then arrival),
//! checked with core's [`PlanApplier`] against the latest state, committed as one
//! `ApplyPlan` entry, answered to the worker that submitted it.
//!
//! Pipelined as core's applier docs describe: while one plan's Raft write is in flight, the
//! next plan is popped and checked against the latest state with the in-flight plan applied
//! on top (the overlay); its own write starts once the previous one has committed.

use super::Leadership;
use crate::clock::now;
use crate::worker::PlanApplyError;
use drover_core::broker::Token;
use drover_core::plan_check::{ApplierError, PlanApplier, Prioritized};
use drover_core::{EvalId, Index, Plan, PlanResult};
use std::fmt;
use std::sync::Arc;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A plan waiting at the applier, with the channel to answer its worker on.
pub(crate) struct PendingPlan {
    pub plan: Plan,
    pub token: Token,
    pub reply: oneshot::Sender<Result<PlanResult, PlanApplyError>>,
}

impl fmt::Debug for PendingPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingPlan")
            .field("eval_id", &self.plan.eval_id)
            .field("priority", &self.plan.priority)
            .finish_non_exhaustive()
    }
}

impl Prioritized for PendingPlan {
    fn priority(&self) -> u8 {
        self.plan.priority
    }
}

/// A plan whose `ApplyPlan` write is in flight.
struct InFlight {
    write: JoinHandle<Result<Index, PlanApplyError>>,
    /// When the applier took the plan.
    started: Instant,
    result: PlanResult,
    eval_id: EvalId,
    token: Token,
    reply: oneshot::Sender<Result<PlanResult, PlanApplyError>>,
}

pub(super) async fn run(
    shared: Arc<Leadership>,
    min_index: Index,
    mut cancel: watch::Receiver<bool>,
) {
    let mut applier = PlanApplier::new(min_index);
    let mut in_flight: Option<InFlight> = None;
    loop {
        if *cancel.borrow() {
            break;
        }
        let next = {
            let notified = shared.plans_ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let popped = shared.core.lock().await.plans.pop();
            match popped {
                Some(p) => p,
                None => {
                    if let Some(f) = in_flight.take() {
                        finish(&shared, &mut applier, f).await;
                        continue;
                    }
                    tokio::select! {
                        _ = notified => {}
                        _ = cancel.changed() => {}
                    }
                    continue;
                }
            }
        };
        apply_one(&shared, &mut applier, &mut in_flight, next).await;
    }
    if let Some(f) = in_flight.take() {
        finish(&shared, &mut applier, f).await;
    }
    tracing::debug!("plan applier stopped");
}

/// Checks one plan, waits for the previous write, and starts this plan's write.
async fn apply_one(
    shared: &Arc<Leadership>,
    applier: &mut PlanApplier,
    in_flight: &mut Option<InFlight>,
    pending: PendingPlan,
) {
    let PendingPlan { plan, token, reply } = pending;
    let eval_id = plan.eval_id;
    let started = Instant::now();
    loop {
        let outcome = loop {
            let snap = shared.state.snapshot();
            match applier.check(&snap, &plan) {
                Ok(outcome) => break outcome,
                Err(ApplierError::StateBehind { required, latest }) => {
                    let limit = shared.config.plan_wait_limit;
                    if shared.state.applied_index() >= required {
                        // Applied but not reflected in the tables (a blank or membership
                        // entry): the floor can never be reached. Start a fresh applier at
                        // what the state reflects, once no write is in flight.
                        if let Some(f) = in_flight.take() {
                            finish(shared, applier, f).await;
                        }
                        tracing::warn!(
                            required,
                            latest,
                            "plan applier floor above state; resetting it"
                        );
                        *applier = PlanApplier::new(latest.max(snap.latest_index()));
                        continue;
                    }
                    if let Err(e) = shared.state.wait_for_index(required, limit).await {
                        answer(shared, eval_id, token, reply, Err(e.into())).await;
                        return;
                    }
                }
                Err(e) => {
                    answer(shared, eval_id, token, reply, Err(e.into())).await;
                    return;
                }
            }
        };
        if outcome.has_refusals() {
            tracing::debug!(%eval_id, refused = outcome.result.rejected_nodes.len(), "plan partly refused");
        }
        let Some(apply) = outcome.apply else {
            shared.writer.metrics().plan_applied(started.elapsed(), 0);
            answer(shared, eval_id, token, reply, Ok(outcome.result)).await;
            return;
        };
        if let Some(f) = in_flight.take() {
            finish(shared, applier, f).await;
        }
        match applier.begin_commit(apply, now()) {
            Ok(command) => {
                let command = command.clone();
                let writer = shared.writer.clone();
                let write = tokio::spawn(async move {
                    writer.write(command).await.map_err(PlanApplyError::from)
                });
                *in_flight = Some(InFlight {
                    write,
                    started,
                    result: outcome.result,
                    eval_id,
                    token,
                    reply,
                });
                return;
            }
            // The check relied on a write that failed: check again.
            Err(ApplierError::NotChecked(_)) => continue,
            Err(e) => {
                answer(shared, eval_id, token, reply, Err(e.into())).await;
                return;
            }
        }
    }
}

/// Waits for the in-flight write and answers its worker.
async fn finish(shared: &Leadership, applier: &mut PlanApplier, f: InFlight) {
    let InFlight {
        write,
        started,
        mut result,
        eval_id,
        token,
        reply,
    } = f;
    let outcome = match write.await {
        Ok(r) => r,
        Err(e) => Err(PlanApplyError::WriteTask {
            reason: e.to_string(),
        }),
    };
    let answer_with = match outcome {
        Ok(index) => {
            let _ = applier.committed(index);
            result.alloc_index = index;
            let placed = result.node_allocation.values().map(Vec::len).sum();
            shared
                .writer
                .metrics()
                .plan_applied(started.elapsed(), placed);
            tracing::debug!(%eval_id, index, "plan committed");
            Ok(result)
        }
        Err(error) => {
            let _ = applier.commit_failed();
            tracing::warn!(%eval_id, %error, "plan commit failed");
            Err(error)
        }
    };
    answer(shared, eval_id, token, reply, answer_with).await;
}

async fn answer(
    shared: &Leadership,
    eval_id: EvalId,
    token: Token,
    reply: oneshot::Sender<Result<PlanResult, PlanApplyError>>,
    result: Result<PlanResult, PlanApplyError>,
) {
    {
        let mut core = shared.core.lock().await;
        if core.is_enabled() {
            // The plan left the applier: the worker's nack timer runs again.
            let _ = core.broker.resume_nack_timeout(eval_id, token, now());
        }
    }
    // The worker may have given up (shut down); nothing to do then.
    let _ = reply.send(result);
}
