//! The console's copy of the cluster: loaded from the read RPCs, then kept current by the
//! event stream. Per-node and per-job allocation aggregates are maintained incrementally on
//! every change, so no view ever walks all allocations to draw a frame.

mod alloc_name;
mod alloc_wire;
mod allocs;
mod change;
mod deployments;
mod intern;
mod job_evals;
mod node_wire;
mod rows;
mod services;

pub use alloc_name::AllocName;
pub use alloc_wire::{
    JobStrings, ListedAlloc, ListedAllocPage, decode_alloc, decode_alloc_with, decode_listed_alloc,
};
pub use allocs::AllocTable;
pub use change::{
    AllocDetail, Change, ClusterInfo, DecodeError, HealthPeriods, ServerState, ServerView,
    Snapshot, alloc_row, decode_blocked, decode_event, decode_job_entry, decode_node,
    decode_worker, health_periods, job_row, role_label, scheduling_stats,
};
pub use deployments::DeploymentTable;
pub use job_evals::JobEvals;
pub use node_wire::{ListedNode, ListedNodeEntry, ListedNodePage};
pub use rows::{
    AllocRow, BlockedKindLabel, BlockedRow, DeploymentPart, EventRow, JobCounts, JobRow,
    SchedulingStats, Usage, WorkerRow, WorkerStatusLabel, job_status_text, workload_label,
};
pub use services::ServiceTable;

use drover_core::{EvalId, Evaluation, JobKey, Node, NodeId};
use std::collections::{HashMap, VecDeque};

/// How many lines of the live event stream are kept.
pub const EVENT_LOG_LEN: usize = 2_000;

/// Every object the console shows.
#[derive(Debug, Default)]
pub struct Cluster {
    pub nodes: HashMap<NodeId, Node>,
    /// With the per-node and per-job sums over it.
    pub allocs: AllocTable,
    pub jobs: HashMap<JobKey, JobRow>,
    pub evals: HashMap<EvalId, Evaluation>,
    /// Every service registration, with each allocation's.
    pub services: ServiceTable,
    /// Every deployment the servers keep, with the allocations each placed.
    pub deployments: DeploymentTable,
    pub blocked: Vec<BlockedRow>,
    pub workers: Vec<WorkerRow>,
    pub stats: SchedulingStats,
    pub info: ClusterInfo,
    /// What each server the console could ask says of itself, by server id (kept until
    /// an answer replaces it; a server that stops answering is left out of the next).
    pub server_views: Vec<ServerView>,
    pub events: VecDeque<EventRow>,
    /// The highest Raft index seen in any answer or event.
    pub index: u64,
    /// The server's node health periods, from the last load (`None`: not sent).
    pub health_periods: Option<HealthPeriods>,
    /// Invariant: equals a recount over `evals`, per job.
    job_evals: job_evals::JobEvalIndex,
    /// Invariant: equals [`HealthCounts::of`] over `nodes`. The header shows it every frame,
    /// and a walk of ten thousand nodes per frame was a tenth of a frame.
    health_counts: HealthCounts,
    next_event_seq: u64,
}

/// Nodes per health set; the console keeps it incrementally as nodes change.
pub use drover_core::node_health::HealthCounts;

impl Cluster {
    /// Replaces everything the read RPCs cover. Leader-only structures (workers, broker
    /// stats, blocked evaluations) and the event log are kept: they have their own feeds.
    pub fn load(&mut self, snapshot: Snapshot) {
        self.nodes = snapshot.nodes.into_iter().map(|n| (n.id, n)).collect();
        self.health_counts = HealthCounts::of(self.nodes.values());
        self.jobs = snapshot
            .jobs
            .into_iter()
            .map(|j| (j.key.clone(), j))
            .collect();
        self.evals = snapshot.evals.into_iter().map(|e| (e.id, e)).collect();
        self.job_evals = job_evals::JobEvalIndex::rebuild(self.evals.values());
        // Built (sums included) by the task that loaded it, not on the console's thread.
        self.allocs = snapshot.allocs;
        self.services = ServiceTable::of(snapshot.services);
        self.deployments = DeploymentTable::of(snapshot.deployments, self.allocs.values());
        self.index = self.index.max(snapshot.index);
        self.health_periods = snapshot.health_periods;
    }

