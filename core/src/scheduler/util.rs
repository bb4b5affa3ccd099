//! Pieces every scheduler shares: building a placed allocation, recording preemptions,
//! and closing an eval (complete, blocked for what did not fit, or failed after retries).

use super::reconcile::{Placement, PlacementKind, Replace, reschedule};
use super::stack::RankedNode;
use super::{Env, Planner, SchedulerError};
use crate::state::StateSnapshot;
use crate::types::*;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A new allocation for placement `p` on the node `ranked` chose. `namespace` is the job's
/// namespace, shared by every allocation of the eval (the store's per-job index then
/// compares it by pointer).
#[allow(clippy::too_many_arguments)]
pub fn new_alloc(
    job: &Job,
    namespace: &Arc<str>,
    group: &TaskGroup,
    p: &Placement,
    eval: &Evaluation,
    ranked: &RankedNode,
    metrics: &AllocMetric,
    now: Timestamp,
    rng: &mut impl rand::Rng,
) -> Allocation {
    let reschedule_tracker = match (p.kind, &p.previous) {
        (PlacementKind::Replacement(Replace::Reschedule { delay }), Some(prev)) => Some(Box::new(
            reschedule::next_tracker(prev, &group.reschedule, now, delay),
        )),
        // Other replacements carry the history along so attempts stay counted.
        (_, Some(prev)) => prev.links.get().reschedule_tracker.clone(),
        _ => None,
    };
    Allocation {
        id: AllocId::from_bytes(rng.random()),
        eval_id: eval.id,
        name: p.name.clone(),
        namespace: namespace.clone(),
        job_id: job.id.clone(),
        job_version: job.version,
        task_group: group.name.as_str().into(),
        node_id: ranked.node.id,
        desired_status: DesiredStatus::Run,
        desired_description: Default::default(),
        client_status: ClientStatus::Pending,
        client_description: Default::default(),
        state_history: thin_vec::ThinVec::new(),
        task_states: Default::default(),
        links: Links::new(AllocLinks {
            reschedule_tracker,
            previous_allocation: p.previous.as_ref().map(|a| a.id),
            preempted_allocations: ranked.preempted.iter().map(|a| a.id).collect(),
            deployment: p.deployment.clone(),
            ..Default::default()
        }),
        resources: group.resources(),
        ports: ranked.ports.clone(),
        metrics: PlacementMetric {
            nodes_evaluated: metrics.nodes_evaluated,
            nodes_filtered: metrics.nodes_filtered,
            nodes_exhausted: metrics.nodes_exhausted,
            score: ranked.score as f32,
        },
        create_index: 0,
        modify_index: 0,
        alloc_modify_index: 0,
        create_time: now,
        modify_time: now,
    }
}

/// The entry of `group` in a per-group map; the name is copied only when the entry is new
/// (schedulers call this once per placement).
pub(crate) fn group_entry<'m, V: Default>(
    map: &'m mut BTreeMap<String, V>,
    group: &str,
) -> &'m mut V {
    if !map.contains_key(group) {
        map.insert(group.to_owned(), V::default());
    }
    map.get_mut(group).expect("inserted above")
}

/// Adds `alloc` to the plan, evicting what `ranked` said must make room for it.
pub fn append_with_preemptions(plan: &mut Plan, alloc: Allocation, ranked: &RankedNode) {
    for victim in &ranked.preempted {
        let mut t = AllocTransition::stop(victim.id, format!("preempted by alloc {}", alloc.id));
        t.desired_status = DesiredStatus::Evict;
        t.preempted_by = Some(alloc.id);
        plan.append_preemption(victim.node_id, t);
    }
    plan.append_alloc(alloc);
}

