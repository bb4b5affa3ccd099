//! The eval broker (leader only): holds pending evaluations and hands them to scheduler
//! workers, at least once, one per job at a time.
//!
//! A pure state machine. The runtime passes `now` into every call that can move time,
//! polls [`EvalBroker::next_deadline`] and calls [`EvalBroker::tick`] when it is due, and
//! passes a seeded generator where randomness is needed. Timers fire at their due time
//! whatever the tick cadence: every call taking `now` first fires the timers due by then,
//! and an eval nacked by its timer is re-enqueued as of the timer's due time.
//!
//! An eval's life in the broker:
//!
//! ```text
//!  enqueue ─┬─ wait ──────────► delayed ──due──┐
//!           └──────────────────────────────────┤
//!                     job has an outstanding eval? ── yes ─► pending ──┐ (at most one:
//!                                  │ no                                │ on arrival the
//!                                  ▼                                   │ lesser one goes
//!          ┌──────────────────► ready ◄── ack of the outstanding eval ─┤ cancelable
//!          │                      │ dequeue (token)                    └──► reaper)
//!          │ back-off due         ▼
//!       delayed ◄── nack ───── unacked ── ack ──► gone (next pending becomes ready)
//!                  (or timeout)    │
//!               past delivery limit└──► failed ── take_failed (token) ─► unacked
//! ```
//!
//! A job's next delivery waits for state at the highest modify index of the job's evals,
//! or higher if [`EvalBroker::raise_waiting`] raised it: a node change the leader folds
//! into an eval that is still waiting instead of writing one more (see `leader`).
//!
//! Failed evals keep their job's slot, as in Nomad: the leader takes them with
//! [`EvalBroker::take_failed`], which hands each out under a token like a dequeue, writes
//! the eval as failed together with its follow-up ([`failed_follow_up`]), then acks it.
//! Only that ack lets the job's next eval run. Should the write fail, the nack timer
//! returns the eval to the failed queue.

mod cancel;
mod config;
mod error;
mod follow_up;
mod hash;
mod jobs;
mod outstanding;
mod queue;
mod stats;
mod timers;
mod token;

#[cfg(test)]
mod invariants;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use config::{BrokerConfig, CANCEL_BATCH_SIZE};
pub use error::BrokerError;
pub use follow_up::{FailedFollowUp, failed_follow_up};
pub use stats::{BrokerStats, QueueCounts};
pub use token::Token;

use crate::{EvalId, EvalStatus, Evaluation, Index, SchedulerType, Timestamp};
use hash::IdMap;
use jobs::{JobSlot, JobTable, PendingKey};
use queue::ReadyQueues;
use rand::Rng;
use stats::{Bucket, Counters};
use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use timers::{DelayQueue, NackTimers};

/// One delivery of an eval to a worker.
#[derive(Clone, Debug)]
pub struct Dequeued {
    /// Shared with the broker, which keeps it to redeliver on a nack; workers read it and
    /// build their updated copy from it.
    pub eval: Arc<Evaluation>,
    /// Needed to ack, nack, or touch the nack timer of this delivery.
    pub token: Token,
    /// The state index the worker must reach before scheduling: the highest modify index
    /// of the job's evals the broker has seen, at least the eval's own.
    pub wait_index: Index,
}

/// The broker. Starts disabled; the leader enables it (see [`EvalBroker::restore`]).
#[derive(Debug)]
pub struct EvalBroker {
    config: BrokerConfig,
    enabled: bool,
    /// The operator's `pause_eval_broker`: evals are still taken in (and timers still fire)
    /// but none is handed out, as in Nomad. Independent of `enabled`, which leadership sets.
    paused: bool,
    /// Every eval the broker tracks, wherever it is. An id in here makes enqueue a no-op.
    evals: IdMap<Tracked>,
    jobs: JobTable,
    ready: ReadyQueues,
    nack_timers: NackTimers,
    delayed: DelayQueue,
    /// Evals past the delivery limit, oldest first.
    failed: VecDeque<EvalId>,
    /// Superseded evals for the reaper, oldest first.
    cancelable: VecDeque<EvalId>,
    counters: Counters,
    /// Deliveries made so far; the unique part of each [`Token`]. Never reset, so tokens
    /// stay unique across disable / enable.
    deliveries: u64,
    /// When the reaper last swept; paces [`EvalBroker::sweep_cancelable`].
    last_cancel_sweep: Option<Timestamp>,
    /// See [`BrokerStats::peak_job_evals`]; measured once each enqueue has settled.
    peak_job_evals: usize,
}

