//! Plan checks with an optimistic overlay, so that checking the next plan overlaps the Raft
//! write of the previous one (pipelining).
//!
//! The runtime's loop, one plan at a time:
//!
//! ```text
//! loop {
//!     plan = queue.pop()                                   // wait while empty
//!     outcome = loop {
//!         match applier.check(&store.snapshot(), &plan) {
//!             Ok(outcome) => break outcome,
//!             Err(e) => wait until the store reaches e.wait_index()  // StateBehind
//!         }
//!     }
//!     if outcome.apply is None { reply(outcome.result); continue }
//!     if applier.in_flight() {                             // one write at a time
//!         match in_flight_write.await {
//!             Ok(index) => applier.committed(index),       // reply to that plan's worker
//!             Err(_) => applier.commit_failed(),           // reply with the error
//!         }
//!     }
//!     match applier.begin_commit(apply, now) {
//!         Ok(command) => in_flight_write = raft.write(command.clone()),
//!         Err(NotChecked) => check the same plan again     // its overlay was dropped
//!     }
//! }
//! ```
//!
//! Invariant: a plan is checked only against state at least as new as both the last plan
//! this applier committed and the plan's own `snapshot_index`, with the in-flight plan (if
//! any) applied on top. A check that relied on an in-flight plan can commit only if that
//! plan committed.

use super::check::{PlanOutcome, check_plan};
use crate::fsm::{self, ApplyError, Command, PlanApply};
use crate::state::StateSnapshot;
use crate::types::*;

/// Why the applier cannot do what it was asked.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ApplierError {
    /// The state handed to `check` is older than the last committed plan or the plan's
    /// snapshot: wait until the store reaches `required`, then check again.
    #[error("state at index {latest} is behind index {required}: wait for it and check again")]
    StateBehind { latest: Index, required: Index },
    /// `begin_commit` while another plan's write is in flight: await it first.
    #[error("the plan of eval {0} is still being committed")]
    CommitInFlight(EvalId),
    /// `begin_commit` for a plan that was not the last one checked, or whose check relied on
    /// an in-flight plan whose commit then failed: check it again.
    #[error("the plan of eval {0} has no valid check to commit: check it again")]
    NotChecked(EvalId),
    /// `committed` or `commit_failed` with no write in flight.
    #[error("no plan commit is in flight")]
    NoCommitInFlight,
    /// Applying the in-flight plan to the overlay failed (the FSM never refuses a plan, so
    /// this means the FSM changed).
    #[error("applying the in-flight plan to the overlay failed: {0}")]
    Overlay(#[from] ApplyError),
}

impl ApplierError {
    /// The index the store must reach before checking again, for `StateBehind`.
    pub fn wait_index(&self) -> Option<Index> {
        match self {
            ApplierError::StateBehind { required, .. } => Some(*required),
            _ => None,
        }
    }
}

/// The plan applier's check state: the last committed index, the plan whose Raft write is
/// in flight, and which plan was last checked against what. Pure: no clock, no IO.
#[derive(Debug)]
pub struct PlanApplier {
    /// Index of the last plan this applier committed (or the floor it was created with).
    last_committed: Index,
    in_flight: Option<InFlight>,
    /// Counts `begin_commit`s, so a check can name the in-flight write it relied on.
    commits_begun: u64,
    last_check: Option<LastCheck>,
}

#[derive(Debug)]
struct InFlight {
    seq: u64,
    eval_id: EvalId,
    command: Command,
    /// The latest state index the overlay was built on, and the overlay. Rebuilt only when
    /// a newer latest state is passed in.
    overlay: Option<(Index, StateSnapshot)>,
}

#[derive(Clone, Copy, Debug)]
struct LastCheck {
    eval_id: EvalId,
    /// The in-flight write the check's overlay applied, if any.
    relied_on: Option<u64>,
}

impl Default for PlanApplier {
    fn default() -> Self {
        Self::new(0)
    }
}

impl PlanApplier {
    /// An applier that never checks against state older than `min_index` (a new leader
    /// passes the index of its barrier write, so it never acts on stale state).
    pub fn new(min_index: Index) -> Self {
        Self {
            last_committed: min_index,
            in_flight: None,
            commits_begun: 0,
            last_check: None,
        }
    }

