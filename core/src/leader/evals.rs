//! The evals the leader attaches to node changes, as Nomad's `createNodeEvals` does for
//! the jobs with work on the node: one node-update eval for each, written in the node's own
//! entry.
//!
//! Live system and sysbatch jobs are not among them, whether or not they run on the node: a
//! node change can move every one of them, and their evals are coalesced per job after
//! the node's entry is applied (`coalesce.rs`), so a storm of node changes makes a handful
//! of evals per job, not one per node.

use super::coalesce::follows_nodes;
use crate::state::StateSnapshot;
use crate::types::{EvalId, Evaluation, Job, JobKey, NodeId, Timestamp, TriggeredBy};
use rand::Rng;
use std::collections::BTreeSet;

/// A node-update eval for each job in `jobs` that exists, is not a template, and is not a
/// live system or sysbatch job (those are coalesced); ids drawn from `rng`.
pub fn node_update_evals(
    snap: &StateSnapshot,
    node_id: NodeId,
    jobs: impl IntoIterator<Item = JobKey>,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Vec<Evaluation> {
    node_update_evals_where(snap, node_id, jobs, now, rng, |job| !follows_nodes(job))
}

/// [`node_update_evals`] for the jobs with allocations still running on the node.
pub fn node_evals(
    snap: &StateSnapshot,
    node_id: NodeId,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Vec<Evaluation> {
    node_update_evals(snap, node_id, jobs_with_work_on(snap, node_id), now, rng)
}

/// The jobs with an allocation on `node_id` that its client has not finished.
pub(super) fn jobs_with_work_on(snap: &StateSnapshot, node_id: NodeId) -> Vec<JobKey> {
    snap.allocs_by_node(&node_id)
        .filter(|a| !a.client_terminal())
        .map(|a| JobKey {
            namespace: a.namespace.clone(),
            id: a.job_id.clone(),
        })
        .collect()
}

/// A node-update eval for each job in `jobs` (each once) that exists, is not a template and
/// passes `keep`; ids drawn from `rng`.
pub(super) fn node_update_evals_where(
    snap: &StateSnapshot,
    node_id: NodeId,
    jobs: impl IntoIterator<Item = JobKey>,
    now: Timestamp,
    rng: &mut impl Rng,
    keep: impl Fn(&Job) -> bool,
) -> Vec<Evaluation> {
    let keys: BTreeSet<JobKey> = jobs.into_iter().collect();
    keys.into_iter()
        .filter_map(|key| snap.job(&key))
        .filter(|job| !job.is_template() && keep(job))
        .map(|job| {
            let id = EvalId::from_bytes(rng.random());
            let mut e = Evaluation::new(id, job, TriggeredBy::NodeUpdate, now);
            e.node_id = Some(node_id);
            e
        })
        .collect()
}
