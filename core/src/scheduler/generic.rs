//! The service and batch scheduler: reconcile, place, submit, retry against fresher state,
//! and leave a blocked eval behind for whatever could not be placed.

use super::reconcile::{self, Placement, PlacementKind, Reconciled, Replace};
use super::stack::{CandidateLimit, SelectOptions, Stack};
use super::{Env, Planner, SchedulerError, feasible, util};
use crate::state::StateSnapshot;
use crate::types::*;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

/// Plan attempts before the eval fails: service retries harder than batch (Nomad's limits).
pub fn max_attempts(job_type: JobType) -> u32 {
    match job_type {
        JobType::Batch | JobType::SysBatch => 2,
        JobType::Service | JobType::System => 5,
    }
}

/// What one scheduling pass produced, before submission.
#[derive(Debug, Default)]
struct Pass {
    plan: Option<Plan>,
    failures: BTreeMap<String, AllocMetric>,
    queued: BTreeMap<String, u32>,
    class_eligibility: BTreeMap<String, bool>,
    escaped: bool,
}

#[derive(Debug)]
pub struct GenericScheduler {
    job_type: JobType,
    env: Env,
}

impl Pass {
    /// A job-wide blocked eval for whatever this pass could not place.
    fn finish(&self) -> util::Finish {
        util::Finish {
            failures: self.failures.clone(),
            queued: self.queued.clone(),
            block: Some((self.class_eligibility.clone(), self.escaped)),
        }
    }
}

impl util::PlannedPass for Pass {
    fn take_plan(&mut self) -> Option<Plan> {
        self.plan.take()
    }

    fn finish(&self, _: &Evaluation) -> Option<util::Finish> {
        Some(Pass::finish(self))
    }
}

impl GenericScheduler {
    pub fn new(job_type: JobType, env: Env) -> Self {
        Self { job_type, env }
    }

    pub fn process(
        &mut self,
        eval: &Evaluation,
        snapshot: StateSnapshot,
        planner: &mut dyn Planner,
    ) -> Result<(), SchedulerError> {
        let mut rng = self.env.rng_for(eval);
        let settled = util::submit_until_settled(
            eval,
            snapshot,
            max_attempts(self.job_type),
            self.env,
            &mut rng,
            planner,
            |state, rng| self.compute(state, eval, rng),
        )?;
        let Some((pass, state)) = settled else {
            return Ok(());
        };
        util::finish_eval(eval, &state, pass.finish(), self.env, &mut rng, planner)
    }

    fn compute(&self, state: &StateSnapshot, eval: &Evaluation, rng: &mut ChaCha8Rng) -> Pass {
        let key = eval.job_key();
        let now = self.env.now;
        let rec = reconcile::reconcile(state, &key, eval, now, rng);
        let mut plan = Plan::new(
            eval.id,
            eval.priority,
            Some(key.clone()),
            state.latest_index(),
        );
        let mut pass = Pass::default();
        let Reconciled {
            place,
            updates,
            in_place,
            evals,
            desired,
            deployment,
            deployment_updates,
        } = rec;
        plan.deployment = deployment;
        plan.deployment_updates = deployment_updates;
        for (node, t) in updates {
            plan.append_update(node, t);
        }
        for a in in_place {
            plan.append_alloc(a);
        }
        plan.evals = evals;
        plan.annotations = Some(PlanAnnotations {
            desired_tg_updates: desired,
        });
        if let Some(job) = state.job(&key).filter(|_| !place.is_empty()) {
            self.place(state, job, &key, eval, place, &mut plan, &mut pass, rng);
        }
        util::add_preemption_evals(&mut plan, state, now, rng);
        pass.plan = Some(plan);
        pass
    }

    #[allow(clippy::too_many_arguments)]
    fn place(
        &self,
        state: &StateSnapshot,
        job: &Job,
        key: &JobKey,
        eval: &Evaluation,
        place: Vec<Placement>,
        plan: &mut Plan,
        pass: &mut Pass,
        rng: &mut ChaCha8Rng,
    ) {
        let (nodes, by_dc) = feasible::ready_nodes_in_dcs(state, job);
        let limit = if self.job_type == JobType::Batch {
            CandidateLimit::Fixed(2)
        } else {
            CandidateLimit::Log2
        };
        plan.reserve_nodes(place.len());
        let mut stack = Stack::new(state, job, limit);
        // The counts are the store's: the stack need not read every node's datacenter.
        stack.set_nodes_available(by_dc.clone());
        stack.set_nodes(nodes, rng);
        let preemption = state.scheduler_config().preemption;
        let allow_preemption = match self.job_type {
            JobType::Batch => preemption.batch,
            _ => preemption.service,
        };
        let mut failed: BTreeSet<String> = BTreeSet::new();
        for p in place {
            let Some(group) = job.group(&p.group) else {
                continue;
            };
            util::group_entry(&mut pass.queued, &p.group);
            if failed.contains(&p.group) {
                // One failure per group is enough to know why; the rest are only counted.
                if let Some(m) = pass.failures.get_mut(&p.group) {
                    m.coalesced_failures += 1;
                }
                *pass.queued.entry(p.group.clone()).or_default() += 1;
                undo_stop(plan, &p, state, self.env.now);
                continue;
            }
            let opts = SelectOptions {
                penalty_nodes: p.penalty_node().into_iter().collect(),
                preferred_nodes: Vec::new(),
                allow_preemption,
            };
            match stack.select(group, plan, &opts) {
                Some(ranked) => {
                    let alloc = util::new_alloc(
                        job,
                        &key.namespace,
                        group,
                        &p,
                        eval,
                        &ranked,
                        stack.metrics(),
                        self.env.now,
                        rng,
                    );
                    util::append_with_preemptions(plan, alloc, &ranked);
                }
                None => {
                    let mut m = stack.metrics().clone();
                    m.nodes_available = by_dc.clone();
                    m.coalesced_failures = 1;
                    pass.failures.insert(p.group.clone(), m);
                    *pass.queued.entry(p.group.clone()).or_default() += 1;
                    failed.insert(p.group.clone());
                    undo_stop(plan, &p, state, self.env.now);
                }
            }
        }
        (pass.class_eligibility, pass.escaped) = stack.class_eligibility();
    }
}

/// When a replacement cannot be placed, the allocation it would replace keeps running
/// (a destructive update, migration or reschedule never stops work it cannot re-home).
/// Lost allocations are marked lost regardless: their node is gone. So is a migration off
/// a node whose drain is forced (`-force`, or its deadline passed): the drain's deadline
/// removes what is left from the node whether or not it has somewhere to go, as Nomad's.
fn undo_stop(plan: &mut Plan, p: &Placement, state: &StateSnapshot, now: Timestamp) {
    let forced_off = |prev: &Allocation| {
        state
            .node(&prev.node_id)
            .and_then(|n| n.drain.as_ref())
            .is_some_and(|d| d.force || d.deadline_at().is_some_and(|at| at <= now))
    };
    let keeps_running = match p.kind {
        PlacementKind::Destructive | PlacementKind::Replacement(Replace::Reschedule { .. }) => true,
        PlacementKind::Replacement(Replace::Migrate) => {
            !p.previous.as_deref().is_some_and(forced_off)
        }
        _ => false,
    };
    if let (true, Some(prev)) = (keeps_running, &p.previous) {
        plan.remove_updates_of(prev.node_id, prev.id);
    }
}
