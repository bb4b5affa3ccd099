//! What a node's allocation updates mean beyond their FSM write: which jobs need an eval
//! now, and which failures point at the node rather than at the job.
//!
//! A failure counts against the node (towards flaky) when the agent says so (it could not
//! start any process: fork failed, disk full, driver unhealthy), or when the evidence in
//! state says so: the same job version keeps failing here while it runs fine elsewhere.
//! A job's own mistakes (missing command, bad arguments, exit codes) that fail everywhere
//! never count.

pub mod health;

use crate::fsm::AllocClientUpdate;
use crate::state::StateSnapshot;
use crate::types::{
    AllocId, Allocation, ClientStatus, DesiredStatus, EvalId, Evaluation, JobKey, Node, NodeId,
    Timestamp, TriggeredBy,
};
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};

/// Failures of one job version on one node, with none of its allocations doing well there,
/// after which the node is suspected (when the version also runs fine elsewhere).
pub const FAILURES_HERE: usize = 2;
/// Allocations of the same job version running or complete on other nodes that make
/// repeated failures here the node's fault.
pub const FINE_ELSEWHERE: usize = 2;

/// One allocation's client-side change, with the agent's verdict on whose fault a failure
/// was (the FSM's update does not carry it: it feeds the node-health tracker).
#[derive(Clone, Debug, PartialEq)]
pub struct ClientAllocUpdate {
    pub update: AllocClientUpdate,
    pub infra_failure: bool,
    /// Every service registration of the allocation with its checks' health, replacing
    /// the catalog's; `None`: unchanged.
    pub services: Option<Vec<crate::types::ServiceRegistration>>,
}

/// The meaning of one batch of updates from one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientReport {
    /// The updates to write, in the order they came.
    pub updates: Vec<AllocClientUpdate>,
    /// Jobs that need an eval for this batch, and why: a failure to reschedule, or an
    /// allocation held as unknown reporting in again (the reconnect, which the scheduler
    /// must settle now rather than at the end of the disconnect window).
    pub eval_jobs: BTreeMap<JobKey, TriggeredBy>,
    /// The reason of each failure that counts against the node.
    pub node_failures: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientReportError {
    #[error("allocation {0} not found")]
    UnknownAlloc(AllocId),
    #[error("allocation {alloc_id} is not on node {node_id}")]
    NotOnNode { alloc_id: AllocId, node_id: NodeId },
}

/// Reads a batch of updates from `node` against `snap`. Every allocation must exist and be
/// on that node (a node can only report its own).
pub fn assess(
    snap: &StateSnapshot,
    node: &Node,
    updates: Vec<ClientAllocUpdate>,
) -> Result<ClientReport, ClientReportError> {
    let mut report = ClientReport {
        updates: Vec::with_capacity(updates.len()),
        ..ClientReport::default()
    };
    // One suspicion per job version per batch, however many of its allocations failed.
    let mut suspected: BTreeSet<(JobKey, u64)> = BTreeSet::new();
    for u in updates {
        let alloc = snap
            .alloc(&u.update.alloc_id)
            .ok_or(ClientReportError::UnknownAlloc(u.update.alloc_id))?;
        if alloc.node_id != node.id {
            return Err(ClientReportError::NotOnNode {
                alloc_id: u.update.alloc_id,
                node_id: node.id,
            });
        }
        let failed = u.update.client_status == ClientStatus::Failed;
        if u.infra_failure {
            report.node_failures.push(infra_reason(&u.update));
        } else if failed
            && alloc.client_status != ClientStatus::Failed
            && suspected.insert((job_key(alloc), alloc.job_version))
            && let Some(reason) = fails_only_here(snap, alloc)
        {
            report.node_failures.push(reason);
        }
        let trigger = if failed && alloc.desired_status == DesiredStatus::Run {
            Some(TriggeredBy::AllocFailure)
        } else if alloc.client_status == ClientStatus::Unknown
            && u.update.client_status != ClientStatus::Unknown
        {
            Some(TriggeredBy::Reconnect)
        } else {
            None
        };
        if let Some(trigger) = trigger {
            report.eval_jobs.entry(job_key(alloc)).or_insert(trigger);
        }
        report.updates.push(u.update);
    }
    Ok(report)
}

impl ClientReport {
    /// The evals the report calls for, one per job that still exists; ids from `rng`.
    pub fn evals(
        &self,
        snap: &StateSnapshot,
        now: Timestamp,
        rng: &mut impl Rng,
    ) -> Vec<Evaluation> {
        self.eval_jobs
            .iter()
            .filter_map(|(k, trigger)| Some((snap.job(k)?, *trigger)))
            .map(|(job, trigger)| {
                Evaluation::new(EvalId::from_bytes(rng.random()), job, trigger, now)
            })
            .collect()
    }
}

fn job_key(a: &Allocation) -> JobKey {
    JobKey {
        namespace: a.namespace.clone(),
        id: a.job_id.clone(),
    }
}

/// The reason the agent gave: its task's latest event marked as the node's fault.
fn infra_reason(u: &AllocClientUpdate) -> String {
    u.task_states
        .values()
        .flat_map(|t| t.events.iter())
        .filter(|e| e.infra_failure())
        .max_by_key(|e| e.time())
        .map_or_else(
            || "infrastructure failure".to_string(),
            |e| e.message().to_string(),
        )
}

/// `alloc` (on its node) just failed: a reason when its job version has now failed
/// [`FAILURES_HERE`] times on this node with nothing running or complete here, while
/// [`FINE_ELSEWHERE`] of its allocations run or completed on other nodes.
fn fails_only_here(snap: &StateSnapshot, alloc: &Allocation) -> Option<String> {
    let (mut failed_here, mut fine_here, mut fine_elsewhere) = (1usize, 0usize, 0usize);
    for other in snap.allocs_by_job(&job_key(alloc)) {
        if other.id == alloc.id || other.job_version != alloc.job_version {
            continue;
        }
        let fine = matches!(
            other.client_status,
            ClientStatus::Running | ClientStatus::Complete
        );
        match (other.node_id == alloc.node_id, fine) {
            (true, true) => fine_here += 1,
            (true, false) if other.client_status == ClientStatus::Failed => failed_here += 1,
            (false, true) => fine_elsewhere += 1,
            _ => {}
        }
    }
    (failed_here >= FAILURES_HERE && fine_here == 0 && fine_elsewhere >= FINE_ELSEWHERE).then(
        || {
            format!(
                "job {} version {} failed {failed_here} times here but runs on other nodes ({fine_elsewhere} allocations)",
                alloc.job_id, alloc.job_version
            )
        },
    )
}

#[cfg(test)]
mod tests;
