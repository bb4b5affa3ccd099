//! The leader loop: one task that feeds the broker and blocked evals from applied entries
//! and fires every timer of the leader's core at its due time.
//!
//! Each turn waits for the first of: a batch of applied-entry events, the earliest due time
//! of broker / heartbeats / health / periodic / sweeps, a wake-up, or cancellation. It then
//! runs everything due ([`Leadership::run_due`]). Raft writes decided under the lock are
//! collected as [`Action`]s and run after it is released, each in its own task, so a slow
//! write never stalls the loop.

use super::{LeaderCore, Leadership, gc, health, heartbeat};
use crate::write::now;
use drover_core::blocked::{BlockOutcome, DUPLICATE_CANCEL_REASON, Unblocked};
use drover_core::broker::{Token, failed_follow_up};
use drover_core::fsm::{Command, Event, EventPayload, EventType};
use drover_core::state::StateSnapshot;
use drover_core::{EvalId, EvalStatus, Evaluation, Index, Timestamp};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// The reason written on evals the broker superseded.
pub(crate) const SUPERSEDED_REASON: &str = "superseded by a newer evaluation of the job";

/// A Raft write the leader decided on while holding the core lock.
#[derive(Debug)]
pub(crate) enum Action {
    Write(Command, &'static str),
    /// Writes a failed eval and its follow-up, then acks the failed delivery.
    FailEval {
        command: Command,
        eval_id: EvalId,
        token: Token,
    },
    /// Periodic launches, committed in order.
    Sequence(Vec<Command>, &'static str),
}

pub(crate) fn cancel_command(evals: Vec<Evaluation>, reason: &str, now: Timestamp) -> Command {
    Command::EvalCancel {
        eval_ids: evals.into_iter().map(|e| e.id).collect(),
        reason: reason.to_string(),
        now,
    }
}

/// Interval sweeps that are not due times of a core structure.
#[derive(Debug)]
pub(super) struct Sweeps {
    failed_blocked: Timestamp,
    prune: Timestamp,
    gc: Timestamp,
}

impl Sweeps {
    fn new(shared: &Leadership, now: Timestamp) -> Self {
        Self {
            failed_blocked: now.saturating_add(shared.config.blocked.failed_sweep_interval),
            prune: now.saturating_add(shared.config.blocked.prune_interval),
            gc: now.saturating_add(shared.config.gc.interval),
        }
    }

    fn next(&self) -> Timestamp {
        self.failed_blocked.min(self.prune).min(self.gc)
    }
}

pub(super) async fn run(
    shared: Arc<Leadership>,
    mut events: broadcast::Receiver<Arc<Vec<Event>>>,
    after: Index,
    mut cancel: watch::Receiver<bool>,
) {
    let mut sweeps = Sweeps::new(&shared, now());
    loop {
        if *cancel.borrow() {
            break;
        }
        let due = shared.next_deadline(&sweeps).await;
        let sleep = due.since(now()).max(Duration::from_millis(1));
        tokio::select! {
            _ = cancel.changed() => {}
            batch = events.recv() => match batch {
                Ok(batch) => shared.on_events(&batch, after).await,
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "leader fell behind the event stream; resyncing");
                    shared.resync().await;
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = tokio::time::sleep(sleep) => {}
            _ = shared.wake.notified() => {}
        }
        shared.run_due(&mut sweeps).await;
    }
    tracing::debug!("leader loop stopped");
}

/// Enqueues unblocked evals with the token of the delivery they were reblocked under.
pub(crate) fn enqueue_unblocked(core: &mut LeaderCore, unblocked: Vec<Unblocked>, now: Timestamp) {
    if unblocked.is_empty() {
        return;
    }
    for u in &unblocked {
        tracing::debug!(eval_id = %u.eval.id, job_id = %u.eval.job_id, "eval unblocked");
    }
    core.broker.enqueue_all(
        unblocked
            .into_iter()
            .map(|u| (u.eval, u.token.and_then(|t| t.parse::<Token>().ok()))),
        now,
    );
}

/// Drains duplicate blocked evals into cancel writes, one batch per write.
fn take_duplicates(core: &mut LeaderCore, now: Timestamp, actions: &mut Vec<Action>) {
    let batch = core.blocked.config().duplicate_batch.max(1);
    loop {
        let dups = core.blocked.take_duplicates(batch);
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

impl Leadership {
    /// The earliest time anything in the core is due.
    async fn next_deadline(&self, sweeps: &Sweeps) -> Timestamp {
        let core = self.core.lock().await;
        [
            core.broker.next_deadline(),
            core.broker.next_cancel_sweep(),
            core.heartbeats.next_deadline(),
            core.health.next_deadline(),
            core.periodic.next_deadline(),
            Some(sweeps.next()),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or_else(|| now().saturating_add(Duration::from_secs(60)))
    }

    /// Acts on the events of applied entries newer than `after`.
    async fn on_events(&self, batch: &[Event], after: Index) {
        let now = now();
        let mut snap: Option<StateSnapshot> = None;
        let mut actions = Vec::new();
        let mut guard = self.core.lock().await;
        if !guard.enabled {
            return;
        }
        let core = &mut *guard;
        let mut pending: Vec<Arc<Evaluation>> = Vec::new();
        let mut unblocked: Vec<Unblocked> = Vec::new();
        let mut resumed = false;
        for ev in batch.iter().filter(|e| e.index > after) {
            match (&ev.event_type, &ev.payload) {
                (EventType::EvaluationUpdated, EventPayload::Evaluation(e)) => match e.status {
                    EvalStatus::Pending => pending.push(e.clone()),
                    EvalStatus::Blocked => {
                        let outcome = match core.broker.outstanding(e.id) {
                            Some(token) => {
                                core.blocked.reblock((**e).clone(), token.to_string(), now)
                            }
                            None => core.blocked.block((**e).clone(), now),
                        };
                        tracing::debug!(eval_id = %e.id, job_id = %e.job_id, ?outcome, "eval blocked");
                        if let BlockOutcome::Enqueue(u) = outcome {
                            unblocked.push(*u);
                        }
                    }
                    EvalStatus::Complete
                        if e.failed_tg_allocs.is_empty() && e.blocked_eval.is_none() =>
                    {
                        core.blocked.untrack(&e.job_key());
                    }
                    _ => {}
                },
                (EventType::JobRegistered | EventType::JobDeregistered, EventPayload::Job(j)) => {
                    if let Err(e) = core.periodic.track(j, now) {
                        tracing::warn!(job_id = %j.id, error = %e, "periodic job not tracked");
                    }
                    if j.stop {
                        core.blocked.untrack(&j.key());
                    }
                }
                (EventType::JobDeregistered, EventPayload::JobKey(k)) => {
                    core.periodic.untrack(k);
                    core.blocked.untrack(k);
                }
                (
                    EventType::NodeRegistration
                    | EventType::NodeStatus
                    | EventType::NodeEligibility
                    | EventType::NodeHealth
                    | EventType::NodeDrain,
                    EventPayload::Node(n),
                ) if n.is_schedulable() => {
                    unblocked.extend(core.blocked.unblock_node(n.id, n.class_key(), ev.index));
                }
                (EventType::SchedulerConfigUpdated, EventPayload::SchedulerConfig(c)) => {
                    let paused = c.pause_eval_broker;
                    if core.broker.is_paused() != paused {
                        tracing::info!(paused, "eval broker pause changed by scheduler config");
                        core.broker.set_paused(paused);
                        resumed |= !paused;
                    }
                }
                (EventType::NodeDeregistration, EventPayload::Node(n)) => {
                    core.heartbeats.remove(&n.id);
                    core.health.remove(&n.id);
                }
                (
                    EventType::PlanResult | EventType::AllocationClientUpdated,
                    EventPayload::Allocation(a),
                ) if !a.uses_resources() => {
                    let snap = snap.get_or_insert_with(|| self.state.snapshot());
                    if let Some(node) = snap.node(&a.node_id) {
                        unblocked.extend(core.blocked.unblock_node(
                            node.id,
                            node.class_key(),
                            ev.index,
                        ));
                    }
                }
                _ => {}
            }
        }
        let woke = resumed || !pending.is_empty() || !unblocked.is_empty();
        core.broker
            .enqueue_all(pending.into_iter().map(|e| (e, None)), now);
        enqueue_unblocked(core, unblocked, now);
        take_duplicates(core, now, &mut actions);
        drop(guard);
        if woke {
            self.evals_ready.notify_waiters();
        }
        self.run_actions(actions);
    }

    /// After missing events: every pending eval in state goes to the broker (a no-op for
    /// those it tracks) and every blocked one to the blocked evals.
    async fn resync(&self) {
        let now = now();
        let snap = self.state.snapshot();
        let mut actions = Vec::new();
        let mut guard = self.core.lock().await;
        if !guard.enabled {
            return;
        }
        let core = &mut *guard;
        let mut unblocked = Vec::new();
        for e in snap.evals() {
            match e.status {
                EvalStatus::Pending => core.broker.enqueue(e.clone(), now),
                EvalStatus::Blocked if core.broker.outstanding(e.id).is_none() => {
                    if let BlockOutcome::Enqueue(u) = core.blocked.block((**e).clone(), now) {
                        unblocked.push(*u);
                    }
                }
                _ => {}
            }
        }
        enqueue_unblocked(core, unblocked, now);
        take_duplicates(core, now, &mut actions);
        drop(guard);
        self.evals_ready.notify_waiters();
        self.run_actions(actions);
    }

    /// Fires everything due now: broker timers and its failed and cancelable evals,
    /// heartbeat expiries, health timers and readiness checks, periodic launches, the
    /// blocked-eval sweeps and GC.
    async fn run_due(&self, sweeps: &mut Sweeps) {
        let now = now();
        let snap = self.state.snapshot();
        let mut actions = Vec::new();
        let mut guard = self.core.lock().await;
        if !guard.enabled {
            return;
        }
        let core = &mut *guard;
        let before = core.broker.stats().total.ready;

        core.broker.tick(now);
        for d in core.broker.take_failed(now, &mut core.rng) {
            let fu = failed_follow_up(&d.eval, core.broker.config(), now, &mut core.rng);
            tracing::warn!(eval_id = %d.eval.id, job_id = %d.eval.job_id, follow_up = %fu.follow_up.id, "eval reached the delivery limit");
            actions.push(Action::FailEval {
                command: Command::EvalUpsert {
                    evals: vec![fu.failed, fu.follow_up],
                },
                eval_id: d.eval.id,
                token: d.token,
            });
        }
        let cancelable = core.broker.sweep_cancelable(now);
        if !cancelable.is_empty() {
            actions.push(Action::Write(
                cancel_command(cancelable, SUPERSEDED_REASON, now),
                "cancel superseded evals",
            ));
        }

        for node_id in core.heartbeats.expired(now) {
            heartbeat::on_expired(core, &snap, node_id, now, &mut actions);
        }

        let tick = core.health.tick(now);
        health::push_decisions(&snap, tick.decisions, now, &mut actions);
        for node_id in tick.readiness_checks {
            health::check_readiness(core, &snap, node_id, now, &mut actions);
        }

        if core.periodic.next_deadline().is_some_and(|d| d <= now) {
            let launches = core.periodic.tick(now, &snap, &mut core.rng);
            if !launches.is_empty() {
                for l in &launches {
                    tracing::info!(job_id = %l.parent, child = %l.job.id, "periodic launch");
                }
                actions.push(Action::Sequence(
                    launches.into_iter().map(|l| l.into_command(now)).collect(),
                    "periodic launch",
                ));
            }
        }

        if sweeps.failed_blocked <= now {
            sweeps.failed_blocked = now.saturating_add(self.config.blocked.failed_sweep_interval);
            let unblocked = core.blocked.unblock_failed();
            enqueue_unblocked(core, unblocked, now);
        }
        if sweeps.prune <= now {
            sweeps.prune = now.saturating_add(self.config.blocked.prune_interval);
            core.blocked.prune(now);
        }
        take_duplicates(core, now, &mut actions);
        if sweeps.gc <= now {
            sweeps.gc = now.saturating_add(self.config.gc.interval);
            for cmd in gc::collect(&snap, now, &self.config.gc) {
                actions.push(Action::Write(cmd, "garbage collection"));
            }
        }
        let woke = core.broker.stats().total.ready > before;
        drop(guard);
        if woke {
            self.evals_ready.notify_waiters();
        }
        self.run_actions(actions);
    }

    /// Runs the writes decided under the lock, each in its own task.
    pub(crate) fn run_actions(self: &Leadership, actions: Vec<Action>) {
        for action in actions {
            let writer = self.writer.clone();
            match action {
                Action::Write(cmd, what) => {
                    tokio::spawn(async move {
                        writer.write_logged(cmd, what).await;
                    });
                }
                Action::Sequence(cmds, what) => {
                    tokio::spawn(async move {
                        for cmd in cmds {
                            writer.write_logged(cmd, what).await;
                        }
                    });
                }
                Action::FailEval {
                    command,
                    eval_id,
                    token,
                } => {
                    if let Some(me) = self.me.upgrade() {
                        super::reaper::spawn_fail_eval(me, command, eval_id, token);
                    }
                }
            }
        }
    }
}
