//! Which evaluations answer "why is this job pending": the job's newest evaluation, whose
//! queued counts are the job's queued allocations (the server's job summary takes them
//! from the same one), and its newest evaluation that recorded placement failures. A
//! blocked evaluation records none itself: the evaluation that created it holds them.

use drover_core::{EvalId, Evaluation, JobKey};
use std::collections::HashMap;

/// An evaluation's place in a job's history: (modify index, id), as the server orders it.
type EvalKey = (u64, EvalId);

fn key_of(e: &Evaluation) -> EvalKey {
    (e.modify_index, e.id)
}

/// The two evaluations of one job the console reads its pending state from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobEvals {
    pub newest: Option<EvalKey>,
    /// The newest with a non-empty `failed_tg_allocs`.
    pub newest_failed: Option<EvalKey>,
}

impl JobEvals {
    /// Takes `eval` into account, as it is now stored.
    pub fn offer(&mut self, eval: &Evaluation) {
        let key = key_of(eval);
        if self.newest.is_none_or(|cur| key >= cur) {
            self.newest = Some(key);
        }
        if !eval.failed_tg_allocs.is_empty() && self.newest_failed.is_none_or(|cur| key >= cur) {
            self.newest_failed = Some(key);
        }
    }

    /// Whether the change from `old` to `new` (`None`: removed) can move either pick back
    /// to an older evaluation, which only a recount finds. Updates only move an
    /// evaluation's modify index forward, so most changes are taken at once.
    fn needs_recount(&self, old: &Evaluation, new: Option<&Evaluation>) -> bool {
        let is = |pick: Option<EvalKey>| pick.is_some_and(|(_, id)| id == old.id);
        match new {
            None => is(self.newest) || is(self.newest_failed),
            Some(new) => is(self.newest_failed) && new.failed_tg_allocs.is_empty(),
        }
    }

    /// A fresh count over `evals`, for a job whose remembered evaluation changed or left.
    pub fn recount<'a>(job: &JobKey, evals: impl IntoIterator<Item = &'a Evaluation>) -> Self {
        let mut j = JobEvals::default();
        for e in evals {
            if e.namespace == job.namespace && e.job_id == job.id {
                j.offer(e);
            }
        }
        j
    }
}

/// Per job, kept as evaluations arrive, change and leave.
///
/// Invariant: equals [`JobEvals::recount`] of every job over the evaluations held.
#[derive(Debug, Default)]
pub struct JobEvalIndex {
    jobs: HashMap<JobKey, JobEvals>,
}

impl JobEvalIndex {
    pub fn rebuild<'a>(evals: impl IntoIterator<Item = &'a Evaluation>) -> Self {
        let mut index = JobEvalIndex::default();
        for e in evals {
            index.jobs.entry(e.job_key()).or_default().offer(e);
        }
        index
    }

    pub fn get(&self, job: &JobKey) -> JobEvals {
        self.jobs.get(job).copied().unwrap_or_default()
    }

    /// After `new` replaced `old` (or arrived; `None`: removed) in `evals`.
    pub fn changed(
        &mut self,
        old: Option<&Evaluation>,
        new: Option<&Evaluation>,
        evals: &HashMap<EvalId, Evaluation>,
    ) {
        if let (Some(o), Some(n)) = (old, new)
            && (o.namespace != n.namespace || o.job_id != n.job_id)
        {
            // Never sent by a server, but a malformed update must not corrupt the index.
            self.changed(Some(o), None, evals);
            return self.changed(None, Some(n), evals);
        }
        let Some(job) = new.or(old).map(Evaluation::job_key) else {
            return;
        };
        let entry = self.jobs.entry(job.clone()).or_default();
        let recount = old.is_some_and(|o| entry.needs_recount(o, new));
        if recount {
            *entry = JobEvals::recount(&job, evals.values());
        } else if let Some(new) = new {
            entry.offer(new);
        }
        if *entry == JobEvals::default() {
            self.jobs.remove(&job);
        }
    }
}