/// One `preemption` eval for every other job that loses allocations to `plan`, so that
/// each is re-evaluated in the same commit that evicts its work (as Nomad's plan applier
/// does): its allocations are replaced where capacity allows or wait in a blocked eval,
/// and the job never reads `dead` while its count is unmet. The plan applier drops the
/// eval of a job whose preemptions it refused.
pub fn add_preemption_evals(
    plan: &mut Plan,
    state: &StateSnapshot,
    now: Timestamp,
    rng: &mut impl rand::Rng,
) {
    let mut losers: Vec<JobKey> = plan
        .node_preemptions
        .values()
        .flatten()
        .filter_map(|t| state.alloc(&t.alloc_id))
        .map(|a| JobKey {
            namespace: a.namespace.clone(),
            id: a.job_id.clone(),
        })
        .filter(|k| plan.job.as_ref() != Some(k))
        .collect();
    losers.sort();
    losers.dedup();
    for key in losers {
        let Some(job) = state.job(&key) else { continue };
        if plan
            .evals
            .iter()
            .any(|e| e.triggered_by == TriggeredBy::Preemption && e.job_key() == key)
        {
            continue;
        }
        let id = EvalId::from_bytes(rng.random());
        plan.evals
            .push(Evaluation::new(id, job, TriggeredBy::Preemption, now));
    }
}

/// A blocked eval standing in for the placements of `eval` that did not fit.
fn blocked_eval(
    eval: &Evaluation,
    state: &StateSnapshot,
    trigger: TriggeredBy,
    env: Env,
    rng: &mut impl rand::Rng,
) -> Evaluation {
    let mut b = eval.clone();
    b.id = EvalId::from_bytes(rng.random());
    b.triggered_by = trigger;
    b.status = EvalStatus::Blocked;
    b.status_description = "created to place remaining allocations".into();
    b.previous_eval = Some(eval.id);
    b.next_eval = None;
    b.blocked_eval = None;
    b.wait = None;
    b.wait_until = None;
    b.failed_tg_allocs = BTreeMap::new();
    b.snapshot_index = state.latest_index();
    b.create_time = env.now;
    b.modify_time = env.now;
    b
}

/// How an eval ends after its last pass.
#[derive(Debug, Default)]
pub struct Finish {
    /// Per group, why placements failed (reported on the eval).
    pub failures: BTreeMap<String, AllocMetric>,
    pub queued: BTreeMap<String, u32>,
    /// Leave a job-wide blocked eval for the failures, with this class eligibility and
    /// escaped flag; `None` when the caller blocked them some other way (per node).
    pub block: Option<(BTreeMap<String, bool>, bool)>,
}

/// The writes that close an eval after its last pass.
// Made once per submitted plan and moved straight into it: boxing would save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Closing {
    /// The eval was itself a blocked one and still cannot place everything: back into the
    /// blocked set.
    Reblock(Evaluation),
    /// A blocked eval for unplaced work, if any, then the eval itself, complete.
    Close {
        blocked: Option<Evaluation>,
        done: Evaluation,
    },
}

/// How an eval closes after a pass ([`Closing`]).
pub fn closing(
    eval: &Evaluation,
    state: &StateSnapshot,
    finish: Finish,
    env: Env,
    rng: &mut impl rand::Rng,
) -> Closing {
    let Finish {
        failures,
        queued,
        block,
    } = finish;
    let mut done = eval.clone();
    let mut blocked = None;
    if let (false, Some((class_eligibility, escaped))) = (failures.is_empty(), block) {
        if eval.status == EvalStatus::Blocked {
            let mut again = eval.clone();
            again.class_eligibility = class_eligibility;
            again.escaped_computed_class = escaped;
            again.snapshot_index = state.latest_index();
            again.queued_allocations = queued;
            again.modify_time = env.now;
            return Closing::Reblock(again);
        }
        let mut b = blocked_eval(eval, state, TriggeredBy::QueuedAllocs, env, rng);
        b.class_eligibility = class_eligibility;
        b.escaped_computed_class = escaped;
        b.queued_allocations = queued.clone();
        done.blocked_eval = Some(b.id);
        blocked = Some(b);
    }
    done.status = EvalStatus::Complete;
    done.status_description = String::new();
    done.failed_tg_allocs = failures;
    done.queued_allocations = queued;
    done.snapshot_index = state.latest_index();
    done.modify_time = env.now;
    Closing::Close { blocked, done }
}

