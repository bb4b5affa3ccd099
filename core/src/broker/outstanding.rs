//! Calls on a delivery in flight: ack, nack, the nack timer, and the failed queue.

use super::{Dequeued, EvalBroker, PendingKey, State, Tracked, place};
use crate::broker::BrokerError;
use crate::broker::stats::Bucket;
use crate::broker::token::Token;
use crate::{EvalId, Timestamp};
use rand::Rng;
use std::collections::hash_map::Entry;

/// Whether `token` is the current delivery of the tracked eval `id`, and if not, why.
fn check_token(tracked: &Tracked, id: EvalId, token: Token) -> Result<(), BrokerError> {
    match &tracked.state {
        State::Unacked(unacked) if unacked.token == token => Ok(()),
        _ if tracked.timed_out == Some(token) => Err(BrokerError::NackTimeoutReached(id)),
        State::Unacked(_) => Err(BrokerError::TokenMismatch(id)),
        _ => Err(BrokerError::NotOutstanding(id)),
    }
}

impl EvalBroker {
    /// Acknowledges a delivery: the eval is done and leaves the broker. The job's pending
    /// evals then collapse: the best one (highest priority, then highest modify index)
    /// becomes ready and the rest become cancelable (see [`Self::take_cancelable`]). A
    /// requeue held for this delivery is enqueued last.
    ///
    /// Refused if the broker is disabled, the eval is not handed out, the token is not the
    /// current delivery's, or the delivery's nack timer fired by `now` (the broker already
    /// nacked it, so another worker may be running it).
    pub fn ack(&mut self, id: EvalId, token: Token, now: Timestamp) -> Result<(), BrokerError> {
        self.tick_enabled(now)?;
        // One lookup: check and remove through the same entry.
        let tracked = match self.evals.entry(id) {
            Entry::Occupied(entry) => {
                check_token(entry.get(), id, token)?;
                entry.remove()
            }
            Entry::Vacant(_) => return Err(BrokerError::NotOutstanding(id)),
        };
        self.counters.dec(tracked.eval.scheduler, Bucket::Unacked);
        let State::Unacked(unacked) = tracked.state else {
            unreachable!("checked above")
        };
        if let Some(deadline) = unacked.deadline {
            self.nack_timers.remove(deadline, id);
        }
        self.jobs.get_mut(tracked.job).outstanding = None;
        self.collapse_pending(tracked.job);
        self.jobs.release(tracked.job);
        if let Some(requeue) = unacked.requeue {
            self.enqueue_one(requeue, None, now);
        }
        Ok(())
    }

    /// Keeps the best pending eval of a job whose outstanding eval just left and makes it
    /// ready. The others were already superseded as they arrived
    /// ([`Self::supersede_pending`]), so at most one waits here.
    fn collapse_pending(&mut self, slot: super::JobSlot) {
        self.supersede_pending(slot);
        let Some(best) = self.jobs.get_mut(slot).pending.pop() else {
            return;
        };
        let tracked = self
            .evals
            .get_mut(&best.id)
            .expect("pending evals are tracked");
        let state = place(&mut self.jobs, &mut self.ready, &tracked.eval, slot);
        tracked.move_to(state, &mut self.counters);
    }

    /// Leaves only the best pending eval of a job (highest priority, then highest modify
    /// index) in its pending heap and marks every other one cancelable; returns the
    /// survivor. Run whenever an eval joins the heap, so a storm of evals for one job (a
    /// thousand nodes registering while it is scheduled) holds one pending eval, not a
    /// thousand: the survivor is scheduled against the state as it is when it runs, which
    /// includes whatever the others were made for.
    pub(super) fn supersede_pending(&mut self, slot: super::JobSlot) -> Option<PendingKey> {
        let job = self.jobs.get_mut(slot);
        let best = job.pending.pop()?;
        for PendingKey { id, .. } in job.pending.drain() {
            let tracked = self.evals.get_mut(&id).expect("pending evals are tracked");
            tracked.move_to(State::Cancelable, &mut self.counters);
            self.cancelable.push_back(id);
            // Never the job's last eval: `best` and the outstanding one still count.
            job.tracked -= 1;
        }
        job.pending.push(best);
        Some(best)
    }

    /// Negatively acknowledges a delivery: the worker could not finish it. The eval stays
    /// its job's outstanding eval and comes back after [`super::BrokerConfig::nack_delay`],
    /// or goes to the failed queue once it has been delivered `delivery_limit` times. A
    /// requeue held for this delivery is dropped.
    pub fn nack(&mut self, id: EvalId, token: Token, now: Timestamp) -> Result<(), BrokerError> {
        self.check_delivery(id, token, now)?;
        self.nack_delivery(id, now);
        Ok(())
    }

