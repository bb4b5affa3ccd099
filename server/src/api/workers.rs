//! `drover.v1.WorkerService`: every server's scheduler workers. A call naming another
//! server is passed on to it (with the caller's token, which it checks again); `list` and
//! `all` without a server reach every server of the cluster, so "pause every worker" means
//! every worker whichever server answers.

use super::Api;
use crate::raft::ServerId;
use crate::worker::{WorkerInfo, WorkerStatus, WorkloadStatus};
use drover_core::acl::{Area, Level, Need};
use drover_proto::WireEnum;
use drover_proto::convert::{WorkerConfigUpdate, WorkerTarget};
use drover_proto::v1 as pb;
use drover_proto::v1::worker_service_client::WorkerServiceClient;
use drover_proto::v1::worker_service_server::WorkerService;
use tonic::metadata::MetadataMap;
use tonic::transport::Channel;
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

    /// The server `server_id` names when it is another one: `None` for this server (or
    /// none named), INVALID_ARGUMENT for a malformed id.
    fn other(&self, server_id: Option<&str>) -> Result<Option<ServerId>, Status> {
        let Some(id) = server_id.filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        let id: ServerId = id.parse().map_err(|_| {
            Status::invalid_argument(format!("server_id: {id:?} is not a server id (a number)"))
        })?;
        Ok((id != self.0.handle.server_id()).then_some(id))
    }

    /// A client of server `id`'s workers.
    async fn remote(&self, id: ServerId) -> Result<WorkerServiceClient<Channel>, Status> {
        let channel = self.0.handle.inner.directory.server(id).await?;
        Ok(WorkerServiceClient::new(channel))
    }

    /// The other servers of the cluster, by id.
    fn others(&self) -> Vec<ServerId> {
        let own = self.0.handle.server_id();
        let mut ids: Vec<ServerId> = self
            .0
            .handle
            .inner
            .directory
            .members()
            .into_iter()
            .filter(|id| *id != own)
            .collect();
        ids.sort_unstable();
        ids
    }
}

/// `message` as a call passed on to another server: the caller's token (the other server
/// checks it again) and the forwarded mark (so the call is not passed on again).
fn onward<T>(from: &MetadataMap, own: ServerId, message: T) -> Request<T> {
    let mut req = Request::new(message);
    if let Some(token) = from.get("authorization") {
        req.metadata_mut().insert("authorization", token.clone());
    }
    if let Ok(v) = own.to_string().parse() {
        req.metadata_mut()
            .insert(crate::forward::FORWARDED_HEADER, v);
    }
    req
}

/// A remote server's refusal or failure, naming it.
fn from_server(id: ServerId, s: Status) -> Status {
    Status::new(s.code(), format!("server {id}: {}", s.message()))
}

fn target_server(t: &WorkerTarget) -> Option<&str> {
    match t {
        WorkerTarget::One { server_id, .. } | WorkerTarget::All { server_id } => {
            server_id.as_deref()
        }
    }
}

/// What a pause or resume does.
#[derive(Clone, Copy, Debug)]
enum Action {
    Pause,
    Resume,
}

impl WorkerApi {
    /// `action` on this server's workers that `target` selects.
    async fn local(
        &self,
        action: Action,
        target: WorkerTarget,
    ) -> Result<Vec<pb::WorkerInfo>, Status> {
        let workers = match action {
            Action::Pause => self.0.handle.pause_workers(target).await?,
            Action::Resume => self.0.handle.resume_workers(target).await?,
        };
        Ok(self.infos(&workers))
    }

    /// `action` on server `id`'s workers that `selector` (naming `id`) selects.
    async fn on_server(
        &self,
        metadata: &MetadataMap,
        id: ServerId,
        action: Action,
        mut selector: pb::WorkerSelector,
    ) -> Result<Vec<pb::WorkerInfo>, Status> {
        selector.server_id = id.to_string();
        let own = self.0.handle.server_id();
        let mut client = self.remote(id).await.map_err(|s| from_server(id, s))?;
        let answer = match action {
            Action::Pause => client
                .pause(onward(
                    metadata,
                    own,
                    pb::PauseWorkersRequest {
                        workers: Some(selector),
                    },
                ))
                .await
                .map(|a| a.into_inner().workers),
            Action::Resume => client
                .resume(onward(
                    metadata,
                    own,
                    pb::ResumeWorkersRequest {
                        workers: Some(selector),
                    },
                ))
                .await
                .map(|a| a.into_inner().workers),
        };
        answer.map_err(|s| from_server(id, s))
    }

