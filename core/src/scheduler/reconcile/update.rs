//! Whether a job change can be applied to a running allocation in place, or needs it replaced.

use crate::types::*;

/// True when moving an allocation from `old` to `new` needs a new process: any task added,
/// removed or changed in what it runs (driver, config, env, resources, snapshot, meta).
/// Counts, policies, kill timeouts and constraints are applied in place.
pub fn tasks_updated(old: &TaskGroup, new: &TaskGroup) -> bool {
    if old.tasks.len() != new.tasks.len() {
        return true;
    }
    old.tasks.iter().zip(&new.tasks).any(|(a, b)| {
        a.name != b.name
            || a.driver != b.driver
            || a.config != b.config
            || a.env != b.env
            || a.resources != b.resources
            || a.snapshot != b.snapshot
            || a.meta != b.meta
    })
}

/// The rolling-update width for a group: the group's own strategy, else the job's. Zero means
/// no limit (everything at once).
pub fn max_parallel(job: &Job, group: &TaskGroup) -> u32 {
    group.update.as_ref().unwrap_or(&job.update).max_parallel
}
