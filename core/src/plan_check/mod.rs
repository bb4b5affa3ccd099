//! The plan applier's checks: which parts of a scheduler's plan may commit.
//!
//! Schedulers plan against snapshots that may be stale by the time the plan arrives, and
//! several workers plan at once. The leader's plan applier is the one place that serializes
//! them: it takes plans one at a time ([`PlanQueue`], by priority then arrival), re-checks
//! every node of each plan against the latest state ([`check_plan`]), and commits only what
//! still fits, so no node is ever over-committed whatever the workers did. [`PlanApplier`]
//! lets the check of the next plan overlap the Raft write of the previous one by checking
//! against the latest state with the in-flight plan applied. [`RejectionTracker`] spots
//! nodes refused over and over (off by default).
//!
//! Everything here is pure: no clock (time comes in as arguments), no IO, no async. The
//! runtime owns the loop, the Raft writes and the replies to workers.

mod applier;
mod check;
mod queue;
mod rejections;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use applier::{ApplierError, PlanApplier};
pub use check::{NodeRefusal, PlanOutcome, check_plan};
pub use queue::{PlanQueue, PlanQueueStats, Prioritized};
pub use rejections::{RejectionConfigError, RejectionTracker, RejectionTrackerConfig};