    /// Applies one change; returns whether it placed a new allocation (for the placement
    /// rate). Changes older than what is held (by modify index) are ignored, so replaying
    /// events the snapshot already covers changes nothing.
    pub fn apply(&mut self, change: Change) -> bool {
        match change {
            Change::Node(node) => {
                if self
                    .nodes
                    .get(&node.id)
                    .is_none_or(|old| old.modify_index <= node.modify_index)
                {
                    self.health_counts.add(node.health, 1);
                    if let Some(old) = self.nodes.insert(node.id, *node) {
                        self.health_counts.add(old.health, -1);
                    }
                }
            }
            Change::NodeRemoved(id) => {
                if let Some(old) = self.nodes.remove(&id) {
                    self.health_counts.add(old.health, -1);
                }
            }
            Change::Alloc(row) => {
                let known = self.allocs.get(&row.id);
                if known.is_some_and(|old| old.modify_index > row.modify_index) {
                    return false;
                }
                let placed = known.is_none() && row.is_live();
                let was = known.and_then(|a| a.deployment).map(|p| p.id);
                self.deployments
                    .alloc_moved(row.id, was, row.deployment.map(|p| p.id));
                self.allocs.upsert(row);
                return placed;
            }
            Change::AllocRemoved(id) => {
                if let Some(old) = self.allocs.remove(&id) {
                    self.deployments
                        .alloc_moved(id, old.deployment.map(|p| p.id), None);
                }
            }
            Change::Eval(eval) => {
                if self
                    .evals
                    .get(&eval.id)
                    .is_none_or(|old| old.modify_index <= eval.modify_index)
                {
                    let id = eval.id;
                    let old = self.evals.insert(id, *eval);
                    self.job_evals
                        .changed(old.as_ref(), self.evals.get(&id), &self.evals);
                }
            }
            Change::EvalRemoved(id) => {
                if let Some(old) = self.evals.remove(&id) {
                    self.job_evals.changed(Some(&old), None, &self.evals);
                }
            }
            Change::Job(job) => {
                if self
                    .jobs
                    .get(&job.key)
                    .is_none_or(|old| old.modify_index <= job.modify_index)
                {
                    self.jobs.insert(job.key.clone(), job);
                }
            }
            Change::JobRemoved(key) => {
                self.deployments.remove_job(&key);
                self.jobs.remove(&key);
            }
            Change::Deployment(d) => self.deployments.upsert(*d),
            Change::Service(r) => self.services.upsert(*r),
            Change::ServiceRemoved(id) => self.services.remove(&id),
            Change::SchedulerConfig { pause_eval_broker } => {
                self.stats.broker_paused = pause_eval_broker;
            }
            Change::LogOnly => {}
        }
        false
    }

    /// Appends to the event log, numbering the line and dropping the oldest past
    /// [`EVENT_LOG_LEN`].
    pub fn log_event(&mut self, mut row: EventRow) {
        self.next_event_seq += 1;
        row.seq = self.next_event_seq;
        self.index = self.index.max(row.index);
        if self.events.len() == EVENT_LOG_LEN {
            self.events.pop_front();
        }
        self.events.push_back(row);
    }

    pub fn usage(&self, node: &NodeId) -> Usage {
        self.allocs.usage(node)
    }

    pub fn job_counts(&self, job: &JobKey) -> JobCounts {
        self.allocs.job_counts(job)
    }

    /// The evaluations a job's pending state is read from.
    pub fn job_evals(&self, job: &JobKey) -> JobEvals {
        self.job_evals.get(job)
    }

    /// Allocations of `job` its newest evaluation could not place yet.
    pub fn queued(&self, job: &JobKey) -> u32 {
        self.job_evals(job)
            .newest
            .and_then(|(_, id)| self.evals.get(&id))
            .map_or(0, |e| e.queued_allocations.values().sum())
    }

    /// Why `job` has allocations waiting: its newest evaluation with placement failures,
    /// while the job still has queued allocations or that evaluation is its newest (older
    /// failures that later placements made good are history, not a reason).
    pub fn pending_reasons(&self, job: &JobKey) -> Option<&Evaluation> {
        let picks = self.job_evals(job);
        let failed = picks.newest_failed?;
        if self.queued(job) == 0 && picks.newest != Some(failed) {
            return None;
        }
        self.evals.get(&failed.1)
    }

    /// The placement failures behind `eval`: its own, else those of the evaluation that
    /// created it (a blocked evaluation records none), else its job's current reasons.
    pub fn failures_behind<'a>(&'a self, eval: &'a Evaluation) -> Option<&'a Evaluation> {
        if !eval.failed_tg_allocs.is_empty() {
            return Some(eval);
        }
        eval.previous_eval
            .and_then(|id| self.evals.get(&id))
            .filter(|prev| !prev.failed_tg_allocs.is_empty())
            .or_else(|| self.pending_reasons(&eval.job_key()))
    }

    pub fn health_counts(&self) -> HealthCounts {
        self.health_counts
    }
}

#[cfg(test)]
mod tests;
