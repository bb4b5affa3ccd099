//! `drover.v1.DeploymentService`: deployments read and acted on. Reads need `read-job`,
//! actions `submit-job`, in the deployment's namespace.

use super::Api;
use crate::auth::{authorize, namespace_or_default as ns_of};
use crate::handle::DeploymentAction;
use drover_core::acl::{Acl, NamespaceCapability as Cap, Need};
use drover_core::types::{Deployment, JobId};
use drover_proto::v1 as pb;
use drover_proto::v1::deployment_service_server::DeploymentService;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The DeploymentService implementation.
#[derive(Clone, Debug)]
pub struct DeploymentApi(pub(crate) Api);

impl DeploymentApi {
    /// The deployment `id` names, once the caller may do `cap` in its namespace. A caller
    /// with the grant in no namespace learns nothing of deployments.
    fn target(&self, acl: &Acl, id: &str, cap: Cap) -> Result<Arc<Deployment>, Status> {
        let snap = self.0.handle.snapshot();
        let d = self.0.handle.resolve_deployment(&snap, id)?;
        acl.check(&Need::Namespace(cap, &d.namespace))
            .map_err(|denied| Status::permission_denied(denied.to_string()))?;
        Ok(d)
    }

    async fn act<T>(
        &self,
        req: Request<T>,
        id: &str,
        action: DeploymentAction,
    ) -> Result<Response<pb::DeploymentActionResponse>, Status> {
        let acl = authorize(&req, Need::AnyNamespace(Cap::SubmitJob))?;
        let d = self.target(&acl, id, Cap::SubmitJob)?;
        let acted = self.0.handle.deployment_action(d.id, action).await?;
        Ok(Response::new(pb::DeploymentActionResponse {
            deployment: Some(acted.deployment.as_ref().into()),
            eval_id: acted.eval_id.map(|e| e.to_string()).unwrap_or_default(),
            index: acted.index,
        }))
    }
}

#[tonic::async_trait]
impl DeploymentService for DeploymentApi {
    async fn list(
        &self,
        req: Request<pb::ListDeploymentsRequest>,
    ) -> Result<Response<pb::ListDeploymentsResponse>, Status> {
        let acl = match req.get_ref().namespace.as_str() {
            "*" => authorize(&req, Need::AnyNamespace(Cap::ReadJob))?,
            ns => authorize(&req, Need::Namespace(Cap::ReadJob, ns_of(ns)))?,
        };
        let req = req.into_inner();
        let snap = self.0.read(req.query.as_ref()).await?;
        let namespace = (req.namespace != "*").then(|| ns_of(&req.namespace).to_string());
        let job = (!req.job_id.is_empty()).then(|| JobId::new(&req.job_id));
        let mut found: Vec<_> = snap
            .deployments()
            .filter(|d| namespace.as_ref().is_none_or(|ns| d.namespace == *ns))
            .filter(|d| job.as_ref().is_none_or(|j| d.job_id == *j))
            .filter(|d| acl.allows(&Need::Namespace(Cap::ReadJob, &d.namespace)))
            .collect();
        found.sort_by_key(|d| (std::cmp::Reverse(d.create_index), d.id));
        Ok(Response::new(pb::ListDeploymentsResponse {
            deployments: found.iter().map(|d| d.as_ref().into()).collect(),
            index: snap.latest_index(),
        }))
    }

    async fn get(
        &self,
        req: Request<pb::GetDeploymentRequest>,
    ) -> Result<Response<pb::GetDeploymentResponse>, Status> {
        let acl = authorize(&req, Need::AnyNamespace(Cap::ReadJob))?;
        let req = req.into_inner();
        let snap = self.0.read(req.query.as_ref()).await?;
        let d = self.0.handle.resolve_deployment(&snap, &req.id)?;
        acl.check(&Need::Namespace(Cap::ReadJob, &d.namespace))
            .map_err(|denied| Status::permission_denied(denied.to_string()))?;
        Ok(Response::new(pb::GetDeploymentResponse {
            deployment: Some(d.as_ref().into()),
            index: snap.latest_index(),
        }))
    }

    async fn promote(
        &self,
        req: Request<pb::PromoteDeploymentRequest>,
    ) -> Result<Response<pb::DeploymentActionResponse>, Status> {
        let id = req.get_ref().id.clone();
        let groups = req.get_ref().groups.clone();
        self.act(req, &id, DeploymentAction::Promote(groups)).await
    }

    async fn fail(
        &self,
        req: Request<pb::DeploymentIdRequest>,
    ) -> Result<Response<pb::DeploymentActionResponse>, Status> {
        let id = req.get_ref().id.clone();
        self.act(req, &id, DeploymentAction::Fail).await
    }

    async fn pause(
        &self,
        req: Request<pb::DeploymentIdRequest>,
    ) -> Result<Response<pb::DeploymentActionResponse>, Status> {
        let id = req.get_ref().id.clone();
        self.act(req, &id, DeploymentAction::Pause).await
    }

    async fn resume(
        &self,
        req: Request<pb::DeploymentIdRequest>,
    ) -> Result<Response<pb::DeploymentActionResponse>, Status> {
        let id = req.get_ref().id.clone();
        self.act(req, &id, DeploymentAction::Resume).await
    }

    async fn unblock(
        &self,
        req: Request<pb::DeploymentIdRequest>,
    ) -> Result<Response<pb::DeploymentActionResponse>, Status> {
        let id = req.get_ref().id.clone();
        self.act(req, &id, DeploymentAction::Unblock).await
    }
}
