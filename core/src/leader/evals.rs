//! The evals the leader attaches to node changes, as Nomad's `createNodeEvals` does: one
//! node-update eval for every job with work on the node, and one for every system and
//! sysbatch job (a node joining or leaving changes where they run).

use crate::state::StateSnapshot;
use crate::types::{EvalId, Evaluation, JobKey, NodeId, Timestamp, TriggeredBy};
use rand::Rng;
use std::collections::BTreeSet;

/// A node-update eval for each job in `jobs` that exists, plus every live system and
/// sysbatch job; ids drawn from `rng`.
pub fn node_update_evals(
    snap: &StateSnapshot,
    node_id: NodeId,
    jobs: impl IntoIterator<Item = JobKey>,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Vec<Evaluation> {
    let mut keys: BTreeSet<JobKey> = jobs.into_iter().collect();
    keys.extend(
        snap.jobs()
            .filter(|j| j.job_type.is_per_node() && !j.stop && !j.is_template())
            .map(|j| j.key()),
    );
    keys.into_iter()
        .filter_map(|key| snap.job(&key))
        .filter(|job| !job.is_template())
        .map(|job| {
            let id = EvalId::from_bytes(rng.random());
            let mut e = Evaluation::new(id, job, TriggeredBy::NodeUpdate, now);
            e.node_id = Some(node_id);
            e
        })
        .collect()
}

/// [`node_update_evals`] for the jobs with allocations still running on the node.
pub fn node_evals(
    snap: &StateSnapshot,
    node_id: NodeId,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Vec<Evaluation> {
    let jobs: Vec<JobKey> = snap
        .allocs_by_node(&node_id)
        .filter(|a| !a.client_terminal())
        .map(|a| JobKey {
            namespace: a.namespace.clone(),
            id: a.job_id.clone(),
        })
        .collect();
    node_update_evals(snap, node_id, jobs, now, rng)
}
