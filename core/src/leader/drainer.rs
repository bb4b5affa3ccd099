//! The node drainer (Nomad's `drainer`), a leader duty: it decides which allocations on
//! draining nodes move, and when, and ends a drain that has nothing left to move.
//!
//! A drain does not stop everything at once. Per task group, at most the group's
//! `migrate.max_parallel` allocations are moving at a time: the drainer marks one (its
//! desired transition, `Command::AllocsMigrate`, with an eval of its job) only while the
//! group keeps at least `count - max_parallel` healthy allocations, healthy meaning running
//! for `migrate.min_healthy_time` and, with `migrate.health_check = "checks"` (the
//! default), every service registration of the allocation passing in the catalog. The
//! scheduler then stops each marked allocation and places its replacement elsewhere, and
//! as replacements turn healthy the next ones are marked.
//!
//! - Batch allocations are left to finish until the deadline (Nomad does the same).
//! - System and sysbatch allocations move last, once nothing else on the node is left,
//!   and never when the drain spares them (`-ignore-system`).
//! - At the deadline (at once with `-force`) whatever is left is marked together.
//! - A node whose drain covers nothing its client still runs completes its drain by itself
//!   (`Command::NodeDrainComplete`: drain cleared, the node stays ineligible).
//!
//! The decision ([`plan`]) is a pure function of state, time and the marks still being
//! written; [`Drainer`] keeps which nodes drain and those marks between calls.

