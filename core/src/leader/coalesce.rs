//! Node-update evals of system and sysbatch jobs, coalesced per job.
//!
//! A node joining, leaving, or changing its eligibility, drain or health can move every
//! system and sysbatch job, so each such change used to carry one eval per such job in its
//! own entry. A storm of N nodes joining wrote N evals per job: the broker ran few of them
//! (it supersedes pending evals), but state held thousands at once until the reaper
//! cancelled them. Here a job has at most one such eval waiting (written, not yet handed
//! out) besides the one a worker runs.
//!
//! # The route
//!
//! A node command no longer carries evals for per-node jobs. When the leader sees its
//! events (the entry is committed and applied at index `Y`), every live per-node job is
//! marked dirty at `Y` ([`LeaderEngine::on_events`]). For each job:
//!
//! 1. If the broker holds an eval of the job still to be handed out (ready, pending behind
//!    the one in flight, or backing off after a nack), its wait index is raised to `Y`
//!    ([`crate::broker::EvalBroker::raise_waiting`]). No write.
//! 2. Else, if an eval made here for the job is being written (its entry not seen yet),
//!    nothing: that entry lands after `Y`.
//! 3. Else one new eval is made; those of one pass go in one `EvalUpsert`
//!    ([`Action::CoalescedEvals`]). It reaches the broker through its entry's event like
//!    any eval and waits in the job's pending slot behind the one in flight.
//!
//! # Why no node is missed
//!
//! A worker schedules an eval from state at or after the wait index its dequeue hands out,
//! so a node written at `Y` is seen by any eval dequeued with a wait index of at least `Y`.
//!
//! - Case 1: the raise and the check that the eval is still waiting are one broker call,
//!   and the runtime makes every broker call under the engine's one lock. A dequeue either
//!   came first (the eval is handed out, so the check fails and case 3 applies) or comes
//!   after and reads the raised index.
//! - Case 2: events reach the engine in log order, and a batch's pending evals are enqueued
//!   (which ends their "being written" mark) before its node changes are coalesced. An
//!   eval still marked was therefore not applied by the end of the batch: its entry, and
//!   with it its modify index (a floor of its wait index), is after `Y`.
//! - Case 3: the new eval is written after `Y` was applied, so the same holds.
//!
//! A coalesced eval has no `node_id`: the system scheduler places on every eligible node of
//! the job whatever the eval names, and a blocked eval made from one with a node would be
//! tracked for that node alone.
//!
//! # Failover and failed writes
//!
//! The node's entry and the eval's are two writes, as in Nomad (`Node.Register`, then
//! `createNodeEvals`). A leader that stops between them leaves a node change that no eval
//! covers, and its successor never sees that change's events (they precede its restore).
//! So a new leader passes over every per-node job once ([`LeaderEngine::establish`] marks
//! the pass, its first `run_due` makes it), as does a leader that missed events (resync):
//! a waiting eval is raised to the state's index; a job whose last complete eval was
//! scheduled from state at or after the nodes' last change needs nothing; any other job
//! gets an eval. An eval write that fails while leading is made again after
//! [`RETRY_AFTER`] ([`LeaderEngine::coalesced_evals_lost`]).
//!
//! Jobs that are not per-node (service, batch) but have allocations on the node keep their
//! eval in the node's own entry: they are as many as the node runs, and only that atomic
//! write covers them across a failover without a pass over every job.

use super::{Action, LeaderEngine};
use crate::fsm::Command;
use crate::plan_check::Prioritized;
use crate::state::{StateSnapshot, Table};
use crate::types::{EvalId, EvalStatus, Evaluation, Index, Job, JobKey, Timestamp, TriggeredBy};
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// How long after a failed write of coalesced evals they are made again.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Whether a change to a node can change where `job` runs: live system and sysbatch jobs.
pub(super) fn follows_nodes(job: &Job) -> bool {
    job.job_type.is_per_node() && !job.stop && !job.is_template()
}

