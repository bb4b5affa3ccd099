//! `drover.v1.WorkerService`: this server's scheduler workers.

use super::Api;
use crate::worker::{WorkerInfo, WorkerStatus, WorkloadStatus};
use drover_core::acl::{Area, Level, Need};
use drover_proto::WireEnum;
use drover_proto::convert::{WorkerConfigUpdate, WorkerTarget};
use drover_proto::v1 as pb;
use drover_proto::v1::worker_service_server::WorkerService;
use tonic::{Request, Response, Status};

/// The WorkerService implementation.
#[derive(Clone, Debug)]
pub struct WorkerApi(pub(crate) Api);

// drover-proto has no conversion for the server's worker types; these are the local ones.
fn status(s: WorkerStatus) -> pb::WorkerStatus {
    match s {
        WorkerStatus::Starting => pb::WorkerStatus::Starting,
        WorkerStatus::Started => pb::WorkerStatus::Started,
        WorkerStatus::Pausing => pb::WorkerStatus::Pausing,
        WorkerStatus::Paused => pb::WorkerStatus::Paused,
        WorkerStatus::Resuming => pb::WorkerStatus::Resuming,
        WorkerStatus::Stopping => pb::WorkerStatus::Stopping,
        WorkerStatus::Stopped => pb::WorkerStatus::Stopped,
    }
}

fn workload(s: WorkloadStatus) -> pb::WorkloadStatus {
    match s {
        WorkloadStatus::WaitingToDequeue => pb::WorkloadStatus::WaitingToDequeue,
        WorkloadStatus::WaitingForRaft => pb::WorkloadStatus::WaitingForRaft,
        WorkloadStatus::Scheduling => pb::WorkloadStatus::Scheduling,
        WorkloadStatus::Submitting => pb::WorkloadStatus::Submitting,
        WorkloadStatus::Backoff => pb::WorkloadStatus::Backoff,
        WorkloadStatus::Paused => pb::WorkloadStatus::Paused,
        WorkloadStatus::Stopped => pb::WorkloadStatus::Stopped,
    }
}

impl WorkerApi {
    fn info(&self, w: &WorkerInfo) -> pb::WorkerInfo {
        pb::WorkerInfo {
            id: w.id.clone(),
            server_id: self.0.handle.server_id().to_string(),
            enabled_schedulers: w.enabled.iter().map(|t| t.to_wire()).collect(),
            started_unix_ms: w.started_at.as_millis(),
            status: status(w.status).into(),
            workload_status: workload(w.workload).into(),
        }
    }

    fn infos(&self, ws: &[WorkerInfo]) -> Vec<pb::WorkerInfo> {
        ws.iter().map(|w| self.info(w)).collect()
    }

    /// Only this server is reachable until forwarding comes with the multi-server work.
    fn check_server(&self, server_id: Option<&str>) -> Result<(), Status> {
        match server_id {
            Some(id) if !id.is_empty() && id != self.0.handle.server_id().to_string() => {
                Err(Status::not_found(format!(
                    "server {id} not found (this is server {})",
                    self.0.handle.server_id()
                )))
            }
            _ => Ok(()),
        }
    }
}

fn target_server(t: &WorkerTarget) -> Option<&str> {
    match t {
        WorkerTarget::One { server_id, .. } | WorkerTarget::All { server_id } => {
            server_id.as_deref()
        }
    }
}

#[tonic::async_trait]
impl WorkerService for WorkerApi {
    async fn list(
        &self,
        req: Request<pb::ListWorkersRequest>,
    ) -> Result<Response<pb::ListWorkersResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Read))?;
        self.check_server(Some(&req.into_inner().server_id))?;
        let workers = self.0.handle.workers().await;
        Ok(Response::new(pb::ListWorkersResponse {
            workers: self.infos(&workers),
        }))
    }

    async fn pause(
        &self,
        req: Request<pb::PauseWorkersRequest>,
    ) -> Result<Response<pb::PauseWorkersResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Write))?;
        let target = WorkerTarget::try_from(req.into_inner())?;
        self.check_server(target_server(&target))?;
        let workers = self.0.handle.pause_workers(target).await?;
        Ok(Response::new(pb::PauseWorkersResponse {
            workers: self.infos(&workers),
        }))
    }

    async fn resume(
        &self,
        req: Request<pb::ResumeWorkersRequest>,
    ) -> Result<Response<pb::ResumeWorkersResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Write))?;
        let target = WorkerTarget::try_from(req.into_inner())?;
        self.check_server(target_server(&target))?;
        let workers = self.0.handle.resume_workers(target).await?;
        Ok(Response::new(pb::ResumeWorkersResponse {
            workers: self.infos(&workers),
        }))
    }

    async fn get_config(
        &self,
        req: Request<pb::GetWorkerConfigRequest>,
    ) -> Result<Response<pb::GetWorkerConfigResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Read))?;
        self.check_server(Some(&req.into_inner().server_id))?;
        let config = self.0.handle.worker_config().await;
        Ok(Response::new(pb::GetWorkerConfigResponse {
            config: Some((&config).into()),
            max_count: crate::config::cpu_count(),
        }))
    }

    async fn set_config(
        &self,
        req: Request<pb::SetWorkerConfigRequest>,
    ) -> Result<Response<pb::SetWorkerConfigResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Write))?;
        let update = WorkerConfigUpdate::try_from(req.into_inner())?;
        self.check_server(update.server_id.as_deref())?;
        let workers = self.0.handle.set_worker_config(update.config).await?;
        let config = self.0.handle.worker_config().await;
        Ok(Response::new(pb::SetWorkerConfigResponse {
            config: Some((&config).into()),
            workers: self.infos(&workers),
        }))
    }
}
