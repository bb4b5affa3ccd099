//! The leader's decisions as a synchronous engine: events, heartbeats and time in, Raft
//! writes out.
//!
//! While a server leads it keeps the eval broker, the blocked evals, the plan queue, the
//! heartbeat timers, the node-health tracker and the periodic launcher, and it decides what
//! to write when something happens: an applied entry, a heartbeat, a timer that fell due.
//! [`LeaderEngine`] holds those structures and makes those decisions; the runtime
//! (`server/src/leader/`) holds the lock around it, polls [`LeaderEngine::next_deadline`],
//! runs the returned [`Action`]s through Raft and wakes whoever waits. This is openraft's
//! `Engine` / runtime split one level up, and it is what lets the tests in this module play
//! a whole leadership (failover included) with time passed in.
//!
//! Invariants:
//! - Every method is deterministic given its inputs and the seed the engine was made with:
//!   eval ids and heartbeat jitter come from the engine's seeded generator.
//! - While not [`LeaderEngine::is_enabled`] (before establishing leadership, after revoking
//!   it) the engine decides nothing: every method returns no actions.
//! - A node gets at most one eval per job from one decision ([`crate::fsm::one_eval_per_job`]
//!   on every batch of commands a heartbeat produces).
//! - A system or sysbatch job has at most one node-update eval waiting (written, not yet
//!   handed out) besides the one in flight, and every node change is seen by an eval of
//!   the job scheduled from state at or after it (`coalesce.rs`).

mod coalesce;
mod deployments;
mod drainer;
mod due;
mod evals;
mod events;
mod gc;
mod health;
mod nodes;
#[cfg(test)]
mod proptests;
mod purge;
#[cfg(test)]
mod tests;

pub use deployments::{
    RETRY_AFTER as DEPLOYMENT_RETRY_AFTER, decide as decide_deployment, revert_to,
};
pub use drainer::{DrainPlan, plan as drain_plan};
pub use evals::{node_evals, node_update_evals};
pub use gc::{GcConfig, collect_garbage};
pub use nodes::HeartbeatOutcome;
pub use purge::{NodePurge, NodePurgeError, node_purge};

use crate::blocked::{BlockedConfig, BlockedEvals, BlockedStats};
use crate::broker::{BrokerConfig, BrokerStats, EvalBroker, Token};
use crate::fsm::Command;
use crate::node_health::{
    HealthConfig, HeartbeatConfig, HeartbeatTimers, NodeHealthError, NodeHealthTracker,
};
use crate::periodic::PeriodicLauncher;
use crate::plan_check::{PlanQueue, PlanQueueStats, Prioritized};
use crate::state::StateSnapshot;
use crate::types::{EvalId, Evaluation, NodeStatus, Timestamp};
use crate::validate::Limits;
use coalesce::Coalescer;
use due::Sweeps;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::fmt;

/// The reason written on evals the broker superseded.
pub const SUPERSEDED_REASON: &str = "superseded by a newer evaluation of the job";

/// Everything the leader's structures are configured with.
#[derive(Clone, Debug, Default)]
pub struct LeaderConfig {
    pub broker: BrokerConfig,
    pub blocked: BlockedConfig,
    pub heartbeat: HeartbeatConfig,
    pub health: HealthConfig,
    pub gc: GcConfig,
    pub limits: Limits,
}

/// A Raft write the engine decided on; the runtime runs it after releasing its lock.
#[derive(Debug, PartialEq)]
pub enum Action {
    Write(Command, &'static str),
    /// Writes a failed eval and its follow-up, then acks the failed delivery.
    FailEval {
        command: Command,
        eval_id: EvalId,
        token: Token,
    },
    /// Commands committed one after the other, in order (periodic launches).
    Sequence(Vec<Command>, &'static str),
    /// Writes the node-update evals coalesced for per-node jobs (an `EvalUpsert`). Should
    /// the write fail, the runtime hands the command back to
    /// [`LeaderEngine::coalesced_evals_lost`], or the jobs could miss a node change.
    CoalescedEvals(Command),
}

impl Action {
    /// The commands this action writes, in order.
    pub fn commands(&self) -> Vec<&Command> {
        match self {
            Action::Write(c, _)
            | Action::FailEval { command: c, .. }
            | Action::CoalescedEvals(c) => {
                vec![c]
            }
            Action::Sequence(cs, _) => cs.iter().collect(),
        }
    }
}

/// What one engine call decided: the writes, and whether evals became ready (waiting
/// dequeues should look again).
#[derive(Debug, Default, PartialEq)]
pub struct Step {
    pub actions: Vec<Action>,
    pub evals_ready: bool,
}

/// The broker, blocked-eval and plan-queue counters, read together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderStats {
    pub broker: BrokerStats,
    pub blocked: BlockedStats,
    pub plan_queue: PlanQueueStats,
}

/// What establishing leadership restored, for the runtime's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Established {
    pub ready: usize,
    pub pending: usize,
    pub blocked: usize,
    pub nodes: usize,
    pub periodic: usize,
}