/// What the coalescing remembers between calls. Emptied when leadership is revoked.
#[derive(Debug, Default)]
pub(super) struct Coalescer {
    /// Per job, the eval made for it whose entry has not been seen applied.
    writing: BTreeMap<JobKey, EvalId>,
    /// Jobs whose eval was lost with its write, made again at `retry_at`.
    retry: BTreeSet<JobKey>,
    retry_at: Option<Timestamp>,
    /// When the pass over every per-node job is due (set by establish).
    pass_at: Option<Timestamp>,
    /// The live per-node jobs as of a jobs-table index: node changes come by the thousand
    /// in a storm, job changes rarely, and there may be many more jobs of other types.
    per_node_jobs: Option<(Index, Vec<Arc<Job>>)>,
}

/// How one job took a node change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Coalesced {
    /// Its waiting eval's wait index was raised.
    Raised,
    /// Its eval being written lands after the change.
    Writing,
    /// Its last complete eval saw every node change (passes only).
    UpToDate,
    /// A new eval was made.
    Made,
}

impl Coalescer {
    pub(super) fn clear(&mut self) {
        *self = Coalescer::default();
    }

    /// `eval`'s entry was applied: it is no longer being written.
    pub(super) fn seen(&mut self, eval: &Evaluation) {
        if self.writing.is_empty() {
            return;
        }
        let key = eval.job_key();
        if self.writing.get(&key) == Some(&eval.id) {
            self.writing.remove(&key);
        }
    }

    /// The live per-node jobs of `snap`, from the cache while its jobs table is unchanged
    /// (state at one index is always the same state).
    fn per_node_jobs(&mut self, snap: &StateSnapshot) -> Vec<Arc<Job>> {
        let at = snap.table_index(Table::Jobs);
        match &self.per_node_jobs {
            Some((cached_at, jobs)) if *cached_at == at => jobs.clone(),
            _ => {
                let jobs: Vec<Arc<Job>> =
                    snap.jobs().filter(|j| follows_nodes(j)).cloned().collect();
                self.per_node_jobs = Some((at, jobs.clone()));
                jobs
            }
        }
    }

    pub(super) fn schedule_pass(&mut self, now: Timestamp) {
        self.pass_at = Some(now);
    }

