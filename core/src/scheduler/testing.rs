//! A planner that commits plans to an in-memory store through the real plan checks and FSM:
//! the harness scheduler tests, benchmarks and simulations run against (Nomad's `Harness`).

use super::{Env, Planner, PlannerError, Scheduler, SchedulerError, Submitted};
use crate::fsm::{self, Command};
use crate::plan_check::check_plan;
use crate::state::StateStore;
use crate::types::*;

#[derive(Debug, Default)]
pub struct Harness {
    pub state: StateStore,
    index: Index,
    pub now: Timestamp,
    pub plans: Vec<Plan>,
    pub results: Vec<PlanResult>,
    pub created: Vec<Evaluation>,
    pub updated: Vec<Evaluation>,
    pub reblocked: Vec<Evaluation>,
    /// Refuse every plan outright (exercises the retry limit).
    pub refuse_all: bool,
}

impl Harness {
    pub fn new(now: Timestamp) -> Self {
        Self {
            now,
            ..Self::default()
        }
    }

    /// A harness over existing state (an O(1) copy), writing at indexes after its latest.
    pub fn from_state(state: &StateStore, now: Timestamp) -> Self {
        Self {
            index: state.latest_index(),
            state: state.snapshot(),
            now,
            ..Self::default()
        }
    }

    /// Applies a setup command at the next index; setup must be valid.
    pub fn apply(&mut self, cmd: Command) {
        self.index += 1;
        let kind = cmd.kind();
        if let Err(e) = fsm::apply(&mut self.state, self.index, cmd) {
            panic!("harness setup {kind} failed: {e}");
        }
    }

    pub fn upsert_node(&mut self, node: Node) {
        self.apply(Command::NodeRegister {
            node,
            now: self.now,
        });
    }

    /// Registers `job` with a registration eval and returns that eval as stored.
    pub fn register(&mut self, job: &Job, eval_n: u64) -> Evaluation {
        let eval = crate::mock::eval(eval_n, job);
        self.apply(Command::JobRegister {
            job: job.clone(),
            eval: Some(eval.clone()),
            now: self.now,
        });
        (**self.state.eval(&eval.id).expect("eval just written")).clone()
    }

    /// Runs the scheduler for `eval` against the current state.
    pub fn process(&mut self, eval: &Evaluation, seed: u64) -> Result<(), SchedulerError> {
        let env = Env {
            now: self.now,
            seed,
        };
        let snapshot = self.state.snapshot();
        Scheduler::new(env).process(eval, snapshot, self)
    }

    fn write_eval(&mut self, eval: Evaluation) {
        self.index += 1;
        let _ = fsm::apply(
            &mut self.state,
            self.index,
            Command::EvalUpsert { evals: vec![eval] },
        );
    }

    /// The last plan submitted, if any.
    pub fn last_plan(&self) -> Option<&Plan> {
        self.plans.last()
    }
}

impl Planner for Harness {
    fn submit_plan(&mut self, plan: Plan) -> Result<Submitted, PlannerError> {
        if self.refuse_all {
            let mut result = PlanResult {
                refresh_index: self.state.latest_index(),
                ..PlanResult::default()
            };
            for node in plan.nodes() {
                result
                    .rejected_nodes
                    .insert(node, "refused by the test harness".into());
            }
            self.plans.push(plan);
            self.results.push(result.clone());
            return Ok(Submitted {
                result,
                refreshed: Some(self.state.snapshot()),
            });
        }
        // The plan is kept for the tests only after it is checked, so it is moved, not copied.
        let outcome = check_plan(&self.state, &plan);
        let refused = outcome.has_refusals();
        let mut result = outcome.result;
        if let Some(apply) = outcome.apply {
            self.index += 1;
            let applied = fsm::apply(
                &mut self.state,
                self.index,
                Command::ApplyPlan {
                    plan: apply,
                    now: self.now,
                },
            );
            if let Err(e) = applied {
                let eval_id = plan.eval_id;
                self.plans.push(plan);
                return Err(PlannerError::PlanNotApplied {
                    eval_id,
                    cause: e.into(),
                });
            }
            result.alloc_index = self.index;
            // The eval's closing writes went in with the plan: record them as the
            // planner's calls would have been.
            if result.closed {
                for e in &plan.closing {
                    if e.id == plan.eval_id {
                        self.updated.push(e.clone());
                    } else {
                        self.created.push(e.clone());
                    }
                }
            }
        }
        self.plans.push(plan);
        self.results.push(result.clone());
        let refreshed = refused.then(|| self.state.snapshot());
        Ok(Submitted { result, refreshed })
    }

    fn update_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.updated.push(eval.clone());
        self.write_eval(eval);
        Ok(())
    }

    fn create_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.created.push(eval.clone());
        self.write_eval(eval);
        Ok(())
    }

    fn reblock_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.reblocked.push(eval.clone());
        self.write_eval(eval);
        Ok(())
    }
}

/// A planner that accepts every plan in full and writes nothing: what a scheduler costs on
/// its own, without the plan applier's checks and the FSM write (benchmarks), or what it
/// would submit (tests). Evals it is asked to write are kept in order.
#[derive(Debug, Default)]
pub struct RecordingPlanner {
    pub plans: Vec<Plan>,
    pub evals: Vec<Evaluation>,
}

impl Planner for RecordingPlanner {
    fn submit_plan(&mut self, plan: Plan) -> Result<Submitted, PlannerError> {
        let result = PlanResult {
            alloc_index: plan.snapshot_index + 1,
            ..PlanResult::default()
        };
        self.plans.push(plan);
        Ok(Submitted {
            result,
            refreshed: None,
        })
    }

    fn update_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.evals.push(eval);
        Ok(())
    }

    fn create_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.evals.push(eval);
        Ok(())
    }

    fn reblock_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.evals.push(eval);
        Ok(())
    }
}
