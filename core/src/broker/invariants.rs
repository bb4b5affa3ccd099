//! A full consistency check of the broker's structures, for tests: every counter is
//! recounted and every index cross-checked against the eval map.

use super::{EvalBroker, State};
use crate::broker::stats::{Bucket, Counters};
use crate::{EvalId, JobKey, SchedulerType};
use std::collections::{HashMap, HashSet};

impl EvalBroker {
    /// Ids of every tracked eval.
    pub(super) fn tracked_ids(&self) -> HashSet<EvalId> {
        self.evals.keys().copied().collect()
    }

    /// Panics with a description of the first inconsistency found.
    pub(super) fn assert_consistent(&self) {
        if !self.enabled {
            assert!(self.evals.is_empty(), "a disabled broker tracks nothing");
        }

        // Counters equal a recount of the eval map.
        let mut recount = Counters::default();
        for tracked in self.evals.values() {
            recount.inc(tracked.eval.scheduler, tracked.state.bucket());
        }
        assert_eq!(
            self.counters.snapshot(),
            recount.snapshot(),
            "counters drifted"
        );

        // Every queue holds exactly the evals in the matching state.
        let in_state = |id: &EvalId, want: Bucket| {
            let tracked = self
                .evals
                .get(id)
                .unwrap_or_else(|| panic!("{id} is queued, not tracked"));
            assert_eq!(tracked.state.bucket(), want, "{id} is queued as {want:?}");
            tracked
        };
        for t in SchedulerType::ALL {
            let mut n = 0;
            self.ready.assert_consistent(t);
            for (priority, entry) in self.ready.iter(t) {
                let eval = &in_state(&entry.id, Bucket::Ready).eval;
                assert_eq!((eval.scheduler, eval.priority), (t, priority));
                assert_eq!(entry.create_index, eval.create_index);
                n += 1;
            }
            assert_eq!(
                n,
                self.counters.snapshot().for_type(t).ready,
                "ready queue {t} length"
            );
        }
        let delayed: Vec<_> = self.delayed.iter().collect();
        delayed
            .iter()
            .for_each(|(_, id)| _ = in_state(id, Bucket::Waiting));
        assert_eq!(delayed.len(), self.counters.snapshot().total.waiting);
        self.failed
            .iter()
            .for_each(|id| _ = in_state(id, Bucket::Failed));
        assert_eq!(self.failed.len(), self.counters.snapshot().total.failed);
        self.cancelable
            .iter()
            .for_each(|id| _ = in_state(id, Bucket::Cancelable));
        assert_eq!(
            self.cancelable.len(),
            self.counters.snapshot().total.cancelable
        );

        // Nack timers match the unpaused deliveries one to one; tokens are distinct.
        let mut timers = 0;
        for &(at, id) in self.nack_timers.iter() {
            match &in_state(&id, Bucket::Unacked).state {
                State::Unacked(unacked) => assert_eq!(unacked.deadline, Some(at)),
                _ => unreachable!(),
            }
            timers += 1;
        }
        let mut tokens = HashSet::new();
        for tracked in self.evals.values() {
            if let State::Unacked(unacked) = &tracked.state {
                assert!(tokens.insert(unacked.token), "token handed out twice");
                timers -= usize::from(unacked.deadline.is_some());
            }
        }
        assert_eq!(timers, 0, "a nack timer without its delivery");

        // Jobs: one outstanding eval each, pending heaps and counts in step.
        let slot_keys: HashMap<u32, &JobKey> =
            self.jobs.iter().map(|(slot, key, _)| (slot, key)).collect();
        assert_eq!(
            slot_keys.len(),
            self.jobs.iter().count(),
            "two jobs share a slot"
        );
        let mut per_job: HashMap<u32, u32> = HashMap::new();
        for (id, tracked) in &self.evals {
            if matches!(tracked.state, State::Cancelable) {
                continue;
            }
            assert_eq!(
                slot_keys.get(&tracked.job).copied(),
                Some(&tracked.eval.job_key()),
                "{id} in wrong job"
            );
            *per_job.entry(tracked.job).or_default() += 1;
            let job = self.jobs.get(tracked.job);
            match tracked.state {
                State::Ready | State::Unacked(_) | State::Failed => {
                    assert_eq!(
                        job.outstanding,
                        Some(*id),
                        "{id} runs beside another eval of its job"
                    )
                }
                State::Pending => {
                    assert!(job.outstanding.is_some(), "{id} pends behind nothing");
                    assert!(
                        job.pending.iter().any(|k| k.id == *id),
                        "{id} not in its job's heap"
                    );
                }
                State::Delayed | State::Cancelable => {}
            }
        }
        let mut busy_jobs = 0;
        let mut idle_jobs = 0;
        for (slot, key, job) in self.jobs.iter() {
            if job.tracked == 0 {
                idle_jobs += 1;
                assert!(
                    job.outstanding.is_none() && job.pending.is_empty(),
                    "idle job {key}"
                );
                assert_eq!(job.wait_index, 0, "idle job {key} remembers a wait index");
            } else {
                busy_jobs += 1;
            }
            assert_eq!(
                job.tracked,
                per_job.get(&slot).copied().unwrap_or(0),
                "job {key} tracked count"
            );
            assert!(
                job.pending.len() <= 1,
                "job {key} holds {} pending evals: they collapse as they arrive",
                job.pending.len()
            );
            for pending in &job.pending {
                assert!(matches!(
                    in_state(&pending.id, Bucket::Pending).state,
                    State::Pending
                ));
            }
            if let Some(id) = job.outstanding {
                let tracked = self.evals.get(&id).expect("outstanding eval is tracked");
                assert!(
                    matches!(
                        tracked.state,
                        State::Ready | State::Unacked(_) | State::Failed | State::Delayed
                    ),
                    "job {key}'s outstanding eval {id} is {:?}",
                    tracked.state.bucket()
                );
            }
        }
        assert_eq!(busy_jobs, per_job.len(), "evals without a job slot");
        assert_eq!(idle_jobs, self.jobs.idle(), "idle job count");
    }
}
