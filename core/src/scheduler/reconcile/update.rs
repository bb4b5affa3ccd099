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

/// True when the group's ports changed: one added, removed, relabelled, made static or
/// dynamic, given another static port, mapping (`to`) or host network. An allocation keeps
/// the ports it holds through an in-place update, so only an unchanged ask may keep them;
/// changing a static port is destructive.
pub fn network_updated(old: &TaskGroup, new: &TaskGroup) -> bool {
    fn ports(g: &TaskGroup) -> &[PortAsk] {
        g.network.as_ref().map_or(&[], |n| &n.ports)
    }
    ports(old) != ports(new)
}

/// Whether the ports `alloc` holds are still the node's to give: each on one of its
/// addresses and none among its reserved ports (an agent may come back with others).
fn ports_still_held(alloc: &Allocation, node: &Node) -> bool {
    let n = &node.networks;
    alloc.ports.iter().all(|p| {
        !n.reserved_ports.contains(p.value) && n.addresses.iter().any(|a| a.address == p.host_ip)
    })
}

/// Whether `alloc`, placed with `old` on `node`, may become `new` in place: no task changed
/// in what it runs ([`tasks_updated`]), its ports are asked as they were
/// ([`network_updated`]) and are still the node's to give, and the node still takes the
/// new version (its datacenter, the job's and the group's constraints, its drivers:
/// `fits`). An allocation whose old version or node is gone is replaced.
pub(crate) fn in_place(
    alloc: &Allocation,
    old: Option<&TaskGroup>,
    new: &TaskGroup,
    node: Option<&Node>,
    fits: &crate::scheduler::feasible::NodeMatch,
) -> bool {
    match (old, node) {
        (Some(old), Some(node)) => {
            !tasks_updated(old, new)
                && !network_updated(old, new)
                && ports_still_held(alloc, node)
                && fits.runs(node, new)
        }
        _ => false,
    }
}

/// The rolling-update width for a group: the group's own strategy, else the job's. Zero means
/// no limit (everything at once).
pub fn max_parallel(job: &Job, group: &TaskGroup) -> u32 {
    group.update.as_ref().unwrap_or(&job.update).max_parallel
}