/// The leader's structures and the decisions over them. `P` is what the plan queue holds
/// (the runtime's plan with its reply channel).
pub struct LeaderEngine<P: Prioritized> {
    enabled: bool,
    /// Leading but cut off from a quorum for longer than the lease (see
    /// [`Self::suspend`]): every structure is kept, nothing is answered or fired.
    suspended: bool,
    pub broker: EvalBroker,
    pub blocked: BlockedEvals,
    pub plans: PlanQueue<P>,
    pub heartbeats: HeartbeatTimers,
    pub health: NodeHealthTracker,
    pub periodic: PeriodicLauncher,
    pub rng: ChaCha8Rng,
    sweeps: Sweeps,
    coalescer: Coalescer,
    drainer: drainer::Drainer,
    deployments: deployments::Watcher,
    config: LeaderConfig,
}

impl<P: Prioritized> fmt::Debug for LeaderEngine<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderEngine")
            .field("enabled", &self.enabled)
            .field("suspended", &self.suspended)
            .field("broker", &self.broker.stats().total)
            .field("plans", &self.plans.len())
            .field("heartbeats", &self.heartbeats.len())
            .finish_non_exhaustive()
    }
}

impl<P: Prioritized> LeaderEngine<P> {
    /// A disabled engine; `seed` drives every id and jitter it draws.
    pub fn new(config: LeaderConfig, seed: u64) -> Result<Self, NodeHealthError> {
        Ok(Self {
            enabled: false,
            suspended: false,
            broker: EvalBroker::new(config.broker.clone()),
            blocked: BlockedEvals::new(config.blocked),
            plans: PlanQueue::new(),
            heartbeats: HeartbeatTimers::new(config.heartbeat.clone())?,
            health: NodeHealthTracker::new(config.health.clone())?,
            periodic: PeriodicLauncher::new(&config.limits),
            rng: ChaCha8Rng::seed_from_u64(seed),
            sweeps: Sweeps::new(&config, Timestamp(0)),
            coalescer: Coalescer::default(),
            drainer: drainer::Drainer::default(),
            deployments: deployments::Watcher::default(),
            config,
        })
    }

    /// True between [`Self::establish`] and [`Self::revoke`], suspended or not.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Whether the engine gives leader-only answers now: enabled and not suspended. Node
    /// registrations and heartbeats, operator node decisions and eval dequeues wait for it.
    pub fn is_answering(&self) -> bool {
        self.enabled && !self.suspended
    }

    /// The leader has not heard from a quorum within its lease: it may have been cut off
    /// while the others elect a new leader, so it must not acknowledge nodes or hand out
    /// work, and its timers must not fire (a node that could not heartbeat to it would be
    /// marked missing). Unlike [`Self::revoke`] it keeps the broker, the blocked evals, the
    /// queued plans and every timer, and it goes on following applied entries, so a lease
    /// that lapsed because the followers were slow, not gone, costs no rebuild from state.
    /// A no-op while not enabled.
    pub fn suspend(&mut self) {
        self.suspended = self.enabled;
    }

    /// A quorum answered again within the lease: answers and timers resume. Every node
    /// with a heartbeat timer gets at least the failover TTL from `now`, as on
    /// [`Self::establish`], because nodes were refused while the engine was suspended.
    pub fn resume(&mut self, now: Timestamp) {
        if !self.suspended {
            return;
        }
        self.suspended = false;
        self.heartbeats
            .extend_all_to(now.saturating_add(self.config.heartbeat.failover_ttl));
    }

    pub fn config(&self) -> &LeaderConfig {
        &self.config
    }

    pub fn stats(&self) -> LeaderStats {
        LeaderStats {
            broker: self.broker.stats(),
            blocked: self.blocked.stats(),
            plan_queue: self.plans.stats(),
        }
    }

