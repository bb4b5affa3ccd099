//! The schedulers: given an evaluation, a state snapshot and a planner, produce a plan.
//!
//! This is Nomad's `Scheduler(State, Planner)` seam. A scheduler reads only the snapshot it is
//! given and reaches the world only through the [`Planner`]: it submits plans (and may be
//! handed a fresher snapshot to retry against when part of a plan was refused) and creates,
//! updates or reblocks evaluations. Time and randomness come in through [`Env`], so a run is
//! a pure function of its inputs.

pub mod annotate;
pub mod feasible;
pub mod generic;
pub mod preempt;
pub mod rank;
pub mod reconcile;
mod reconcile_node;
pub mod stack;
pub mod system;
pub mod testing;
pub mod util;

#[cfg(test)]
mod tests;

use crate::state::StateSnapshot;
use crate::types::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// What a planner answers to a submitted plan.
#[derive(Debug)]
pub struct Submitted {
    pub result: PlanResult,
    /// Set when part of the plan was refused: retry against this newer state.
    pub refreshed: Option<StateSnapshot>,
}

/// Why the planner could not do what was asked (the eval is then nacked and retried).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlannerError {
    #[error("plan for eval {eval_id} was not applied: {cause}")]
    PlanNotApplied { eval_id: EvalId, cause: PlanError },
    #[error("eval {eval_id} could not be written: {cause}")]
    EvalWrite { eval_id: EvalId, cause: PlanError },
}

/// What went wrong with a write a planner made, by kind, so that callers can match on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The FSM refused the entry (it is committed, the state unchanged).
    #[error(transparent)]
    Refused(#[from] crate::fsm::ApplyError),
    /// The planner's server does not lead (any more).
    #[error("not the leader: {reason}")]
    NotLeader { reason: String },
    /// The state did not reach the index the write needs in time.
    #[error("state did not reach index {index} in time")]
    StateBehind { index: Index },
    /// The write could not be made (Raft unavailable, the server stopping).
    #[error("unavailable: {reason}")]
    Unavailable { reason: String },
}

/// The only way a scheduler affects the world.
pub trait Planner {
    fn submit_plan(&mut self, plan: Plan) -> Result<Submitted, PlannerError>;
    /// Writes the scheduler's final view of the eval it was processing.
    fn update_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError>;
    /// Creates a new eval (blocked evals, follow-ups).
    fn create_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError>;
    /// Puts an eval that was itself unblocked back into the blocked set.
    fn reblock_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError>;
}

/// Why scheduling an eval failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerError {
    #[error(transparent)]
    Planner(#[from] PlannerError),
    #[error("eval {eval_id} has scheduler type {found}, expected {expected}")]
    WrongScheduler {
        eval_id: EvalId,
        found: SchedulerType,
        expected: &'static str,
    },
}

/// The inputs a scheduler may not take from the world: the time and a random seed.
#[derive(Clone, Copy, Debug)]
pub struct Env {
    pub now: Timestamp,
    /// Seeds candidate shuffles and new ids; the runtime draws it per eval.
    pub seed: u64,
}

impl Env {
    /// The generator for one eval: the seed mixed with the eval id, so two evals processed
    /// with the same seed still shuffle differently.
    pub fn rng_for(&self, eval: &Evaluation) -> ChaCha8Rng {
        let id = eval.id.0.as_u128();
        ChaCha8Rng::seed_from_u64(self.seed ^ (id as u64) ^ ((id >> 64) as u64))
    }
}

/// Draws a fresh id from the scheduler's generator (never from the OS).
pub fn random_bytes(rng: &mut impl rand::Rng) -> [u8; 16] {
    rng.random()
}

/// Runs the scheduler an eval's type calls for.
#[derive(Debug)]
pub struct Scheduler {
    env: Env,
}

impl Scheduler {
    pub fn new(env: Env) -> Self {
        Self { env }
    }

    /// Processes one eval against `snapshot`, acting only through `planner`.
    pub fn process(
        &mut self,
        eval: &Evaluation,
        snapshot: StateSnapshot,
        planner: &mut dyn Planner,
    ) -> Result<(), SchedulerError> {
        match eval.scheduler {
            SchedulerType::Service => generic::GenericScheduler::new(JobType::Service, self.env)
                .process(eval, snapshot, planner),
            SchedulerType::Batch => generic::GenericScheduler::new(JobType::Batch, self.env)
                .process(eval, snapshot, planner),
            SchedulerType::System => system::SystemScheduler::new(JobType::System, self.env)
                .process(eval, snapshot, planner),
            SchedulerType::SysBatch => system::SystemScheduler::new(JobType::SysBatch, self.env)
                .process(eval, snapshot, planner),
            SchedulerType::Core => Err(SchedulerError::WrongScheduler {
                eval_id: eval.id,
                found: eval.scheduler,
                expected: "service, batch, system or sysbatch",
            }),
        }
    }
}