use crate::state::StateSnapshot;
use crate::types::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How long a mark being written is remembered: past it, a write that never landed (lost
/// with a failed Raft write) is decided again.
const IN_FLIGHT_FOR: Duration = Duration::from_secs(30);

/// What one pass decided.
#[derive(Debug, Default, PartialEq)]
pub struct DrainPlan {
    /// Allocations to mark, by job.
    pub migrate: BTreeMap<JobKey, Vec<AllocId>>,
    /// Nodes whose drain is complete.
    pub complete: Vec<NodeId>,
    /// When a pass is due again whatever happens: a deadline, or a replacement turning
    /// healthy.
    pub next_due: Option<Timestamp>,
}

/// The drainer's memory between passes. Emptied when leadership is revoked.
#[derive(Debug, Default)]
pub(super) struct Drainer {
    /// Nodes draining, as last seen.
    draining: BTreeSet<NodeId>,
    /// Marks written but not yet seen applied, with when they were decided.
    in_flight: BTreeMap<AllocId, Timestamp>,
    /// Something changed since the last pass.
    dirty: bool,
    next_due: Option<Timestamp>,
}

impl Drainer {
    pub(super) fn clear(&mut self) {
        *self = Drainer::default();
    }

    /// Takes the draining nodes from `snap` (a new leader).
    pub(super) fn restore(&mut self, snap: &StateSnapshot) {
        self.clear();
        self.draining = snap
            .nodes()
            .filter(|n| n.drain.is_some())
            .map(|n| n.id)
            .collect();
        self.dirty = !self.draining.is_empty();
    }

    /// A node changed.
    pub(super) fn on_node(&mut self, node: &Node) {
        let was = self.draining.contains(&node.id);
        if node.drain.is_some() {
            self.draining.insert(node.id);
        } else {
            self.draining.remove(&node.id);
        }
        self.dirty |= was || node.drain.is_some();
    }

    /// An allocation (or a job) changed: worth a pass while any node drains.
    pub(super) fn on_alloc(&mut self, alloc: Option<&Allocation>) {
        if let Some(a) = alloc
            && (a.links.get().migrate || a.is_terminal())
        {
            self.in_flight.remove(&a.id);
        }
        self.dirty |= !self.draining.is_empty();
    }

    pub(super) fn next_deadline(&self, now: Timestamp) -> Option<Timestamp> {
        if self.dirty {
            return Some(now);
        }
        self.next_due
    }

    /// Whether a pass is due at `now`.
    pub(super) fn due(&self, now: Timestamp) -> bool {
        self.dirty || self.next_due.is_some_and(|d| d <= now)
    }

    /// Decides at `now`, and remembers what it marked as being written.
    pub(super) fn pass(&mut self, snap: &StateSnapshot, now: Timestamp) -> DrainPlan {
        self.dirty = false;
        self.in_flight
            .retain(|_, at| now.since(*at) < IN_FLIGHT_FOR);
        let in_flight: BTreeSet<AllocId> = self.in_flight.keys().copied().collect();
        let out = plan(snap, &self.draining, &in_flight, now);
        for id in out.migrate.values().flatten() {
            self.in_flight.insert(*id, now);
        }
        self.next_due = out.next_due;
        out
    }
}

/// When `alloc` last became running, if it runs now: client reports write no history, so
/// for them it is the last report's time, which a change of its checks' health also moves
/// (so with checks the healthy time counts from when they last changed, as it should).
fn running_since(alloc: &Allocation) -> Option<Timestamp> {
    if alloc.client_status != ClientStatus::Running || alloc.is_terminal() {
        return None;
    }
    alloc
        .state_history
        .iter()
        .rev()
        .find(|e| e.client_status == ClientStatus::Running)
        .map_or(Some(alloc.modify_time), |e| Some(e.time))
}

fn earliest(a: Option<Timestamp>, b: Timestamp) -> Option<Timestamp> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// The decision of one pass: which allocations on the `draining` nodes to mark now, and
/// which drains are complete, given the marks still being written (`in_flight`).
pub fn plan(
    snap: &StateSnapshot,
    draining: &BTreeSet<NodeId>,
    in_flight: &BTreeSet<AllocId>,
    now: Timestamp,
) -> DrainPlan {
    let mut out = DrainPlan::default();
    let marked = |a: &Allocation| a.links.get().migrate || in_flight.contains(&a.id);
    // Service allocations waiting for their group's pacing, by (job, group).
    let mut paced: BTreeMap<(JobKey, String), Vec<&Allocation>> = BTreeMap::new();
    let mark = |out: &mut DrainPlan, a: &Allocation| {
        out.migrate
            .entry(JobKey {
                namespace: a.namespace.clone(),
                id: a.job_id.clone(),
            })
            .or_default()
            .push(a.id);
    };
    for node_id in draining {
        let Some(node) = snap.node(node_id) else {
            continue;
        };
        let Some(drain) = &node.drain else {
            continue;
        };
        let deadline = drain.deadline_at();
        let forced = drain.force || deadline.is_some_and(|d| d <= now);
        if let Some(d) = deadline.filter(|_| !forced) {
            out.next_due = earliest(out.next_due, d);
        }
        let mut others_left = false;
        let mut covered_left = false;
        let mut system: Vec<&Allocation> = Vec::new();
        // Everything the node still runs (stopped by the servers but not yet by its client
        // included): the drain is complete when none of what it covers is left running.
        for a in snap
            .allocs_by_node(node_id)
            .filter(|a| !a.client_terminal())
        {
            let key = JobKey {
                namespace: a.namespace.clone(),
                id: a.job_id.clone(),
            };
            let job = snap.job(&key);
            let per_node = job.is_some_and(|j| j.job_type.is_per_node());
            if per_node {
                if !drain.ignore_system_jobs {
                    covered_left = true;
                    if !marked(a) && !a.is_terminal() {
                        system.push(a);
                    }
                }
                continue;
            }
            others_left = true;
            covered_left = true;
            if marked(a) || a.is_terminal() {
                continue;
            }
            let group = job.and_then(|j| j.group(&a.task_group));
            match (job, group) {
                // Its job or group is gone: nothing to pace it against.
                (None, _) | (_, None) => mark(&mut out, a),
                _ if forced => mark(&mut out, a),
                (Some(j), _) if j.job_type == JobType::Batch => {}
                (Some(_), Some(g)) => paced.entry((key, g.name.clone())).or_default().push(a),
            }
        }
        if forced || !others_left {
            for a in system {
                mark(&mut out, a);
            }
        }
        if !covered_left {
            out.complete.push(*node_id);
        }
    }
    for ((key, group_name), mut waiting) in paced {
        let Some(group) = snap.job(&key).and_then(|j| j.group(&group_name)).cloned() else {
            continue;
        };
        let min_healthy = group.migrate.min_healthy_time;
        let mut healthy: u32 = 0;
        for a in snap
            .allocs_by_job(&key)
            .filter(|a| *a.task_group == *group_name && !marked(a))
        {
            let Some(since) = running_since(a) else {
                continue;
            };
            // A failing check holds the drain until it passes; the catalog changes wake
            // the drainer through the allocation's report.
            if group.migrate.health_check == HealthCheck::Checks
                && snap
                    .alloc_services(a.id)
                    .any(|r| r.health != ServiceHealth::Passing)
            {
                continue;
            }
            let ready_at = since.saturating_add(min_healthy);
            if ready_at <= now {
                healthy += 1;
            } else {
                out.next_due = earliest(out.next_due, ready_at);
            }
        }
        let threshold = group
            .count
            .saturating_sub(group.migrate.max_parallel.max(1));
        let can = healthy.saturating_sub(threshold) as usize;
        waiting.sort_by_key(|a| (a.name_index().unwrap_or(u32::MAX), a.id));
        for a in waiting.into_iter().take(can) {
            mark(&mut out, a);
        }
    }
    out
}