/// A tracked eval and its place in the broker.
#[derive(Debug)]
struct Tracked {
    eval: Arc<Evaluation>,
    /// The eval's job; meaningless once the eval is cancelable (it then no longer counts
    /// toward the job, whose slot may be reused).
    job: JobSlot,
    /// How many times the eval was handed out (dequeued or taken as failed).
    deliveries: u32,
    state: State,
    /// The token of the last delivery whose nack timer fired, so a late ack under it is
    /// told why it is refused.
    timed_out: Option<Token>,
}

#[derive(Debug)]
enum State {
    /// In the delay queue.
    Delayed,
    /// In its job's pending heap.
    Pending,
    /// In the ready queue of its scheduler type.
    Ready,
    Unacked(Unacked),
    /// In the failed queue.
    Failed,
    /// In the cancelable queue.
    Cancelable,
}

#[derive(Debug)]
struct Unacked {
    token: Token,
    /// When the nack timer fires; `None` while paused (plan queued at the plan applier).
    deadline: Option<Timestamp>,
    /// A newer copy of this eval to enqueue if this delivery is acked (Nomad's requeue:
    /// the eval was unblocked while still in flight). Dropped if it is nacked, because it
    /// came out of the run that failed.
    requeue: Option<Arc<Evaluation>>,
}

impl State {
    fn bucket(&self) -> Bucket {
        match self {
            State::Delayed => Bucket::Waiting,
            State::Pending => Bucket::Pending,
            State::Ready => Bucket::Ready,
            State::Unacked(_) => Bucket::Unacked,
            State::Failed => Bucket::Failed,
            State::Cancelable => Bucket::Cancelable,
        }
    }
}

impl Tracked {
    /// Moves the eval to `state`, keeping the counters in step; returns the old state.
    fn move_to(&mut self, state: State, counters: &mut Counters) -> State {
        counters.dec(self.eval.scheduler, self.state.bucket());
        counters.inc(self.eval.scheduler, state.bucket());
        std::mem::replace(&mut self.state, state)
    }
}

/// Puts an eval that may run now where it belongs: into the ready queue if its job has
/// no outstanding eval (or the eval is that outstanding one, back from a back-off), else
/// into the job's pending heap. Returns the state it is now in.
fn place(jobs: &mut JobTable, ready: &mut ReadyQueues, eval: &Evaluation, job: JobSlot) -> State {
    let job = jobs.get_mut(job);
    match job.outstanding {
        Some(other) if other != eval.id => {
            job.pending.push(PendingKey::of(eval));
            State::Pending
        }
        _ => {
            job.outstanding = Some(eval.id);
            ready.push(eval);
            State::Ready
        }
    }
}

/// When an eval may first run: the later of `now + wait` and `wait_until`.
fn due_time(eval: &Evaluation, now: Timestamp) -> Timestamp {
    let mut due = now;
    if let Some(wait) = eval.wait {
        due = due.max(now.saturating_add(wait));
    }
    if let Some(until) = eval.wait_until {
        due = due.max(until);
    }
    due
}

impl EvalBroker {
    pub fn new(config: BrokerConfig) -> Self {
        Self {
            config,
            enabled: false,
            paused: false,
            evals: IdMap::default(),
            jobs: JobTable::default(),
            ready: ReadyQueues::default(),
            nack_timers: NackTimers::default(),
            delayed: DelayQueue::default(),
            failed: VecDeque::new(),
            cancelable: VecDeque::new(),
            counters: Counters::default(),
            deliveries: 0,
            last_cancel_sweep: None,
            peak_job_evals: 0,
        }
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Whether the operator paused dequeues (scheduler config `pause_eval_broker`).
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Pauses or resumes dequeues. A paused broker still accepts and orders evals, so
    /// nothing is lost while paused and resuming hands them out in the usual order.
    pub fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }

    /// Enables the broker (this server became leader) or disables it (leadership lost).
    /// Disabling drops every eval it holds, in every state: the next leader rebuilds the
    /// broker from the state store. Outstanding tokens become useless.
    pub fn set_enabled(&mut self, enabled: bool) {
        self.enabled = enabled;
        if !enabled {
            self.evals.clear();
            self.jobs.clear();
            self.ready.clear();
            self.nack_timers.clear();
            self.delayed.clear();
            self.failed.clear();
            self.cancelable.clear();
            self.counters.clear();
            self.last_cancel_sweep = None;
            self.peak_job_evals = 0;
        }
    }