    /// Restarts the nack timer of a delivery at `now`: the worker is making progress (it
    /// wrote, created or reblocked an eval under this token). While the timer is paused
    /// this only confirms the delivery; resuming restarts the full timeout anyway.
    pub fn outstanding_reset(
        &mut self,
        id: EvalId,
        token: Token,
        now: Timestamp,
    ) -> Result<(), BrokerError> {
        self.check_delivery(id, token, now)?;
        let timeout = self.config.nack_timeout;
        let unacked = self.unacked_mut(id);
        if let Some(old) = unacked.deadline {
            let new = now.saturating_add(timeout);
            unacked.deadline = Some(new);
            self.nack_timers.remove(old, id);
            self.nack_timers.insert(new, id);
        }
        Ok(())
    }

    /// Stops the nack timer of a delivery while its plan waits at the plan applier, a
    /// queue whose length the worker does not control. Pausing twice is harmless.
    pub fn pause_nack_timeout(
        &mut self,
        id: EvalId,
        token: Token,
        now: Timestamp,
    ) -> Result<(), BrokerError> {
        self.check_delivery(id, token, now)?;
        if let Some(old) = self.unacked_mut(id).deadline.take() {
            self.nack_timers.remove(old, id);
        }
        Ok(())
    }

    /// Restarts the nack timer of a delivery, with a full timeout from `now`, once its
    /// plan has left the plan applier.
    pub fn resume_nack_timeout(
        &mut self,
        id: EvalId,
        token: Token,
        now: Timestamp,
    ) -> Result<(), BrokerError> {
        self.check_delivery(id, token, now)?;
        let new = now.saturating_add(self.config.nack_timeout);
        if let Some(old) = self.unacked_mut(id).deadline.replace(new) {
            self.nack_timers.remove(old, id);
        }
        self.nack_timers.insert(new, id);
        Ok(())
    }

    /// Hands every failed eval to the leader, each under a token with a running nack
    /// timer, as a dequeue would. The leader writes the eval as failed together with its
    /// follow-up ([`super::failed_follow_up`]) and then acks it, which releases the job
    /// to its next eval. If the write never happens, the nack timer puts the eval back in
    /// the failed queue. Empty when the broker is disabled.
    pub fn take_failed(&mut self, now: Timestamp, rng: &mut impl Rng) -> Vec<Dequeued> {
        if !self.enabled {
            return Vec::new();
        }
        self.tick(now);
        let ids: Vec<EvalId> = self.failed.drain(..).collect();
        ids.into_iter()
            .map(|id| self.deliver(id, now, rng))
            .collect()
    }

    /// Fires the due timers, then checks that `token` is the current delivery of `id`.
    fn check_delivery(
        &mut self,
        id: EvalId,
        token: Token,
        now: Timestamp,
    ) -> Result<(), BrokerError> {
        self.tick_enabled(now)?;
        match self.evals.get(&id) {
            Some(tracked) => check_token(tracked, id, token),
            None => Err(BrokerError::NotOutstanding(id)),
        }
    }

    /// Refuses calls on a disabled broker; fires the timers due by `now` otherwise.
    fn tick_enabled(&mut self, now: Timestamp) -> Result<(), BrokerError> {
        if !self.enabled {
            return Err(BrokerError::Disabled);
        }
        self.tick(now);
        Ok(())
    }

    fn unacked_mut(&mut self, id: EvalId) -> &mut super::Unacked {
        match self.evals.get_mut(&id).map(|t| &mut t.state) {
            Some(State::Unacked(unacked)) => unacked,
            _ => unreachable!("checked by check_delivery"),
        }
    }

    /// The nack timer of `id` fired at `at` (already removed from the timers).
    pub(super) fn expire(&mut self, id: EvalId, at: Timestamp) {
        let tracked = self.evals.get_mut(&id).expect("timed evals are tracked");
        if let State::Unacked(unacked) = &tracked.state {
            tracked.timed_out = Some(unacked.token);
        }
        self.nack_delivery(id, at);
    }

    /// Takes an unacked eval back as of `at`: into the failed queue past the delivery
    /// limit, else ready again after the back-off (keeping its job's slot meanwhile).
    fn nack_delivery(&mut self, id: EvalId, at: Timestamp) {
        let tracked: &mut Tracked = self.evals.get_mut(&id).expect("unacked evals are tracked");
        let state = if tracked.deliveries >= self.config.delivery_limit {
            self.failed.push_back(id);
            State::Failed
        } else {
            let delay = self.config.nack_delay(tracked.deliveries);
            if delay.is_zero() {
                place(&mut self.jobs, &mut self.ready, &tracked.eval, tracked.job)
            } else {
                self.delayed.push(at.saturating_add(delay), id);
                State::Delayed
            }
        };
        let State::Unacked(unacked) = tracked.move_to(state, &mut self.counters) else {
            unreachable!("only unacked evals are nacked")
        };
        if let Some(deadline) = unacked.deadline {
            self.nack_timers.remove(deadline, id);
        }
    }
}