/// Closes an eval after a pass with the planner's writes ([`closing`]).
pub fn finish_eval(
    eval: &Evaluation,
    state: &StateSnapshot,
    finish: Finish,
    env: Env,
    rng: &mut impl rand::Rng,
    planner: &mut dyn Planner,
) -> Result<(), SchedulerError> {
    match closing(eval, state, finish, env, rng) {
        Closing::Reblock(again) => planner.reblock_eval(again)?,
        Closing::Close { blocked, done } => {
            if let Some(b) = blocked {
                planner.create_eval(b)?;
            }
            planner.update_eval(done)?;
        }
    }
    Ok(())
}

/// Every plan attempt was refused: the eval fails, and a blocked eval retries it later
/// (the leader's periodic sweep releases `max-plan-attempts` blocked evals).
pub fn fail_after_attempts(
    eval: &Evaluation,
    state: &StateSnapshot,
    attempts: u32,
    env: Env,
    rng: &mut impl rand::Rng,
    planner: &mut dyn Planner,
) -> Result<(), SchedulerError> {
    let mut b = blocked_eval(eval, state, TriggeredBy::MaxPlanAttempts, env, rng);
    b.escaped_computed_class = true;
    let mut failed = eval.clone();
    failed.status = EvalStatus::Failed;
    failed.status_description = format!("maximum attempts reached ({attempts})");
    failed.blocked_eval = Some(b.id);
    failed.snapshot_index = state.latest_index();
    failed.modify_time = env.now;
    planner.create_eval(b)?;
    planner.update_eval(failed)?;
    Ok(())
}

/// A scheduling pass that carries the plan it computed, for [`submit_until_settled`].
pub trait PlannedPass {
    fn take_plan(&mut self) -> Option<Plan>;
    /// How the eval ends if this pass's plan commits in full, when the closing writes are
    /// known before it is submitted; `None` when the scheduler has more to write first.
    fn finish(&self, eval: &Evaluation) -> Option<Finish>;
}

/// Computes a pass, submits its plan, and recomputes against the refreshed state while part
/// of a plan is refused. An attempt that committed anything resets the count; after `limit`
/// refusals in a row without progress the eval is failed (with a `max-plan-attempts` blocked
/// eval) and `None` is returned; `None` too when the eval closed with its plan
/// ([`PlanResult::closed`]). Otherwise the last pass and the state it read.
pub fn submit_until_settled<P: PlannedPass>(
    eval: &Evaluation,
    snapshot: StateSnapshot,
    limit: u32,
    env: Env,
    rng: &mut ChaCha8Rng,
    planner: &mut dyn Planner,
    mut compute: impl FnMut(&StateSnapshot, &mut ChaCha8Rng) -> P,
) -> Result<Option<(P, StateSnapshot)>, SchedulerError> {
    let mut state = snapshot;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut pass = compute(&state, rng);
        let Some(mut plan) = pass.take_plan().filter(|p| !p.is_no_op()) else {
            return Ok(Some((pass, state)));
        };
        // Offer the closing writes with the plan. They are drawn from a copy of the
        // generator, which is left where `finish_eval` would draw them from: the same ids
        // whichever way the eval closes.
        if let Some(finish) = pass.finish(eval)
            && let Closing::Close { blocked, done } =
                closing(eval, &state, finish, env, &mut rng.clone())
        {
            plan.closing = blocked.into_iter().chain([done]).collect();
        }
        let submitted = planner.submit_plan(plan)?;
        if submitted.result.closed {
            return Ok(None);
        }
        let Some(newer) = submitted.refreshed else {
            return Ok(Some((pass, state)));
        };
        if !submitted.result.is_no_op() {
            attempts = 0;
        }
        if attempts >= limit {
            fail_after_attempts(eval, &state, limit, env, rng, planner)?;
            return Ok(None);
        }
        state = newer;
    }
}