    /// A pause or resume wherever `target` points: the server it names; for one worker on
    /// no named server, this server's or whichever server has it; for `all` on no named
    /// server, every server's (UNAVAILABLE naming those that did not answer, after the
    /// others were done).
    async fn route(
        &self,
        metadata: &MetadataMap,
        target: &WorkerTarget,
        selector: pb::WorkerSelector,
        action: Action,
    ) -> Result<Vec<pb::WorkerInfo>, Status> {
        if let Some(id) = self.other(target_server(target))? {
            return self.on_server(metadata, id, action, selector).await;
        }
        if target_server(target).is_some() {
            return self.local(action, target.clone()).await;
        }
        match target {
            WorkerTarget::One { .. } => match self.local(action, target.clone()).await {
                Err(s) if s.code() == tonic::Code::NotFound => {
                    for id in self.others() {
                        match self.on_server(metadata, id, action, selector.clone()).await {
                            Err(e) if e.code() == tonic::Code::NotFound => continue,
                            answer => return answer,
                        }
                    }
                    Err(s)
                }
                answer => answer,
            },
            WorkerTarget::All { .. } => {
                let mut workers = self.local(action, target.clone()).await?;
                let mut done = vec![self.0.handle.server_id().to_string()];
                let mut failed = Vec::new();
                for id in self.others() {
                    match self.on_server(metadata, id, action, selector.clone()).await {
                        Ok(w) => {
                            workers.extend(w);
                            done.push(id.to_string());
                        }
                        Err(s) => failed.push(s.message().to_string()),
                    }
                }
                if failed.is_empty() {
                    Ok(workers)
                } else {
                    Err(Status::unavailable(format!(
                        "done on servers {}, not on the others: {}",
                        done.join(", "),
                        failed.join("; ")
                    )))
                }
            }
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
        let own = self.0.handle.server_id();
        let named = req.get_ref().server_id.clone();
        if let Some(id) = self.other(Some(&named))? {
            let call = onward(
                req.metadata(),
                own,
                pb::ListWorkersRequest { server_id: named },
            );
            let answer = self.remote(id).await?.list(call).await;
            return answer.map_err(|s| from_server(id, s));
        }
        let mut workers = self.infos(&self.0.handle.workers().await);
        let mut unreachable = Vec::new();
        if named.is_empty() {
            for id in self.others() {
                let call = onward(
                    req.metadata(),
                    own,
                    pb::ListWorkersRequest {
                        server_id: id.to_string(),
                    },
                );
                let answer = match self.remote(id).await {
                    Ok(mut client) => client.list(call).await,
                    Err(s) => Err(s),
                };
                match answer {
                    Ok(a) => workers.extend(a.into_inner().workers),
                    Err(s) => unreachable.push(format!("{id}: {}", s.message())),
                }
            }
        }
        workers.sort_by(|a, b| (&a.server_id, &a.id).cmp(&(&b.server_id, &b.id)));
        Ok(Response::new(pb::ListWorkersResponse {
            workers,
            unreachable,
        }))
    }

    async fn pause(
        &self,
        req: Request<pb::PauseWorkersRequest>,
    ) -> Result<Response<pb::PauseWorkersResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Write))?;
        let (metadata, message) = (req.metadata().clone(), req.into_inner());
        let target = WorkerTarget::try_from(message.clone())?;
        let workers = self
            .route(
                &metadata,
                &target,
                message.workers.unwrap_or_default(),
                Action::Pause,
            )
            .await?;
        Ok(Response::new(pb::PauseWorkersResponse { workers }))
    }

    async fn resume(
        &self,
        req: Request<pb::ResumeWorkersRequest>,
    ) -> Result<Response<pb::ResumeWorkersResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Write))?;
        let (metadata, message) = (req.metadata().clone(), req.into_inner());
        let target = WorkerTarget::try_from(message.clone())?;
        let workers = self
            .route(
                &metadata,
                &target,
                message.workers.unwrap_or_default(),
                Action::Resume,
            )
            .await?;
        Ok(Response::new(pb::ResumeWorkersResponse { workers }))
    }

    async fn get_config(
        &self,
        req: Request<pb::GetWorkerConfigRequest>,
    ) -> Result<Response<pb::GetWorkerConfigResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Read))?;
        if let Some(id) = self.other(Some(&req.get_ref().server_id))? {
            let metadata = req.metadata().clone();
            let call = onward(&metadata, self.0.handle.server_id(), req.into_inner());
            let answer = self.remote(id).await?.get_config(call).await;
            return answer.map_err(|s| from_server(id, s));
        }
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
        if let Some(id) = self.other(Some(&req.get_ref().server_id))? {
            let metadata = req.metadata().clone();
            let call = onward(&metadata, self.0.handle.server_id(), req.into_inner());
            let answer = self.remote(id).await?.set_config(call).await;
            return answer.map_err(|s| from_server(id, s));
        }
        let update = WorkerConfigUpdate::try_from(req.into_inner())?;
        let workers = self.0.handle.set_worker_config(update.config).await?;
        let config = self.0.handle.worker_config().await;
        Ok(Response::new(pb::SetWorkerConfigResponse {
            config: Some((&config).into()),
            workers: self.infos(&workers),
        }))
    }
}
