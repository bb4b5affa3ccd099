//! Jobs: register (with check-and-set in the FSM), dispatch, deregister.

use crate::clock::now;
use crate::error::ServerError;
use crate::handle::ServerHandle;
use drover_core::fsm::ApplyError;
use drover_core::fsm::Command;
use drover_core::periodic::{DispatchError, ForceError, dispatch, force};
use drover_core::state::StateSnapshot;
use drover_core::types::*;
use drover_core::validate::{canonicalize, validate_job};
use drover_proto::convert::{DispatchRequest, JobRegistration};
use std::time::Duration;

/// What a job registration committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRegistered {
    /// `None` for periodic and parameterized parents, which get no eval.
    pub eval_id: Option<EvalId>,
    pub job_modify_index: Index,
    /// The job's version after the write, read under the canonical key (the default
    /// namespace applied), so an empty request namespace still answers the real version.
    pub job_version: u64,
    /// The Raft index of the entry.
    pub index: Index,
}

/// What a dispatch committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobDispatched {
    /// The child job's id.
    pub job_id: JobId,
    pub eval_id: EvalId,
    /// The Raft index of the entry.
    pub index: Index,
}

/// What a job deregistration committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobDeregistered {
    pub eval_id: EvalId,
    pub index: Index,
}

impl ServerHandle {
    /// Validates the job (every problem listed), then commits it with its registration
    /// eval in one entry.
    pub async fn register_job(&self, reg: JobRegistration) -> Result<JobRegistered, ServerError> {
        let mut job = reg.job;
        canonicalize(&mut job);
        validate_job(&job, &self.inner.config.limits)?;
        let key = job.key();
        let snap = self.snapshot();
        crate::admission::check_registration(snap.scheduler_config())?;
        self.check_room(&snap, snap.job(&key).is_none()).await?;
        let now = now();
        let eval = (!job.is_template())
            .then(|| Evaluation::new(EvalId::random(), &job, TriggeredBy::JobRegister, now));
        let eval_id = eval.as_ref().map(|e| e.id);
        // Check-and-set runs in the FSM, so of concurrent writers expecting one index,
        // exactly one commits; a refusal comes back as `Refused` (FAILED_PRECONDITION).
        let cmd = match reg.enforce_index {
            Some(enforce_index) => Command::JobRegisterChecked {
                job,
                eval,
                now,
                enforce_index,
            },
            None => Command::JobRegister { job, eval, now },
        };
        let index = self.inner.writer.write(cmd).await?;
        let (job_modify_index, job_version) = self
            .snapshot()
            .job(&key)
            .map_or((index, 0), |j| (j.job_modify_index, j.version));
        tracing::info!(job_id = %key, eval_id = ?eval_id, index, "job registered");
        Ok(JobRegistered {
            eval_id,
            job_modify_index,
            job_version,
            index,
        })
    }

    /// Refuses new work while the cluster is at its job limit (for a new job) or the
    /// broker holds its maximum of outstanding evals, with a hint of when to retry.
    async fn check_room(&self, snap: &StateSnapshot, new_job: bool) -> Result<(), ServerError> {
        let config = &self.inner.config;
        if new_job && snap.job_count() >= config.max_jobs {
            return Err(ServerError::ResourceExhausted {
                reason: format!("the cluster holds its maximum of {} jobs", config.max_jobs),
                retry_after: Duration::from_secs(60),
            });
        }
        if let Ok(stats) = self.inner.leadership.stats().await {
            let held = stats.broker.total.tracked();
            if held >= config.max_outstanding_evals {
                return Err(ServerError::ResourceExhausted {
                    reason: format!(
                        "{held} evaluations are outstanding, the maximum is {}",
                        config.max_outstanding_evals
                    ),
                    retry_after: Duration::from_secs(1),
                });
            }
        }
        Ok(())
    }

    /// Dispatches a parameterized job: a child job with the request's meta and payload,
    /// committed with its eval in one entry.
    pub async fn dispatch_job(&self, req: DispatchRequest) -> Result<JobDispatched, ServerError> {
        let snap = self.snapshot();
        let parent = snap
            .job(&req.parent)
            .ok_or_else(|| ServerError::not_found("job", &req.parent))?;
        crate::admission::check_registration(snap.scheduler_config())?;
        self.check_room(&snap, true).await?;
        let now = now();
        let (job, eval) = {
            let mut rng = rand::rng();
            dispatch(
                parent,
                req.meta,
                req.payload,
                now,
                &mut rng,
                &self.inner.config.limits,
            )
            .map_err(dispatch_error)?
        };
        let job_id = job.id.clone();
        let eval_id = eval.id;
        let index = self
            .inner
            .writer
            .write(Command::JobRegister {
                job,
                eval: Some(eval),
                now,
            })
            .await?;
        tracing::info!(parent_id = %req.parent, %job_id, %eval_id, index, "job dispatched");
        Ok(JobDispatched {
            job_id,
            eval_id,
            index,
        })
    }

    /// Launches a child of periodic job `key` now, outside its schedule. The child must
    /// be new (a check-and-set register), so two forces in one second launch one child.
    pub async fn force_periodic(&self, key: JobKey) -> Result<JobDispatched, ServerError> {
        let snap = self.snapshot();
        let parent = snap
            .job(&key)
            .ok_or_else(|| ServerError::not_found("job", &key))?;
        crate::admission::check_registration(snap.scheduler_config())?;
        self.check_room(&snap, true).await?;
        let now = now();
        let launch = force(parent, now, &mut rand::rng(), &self.inner.config.limits)
            .map_err(|e: ForceError| ServerError::precondition(e.to_string()))?;
        let job_id = launch.job.id.clone();
        let eval_id = launch.eval.id;
        let written = self
            .inner
            .writer
            .write(Command::JobRegisterChecked {
                job: launch.job,
                eval: Some(launch.eval),
                now,
                enforce_index: 0,
            })
            .await;
        let index = match written {
            Ok(index) => index,
            Err(ServerError::Refused {
                error: ApplyError::JobIndexMismatch { .. },
                ..
            }) => {
                return Err(ServerError::precondition(format!(
                    "job {:?} was already launched this second (child {job_id:?}); try again",
                    key.id.as_str()
                )));
            }
            Err(e) => return Err(e),
        };
        tracing::info!(parent_id = %key, %job_id, %eval_id, index, "periodic job forced");
        Ok(JobDispatched {
            job_id,
            eval_id,
            index,
        })
    }

    /// Stops a job (or removes it with `purge`), with the eval that stops its allocations.
    pub async fn deregister_job(
        &self,
        key: JobKey,
        purge: bool,
    ) -> Result<JobDeregistered, ServerError> {
        let snap = self.snapshot();
        let job = snap
            .job(&key)
            .ok_or_else(|| ServerError::not_found("job", &key))?;
        let now = now();
        let eval = Evaluation::new(EvalId::random(), job, TriggeredBy::JobDeregister, now);
        let eval_id = eval.id;
        let index = self
            .inner
            .writer
            .write(Command::JobDeregister {
                job: key.clone(),
                purge,
                eval: Some(eval),
                now,
            })
            .await?;
        tracing::info!(job_id = %key, %eval_id, purge, index, "job deregistered");
        Ok(JobDeregistered { eval_id, index })
    }
}

fn dispatch_error(e: DispatchError) -> ServerError {
    match e {
        DispatchError::NotParameterized { .. } | DispatchError::Stopped { .. } => {
            ServerError::precondition(e.to_string())
        }
        other => ServerError::InvalidArgument {
            reason: other.to_string(),
        },
    }
}