    /// The index the state must reach before any plan is checked.
    pub fn last_committed(&self) -> Index {
        self.last_committed
    }

    /// Whether a plan's Raft write is in flight (so `check` uses the overlay).
    pub fn in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Checks `plan` against `latest` with the in-flight plan, if any, applied on top.
    ///
    /// `latest` must be at least as new as the last committed plan and the plan's snapshot
    /// index; if it is not, this returns [`ApplierError::StateBehind`] and the caller waits.
    /// The overlay applies the in-flight `ApplyPlan` at `latest.latest_index() + 1`; should
    /// `latest` already contain it (the runtime learned of the commit late), applying it
    /// again changes no usage, since placements and transitions are keyed by allocation id.
    /// A refusal against the overlay carries that index as its refresh index: a lower bound
    /// of the index the in-flight plan will commit at.
    pub fn check(
        &mut self,
        latest: &StateSnapshot,
        plan: &Plan,
    ) -> Result<PlanOutcome, ApplierError> {
        let required = self.last_committed.max(plan.snapshot_index);
        let at = latest.latest_index();
        if at < required {
            return Err(ApplierError::StateBehind {
                latest: at,
                required,
            });
        }
        let (outcome, relied_on) = match &mut self.in_flight {
            None => (check_plan(latest, plan), None),
            Some(f) => (check_plan(f.overlay_on(latest)?, plan), Some(f.seq)),
        };
        self.last_check = outcome.apply.as_ref().map(|_| LastCheck {
            eval_id: plan.eval_id,
            relied_on,
        });
        Ok(outcome)
    }

    /// Starts the commit of the last checked plan's `apply` and returns the command to write
    /// to Raft (the overlay assumes exactly this command). Only one write may be in flight.
    /// Takes the apply by value: a large plan is not copied again (on an error it is
    /// dropped, and checking the plan again yields a fresh one).
    pub fn begin_commit(
        &mut self,
        apply: PlanApply,
        now: Timestamp,
    ) -> Result<&Command, ApplierError> {
        if let Some(f) = &self.in_flight {
            return Err(ApplierError::CommitInFlight(f.eval_id));
        }
        // Any in-flight write the check relied on has finished, and not by failing (that
        // clears `last_check`), so its changes are part of the committed state.
        self.last_check
            .take()
            .filter(|c| c.eval_id == apply.eval_id)
            .ok_or(ApplierError::NotChecked(apply.eval_id))?;
        self.commits_begun += 1;
        let eval_id = apply.eval_id;
        let f = self.in_flight.insert(InFlight {
            seq: self.commits_begun,
            eval_id,
            command: Command::ApplyPlan { plan: apply, now },
            overlay: None,
        });
        Ok(&f.command)
    }

    /// The in-flight write committed at `index`: later checks need state at least that new.
    pub fn committed(&mut self, index: Index) -> Result<(), ApplierError> {
        self.in_flight
            .take()
            .ok_or(ApplierError::NoCommitInFlight)?;
        self.last_committed = self.last_committed.max(index);
        Ok(())
    }

    /// The in-flight write failed: drop the overlay, and invalidate a check that relied on
    /// it (its `begin_commit` then returns [`ApplierError::NotChecked`]).
    pub fn commit_failed(&mut self) -> Result<(), ApplierError> {
        let failed = self
            .in_flight
            .take()
            .ok_or(ApplierError::NoCommitInFlight)?;
        if self
            .last_check
            .is_some_and(|c| c.relied_on == Some(failed.seq))
        {
            self.last_check = None;
        }
        Ok(())
    }

    /// Forgets the in-flight write and the last check (leadership lost). The committed
    /// index floor stays.
    pub fn reset(&mut self) {
        self.in_flight = None;
        self.last_check = None;
    }
}

impl InFlight {
    /// `latest` with this plan applied, built once per latest index.
    fn overlay_on(&mut self, latest: &StateSnapshot) -> Result<&StateSnapshot, ApplyError> {
        let at = latest.latest_index();
        let overlay = match self.overlay.take() {
            Some((base, overlay)) if base == at => overlay,
            _ => {
                let mut overlay = latest.clone();
                fsm::apply(&mut overlay, at + 1, self.command.clone())?;
                overlay
            }
        };
        Ok(&self.overlay.insert((at, overlay)).1)
    }
}
