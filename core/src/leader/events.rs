//! Applied entries on the leader: pending evals go to the broker, blocked ones to the
//! blocked evals, whatever frees capacity or changes a node unblocks what waits for it,
//! and a node change reaches every system and sysbatch job through the coalescing of
//! their node-update evals (`coalesce.rs`).

use super::{Action, LeaderEngine, Step, cancel_command};
use crate::blocked::{
    BlockOutcome, BlockedEvals, DUPLICATE_CANCEL_REASON, OBSOLETE_CANCEL_REASON, Unblocked,
};
use crate::broker::{EvalBroker, Token};
use crate::fsm::{Event, EventPayload, EventType};
use crate::plan_check::Prioritized;
use crate::state::StateSnapshot;
use crate::types::{EvalStatus, Evaluation, Index, Timestamp};
use std::sync::Arc;

impl<P: Prioritized> LeaderEngine<P> {
    /// Acts on the events of applied entries newer than `after` (the index leadership was
    /// established at: older entries are already in the restored structures). `snap` is
    /// state at or after the batch, and batches come in log order.
    ///
    /// A node's status, eligibility, drain or health changing marks every live per-node
    /// job dirty at the entry's index. The batch's evals are enqueued first, so an eval the
    /// coalescing is still writing is known to land after every entry of the batch.
    pub fn on_events(
        &mut self,
        batch: &[Event],
        after: Index,
        snap: &StateSnapshot,
        now: Timestamp,
    ) -> Step {
        if !self.enabled {
            return Step::default();
        }
        let mut actions = Vec::new();
        let mut pending: Vec<Arc<Evaluation>> = Vec::new();
        let mut unblocked: Vec<Unblocked> = Vec::new();
        let mut obsolete: Vec<Evaluation> = Vec::new();
        let mut resumed = false;
        // The last entry of the batch that changed a node in a way per-node jobs follow.
        let mut node_changed: Option<Index> = None;
        // Per-node jobs whose allocations a drain marked to move, and the last such entry.
        let mut drained_per_node: (Vec<crate::types::JobKey>, Index) = (Vec::new(), 0);
        let mut deployments = Vec::new();
        for ev in batch.iter().filter(|e| e.index > after) {
            match &ev.payload {
                EventPayload::Deployment(d) => deployments.push(d.id),
                EventPayload::Node(n) => self.drainer.on_node(n),
                EventPayload::Allocation(a) => {
                    self.drainer.on_alloc(Some(a));
                    if ev.event_type == EventType::AllocationUpdated && a.links.get().migrate {
                        let key = crate::types::JobKey {
                            namespace: a.namespace.clone(),
                            id: a.job_id.clone(),
                        };
                        if snap
                            .job(&key)
                            .is_some_and(|j| super::coalesce::follows_nodes(j))
                            && !drained_per_node.0.contains(&key)
                        {
                            drained_per_node.0.push(key);
                        }
                        drained_per_node.1 = drained_per_node.1.max(ev.index);
                    }
                }
                EventPayload::Job(_) | EventPayload::AllocId(_) => self.drainer.on_alloc(None),
                _ => {}
            }
            if let EventPayload::Node(_) = ev.payload
                && matches!(
                    ev.event_type,
                    EventType::NodeStatus
                        | EventType::NodeEligibility
                        | EventType::NodeDrain
                        | EventType::NodeHealth
                )
            {
                node_changed = node_changed.max(Some(ev.index));
            }
            if let (EventType::EvaluationUpdated, EventPayload::Evaluation(e)) =
                (&ev.event_type, &ev.payload)
            {
                self.coalescer.seen(e);
            }
            match (&ev.event_type, &ev.payload) {
                (EventType::EvaluationUpdated, EventPayload::Evaluation(e)) => match e.status {
                    EvalStatus::Pending => pending.push(e.clone()),
                    EvalStatus::Blocked => {
                        let outcome = match self.broker.outstanding(e.id) {
                            Some(token) => {
                                self.blocked.reblock((**e).clone(), token.to_string(), now)
                            }
                            None => self.blocked.block((**e).clone(), now),
                        };
                        tracing::debug!(eval_id = %e.id, job_id = %e.job_id, ?outcome, "eval blocked");
                        if let BlockOutcome::Enqueue(u) = outcome {
                            unblocked.push(*u);
                        }
                    }
                    EvalStatus::Complete
                        if e.failed_tg_allocs.is_empty() && e.blocked_eval.is_none() =>
                    {
                        obsolete.extend(self.blocked.untrack(&e.job_key()));
                    }
                    _ => {}
                },
                (EventType::JobRegistered | EventType::JobDeregistered, EventPayload::Job(j)) => {
                    if let Err(e) = self.periodic.track(j, now) {
                        tracing::warn!(job_id = %j.id, error = %e, "periodic job not tracked");
                    }
                    if j.stop {
                        obsolete.extend(self.blocked.untrack(&j.key()));
                    }
                }
                (EventType::JobDeregistered, EventPayload::JobKey(k)) => {
                    self.periodic.untrack(k);
                    obsolete.extend(self.blocked.untrack(k));
                }
                (
                    EventType::NodeRegistration
                    | EventType::NodeStatus
                    | EventType::NodeEligibility
                    | EventType::NodeHealth
                    | EventType::NodeDrain,
                    EventPayload::Node(n),
                ) if n.is_schedulable() => {
                    unblocked.extend(self.blocked.unblock_node(n.id, n.class_key(), ev.index));
                }
                (EventType::SchedulerConfigUpdated, EventPayload::SchedulerConfig(c)) => {
                    let paused = c.pause_eval_broker;
                    if self.broker.is_paused() != paused {
                        tracing::info!(paused, "eval broker pause changed by scheduler config");
                        self.broker.set_paused(paused);
                        resumed |= !paused;
                    }
                }
                (EventType::NodeDeregistration, EventPayload::Node(n)) => {
                    self.heartbeats.remove(&n.id);
                    self.health.remove(&n.id);
                }
                (
                    EventType::PlanResult | EventType::AllocationClientUpdated,
                    EventPayload::Allocation(a),
                ) if !a.uses_resources() => {
                    if let Some(node) = snap.node(&a.node_id) {
                        unblocked.extend(self.blocked.unblock_node(
                            node.id,
                            node.class_key(),
                            ev.index,
                        ));
                    }
                }
                _ => {}
            }
        }
        let evals_ready = resumed || !pending.is_empty() || !unblocked.is_empty();
        self.broker
            .enqueue_all(pending.into_iter().map(|e| (e, None)), now);
        enqueue_unblocked(&mut self.broker, unblocked, now);
        if let Some(index) = node_changed {
            actions.extend(self.coalesce_node_change(snap, index, now));
        }
        if !drained_per_node.0.is_empty() {
            actions.extend(self.coalesce_jobs(snap, &drained_per_node.0, drained_per_node.1, now));
        }
        self.drain_due(snap, now, &mut actions);
        self.deployments
            .decide(snap, &deployments, now, &mut self.rng, &mut actions);
        take_duplicates(&mut self.blocked, now, &mut actions);
        if !obsolete.is_empty() {
            actions.push(Action::Write(
                cancel_command(obsolete, OBSOLETE_CANCEL_REASON, now),
                "cancel obsolete blocked evals",
            ));
        }
        Step {
            actions,
            evals_ready,
        }
    }

