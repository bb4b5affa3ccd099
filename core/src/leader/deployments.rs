//! The deployment watcher: the leader's decisions over running deployments.
//!
//! Every change of a deployment (its counts move as allocations are placed and report
//! health) and every progress deadline that falls due is decided against the latest
//! state, in this order:
//! - a group with an unhealthy allocation fails the deployment (`Failed due to unhealthy
//!   allocations`), a group past its progress deadline too (`Failed due to progress
//!   deadline`); with `auto_revert` the failure registers the job's last stable version
//!   again (when it differs from the current spec);
//! - every group complete (promoted, and as many healthy as its count) makes it
//!   successful, which marks the job version stable;
//! - canaries all healthy in groups that all `auto_promote`: promoted;
//! - more healthy allocations than last seen: an eval, so the scheduler places the next
//!   ones.
//!
//! Invariants: a paused or finished deployment is never decided on; a decision that ends
//! a deployment is not made again while its write is in flight (for [`RETRY_AFTER`]); at
//! most one write per deployment per call.

use super::Action;
use crate::fsm::Command;
use crate::state::StateSnapshot;
use crate::types::*;
use rand::Rng;
use std::collections::BTreeMap;
use std::time::Duration;

/// A decision whose write has not shown up in state is made again after this long.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);

/// What the watcher remembers of each active deployment.
#[derive(Debug, Default)]
pub(super) struct Watcher {
    watched: BTreeMap<DeploymentId, Watched>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Watched {
    /// Healthy allocations over all groups when last decided on.
    healthy: u32,
    /// The next progress deadline.
    deadline: Option<Timestamp>,
    /// A decision was written at this time and has not been applied yet.
    in_flight: Option<Timestamp>,
}

impl Watcher {
    pub(super) fn clear(&mut self) {
        self.watched.clear();
    }

    /// Watches every active deployment of `snap` (a new leader); each is decided on at
    /// its next change or deadline.
    pub(super) fn restore(&mut self, snap: &StateSnapshot) {
        self.watched = snap
            .deployments()
            .filter(|d| d.is_active())
            .map(|d| {
                (
                    d.id,
                    Watched {
                        healthy: healthy(d),
                        deadline: d.next_deadline(),
                        in_flight: None,
                    },
                )
            })
            .collect();
    }

    pub(super) fn next_deadline(&self) -> Option<Timestamp> {
        self.watched
            .values()
            .filter_map(|w| match (w.deadline, w.in_flight) {
                (Some(d), Some(at)) => Some(d.max(at.saturating_add(RETRY_AFTER))),
                (d, _) => d,
            })
            .min()
    }