    /// Enables the broker and enqueues the evals a new leader finds in its state store:
    /// every non-terminal one except blocked ones (those belong to the blocked-evals
    /// tracker). They go in oldest first (create index, then id) whatever order they come
    /// in, so the oldest eval of each job is the one that runs first.
    pub fn restore<E: Into<Arc<Evaluation>>>(
        &mut self,
        evals: impl IntoIterator<Item = E>,
        now: Timestamp,
    ) {
        self.set_enabled(true);
        self.tick(now);
        let mut evals: Vec<Arc<Evaluation>> = evals
            .into_iter()
            .map(Into::into)
            .filter(|e| !e.is_terminal() && e.status != EvalStatus::Blocked)
            .collect();
        evals.sort_by_key(|e| (e.create_index, e.id));
        for eval in evals {
            self.enqueue_one(eval, None, now);
        }
    }

    /// Enqueues an eval. A no-op if the broker is disabled, if the eval is terminal, or if
    /// an eval with its id is already tracked.
    pub fn enqueue(&mut self, eval: impl Into<Arc<Evaluation>>, now: Timestamp) {
        self.tick(now);
        self.enqueue_one(eval.into(), None, now);
    }

    /// Enqueues several evals, each optionally with the token of a delivery in flight.
    ///
    /// An eval given with a token whose id is currently unacked under that token is held,
    /// not enqueued: it goes in when that delivery is acked and is dropped if it is nacked
    /// (it was unblocked out of a run that failed). Given with any other token while its id
    /// is tracked, it is a no-op as for [`Self::enqueue`]; untracked, it is enqueued.
    pub fn enqueue_all<E: Into<Arc<Evaluation>>>(
        &mut self,
        evals: impl IntoIterator<Item = (E, Option<Token>)>,
        now: Timestamp,
    ) {
        self.tick(now);
        for (eval, token) in evals {
            self.enqueue_one(eval.into(), token, now);
        }
    }

    fn enqueue_one(&mut self, eval: Arc<Evaluation>, token: Option<Token>, now: Timestamp) {
        if !self.enabled || eval.is_terminal() {
            return;
        }
        let slot = match self.evals.entry(eval.id) {
            Entry::Occupied(mut tracked) => {
                if let (Some(token), State::Unacked(unacked)) =
                    (token, &mut tracked.get_mut().state)
                {
                    if unacked.token == token {
                        unacked.requeue = Some(eval);
                    }
                }
                return;
            }
            Entry::Vacant(slot) => slot,
        };
        let job = self.jobs.acquire(&eval);
        let due = due_time(&eval, now);
        let state = if due > now {
            self.delayed.push(due, eval.id);
            State::Delayed
        } else {
            place(&mut self.jobs, &mut self.ready, &eval, job)
        };
        self.counters.inc(eval.scheduler, state.bucket());
        let pending = matches!(state, State::Pending);
        slot.insert(Tracked {
            eval,
            job,
            deliveries: 0,
            state,
            timed_out: None,
        });
        if pending {
            self.supersede_pending(job);
        }
        let held = self.jobs.get(job).tracked as usize;
        self.peak_job_evals = self.peak_job_evals.max(held);
    }

    /// Whether a dequeue for `types` would find an eval now. Cheap, for the runtime's
    /// blocking wait; evals whose delay is due only count after [`Self::tick`].
    pub fn has_ready(&self, types: &[SchedulerType]) -> bool {
        self.enabled && !self.paused && self.ready.has_ready(types)
    }

    /// Hands out the next eval for any of `types`, or `None` if none is ready (or the
    /// broker is disabled; see [`Self::is_enabled`]). The highest-priority head among the
    /// requested types wins; ties between types are broken at random from `rng`, which
    /// also salts the token. The delivery's nack timer starts at `now`. A paused broker
    /// hands out nothing.
    pub fn dequeue(
        &mut self,
        types: &[SchedulerType],
        now: Timestamp,
        rng: &mut impl Rng,
    ) -> Option<Dequeued> {
        if !self.enabled || self.paused {
            return None;
        }
        self.tick(now);
        let sched = self.ready.pick(types, rng)?;
        let id = self
            .ready
            .pop(sched)
            .expect("the picked ready queue has a head");
        Some(self.deliver(id, now, rng))
    }

