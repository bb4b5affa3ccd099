//! `drover.v1.AllocService`: task logs and restarts (served by the allocation's agent,
//! reached through [`crate::agent_link`] with a grant for that allocation, never the
//! caller's token), and stopping an allocation.

use super::Api;
use crate::agent_link::{AgentLinks, agent_status, granted};
use drover_core::acl::{NamespaceCapability as Cap, Need};
use drover_core::types::{AllocId, Allocation, Node};
use drover_proto::convert::parse_id;
use drover_proto::v1 as pb;
use drover_proto::v1::alloc_service_server::AllocService;
use std::pin::Pin;
use std::sync::Arc;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};

/// The AllocService implementation.
#[derive(Clone, Debug)]
pub struct AllocApi {
    pub(crate) api: Api,
    pub(crate) agents: Arc<AgentLinks>,
}

type LogStream = Pin<Box<dyn Stream<Item = Result<pb::AllocLogsResponse, Status>> + Send>>;

impl AllocApi {
    pub(crate) fn new(api: Api) -> Self {
        let agents = Arc::new(AgentLinks::new(api.handle.config().tls.clone()));
        Self { api, agents }
    }

    /// The caller, if it holds `cap` in some namespace (so that a token with no such grant
    /// learns nothing of allocations). A denial names the allocation's namespace when the
    /// allocation exists, so a read-only token is told where it lacks the grant.
    fn authorize<T>(
        &self,
        req: &Request<T>,
        id: &str,
        cap: Cap,
    ) -> Result<Arc<drover_core::acl::Acl>, Status> {
        let acl = crate::auth::caller(req)?;
        let Err(denied) = acl.check(&Need::AnyNamespace(cap)) else {
            return Ok(acl);
        };
        let snap = self.api.handle.snapshot();
        let namespace = id
            .parse::<AllocId>()
            .ok()
            .and_then(|id| snap.alloc(&id).map(|a| a.namespace.clone()));
        let message = match namespace {
            Some(ns) => match acl.check(&Need::Namespace(cap, &ns)) {
                Err(d) => d.to_string(),
                Ok(()) => denied.to_string(),
            },
            None => denied.to_string(),
        };
        Err(Status::permission_denied(message))
    }

    /// The allocation `id` names, if the caller may do `cap` in its namespace, and its node.
    fn target(
        &self,
        acl: &drover_core::acl::Acl,
        id: &str,
        cap: Cap,
    ) -> Result<(Arc<Allocation>, Arc<Node>), Status> {
        let id: AllocId = parse_id("alloc_id", id)?;
        let snap = self.api.handle.snapshot();
        let alloc = snap
            .alloc(&id)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("allocation {id} not found")))?;
        acl.check(&Need::Namespace(cap, &alloc.namespace))
            .map_err(|d| Status::permission_denied(d.to_string()))?;
        let node = snap.node(&alloc.node_id).cloned().ok_or_else(|| {
            Status::failed_precondition(format!(
                "allocation {id} is on node {}, which is gone",
                alloc.node_id
            ))
        })?;
        Ok((alloc, node))
    }
}

#[tonic::async_trait]
impl AllocService for AllocApi {
    type LogsStream = LogStream;

    async fn logs(
        &self,
        req: Request<pb::AllocLogsRequest>,
    ) -> Result<Response<Self::LogsStream>, Status> {
        let acl = self.authorize(&req, &req.get_ref().alloc_id, Cap::ReadLogs)?;
        let (alloc, node) = self.target(&acl, &req.get_ref().alloc_id, Cap::ReadLogs)?;
        let task = req.get_ref().task.clone();
        let call = granted(
            &node,
            alloc.id,
            &task,
            pb::AllocAccess::ReadLogs,
            crate::clock::now(),
            req.into_inner(),
        )?;
        let answer = self
            .agents
            .client(&node)?
            .logs(call)
            .await
            .map_err(|s| agent_status(&node, s))?;
        let stream = answer
            .into_inner()
            .map(move |item| item.map_err(|s| agent_status(&node, s)));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn restart(
        &self,
        req: Request<pb::AllocRestartRequest>,
    ) -> Result<Response<pb::AllocRestartResponse>, Status> {
        let acl = self.authorize(&req, &req.get_ref().alloc_id, Cap::AllocLifecycle)?;
        let (alloc, node) = self.target(&acl, &req.get_ref().alloc_id, Cap::AllocLifecycle)?;
        let task = req.get_ref().task.clone();
        let call = granted(
            &node,
            alloc.id,
            &task,
            pb::AllocAccess::Lifecycle,
            crate::clock::now(),
            req.into_inner(),
        )?;
        let answer = self
            .agents
            .client(&node)?
            .restart(call)
            .await
            .map_err(|s| agent_status(&node, s))?
            .into_inner();
        tracing::info!(alloc_id = %alloc.id, node_id = %node.id, tasks = ?answer.tasks, "allocation restarted in place");
        Ok(Response::new(answer))
    }

    async fn stop(
        &self,
        req: Request<pb::AllocStopRequest>,
    ) -> Result<Response<pb::AllocStopResponse>, Status> {
        let acl = self.authorize(&req, &req.get_ref().alloc_id, Cap::AllocLifecycle)?;
        let (alloc, _node) = self.target(&acl, &req.get_ref().alloc_id, Cap::AllocLifecycle)?;
        let stopped = self.api.handle.stop_alloc(alloc.id).await?;
        Ok(Response::new(pb::AllocStopResponse {
            eval_id: stopped.eval_id.to_string(),
            index: stopped.index,
        }))
    }
}