    /// Decides on the deployments that changed (`changed`, by id) and those whose
    /// deadline is due at `now`.
    pub(super) fn decide(
        &mut self,
        snap: &StateSnapshot,
        changed: &[DeploymentId],
        now: Timestamp,
        rng: &mut impl Rng,
        actions: &mut Vec<Action>,
    ) {
        let mut ids: Vec<DeploymentId> = changed.to_vec();
        ids.extend(
            self.watched
                .iter()
                .filter(|(_, w)| w.deadline.is_some_and(|d| d <= now))
                .map(|(id, _)| *id),
        );
        ids.sort();
        ids.dedup();
        for id in ids {
            let Some(d) = snap.deployment(&id).filter(|d| d.is_active()) else {
                self.watched.remove(&id);
                continue;
            };
            let w = self.watched.entry(id).or_default();
            // A paused deployment waits for its resume (an event of its own).
            if d.status == DeploymentStatus::Paused {
                w.deadline = None;
                continue;
            }
            w.deadline = d.next_deadline();
            if w.in_flight
                .is_some_and(|at| now < at.saturating_add(RETRY_AFTER))
            {
                continue;
            }
            w.in_flight = None;
            let decision = decide(snap, d, now, w.healthy, rng);
            w.healthy = healthy(d);
            if let Some((command, ends)) = decision {
                if ends {
                    w.in_flight = Some(now);
                }
                actions.push(Action::Write(command, "deployment watcher"));
            }
        }
    }
}

fn healthy(d: &Deployment) -> u32 {
    d.groups.values().map(|g| g.healthy).sum()
}

/// One deployment's decision: the write, and whether it ends the deployment.
pub fn decide(
    snap: &StateSnapshot,
    d: &Deployment,
    now: Timestamp,
    healthy_seen: u32,
    rng: &mut impl Rng,
) -> Option<(Command, bool)> {
    let key = d.job_key();
    let job = snap.job(&key)?;
    let failure = if d.groups.values().any(|g| g.unhealthy > 0) {
        Some((
            deployment_describe::UNHEALTHY,
            deployment_describe::UNHEALTHY_REVERTED,
        ))
    } else if d
        .groups
        .values()
        .any(|g| !g.is_complete() && g.require_progress_by.is_some_and(|by| by <= now))
    {
        Some((
            deployment_describe::PROGRESS_DEADLINE,
            deployment_describe::PROGRESS_DEADLINE_REVERTED,
        ))
    } else {
        None
    };
    if let Some((plain, reverted)) = failure {
        let revert = d
            .groups
            .values()
            .any(|g| g.auto_revert)
            .then(|| revert_to(snap, d, job))
            .flatten();
        let description = match &revert {
            Some(stable) => format!("{reverted} {}", stable.version),
            None => plain.to_string(),
        };
        tracing::info!(deployment_id = %d.id, job_id = %d.job_id, %description, "deployment failed");
        let eval_for = revert.as_deref().unwrap_or(job);
        let eval = Evaluation::new(
            EvalId::from_bytes(rng.random()),
            eval_for,
            TriggeredBy::DeploymentWatcher,
            now,
        );
        return Some((
            Command::DeploymentStatus {
                updates: vec![DeploymentStatusUpdate {
                    deployment_id: d.id,
                    status: DeploymentStatus::Failed,
                    description,
                }],
                revert: revert.map(|j| {
                    let mut j = (*j).clone();
                    j.stop = false;
                    j
                }),
                evals: vec![eval],
                now,
            },
            true,
        ));
    }
    if d.groups.values().all(DeploymentGroup::is_complete) {
        tracing::info!(deployment_id = %d.id, job_id = %d.job_id, "deployment successful");
        return Some((
            Command::DeploymentStatus {
                updates: vec![DeploymentStatusUpdate {
                    deployment_id: d.id,
                    status: DeploymentStatus::Successful,
                    description: deployment_describe::SUCCESSFUL.into(),
                }],
                revert: None,
                evals: vec![],
                now,
            },
            true,
        ));
    }
    let mut eval = || {
        Evaluation::new(
            EvalId::from_bytes(rng.random()),
            job,
            TriggeredBy::DeploymentWatcher,
            now,
        )
    };
    if d.requires_promotion() && d.has_auto_promote() && canaries_healthy(snap, d) {
        tracing::info!(deployment_id = %d.id, job_id = %d.job_id, "deployment auto-promoted");
        return Some((
            Command::DeploymentPromote {
                deployment_id: d.id,
                groups: Vec::new(),
                eval: eval(),
                now,
            },
            true,
        ));
    }
    (healthy(d) > healthy_seen).then(|| {
        (
            Command::EvalUpsert {
                evals: vec![eval()],
            },
            false,
        )
    })
}

/// Every group waiting for promotion has its canaries placed and healthy.
fn canaries_healthy(snap: &StateSnapshot, d: &Deployment) -> bool {
    d.groups.values().filter(|g| g.awaits_promotion()).all(|g| {
        let healthy = g
            .placed_canaries
            .iter()
            .filter(|id| {
                snap.alloc(id)
                    .and_then(|a| a.links.get().deployment.as_ref()?.health)
                    .is_some_and(|h| h.healthy)
            })
            .count();
        healthy as u32 >= g.desired_canaries
    })
}

/// The job's newest stable version before the deployment's, when its spec differs from
/// the job's current one (reverting to the same spec would change nothing).
pub fn revert_to(snap: &StateSnapshot, d: &Deployment, job: &Job) -> Option<std::sync::Arc<Job>> {
    snap.job_versions(&d.job_key())
        .into_iter()
        .find(|v| v.stable && v.version < d.job_version)
        .filter(|v| v.spec_differs(job))
}
