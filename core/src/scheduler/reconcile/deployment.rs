//! The reconciler's half of a deployment: which deployment this pass's placements join
//! (creating it for a new version), how many new-version allocations may be placed while
//! older ones are not yet healthy, canaries before promotion, and which allocations a
//! deployment holds back.
//!
//! Nomad's rules (its `reconcile.go`), kept: a group with canaries waiting for promotion
//! places only canaries and leaves the old version running; otherwise at most
//! `max_parallel` allocations of the deployment are unhealthy-or-pending at once, and an
//! unhealthy one stops the rollout (the watcher fails the deployment); a paused or failed
//! deployment places nothing of the new version in place of old allocations; a failed
//! allocation of an active deployment is not replaced; promoted canaries take the place
//! of the old allocations with their names; a newer version cancels the older deployment.

use super::describe;
use crate::state::{JobAlloc, StateSnapshot};
use crate::types::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The job-wide part: the deployment this pass works for.
pub(super) struct JobRollout {
    pub id: DeploymentId,
    /// The stored deployment of this version; `None` when this pass would create it.
    pub existing: Option<Arc<Deployment>>,
}

impl JobRollout {
    /// Whether the job rolls out as deployments at all: a service job with an `update`
    /// block (job's or a group's) that asks for one.
    pub fn wanted(job: &Job) -> bool {
        job.job_type == JobType::Service
            && job
                .groups
                .iter()
                .any(|g| strategy(job, g).rollout().is_some())
    }

    /// The deployment of the job's current version, or a new id for one; cancels an
    /// active deployment of an older version (in `cancel`). Draws from `rng` only for a
    /// job that rolls out as deployments, so other jobs' ids are unchanged.
    pub fn prepare(
        snapshot: &StateSnapshot,
        job: &Job,
        rng: &mut impl rand::Rng,
        cancel: &mut Vec<DeploymentStatusUpdate>,
    ) -> Option<JobRollout> {
        // One range probe for the usual job, which never had a deployment.
        let key = job.key();
        let latest = if snapshot.has_deployments(&key) {
            snapshot.latest_deployment(&key)
        } else {
            None
        };
        if let Some(old) = latest
            .as_ref()
            .filter(|d| d.is_active() && d.job_version != job.version)
        {
            cancel.push(DeploymentStatusUpdate {
                deployment_id: old.id,
                status: DeploymentStatus::Cancelled,
                description: deployment_describe::NEWER_JOB.into(),
            });
        }
        if !Self::wanted(job) {
            return None;
        }
        let existing = latest.filter(|d| d.job_version == job.version);
        let id = match &existing {
            Some(d) => d.id,
            None => DeploymentId::from_bytes(rng.random()),
        };
        Some(JobRollout { id, existing })
    }
}

/// The group's effective update strategy.
pub(super) fn strategy<'j>(job: &'j Job, group: &'j TaskGroup) -> &'j UpdateStrategy {
    group.update.as_ref().unwrap_or(&job.update)
}

/// One group's view of the deployment.
pub(super) struct GroupRollout {
    pub id: DeploymentId,
    pub max_parallel: u32,
    pub strategy: DeploymentStrategy,
    /// The group's state as stored, or a fresh one for a deployment this pass creates.
    pub state: DeploymentGroup,
    /// Placements join the deployment (it is running, or created by this pass).
    pub active: bool,
    /// Paused or failed: nothing of the new version replaces old allocations.
    pub halted: bool,
    /// The deployment is new in this pass.
    pub creating: bool,
}

impl GroupRollout {
    pub fn new(job: &Job, group: &TaskGroup, rollout: &JobRollout) -> Option<GroupRollout> {
        let update = strategy(job, group);
        let settings = update.rollout()?.clone();
        let (state, active, halted, creating) = match &rollout.existing {
            Some(d) => (
                d.groups.get(&group.name).cloned().unwrap_or_default(),
                d.status == DeploymentStatus::Running,
                matches!(
                    d.status,
                    DeploymentStatus::Paused | DeploymentStatus::Failed
                ),
                false,
            ),
            None => (
                DeploymentGroup {
                    desired_total: group.count,
                    auto_promote: settings.auto_promote,
                    auto_revert: settings.auto_revert,
                    progress_deadline: settings.progress_deadline,
                    ..Default::default()
                },
                true,
                false,
                true,
            ),
        };
        Some(GroupRollout {
            id: rollout.id,
            max_parallel: update.max_parallel,
            strategy: settings,
            state,
            active,
            halted,
            creating,
        })
    }

    /// The link a placement of this pass carries.
    pub fn link(&self, canary: bool) -> Option<AllocDeployment> {
        self.active.then_some(AllocDeployment {
            id: self.id,
            canary,
            health: None,
        })
    }

    /// Canaries are wanted and not yet promoted.
    pub fn canarying(&self) -> bool {
        self.state.desired_canaries > 0 && !self.state.promoted
    }

