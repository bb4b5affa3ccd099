//! Follow-up evals the reconciler asks for: delayed reschedules, disconnect-window ends and
//! the next step of a rolling update, batched so that allocations due at about the same time
//! share one eval.

use super::{Reconciled, describe};
use crate::types::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Follow-up evals to write, grouped so allocations due at about the same time share one.
#[derive(Default)]
pub(super) struct FollowUps {
    /// (trigger, due) -> allocations whose follow-up id is to be set.
    pub(super) due: BTreeMap<(TriggeredBy, Timestamp), Vec<Arc<Allocation>>>,
    /// Marks waiting for the disconnect follow-up id.
    pub(super) unknown: Vec<(Arc<Allocation>, Timestamp)>,
    pub(super) rolling: Option<std::time::Duration>,
}

/// Follow-ups due within this of each other share one eval (Nomad batches the same way).
const FOLLOW_UP_BATCH: std::time::Duration = std::time::Duration::from_secs(5);

impl FollowUps {
    pub(super) fn write(
        self,
        job: &Job,
        eval: &Evaluation,
        now: Timestamp,
        rng: &mut impl rand::Rng,
        out: &mut Reconciled,
    ) {
        let mut maker = EvalMaker {
            job,
            parent: eval.id,
            now,
            evals: Vec::new(),
            batches: Vec::new(),
        };
        for ((trigger, due), allocs) in self.due {
            let id = maker.batched(trigger, due, rng);
            for a in allocs {
                let mut t = AllocTransition::stop(a.id, a.desired_description.clone());
                t.desired_status = a.desired_status;
                t.follow_up_eval_id = Some(id);
                out.updates.push((a.node_id, t));
            }
        }
        for (a, id) in maker.disconnect_window_ends(self.unknown, rng) {
            out.mark(&a, describe::UNKNOWN, ClientStatus::Unknown, Some(id));
        }
        if let Some(stagger) = self.rolling {
            maker.fresh(TriggeredBy::RollingUpdate, None, Some(stagger), rng);
        }
        out.evals.extend(maker.evals);
    }
}

/// The follow-up evals for allocations marked `unknown` until the end of their disconnect
/// window (`due`): each allocation with the id of the eval that settles it then, and the
/// evals to write (windows ending close together share one). Service and system
/// schedulers alike.
pub(crate) fn disconnect_follow_ups(
    job: &Job,
    eval: &Evaluation,
    now: Timestamp,
    unknown: Vec<(Arc<Allocation>, Timestamp)>,
    rng: &mut impl rand::Rng,
) -> (Vec<(Arc<Allocation>, EvalId)>, Vec<Evaluation>) {
    let mut maker = EvalMaker {
        job,
        parent: eval.id,
        now,
        evals: Vec::new(),
        batches: Vec::new(),
    };
    let marked = maker.disconnect_window_ends(unknown, rng);
    (marked, maker.evals)
}

/// Builds follow-up evals of one job, sharing one eval among follow-ups of the same trigger
/// due within [`FOLLOW_UP_BATCH`] of each other.
struct EvalMaker<'a> {
    job: &'a Job,
    parent: EvalId,
    now: Timestamp,
    evals: Vec<Evaluation>,
    batches: Vec<(TriggeredBy, Timestamp, EvalId)>,
}

impl EvalMaker<'_> {
    /// A `max-disconnect-timeout` follow-up for each allocation, due at its window's end.
    fn disconnect_window_ends(
        &mut self,
        mut unknown: Vec<(Arc<Allocation>, Timestamp)>,
        rng: &mut impl rand::Rng,
    ) -> Vec<(Arc<Allocation>, EvalId)> {
        unknown.sort_by_key(|(a, due)| (*due, a.id));
        unknown
            .into_iter()
            .map(|(a, due)| {
                let id = self.batched(TriggeredBy::MaxDisconnectTimeout, due, rng);
                (a, id)
            })
            .collect()
    }

    fn fresh(
        &mut self,
        trigger: TriggeredBy,
        due: Option<Timestamp>,
        wait: Option<std::time::Duration>,
        rng: &mut impl rand::Rng,
    ) -> EvalId {
        let mut e = Evaluation::new(
            EvalId::from_bytes(rng.random()),
            self.job,
            trigger,
            self.now,
        );
        e.previous_eval = Some(self.parent);
        e.wait_until = due;
        e.wait = wait;
        let id = e.id;
        self.evals.push(e);
        id
    }

    fn batched(
        &mut self,
        trigger: TriggeredBy,
        due: Timestamp,
        rng: &mut impl rand::Rng,
    ) -> EvalId {
        let near = self
            .batches
            .iter()
            .find(|(t, d, _)| *t == trigger && due.since(*d) <= FOLLOW_UP_BATCH);
        if let Some((_, _, id)) = near {
            return *id;
        }
        let id = self.fresh(trigger, Some(due), None, rng);
        self.batches.push((trigger, due, id));
        id
    }
}