    /// Hands out a ready or failed eval under a fresh token and starts its nack timer.
    fn deliver(&mut self, id: EvalId, now: Timestamp, rng: &mut impl Rng) -> Dequeued {
        let token = Token::generate(self.deliveries, rng);
        self.deliveries += 1;
        let deadline = now.saturating_add(self.config.nack_timeout);
        let tracked = self.evals.get_mut(&id).expect("queued evals are tracked");
        tracked.deliveries += 1;
        let unacked = Unacked {
            token,
            deadline: Some(deadline),
            requeue: None,
        };
        tracked.move_to(State::Unacked(unacked), &mut self.counters);
        self.nack_timers.insert(deadline, id);
        let wait_index = self
            .jobs
            .get(tracked.job)
            .wait_index
            .max(tracked.eval.modify_index);
        Dequeued {
            eval: tracked.eval.clone(),
            token,
            wait_index,
        }
    }

    /// Makes the eval of job `namespace`/`job_id` that is still to be handed out, if there
    /// is one, wait for state index `index`: every later delivery of the job's evals
    /// carries a wait index of at least `index`. Returns whether there was such an eval.
    ///
    /// "Still to be handed out" is the job's outstanding eval while it is ready or backing
    /// off after a nack, or an eval pending behind the outstanding one. An eval delayed by
    /// its own `wait` does not count (raising it would hold the change back for the whole
    /// delay), nor does one handed out, which may already hold its snapshot, or a failed
    /// one, which will not run again.
    ///
    /// This is how a node change joins a job's waiting eval instead of adding one
    /// (`crate::leader`'s coalescing of node-update evals): the check and the raise happen
    /// in one call, so no dequeue can come between them, and the dequeue that later hands
    /// the eval out reads the raised index.
    pub fn raise_waiting(&mut self, namespace: &str, job_id: &str, index: Index) -> bool {
        if !self.enabled {
            return false;
        }
        let Some(slot) = self.jobs.find(namespace, job_id) else {
            return false;
        };
        let job = self.jobs.get(slot);
        let waiting = !job.pending.is_empty()
            || job.outstanding.is_some_and(|id| {
                matches!(
                    self.evals.get(&id).map(|t| &t.state),
                    Some(State::Ready | State::Delayed)
                )
            });
        if waiting {
            let job = self.jobs.get_mut(slot);
            job.wait_index = job.wait_index.max(index);
        }
        waiting
    }

    /// The token of `id`'s current delivery, if it is handed out.
    pub fn outstanding(&self, id: EvalId) -> Option<Token> {
        match self.evals.get(&id)?.state {
            State::Unacked(ref unacked) => Some(unacked.token),
            _ => None,
        }
    }

    /// The earliest time a timer (a nack timeout or the end of a delay) is due, if any.
    /// The runtime calls [`Self::tick`] then.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        let nack = self.nack_timers.first().map(|(at, _)| at);
        match (nack, self.delayed.first_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires every timer due at or before `now`, in due order: unacked evals past their
    /// nack timeout are nacked, delayed evals whose time has come enter the ready path
    /// (still one per job). Each takes effect as of its own due time.
    pub fn tick(&mut self, now: Timestamp) {
        if !self.enabled {
            return;
        }
        loop {
            let nack = self.nack_timers.first().filter(|&(at, _)| at <= now);
            let delay = self.delayed.first_due().filter(|&at| at <= now);
            match (nack, delay) {
                (None, None) => break,
                // A nack timer first when both are due at the same time.
                (Some((at, id)), delay) if delay.is_none_or(|d| at <= d) => {
                    self.nack_timers.remove(at, id);
                    self.expire(id, at);
                }
                _ => {
                    let (_, id) = self.delayed.pop().expect("a due delay was peeked");
                    let tracked = self.evals.get_mut(&id).expect("delayed evals are tracked");
                    let job = tracked.job;
                    let state = place(&mut self.jobs, &mut self.ready, &tracked.eval, job);
                    let pending = matches!(state, State::Pending);
                    tracked.move_to(state, &mut self.counters);
                    if pending {
                        self.supersede_pending(job);
                    }
                }
            }
        }
    }

    /// The broker's counters, O(1).
    pub fn stats(&self) -> BrokerStats {
        BrokerStats {
            peak_job_evals: self.peak_job_evals,
            ..self.counters.snapshot()
        }
    }
}