    /// This deployment's link of the allocation `a` stands for, if it is one of ours.
    fn ours<'s>(&self, state: &'s StateSnapshot, a: &JobAlloc) -> Option<&'s AllocDeployment> {
        state
            .job_alloc(a)
            .and_then(|a| a.links.get().deployment.as_ref())
            .filter(|d| d.id == self.id)
    }

    /// A failed allocation of the running deployment: it counts as unhealthy for the
    /// deployment and is not replaced (the watcher fails the deployment).
    pub fn holds_failed(&self, state: &StateSnapshot, a: &JobAlloc) -> bool {
        self.active && a.client_status == ClientStatus::Failed && self.ours(state, a).is_some()
    }

    /// How many old allocations may be replaced now: `max_parallel` less the allocations
    /// of the deployment that are live and not yet healthy; none while any is unhealthy.
    pub fn budget(&self, state: &StateSnapshot, allocs: &[&JobAlloc]) -> usize {
        let mut limit = self.max_parallel as usize;
        for (a, link) in allocs
            .iter()
            .filter_map(|a| self.ours(state, a).map(|l| (a, l)))
        {
            let health = link.health;
            match health {
                Some(h) if !h.healthy => return 0,
                Some(_) => {}
                None if a.client_status == ClientStatus::Failed => return 0,
                None if a.uses_resources() => limit = limit.saturating_sub(1),
                None => {}
            }
        }
        limit
    }
}

/// Splits a group's allocations: canaries that do not hold slots (not yet promoted, of
/// this deployment), canaries to stop (of an older or failed deployment, never
/// promoted), old allocations a promoted canary takes the place of, and the rest.
pub(super) struct Sorted<'a> {
    pub canaries: Vec<&'a JobAlloc>,
    pub stop: Vec<(&'a JobAlloc, &'static str)>,
    pub rest: Vec<&'a JobAlloc>,
}

pub(super) fn sort<'a>(
    snapshot: &StateSnapshot,
    rollout: Option<&GroupRollout>,
    job: &Job,
    existing: Vec<&'a JobAlloc>,
) -> Sorted<'a> {
    let mut out = Sorted {
        canaries: Vec::new(),
        stop: Vec::new(),
        rest: Vec::with_capacity(existing.len()),
    };
    let mut promoted_names: BTreeMap<&str, ()> = BTreeMap::new();
    for a in existing {
        let whole = snapshot.job_alloc(a);
        let canary_of = whole
            .and_then(|w| w.links.get().deployment.as_ref())
            .filter(|d| d.canary)
            .map(|d| d.id);
        let Some(dep) = canary_of.filter(|_| a.uses_resources()) else {
            out.rest.push(a);
            continue;
        };
        match rollout.filter(|r| r.id == dep) {
            Some(r) if r.state.promoted => {
                if let Some(w) = whole {
                    promoted_names.insert(w.name.as_str(), ());
                }
                out.rest.push(a);
            }
            Some(r) if r.active || r.halted && !is_failed(snapshot, dep) => out.canaries.push(a),
            _ => {
                // A canary of a deployment that failed or was superseded before promotion.
                let promoted = snapshot
                    .deployment(&dep)
                    .and_then(|d| d.groups.get(a.group.as_str()).map(|g| g.promoted))
                    .unwrap_or(false);
                if promoted {
                    out.rest.push(a);
                } else {
                    out.stop.push((a, describe::NOT_NEEDED));
                }
            }
        }
    }
    if !promoted_names.is_empty() {
        let (replaced, kept): (Vec<_>, Vec<_>) = out.rest.into_iter().partition(|a| {
            a.uses_resources()
                && a.job_version != job.version
                && snapshot
                    .job_alloc(a)
                    .is_some_and(|w| promoted_names.contains_key(w.name.as_str()))
        });
        out.rest = kept;
        out.stop
            .extend(replaced.into_iter().map(|a| (a, describe::PROMOTED)));
    }
    out
}

fn is_failed(snapshot: &StateSnapshot, id: DeploymentId) -> bool {
    snapshot
        .deployment(&id)
        .is_some_and(|d| d.status == DeploymentStatus::Failed)
}

/// The deployment a pass creates, with each group's settings (its counts are the FSM's).
pub(super) fn new_deployment(
    job: &Job,
    id: DeploymentId,
    groups: BTreeMap<String, DeploymentGroup>,
    now: Timestamp,
) -> Deployment {
    let needs_promotion = groups
        .values()
        .any(|g| g.desired_canaries > 0 && !g.auto_promote);
    Deployment {
        id,
        namespace: job.namespace.clone(),
        job_id: job.id.clone(),
        job_version: job.version,
        job_create_index: job.create_index,
        status: DeploymentStatus::Running,
        description: if needs_promotion {
            deployment_describe::RUNNING_NEEDS_PROMOTION
        } else {
            deployment_describe::RUNNING
        }
        .into(),
        groups,
        create_time: now,
        create_index: 0,
        modify_index: 0,
    }
}