    /// Rebuilds every structure from `snap` and enables them: pending evals to the broker,
    /// blocked ones to the blocked evals (those already unblockable go to the broker), every
    /// node not down a heartbeat timer with the failover TTL (so no node is marked missing
    /// because leadership moved), node health, and the periodic launches. The first
    /// [`Self::run_due`] then checks every system and sysbatch job for node changes the
    /// previous leader wrote without their evals (see `coalesce.rs`).
    pub fn establish(&mut self, snap: &StateSnapshot, now: Timestamp) -> Established {
        self.broker.restore(snap.evals().cloned(), now);
        self.broker
            .set_paused(snap.scheduler_config().pause_eval_broker);
        self.blocked.set_enabled(true);
        let unblocked = self.blocked.restore(snap.evals().map(|e| (**e).clone()));
        self.broker.enqueue_all(
            unblocked
                .into_iter()
                .map(|u| (u.eval, u.token.and_then(|t| t.parse().ok()))),
            now,
        );
        self.heartbeats.clear();
        self.heartbeats.initialize_failover(
            snap.nodes()
                .filter(|n| n.status != NodeStatus::Down)
                .map(|n| n.id),
            now,
        );
        self.health.restore(snap.nodes().map(|n| &**n), now);
        for e in self.periodic.restore(snap, now) {
            tracing::warn!(job_id = %e.job, error = %e, "periodic job not tracked");
        }
        self.plans = PlanQueue::new();
        self.sweeps = Sweeps::new(&self.config, now);
        self.coalescer.clear();
        self.coalescer.schedule_pass(now);
        self.drainer.restore(snap);
        self.deployments.restore(snap);
        self.enabled = true;
        let stats = self.broker.stats();
        Established {
            ready: stats.total.ready,
            pending: stats.total.pending,
            blocked: self.blocked.stats().total_blocked,
            nodes: self.heartbeats.len(),
            periodic: self.periodic.len(),
        }
    }

    /// Disables and empties every structure; returns the plans that were waiting, whose
    /// workers the runtime answers (dropping them answers with an error).
    pub fn revoke(&mut self) -> Vec<P> {
        self.enabled = false;
        self.suspended = false;
        self.broker.set_enabled(false);
        self.blocked.set_enabled(false);
        self.heartbeats.clear();
        self.periodic.clear();
        self.coalescer.clear();
        self.drainer.clear();
        self.deployments.clear();
        self.plans.drain()
    }

    /// The earliest time anything in the engine is due; the runtime calls
    /// [`Self::run_due`] then (or sooner, when something else happens).
    pub fn next_deadline(&self) -> Option<Timestamp> {
        if !self.is_answering() {
            return None;
        }
        [
            self.drainer.next_deadline(Timestamp::ZERO),
            self.broker.next_deadline(),
            self.broker.next_cancel_sweep(),
            self.heartbeats.next_deadline(),
            self.health.next_deadline(),
            self.periodic.next_deadline(),
            self.coalescer.next_deadline(),
            self.deployments.next_deadline(),
            Some(self.sweeps.next()),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// After an ack: the evals the broker superseded, as one cancel write.
    pub fn cancel_superseded_after_ack(&mut self, now: Timestamp) -> Option<Action> {
        let batch = self.broker.cancel_batch_after_ack();
        (!batch.is_empty()).then(|| {
            Action::Write(
                cancel_command(batch, SUPERSEDED_REASON, now),
                "cancel superseded evals",
            )
        })
    }
}

impl<P: Prioritized> LeaderEngine<P> {
    /// A drain pass, if one is due at `now` (see `drainer.rs`): marks as one write per
    /// pass with an eval for each service or batch job they move (system and sysbatch jobs
    /// get theirs coalesced once the marks are applied), and a completion per node.
    fn drain_due(&mut self, snap: &StateSnapshot, now: Timestamp, actions: &mut Vec<Action>) {
        if !self.drainer.due(now) {
            return;
        }
        let plan = self.drainer.pass(snap, now);
        if !plan.migrate.is_empty() {
            let mut allocs = Vec::new();
            let mut evals = Vec::new();
            for (key, ids) in plan.migrate {
                tracing::info!(job_id = %key, allocs = ids.len(), "drain moves allocations");
                allocs.extend(ids);
                if let Some(job) = snap.job(&key).filter(|j| !coalesce::follows_nodes(j)) {
                    let id = crate::types::EvalId::from_bytes(rand::Rng::random(&mut self.rng));
                    evals.push(Evaluation::new(
                        id,
                        job,
                        crate::types::TriggeredBy::NodeDrain,
                        now,
                    ));
                }
            }
            actions.push(Action::Write(
                Command::AllocsMigrate { allocs, evals, now },
                "drain: move allocations",
            ));
        }
        for node_id in plan.complete {
            tracing::info!(%node_id, "node drain complete");
            actions.push(Action::Write(
                Command::NodeDrainComplete { node_id, now },
                "drain complete",
            ));
        }
    }
}

/// The write that cancels `evals` with `reason`.
pub fn cancel_command(evals: Vec<Evaluation>, reason: &str, now: Timestamp) -> Command {
    Command::EvalCancel {
        eval_ids: evals.into_iter().map(|e| e.id).collect(),
        reason: reason.to_string(),
        now,
    }
}
