//! What the tracker hands back to the leader.

use crate::{EvalId, Evaluation};

/// An eval released from blocking, for the leader to enqueue in the broker.
///
/// The eval is returned exactly as it was blocked (status untouched): the leader enqueues
/// it and owns any status write. `token` is set when the eval was reblocked while still
/// outstanding in the broker; the broker uses it to requeue the eval once the outstanding
/// delivery is acked instead of tracking it twice.
#[derive(Clone, PartialEq, Debug)]
pub struct Unblocked {
    pub eval: Evaluation,
    pub token: Option<String>,
}

/// What `block` / `reblock` did with an eval.
#[derive(Clone, PartialEq, Debug)]
pub enum BlockOutcome {
    /// Tracked until an unblock releases it. `superseded` is the older blocked eval of the
    /// same job it replaced, now queued as a duplicate (see `take_duplicates`).
    Blocked { superseded: Option<EvalId> },
    /// An unblock it could have used happened after its snapshot: the leader enqueues it
    /// now instead. Any older blocked eval of the job was still queued as a duplicate.
    /// Boxed: the rare case should not make every outcome eval-sized.
    Enqueue(Box<Unblocked>),
    /// A newer blocked eval of the same job is already tracked (`kept`); this one was
    /// queued as a duplicate for the leader to cancel.
    Duplicate { kept: EvalId },
    /// The tracker is disabled (this server is not the leader): nothing was tracked.
    Disabled,
}
