//! Operator actions on deployments: promote, fail, pause, resume, unblock. Each is checked
//! here against the latest state for a clear error, and again by the FSM where it applies,
//! so of concurrent writers the first wins and the others are refused.

use super::ServerHandle;
use crate::ServerError;
use crate::clock::now;
use drover_core::fsm::Command;
use drover_core::state::StateSnapshot;
use drover_core::types::*;
use std::sync::Arc;

/// An operator's action on one deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeploymentAction {
    /// The named groups' canaries (none named: every group with canaries).
    Promote(Vec<String>),
    Fail,
    Pause,
    Resume,
    /// Marks it successful as it is.
    Unblock,
}

/// What an action wrote.
#[derive(Clone, Debug)]
pub struct DeploymentActed {
    pub deployment: Arc<Deployment>,
    pub eval_id: Option<EvalId>,
    pub index: u64,
}

impl ServerHandle {
    /// The deployment `text` names: its id, or a prefix of exactly one.
    pub fn resolve_deployment(
        &self,
        snap: &StateSnapshot,
        text: &str,
    ) -> Result<Arc<Deployment>, ServerError> {
        if let Ok(id) = text.parse::<DeploymentId>() {
            return snap
                .deployment(&id)
                .cloned()
                .ok_or_else(|| ServerError::not_found("deployment", id));
        }
        let prefix = IdPrefix::parse(text).map_err(|e| ServerError::InvalidArgument {
            reason: format!("deployment id {text:?}: {e}"),
        })?;
        let found: Vec<_> = snap.deployments_with_prefix(&prefix).take(4).collect();
        match found.as_slice() {
            [] => Err(ServerError::not_found("deployment", text)),
            [one] => Ok((*one).clone()),
            several => Err(ServerError::InvalidArgument {
                reason: format!(
                    "deployment id prefix {text:?} matches several deployments: {}",
                    several
                        .iter()
                        .map(|d| d.id.short())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }

    pub async fn deployment_action(
        &self,
        id: DeploymentId,
        action: DeploymentAction,
    ) -> Result<DeploymentActed, ServerError> {
        let snap = self.snapshot();
        let d = snap
            .deployment(&id)
            .cloned()
            .ok_or_else(|| ServerError::not_found("deployment", id))?;
        if !d.is_active() {
            return Err(ServerError::precondition(format!(
                "deployment {id} is {}: only a running or paused deployment changes",
                d.status.as_str()
            )));
        }
        let key = d.job_key();
        let job = snap.job(&key).cloned().ok_or_else(|| {
            ServerError::precondition(format!(
                "deployment {id} belongs to job {key}, which is gone"
            ))
        })?;
        let now = now();
        let eval = Evaluation::new(EvalId::random(), &job, TriggeredBy::DeploymentWatcher, now);
        let eval_id = eval.id;
        let set = |status: DeploymentStatus, description: String| DeploymentStatusUpdate {
            deployment_id: id,
            status,
            description,
        };
        let (command, eval_id) = match action {
            DeploymentAction::Promote(groups) => {
                if !d.groups.values().any(|g| g.desired_canaries > 0) {
                    return Err(ServerError::precondition(format!(
                        "deployment {id} has no canaries to promote"
                    )));
                }
                if let Some(g) = groups.iter().find(|g| !d.groups.contains_key(*g)) {
                    return Err(ServerError::precondition(format!(
                        "deployment {id} has no group {g:?} (it has {})",
                        d.groups.keys().cloned().collect::<Vec<_>>().join(", ")
                    )));
                }
                (
                    Command::DeploymentPromote {
                        deployment_id: id,
                        groups,
                        eval,
                        now,
                    },
                    Some(eval_id),
                )
            }
            DeploymentAction::Fail => {
                let revert = d
                    .groups
                    .values()
                    .any(|g| g.auto_revert)
                    .then(|| drover_core::leader::revert_to(&snap, &d, &job))
                    .flatten();
                let description = match &revert {
                    Some(v) => format!(
                        "{} - rolling back to job version {}",
                        deployment_describe::FAILED_BY_USER,
                        v.version
                    ),
                    None => deployment_describe::FAILED_BY_USER.to_string(),
                };
                let mut eval = eval;
                if let Some(v) = &revert {
                    eval = Evaluation::new(eval_id, v, TriggeredBy::DeploymentWatcher, now);
                }
                (
                    Command::DeploymentStatus {
                        updates: vec![set(DeploymentStatus::Failed, description)],
                        revert: revert.map(|v| {
                            let mut v = (*v).clone();
                            v.stop = false;
                            v
                        }),
                        evals: vec![eval],
                        now,
                    },
                    Some(eval_id),
                )
            }
            DeploymentAction::Pause | DeploymentAction::Resume => {
                let (from, to, description) = match action {
                    DeploymentAction::Pause => (
                        DeploymentStatus::Running,
                        DeploymentStatus::Paused,
                        deployment_describe::PAUSED,
                    ),
                    _ => (
                        DeploymentStatus::Paused,
                        DeploymentStatus::Running,
                        deployment_describe::RUNNING,
                    ),
                };
                if d.status != from {
                    return Err(ServerError::precondition(format!(
                        "deployment {id} is {}, not {}",
                        d.status.as_str(),
                        from.as_str()
                    )));
                }
                let evals = if to == DeploymentStatus::Running {
                    vec![eval]
                } else {
                    Vec::new()
                };
                let eval_id = evals.first().map(|e| e.id);
                (
                    Command::DeploymentStatus {
                        updates: vec![set(to, description.to_string())],
                        revert: None,
                        evals,
                        now,
                    },
                    eval_id,
                )
            }
            DeploymentAction::Unblock => (
                Command::DeploymentStatus {
                    updates: vec![set(
                        DeploymentStatus::Successful,
                        "Deployment marked as successful by an operator".to_string(),
                    )],
                    revert: None,
                    evals: Vec::new(),
                    now,
                },
                None,
            ),
        };
        let index = self.inner.writer.write(command).await?;
        tracing::info!(deployment_id = %id, job_id = %d.job_id, ?eval_id, index, "deployment changed by operator");
        let deployment = self.snapshot().deployment(&id).cloned().unwrap_or(d);
        Ok(DeploymentActed {
            deployment,
            eval_id,
            index,
        })
    }
}