    pub(super) fn next_deadline(&self) -> Option<Timestamp> {
        match (self.retry_at, self.pass_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// How many evals made here are not yet seen applied.
    #[cfg(test)]
    pub(super) fn writing(&self) -> usize {
        self.writing.len()
    }
}

impl<P: Prioritized> LeaderEngine<P> {
    /// Nodes changed in entries up to `index` (all applied, `snap` at or after them): every
    /// per-node job takes the change, and the evals it calls for come back as one write.
    pub(super) fn coalesce_node_change(
        &mut self,
        snap: &StateSnapshot,
        index: Index,
        now: Timestamp,
    ) -> Option<Action> {
        let mut made = Vec::new();
        for job in self.coalescer.per_node_jobs(snap) {
            let how = self.coalesce_job(&job, index, now, &mut made);
            tracing::trace!(job_id = %job.id, index, ?how, "node change coalesced");
        }
        coalesced_write(made)
    }

    /// The per-node jobs `keys` changed at `index` (a drain marked their allocations to
    /// move): each takes the change as it would a node's, and the evals it calls for come
    /// back as one write.
    pub(super) fn coalesce_jobs(
        &mut self,
        snap: &StateSnapshot,
        keys: &[JobKey],
        index: Index,
        now: Timestamp,
    ) -> Option<Action> {
        let mut made = Vec::new();
        for key in keys {
            if let Some(job) = snap.job(key).filter(|j| follows_nodes(j)).cloned() {
                self.coalesce_job(&job, index, now, &mut made);
            }
        }
        coalesced_write(made)
    }

    /// The pass a new leader (or one that missed events) makes over every per-node job, as
    /// of state `snap`.
    pub(super) fn pass_over_per_node_jobs(
        &mut self,
        snap: &StateSnapshot,
        now: Timestamp,
    ) -> Option<Action> {
        let index = snap.latest_index();
        // Every node write, deletions included, moves the table's index.
        let nodes_changed = snap.table_index(Table::Nodes);
        let mut made = Vec::new();
        for job in self.coalescer.per_node_jobs(snap) {
            let up_to_date = snap
                .evals_by_job(&job.key())
                .any(|e| e.status == EvalStatus::Complete && e.snapshot_index >= nodes_changed);
            let how = if self
                .broker
                .raise_waiting(&job.namespace, job.id.as_str(), index)
            {
                Coalesced::Raised
            } else if up_to_date {
                Coalesced::UpToDate
            } else {
                self.coalesce_job(&job, index, now, &mut made)
            };
            tracing::debug!(job_id = %job.id, index, ?how, "per-node job checked for missed node changes");
        }
        coalesced_write(made)
    }

    /// One job takes a node change at `index`; a new eval, if needed, goes into `made`.
    fn coalesce_job(
        &mut self,
        job: &Job,
        index: Index,
        now: Timestamp,
        made: &mut Vec<Evaluation>,
    ) -> Coalesced {
        if self
            .broker
            .raise_waiting(&job.namespace, job.id.as_str(), index)
        {
            return Coalesced::Raised;
        }
        let key = job.key();
        if self.coalescer.writing.contains_key(&key) {
            return Coalesced::Writing;
        }
        let id = EvalId::from_bytes(self.rng.random());
        let eval = Evaluation::new(id, job, TriggeredBy::NodeUpdate, now);
        tracing::debug!(eval_id = %id, job_id = %job.id, index, "node-update eval made for coalesced node changes");
        self.coalescer.writing.insert(key, id);
        made.push(eval);
        Coalesced::Made
    }

    /// The write of an [`Action::CoalescedEvals`] failed: its evals may never exist, so
    /// their jobs get new ones after [`RETRY_AFTER`] (a job whose eval was seen applied
    /// meanwhile, or got another, is left as it is).
    pub fn coalesced_evals_lost(&mut self, command: &Command, now: Timestamp) {
        let Command::EvalUpsert { evals } = command else {
            return;
        };
        if !self.enabled {
            return;
        }
        for eval in evals {
            let key = eval.job_key();
            if self.coalescer.writing.get(&key) == Some(&eval.id) {
                tracing::warn!(eval_id = %eval.id, job_id = %eval.job_id, "coalesced node-update eval not written; making another");
                self.coalescer.writing.remove(&key);
                self.coalescer.retry.insert(key);
                self.coalescer.retry_at = Some(now.saturating_add(RETRY_AFTER));
            }
        }
    }

    /// The retries and the pass that are due at `now`.
    pub(super) fn run_coalescer_due(
        &mut self,
        snap: &StateSnapshot,
        now: Timestamp,
        actions: &mut Vec<Action>,
    ) {
        if self.coalescer.pass_at.is_some_and(|at| at <= now) {
            self.coalescer.pass_at = None;
            actions.extend(self.pass_over_per_node_jobs(snap, now));
        }
        if self.coalescer.retry_at.is_some_and(|at| at <= now) {
            self.coalescer.retry_at = None;
            let index = snap.latest_index();
            let mut made = Vec::new();
            for key in std::mem::take(&mut self.coalescer.retry) {
                if let Some(job) = snap.job(&key).filter(|j| follows_nodes(j)) {
                    self.coalesce_job(job, index, now, &mut made);
                }
            }
            actions.extend(coalesced_write(made));
        }
    }
}

/// The one write carrying the evals a pass made, if it made any.
fn coalesced_write(made: Vec<Evaluation>) -> Option<Action> {
    (!made.is_empty()).then_some(Action::CoalescedEvals(Command::EvalUpsert { evals: made }))
}