    /// After missing events: every pending eval in state goes to the broker (a no-op for
    /// those it tracks) and every blocked one to the blocked evals, and every per-node job
    /// is checked for node changes it may have missed.
    pub fn resync(&mut self, snap: &StateSnapshot, now: Timestamp) -> Step {
        if !self.enabled {
            return Step::default();
        }
        let mut actions = Vec::new();
        let mut unblocked = Vec::new();
        for e in snap.evals() {
            self.coalescer.seen(e);
            match e.status {
                EvalStatus::Pending => self.broker.enqueue(e.clone(), now),
                EvalStatus::Blocked if self.broker.outstanding(e.id).is_none() => {
                    if let BlockOutcome::Enqueue(u) = self.blocked.block((**e).clone(), now) {
                        unblocked.push(*u);
                    }
                }
                _ => {}
            }
        }
        enqueue_unblocked(&mut self.broker, unblocked, now);
        actions.extend(self.pass_over_per_node_jobs(snap, now));
        take_duplicates(&mut self.blocked, now, &mut actions);
        Step {
            actions,
            evals_ready: true,
        }
    }
}

/// Enqueues unblocked evals with the token of the delivery they were reblocked under.
pub(super) fn enqueue_unblocked(
    broker: &mut EvalBroker,
    unblocked: Vec<Unblocked>,
    now: Timestamp,
) {
    if unblocked.is_empty() {
        return;
    }
    for u in &unblocked {
        tracing::debug!(eval_id = %u.eval.id, job_id = %u.eval.job_id, "eval unblocked");
    }
    broker.enqueue_all(
        unblocked
            .into_iter()
            .map(|u| (u.eval, u.token.and_then(|t| t.parse::<Token>().ok()))),
        now,
    );
}

/// Drains duplicate blocked evals into cancel writes, one batch per write.
pub(super) fn take_duplicates(
    blocked: &mut BlockedEvals,
    now: Timestamp,
    actions: &mut Vec<Action>,
) {
    let batch = blocked.config().duplicate_batch.max(1);
    loop {
        let dups = blocked.take_duplicates(batch);
        let full = dups.len() == batch;
        if !dups.is_empty() {
            actions.push(Action::Write(
                cancel_command(dups, DUPLICATE_CANCEL_REASON, now),
                "cancel duplicate blocked evals",
            ));
        }
        if !full {
            break;
        }
    }
}
