//! Everything that falls due with time: broker timers and its failed and superseded evals,
//! the coalescing's pass after establishing and its retries, heartbeat expiries, health
//! timers and readiness checks, periodic launches, the blocked-eval sweeps and garbage
//! collection.

use super::events::{enqueue_unblocked, take_duplicates};
use super::{Action, LeaderConfig, LeaderEngine, SUPERSEDED_REASON, Step, cancel_command, health};
use crate::broker::failed_follow_up;
use crate::fsm::Command;
use crate::plan_check::Prioritized;
use crate::state::StateSnapshot;
use crate::types::Timestamp;

/// Interval sweeps that are not due times of a core structure.
#[derive(Debug)]
pub(super) struct Sweeps {
    failed_blocked: Timestamp,
    prune: Timestamp,
    gc: Timestamp,
}

impl Sweeps {
    pub(super) fn new(config: &LeaderConfig, now: Timestamp) -> Self {
        Self {
            failed_blocked: now.saturating_add(config.blocked.failed_sweep_interval),
            prune: now.saturating_add(config.blocked.prune_interval),
            gc: now.saturating_add(config.gc.interval),
        }
    }

    pub(super) fn next(&self) -> Timestamp {
        self.failed_blocked.min(self.prune).min(self.gc)
    }
}

impl<P: Prioritized> LeaderEngine<P> {
    /// Fires everything due at `now`, deciding against `snap` (the latest applied state).
    pub fn run_due(&mut self, snap: &StateSnapshot, now: Timestamp) -> Step {
        let mut actions = Vec::new();
        if !self.is_answering() {
            return Step::default();
        }
        let before = self.broker.stats().total.ready;

        self.broker.tick(now);
        for d in self.broker.take_failed(now, &mut self.rng) {
            let fu = failed_follow_up(&d.eval, self.broker.config(), now, &mut self.rng);
            tracing::warn!(eval_id = %d.eval.id, job_id = %d.eval.job_id, follow_up = %fu.follow_up.id, "eval reached the delivery limit");
            actions.push(Action::FailEval {
                command: Command::EvalUpsert {
                    evals: vec![fu.failed, fu.follow_up],
                },
                eval_id: d.eval.id,
                token: d.token,
            });
        }
        let cancelable = self.broker.sweep_cancelable(now);
        if !cancelable.is_empty() {
            actions.push(Action::Write(
                cancel_command(cancelable, SUPERSEDED_REASON, now),
                "cancel superseded evals",
            ));
        }

        self.run_coalescer_due(snap, now, &mut actions);
        self.drain_due(snap, now, &mut actions);
        self.deployments
            .decide(snap, &[], now, &mut self.rng, &mut actions);

        for node_id in self.heartbeats.expired(now) {
            self.heartbeat_expired(snap, node_id, now, &mut actions);
        }

        let tick = self.health.tick(now);
        health::push_decisions(snap, tick.decisions, now, &mut self.rng, &mut actions);
        for node_id in tick.readiness_checks {
            self.check_readiness(snap, node_id, now, &mut actions);
        }

        if self.periodic.next_deadline().is_some_and(|d| d <= now) {
            let launches = self.periodic.tick(now, snap, &mut self.rng);
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

        if self.sweeps.failed_blocked <= now {
            self.sweeps.failed_blocked =
                now.saturating_add(self.config.blocked.failed_sweep_interval);
            let unblocked = self.blocked.unblock_failed();
            enqueue_unblocked(&mut self.broker, unblocked, now);
        }
        if self.sweeps.prune <= now {
            self.sweeps.prune = now.saturating_add(self.config.blocked.prune_interval);
            self.blocked.prune(now);
        }
        take_duplicates(&mut self.blocked, now, &mut actions);
        if self.sweeps.gc <= now {
            self.sweeps.gc = now.saturating_add(self.config.gc.interval);
            for cmd in super::collect_garbage(snap, now, &self.config.gc) {
                actions.push(Action::Write(cmd, "garbage collection"));
            }
        }
        Step {
            actions,
            evals_ready: self.broker.stats().total.ready > before,
        }
    }
}
