//! Dry runs for `job plan`: what registering a job would do, without committing anything.
//!
//! The job is registered into a copy of the state (an O(1) clone) and the real scheduler
//! runs against it with a planner that records instead of committing, so the answer is
//! exactly what a registration would produce now.

use super::{Env, Planner, PlannerError, Scheduler, SchedulerError, Submitted};
use crate::fsm::{self, Command};
use crate::state::StateSnapshot;
use crate::types::*;
use std::collections::BTreeMap;

/// What registering a job would do.
#[derive(Debug, Default)]
pub struct DryRun {
    /// The plan the scheduler would submit, if it would submit one.
    pub plan: Option<Plan>,
    /// Per group: place, stop, migrate, in-place, destructive, ignore, preempt, ...
    pub desired: BTreeMap<String, DesiredUpdates>,
    /// Per group, why placements would fail.
    pub failures: BTreeMap<String, AllocMetric>,
    /// The job's version after registration and whether the spec changed.
    pub job_version: u64,
    pub spec_changed: bool,
}

impl DryRun {
    /// Whether registering would change anything (the `job plan` exit code follows this).
    pub fn has_changes(&self) -> bool {
        self.spec_changed
            || self.desired.values().any(|d| {
                d.place
                    + d.stop
                    + d.migrate
                    + d.in_place_update
                    + d.destructive_update
                    + d.preemptions
                    > 0
            })
    }
}

#[derive(Default)]
struct Recorder {
    plan: Option<Plan>,
    eval: Option<Evaluation>,
}

impl Planner for Recorder {
    fn submit_plan(&mut self, plan: Plan) -> Result<Submitted, PlannerError> {
        let result = PlanResult {
            node_allocation: std::sync::Arc::new(plan.node_allocation.clone()),
            node_update: std::sync::Arc::new(plan.node_update.clone()),
            node_preemptions: std::sync::Arc::new(plan.node_preemptions.clone()),
            evals: plan.evals.clone(),
            ..PlanResult::default()
        };
        self.plan = Some(plan);
        Ok(Submitted {
            result,
            refreshed: None,
        })
    }

    fn update_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.eval = Some(eval);
        Ok(())
    }

    fn create_eval(&mut self, _: Evaluation) -> Result<(), PlannerError> {
        Ok(())
    }

    fn reblock_eval(&mut self, _: Evaluation) -> Result<(), PlannerError> {
        Ok(())
    }
}

/// What registering `job` would do against `snapshot`.
pub fn dry_run(
    snapshot: &StateSnapshot,
    job: &Job,
    env: Env,
    eval_id: EvalId,
) -> Result<DryRun, SchedulerError> {
    let mut state = snapshot.clone();
    let index = state.latest_index() + 1;
    let spec_changed = snapshot
        .job(&job.key())
        .is_none_or(|old| old.spec_differs(job));
    let eval = Evaluation::new(eval_id, job, TriggeredBy::JobRegister, env.now);
    let cmd = Command::JobRegister {
        job: job.clone(),
        eval: Some(eval.clone()),
        now: env.now,
    };
    // Registration of a valid job cannot be refused by the FSM.
    fsm::apply(&mut state, index, cmd).map_err(|e| PlannerError::PlanNotApplied {
        eval_id,
        cause: e.into(),
    })?;
    let eval = state.eval(&eval_id).map(|e| (**e).clone()).unwrap_or(eval);
    let job_version = state.job(&job.key()).map_or(0, |j| j.version);
    let mut recorder = Recorder::default();
    Scheduler::new(env).process(&eval, state, &mut recorder)?;
    let desired = recorder
        .plan
        .as_ref()
        .and_then(|p| p.annotations.as_ref())
        .map(|a| a.desired_tg_updates.clone())
        .unwrap_or_default();
    let failures = recorder
        .eval
        .map(|e| e.failed_tg_allocs)
        .unwrap_or_default();
    Ok(DryRun {
        plan: recorder.plan,
        desired,
        failures,
        job_version,
        spec_changed,
    })
}
