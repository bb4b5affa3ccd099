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

/// Whether an allocation of `old` on `node` may become `new` in place: no task changed in
/// what it runs ([`tasks_updated`]) and the node still takes the new version (its
/// datacenter, the job's and the group's constraints, its drivers: `fits`). An allocation
/// whose old version or node is gone is replaced.
pub(crate) fn in_place(
    old: Option<&TaskGroup>,
    new: &TaskGroup,
    node: Option<&Node>,
    fits: &crate::scheduler::feasible::NodeMatch,
) -> bool {
    match (old, node) {
        (Some(old), Some(node)) => !tasks_updated(old, new) && fits.runs(node, new),
        _ => false,
    }
}

/// The rolling-update width for a group: the group's own strategy, else the job's. Zero means
/// no limit (everything at once).
pub fn max_parallel(job: &Job, group: &TaskGroup) -> u32 {
    group.update.as_ref().unwrap_or(&job.update).max_parallel
}
