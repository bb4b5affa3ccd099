//! This server's scheduler workers: list, pause, resume, reconfigure.

use crate::error::ServerError;
use crate::handle::ServerHandle;
use crate::worker::{WorkerConfigError, WorkerInfo, WorkerPoolConfig};
use drover_proto::convert::WorkerTarget;

impl ServerHandle {
    /// Every worker of this server.
    pub async fn workers(&self) -> Vec<WorkerInfo> {
        self.inner.workers.lock().await.info()
    }

    pub async fn worker_config(&self) -> WorkerPoolConfig {
        self.inner.workers.lock().await.config().clone()
    }

    /// Pauses one worker or all of them.
    pub async fn pause_workers(
        &self,
        target: WorkerTarget,
    ) -> Result<Vec<WorkerInfo>, ServerError> {
        self.set_workers_paused(target, true).await
    }

    /// Resumes one paused worker or all paused workers.
    pub async fn resume_workers(
        &self,
        target: WorkerTarget,
    ) -> Result<Vec<WorkerInfo>, ServerError> {
        self.set_workers_paused(target, false).await
    }

    async fn set_workers_paused(
        &self,
        target: WorkerTarget,
        paused: bool,
    ) -> Result<Vec<WorkerInfo>, ServerError> {
        let pool = self.inner.workers.lock().await;
        match target {
            WorkerTarget::One { worker_id, .. } => {
                let changed = if paused {
                    pool.pause(&worker_id)
                } else {
                    pool.resume(&worker_id)
                };
                changed.map(|w| vec![w]).map_err(worker_error)
            }
            WorkerTarget::All { .. } if paused => Ok(pool.pause_all()),
            WorkerTarget::All { .. } => Ok(pool.resume_all()),
        }
    }

    /// Replaces the pool's configuration and rebuilds it; an invalid one changes nothing.
    pub async fn set_worker_config(
        &self,
        config: WorkerPoolConfig,
    ) -> Result<Vec<WorkerInfo>, ServerError> {
        self.inner
            .workers
            .lock()
            .await
            .reconfigure(config)
            .await
            .map_err(worker_error)
    }
}

fn worker_error(e: WorkerConfigError) -> ServerError {
    match e {
        WorkerConfigError::NotFound(id) => ServerError::not_found("worker", id),
        WorkerConfigError::BadStatus { .. } => ServerError::precondition(e.to_string()),
        WorkerConfigError::CountTooHigh { .. } => ServerError::InvalidArgument {
            reason: e.to_string(),
        },
    }
}
