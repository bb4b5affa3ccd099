//! The leader as an in-process [`EvalSource`] for this server's workers.

use super::Leadership;
use super::plan_applier::PendingPlan;
use crate::clock::now;
use crate::worker::{BoxFuture, EvalSource, SourceError};
use drover_core::broker::{Dequeued, Token};
use drover_core::{EvalId, Plan, PlanResult, SchedulerType};
use std::time::Duration;
use tokio::sync::oneshot;

impl Leadership {
    async fn dequeue_inner(
        &self,
        types: &[SchedulerType],
        timeout: Duration,
    ) -> Result<Option<Dequeued>, SourceError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // Registered before looking, so an enqueue between the look and the wait is
            // not missed.
            let notified = self.evals_ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut guard = self.core.lock().await;
                let core = &mut *guard;
                if core.is_answering()
                    && let Some(d) = core.broker.dequeue(types, now(), &mut core.rng)
                {
                    return Ok(Some(d));
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(None);
            }
        }
    }

    async fn ack_inner(&self, eval_id: EvalId, token: Token) -> Result<(), SourceError> {
        let mut core = self.core.lock().await;
        if !core.is_enabled() {
            return Err(SourceError::NotLeader);
        }
        let acked_at = now();
        core.broker.ack(eval_id, token, acked_at)?;
        // The reaper's batch after each ack: cancellations paced by scheduler progress.
        let cancel = core.cancel_superseded_after_ack(now());
        drop(core);
        if let Some(eval) = self.state.snapshot().eval(&eval_id) {
            let took = acked_at.since(eval.create_time);
            self.writer
                .metrics()
                .eval_acked(eval.scheduler.as_str(), took);
        }
        self.evals_ready.notify_waiters();
        self.run_actions(cancel.into_iter().collect());
        Ok(())
    }

    async fn nack_inner(&self, eval_id: EvalId, token: Token) -> Result<(), SourceError> {
        let mut core = self.core.lock().await;
        if !core.is_enabled() {
            return Err(SourceError::NotLeader);
        }
        core.broker.nack(eval_id, token, now())?;
        drop(core);
        // The nack may have made it ready again, or failed it: the loop takes a look.
        self.wake.notify_one();
        self.evals_ready.notify_waiters();
        Ok(())
    }

    async fn touch_inner(&self, eval_id: EvalId, token: Token) -> Result<(), SourceError> {
        let mut core = self.core.lock().await;
        if !core.is_enabled() {
            return Err(SourceError::NotLeader);
        }
        core.broker.outstanding_reset(eval_id, token, now())?;
        Ok(())
    }

    async fn submit_inner(&self, plan: Plan) -> Result<PlanResult, SourceError> {
        let token: Token = plan
            .eval_token
            .parse()
            .map_err(|_| SourceError::BadToken(plan.eval_token.clone()))?;
        let (reply, rx) = oneshot::channel();
        {
            let mut core = self.core.lock().await;
            if !core.is_enabled() {
                return Err(SourceError::NotLeader);
            }
            // Its wait at the applier is not the worker's fault: pause the nack timer.
            core.broker.pause_nack_timeout(plan.eval_id, token, now())?;
            core.plans.push(PendingPlan { plan, token, reply });
        }
        self.plans_ready.notify_one();
        match rx.await {
            Ok(result) => result.map_err(SourceError::Plan),
            Err(_) => Err(SourceError::NotLeader),
        }
    }
}

impl EvalSource for Leadership {
    fn dequeue<'a>(
        &'a self,
        types: &'a [SchedulerType],
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Option<Dequeued>, SourceError>> {
        Box::pin(self.dequeue_inner(types, timeout))
    }

    fn ack(&self, eval_id: EvalId, token: Token) -> BoxFuture<'_, Result<(), SourceError>> {
        Box::pin(self.ack_inner(eval_id, token))
    }

    fn nack(&self, eval_id: EvalId, token: Token) -> BoxFuture<'_, Result<(), SourceError>> {
        Box::pin(self.nack_inner(eval_id, token))
    }

    fn touch(&self, eval_id: EvalId, token: Token) -> BoxFuture<'_, Result<(), SourceError>> {
        Box::pin(self.touch_inner(eval_id, token))
    }

    fn submit_plan(&self, plan: Plan) -> BoxFuture<'_, Result<PlanResult, SourceError>> {
        Box::pin(self.submit_inner(plan))
    }
}
