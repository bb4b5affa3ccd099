//! Job summaries: per group, how many allocations are queued, starting, running, complete,
//! failed, lost or unknown; plus the counts the job status is derived from.
//!
//! A summary is a pure function of the alloc and eval tables (it is rebuilt, not stored, when
//! a snapshot is restored); the store keeps it up to date incrementally on every write.

use crate::types::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct GroupSummary {
    pub queued: u32,
    pub starting: u32,
    pub running: u32,
    pub complete: u32,
    pub failed: u32,
    pub lost: u32,
    pub unknown: u32,
}

impl GroupSummary {
    fn slot(&mut self, status: ClientStatus) -> &mut u32 {
        match status {
            ClientStatus::Pending => &mut self.starting,
            ClientStatus::Running => &mut self.running,
            ClientStatus::Complete => &mut self.complete,
            ClientStatus::Failed => &mut self.failed,
            ClientStatus::Lost => &mut self.lost,
            ClientStatus::Unknown => &mut self.unknown,
        }
    }
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct JobSummary {
    pub job: JobKey,
    pub groups: BTreeMap<String, GroupSummary>,
    /// Allocations that are not terminal (desired run, client not done).
    pub live_allocs: u32,
    pub total_allocs: u32,
    /// Evaluations not yet complete, failed or canceled.
    pub open_evals: u32,
    pub total_evals: u32,
    /// The eval whose `queued_allocations` the `queued` counts come from: the job's most
    /// recently modified eval, by (modify index, id).
    pub queued_from: Option<(Index, EvalId)>,
    pub modify_index: Index,
}

impl JobSummary {
    pub fn new(job: JobKey) -> Self {
        Self {
            job,
            groups: BTreeMap::new(),
            live_allocs: 0,
            total_allocs: 0,
            open_evals: 0,
            total_evals: 0,
            queued_from: None,
            modify_index: 0,
        }
    }

    /// Adds (`sign` = 1) or removes (`sign` = -1) one allocation's contribution.
    pub(super) fn count_alloc(&mut self, alloc: &Allocation, sign: i8) {
        // Called for every allocation written: the group's name is copied only the first
        // time, and only the group touched can have become empty.
        let name = alloc.task_group.as_str();
        if !self.groups.contains_key(name) {
            self.groups.insert(name.to_owned(), GroupSummary::default());
        }
        if let Some(g) = self.groups.get_mut(name) {
            bump(g.slot(alloc.client_status), sign);
            if *g == GroupSummary::default() {
                self.groups.remove(name);
            }
        }
        bump(&mut self.total_allocs, sign);
        if !alloc.is_terminal() {
            bump(&mut self.live_allocs, sign);
        }
    }

    pub(super) fn count_eval(&mut self, eval: &Evaluation, sign: i8) {
        bump(&mut self.total_evals, sign);
        if !eval.is_terminal() {
            bump(&mut self.open_evals, sign);
        }
    }

    /// Takes the queued counts from `eval` if it is the newest eval of the job.
    pub(super) fn offer_queued(&mut self, eval: &Evaluation) {
        let key = (eval.modify_index, eval.id);
        if self.queued_from.is_none_or(|cur| key >= cur) {
            self.set_queued(Some(key), &eval.queued_allocations);
        }
    }

    pub(super) fn set_queued(&mut self, from: Option<(Index, EvalId)>, q: &BTreeMap<String, u32>) {
        self.queued_from = from;
        for g in self.groups.values_mut() {
            g.queued = 0;
        }
        for (name, n) in q {
            self.groups.entry(name.clone()).or_default().queued = *n;
        }
        self.prune_empty_groups();
    }

    /// All-zero group entries are dropped so that a summary equals its recount exactly.
    fn prune_empty_groups(&mut self) {
        self.groups.retain(|_, g| *g != GroupSummary::default());
    }

    /// Whether nothing refers to the job any more (the summary can go with a purged job).
    pub fn is_empty(&self) -> bool {
        self.total_allocs == 0 && self.total_evals == 0
    }
}

fn bump(n: &mut u32, sign: i8) {
    if sign >= 0 {
        *n += 1;
    } else {
        *n = n.saturating_sub(1);
    }
}

/// The job status Nomad derives: system and template jobs run until stopped; others run while
/// any allocation is live, are pending while an eval is open, and are dead once everything
/// they had is terminal (or they were stopped).
pub fn derive_job_status(job: &Job, summary: Option<&JobSummary>) -> JobStatus {
    if job.job_type == JobType::System || job.is_template() {
        return if job.stop {
            JobStatus::Dead
        } else {
            JobStatus::Running
        };
    }
    let Some(s) = summary else {
        return if job.stop {
            JobStatus::Dead
        } else {
            JobStatus::Pending
        };
    };
    if s.live_allocs > 0 {
        JobStatus::Running
    } else if s.open_evals > 0 {
        JobStatus::Pending
    } else if s.total_allocs > 0 || s.total_evals > 0 || job.stop {
        JobStatus::Dead
    } else {
        JobStatus::Pending
    }
}
