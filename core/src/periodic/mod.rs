//! Jobs that launch other jobs: periodic jobs launched on a cron schedule, and parameterized
//! jobs dispatched on request. Both parents are templates ([`Job::is_template`](crate::types::Job::is_template)) that are
//! never placed themselves; each launch or dispatch registers a *child* job, a copy of the
//! parent linked to it by [`parent_id`](crate::types::Job::parent_id), together with its eval in one command.
//!
//! * [`PeriodicLauncher`] is the leader's cron: it tracks periodic jobs, says when the next
//!   launch is due, and on [`tick`](PeriodicLauncher::tick) returns the [`Launch`]es due. It
//!   follows Nomad's periodic dispatcher: children are `<parent>/periodic-<unix seconds>`,
//!   `prohibit_overlap` skips a slot while an earlier child is not dead, stopped or disabled
//!   jobs do not launch, and a new leader launches a missed slot once.
//! * [`force`] launches a periodic job's child now, outside its schedule (`job periodic
//!   force`).
//! * [`dispatch`] checks a dispatch request against the parent's `parameterized` block and
//!   builds the child `<parent>/dispatch-<unix seconds>-<8 hex>` and its eval, as Nomad's
//!   `Job.Dispatch` does.
//!
//! Everything here is pure: time is passed in, ids come from a generator passed in, state
//! is read from a snapshot. The runtime turns the results into `JobRegister` commands.
//!
//! Child ids stay within validation's id limit for any parent: see [`child_id`].
//!
//! What state does not keep: Nomad records each periodic job's last launch in a table of
//! its own. drover reads it from the children's ids instead, so a child that was garbage
//! collected no longer counts as a launch: a new leader could launch again a slot whose
//! child was already collected. That needs a collection threshold shorter than the job's
//! interval between launches (the latest slot's child is younger than one interval).

mod child;
mod dispatch;
mod force;
mod launcher;
mod schedule;

#[cfg(test)]
mod tests;

pub use child::{DISPATCH_SUFFIX, PERIODIC_SUFFIX, child_id, periodic_launch_time};
pub use dispatch::{DispatchError, dispatch};
pub use force::{ForceError, force};
pub use launcher::{Launch, PeriodicLauncher, TrackError};
pub use schedule::{Schedule, ScheduleError, zone};
