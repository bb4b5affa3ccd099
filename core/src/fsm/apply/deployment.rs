//! Applying what changes deployments: the scheduler's new deployment and its placements,
//! the agents' health verdicts, status changes and promotion. The counts of a deployment
//! (placed, healthy, unhealthy, canaries) are kept here and nowhere else, so they agree
//! with the allocations whatever order plans and reports commit in.

use super::{Apply, ApplyError};
use crate::fsm::event::{Event, EventType};
use crate::types::*;
use std::sync::Arc;

impl Apply<'_> {
    /// The scheduler's deployment: created, or its groups' settings taken over (the counts
    /// stay the FSM's). A deployment already finished is left alone.
    pub(super) fn plan_deployment(&mut self, d: &Deployment, now: Timestamp) {
        let mut d = d.clone();
        match self.store.deployment(&d.id) {
            Some(old) if !old.is_active() => return,
            Some(old) => {
                let old = (**old).clone();
                d.create_index = old.create_index;
                d.create_time = old.create_time;
                d.status = old.status;
                d.description = old.description.clone();
                for (name, g) in d.groups.iter_mut() {
                    if let Some(o) = old.groups.get(name) {
                        g.placed_canaries = o.placed_canaries.clone();
                        g.placed = o.placed;
                        g.healthy = o.healthy;
                        g.unhealthy = o.unhealthy;
                        g.promoted = o.promoted;
                        g.require_progress_by = o.require_progress_by;
                    }
                }
            }
            None => {
                d.create_index = self.index;
                d.create_time = now;
                // A group that never places anything must still make progress in time.
                for g in d.groups.values_mut() {
                    if !g.progress_deadline.is_zero() {
                        g.require_progress_by = Some(now.saturating_add(g.progress_deadline));
                    }
                }
            }
        }
        d.modify_index = self.index;
        self.put_deployment(d, EventType::DeploymentStatusUpdate);
    }

    /// Counts a placement (or an in-place update moved into a deployment) for its
    /// deployment: placed, the canary list, and the first progress deadline.
    pub(super) fn count_placement(
        &mut self,
        a: &Allocation,
        old: Option<&Allocation>,
        now: Timestamp,
    ) {
        let Some(link) = &a.links.get().deployment else {
            return;
        };
        let already = old
            .and_then(|o| o.links.get().deployment.as_ref())
            .is_some_and(|o| o.id == link.id);
        if already {
            return;
        }
        self.change_group(link.id, &a.task_group, now, |g, now| {
            g.placed += 1;
            if link.canary {
                g.placed_canaries.push(a.id);
            }
            if g.require_progress_by.is_none() && !g.progress_deadline.is_zero() {
                g.require_progress_by = Some(now.saturating_add(g.progress_deadline));
            }
        });
    }

    /// Counts a health verdict [`mark_health`] recorded on an allocation of `group`, while
    /// its deployment is active.
    pub(super) fn count_health(
        &mut self,
        deployment: DeploymentId,
        group: &str,
        healthy: bool,
        now: Timestamp,
    ) {
        if !self
            .store
            .deployment(&deployment)
            .is_some_and(|d| d.is_active())
        {
            return;
        }
        self.change_group(deployment, group, now, |g, now| {
            if healthy {
                g.healthy += 1;
                if !g.progress_deadline.is_zero() {
                    g.require_progress_by = Some(now.saturating_add(g.progress_deadline));
                }
            } else {
                g.unhealthy += 1;
            }
        });
    }

    fn change_group(
        &mut self,
        id: DeploymentId,
        group: &str,
        now: Timestamp,
        change: impl FnOnce(&mut DeploymentGroup, Timestamp),
    ) {
        let Some(d) = self.store.deployment(&id) else {
            return;
        };
        let mut d = (**d).clone();
        let Some(g) = d.groups.get_mut(group) else {
            return;
        };
        change(g, now);
        d.modify_index = self.index;
        self.put_deployment(d, EventType::DeploymentAllocHealth);
    }

    fn put_deployment(&mut self, d: Deployment, t: EventType) -> Arc<Deployment> {
        self.touch_job(&Arc::from(d.namespace.as_str()), &d.job_id);
        let d = self.store.put_deployment(self.index, d);
        self.events.push(Event::deployment(self.index, t, &d));
        d
    }

    /// Checks every update before changing anything, so a refused command changes nothing.
    pub(super) fn deployment_status(
        &mut self,
        updates: &[DeploymentStatusUpdate],
        revert: Option<Job>,
        evals: &[Evaluation],
        now: Timestamp,
    ) -> Result<(), ApplyError> {
        for u in updates {
            let d = self
                .store
                .deployment(&u.deployment_id)
                .ok_or(ApplyError::DeploymentNotFound(u.deployment_id))?;
            if !d.is_active() {
                return Err(ApplyError::DeploymentNotActive {
                    id: d.id,
                    status: d.status.as_str().into(),
                });
            }
        }
        self.set_statuses(updates, now);
        if let Some(job) = revert {
            self.job_register(job, None, now)?;
        }
        self.upsert_evals(evals);
        Ok(())
    }

    /// Sets statuses of deployments that are still active (the plan's cancellations may
    /// race with the watcher: the first to commit decides).
    pub(super) fn set_statuses(&mut self, updates: &[DeploymentStatusUpdate], now: Timestamp) {
        for u in updates {
            let Some(d) = self.store.deployment(&u.deployment_id) else {
                continue;
            };
            if !d.is_active() {
                continue;
            }
            let mut d = (**d).clone();
            if d.status == DeploymentStatus::Paused && u.status == DeploymentStatus::Running {
                // The time paused does not count against the progress deadline.
                for g in d.groups.values_mut() {
                    if g.require_progress_by.is_some() {
                        g.require_progress_by = Some(now.saturating_add(g.progress_deadline));
                    }
                }
            }
            d.status = u.status;
            d.description = u.description.clone();
            d.modify_index = self.index;
            if d.status == DeploymentStatus::Successful {
                self.store
                    .mark_job_version_stable(self.index, &d.job_key(), d.job_version);
            }
            self.put_deployment(d, EventType::DeploymentStatusUpdate);
        }
    }

    pub(super) fn deployment_promote(
        &mut self,
        id: DeploymentId,
        groups: &[String],
        eval: &Evaluation,
    ) -> Result<(), ApplyError> {
        let d = self
            .store
            .deployment(&id)
            .ok_or(ApplyError::DeploymentNotFound(id))?;
        if !d.is_active() {
            return Err(ApplyError::DeploymentNotActive {
                id,
                status: d.status.as_str().into(),
            });
        }
        if !d.groups.values().any(|g| g.desired_canaries > 0) {
            return Err(ApplyError::DeploymentWithoutCanaries(id));
        }
        if let Some(unknown) = groups.iter().find(|g| !d.groups.contains_key(*g)) {
            return Err(ApplyError::DeploymentGroupUnknown {
                id,
                group: unknown.clone(),
            });
        }
        let chosen: Vec<String> = d
            .groups
            .iter()
            .filter(|(name, g)| {
                g.desired_canaries > 0 && (groups.is_empty() || groups.contains(name))
            })
            .map(|(name, _)| name.clone())
            .collect();
        if chosen.is_empty() {
            return Err(ApplyError::DeploymentWithoutCanaries(id));
        }
        for name in &chosen {
            let g = &d.groups[name];
            let healthy = g
                .placed_canaries
                .iter()
                .filter(|a| {
                    self.store
                        .alloc(a)
                        .and_then(|a| a.links.get().deployment.as_ref()?.health)
                        .is_some_and(|h| h.healthy)
                })
                .count() as u32;
            if healthy < g.desired_canaries {
                return Err(ApplyError::CanariesNotHealthy {
                    id,
                    group: name.clone(),
                    healthy,
                    desired: g.desired_canaries,
                });
            }
        }
        let mut d = (**d).clone();
        for name in &chosen {
            if let Some(g) = d.groups.get_mut(name) {
                g.promoted = true;
            }
        }
        d.description = deployment_describe::PROMOTED.into();
        d.modify_index = self.index;
        self.put_deployment(d, EventType::DeploymentPromotion);
        self.put_eval(eval.clone());
        Ok(())
    }
}

/// Records the agent's health verdict on `a`, an allocation of a deployment that has none
/// yet (the first verdict stands). Returns the deployment, for
/// [`Apply::count_health`], when the verdict was recorded.
pub(super) fn mark_health(
    a: &mut Allocation,
    healthy: bool,
    now: Timestamp,
) -> Option<DeploymentId> {
    let link = a.links.get().deployment.as_ref()?;
    if link.health.is_some() {
        return None;
    }
    let id = link.id;
    a.links.update(|l| {
        if let Some(d) = &mut l.deployment {
            d.health = Some(DeploymentHealth { healthy, time: now });
        }
    });
    Some(id)
}
