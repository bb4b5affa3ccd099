//! `drover.v1.OperatorService`: node operations and the scheduler configuration.

use super::Api;
use crate::clock::now;
use drover_core::Timestamp;
use drover_core::acl::{Area, Level, Need};
use drover_core::node_health::HealthConfig;
use drover_core::node_health::{HealthPeriods, gauges_of, time_left};
use drover_core::state::StateSnapshot;
use drover_core::types::{AllocId, Node, NodeId};
use drover_proto::WireEnum;
use drover_proto::convert::{
    DrainRequest, EligibilityChange, NodeFilter, SchedulerConfigUpdate, parse_id,
};
use drover_proto::v1 as pb;
use drover_proto::v1::operator_service_server::OperatorService;
use tonic::{Request, Response, Status};

/// The OperatorService implementation.
#[derive(Clone, Debug)]
pub struct OperatorApi(pub(crate) Api);

fn entry(
    snap: &StateSnapshot,
    node: &Node,
    health: &HealthConfig,
    now: Timestamp,
) -> pb::NodeListEntry {
    let live = snap
        .allocs_by_node(&node.id)
        .filter(|a| !a.is_terminal())
        .count();
    pb::NodeListEntry {
        node: Some(node.into()),
        live_allocs: u32::try_from(live).unwrap_or(u32::MAX),
        allocated: Some((&snap.node_usage(&node.id)).into()),
        health_time_left_ms: time_left(node, &HealthPeriods::from(health), now).map(ms),
    }
}

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn node_id(text: &str) -> Result<NodeId, Status> {
    Ok(parse_id("node_id", text)?)
}

impl OperatorApi {
    fn health_at(&self, id: &NodeId) -> i32 {
        self.0
            .handle
            .snapshot()
            .node(id)
            .map_or(0, |n| n.health.to_wire())
    }
}

#[tonic::async_trait]
impl OperatorService for OperatorApi {
    async fn node_list(
        &self,
        req: Request<pb::NodeListRequest>,
    ) -> Result<Response<pb::NodeListResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Node, Level::Read))?;
        let req = req.into_inner();
        let filter = NodeFilter::try_from(&req)?;
        let after: Option<NodeId> = super::page::cursor(&req.next_token)?;
        let size = super::page::size(req.page_size, self.0.handle.config().max_list_page);
        let snap = self.0.read(req.query.as_ref()).await?;
        let nodes = snap
            .nodes_after(after.as_ref())
            .filter(|n| filter.matches(n));
        let (nodes, next_token) = super::page::take(nodes, |n| n.id, None, size);
        let (health, now) = (&self.0.handle.config().health, now());
        Ok(Response::new(pb::NodeListResponse {
            next_token,
            nodes: nodes.iter().map(|n| entry(&snap, n, health, now)).collect(),
            counts: Some((&gauges_of(&snap)).into()),
            index: snap.latest_index(),
            health_periods: Some(pb::HealthPeriods {
                lost_grace_ms: ms(health.lost_grace),
                flaky_cool_down_ms: ms(health.flaky_cool_down),
            }),
        }))
    }

    async fn node_get(
        &self,
        req: Request<pb::NodeGetRequest>,
    ) -> Result<Response<pb::NodeGetResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Node, Level::Read))?;
        let req = req.into_inner();
        let id = node_id(&req.node_id)?;
        let snap = self.0.read(req.query.as_ref()).await?;
        let node = snap
            .node(&id)
            .ok_or_else(|| Status::not_found(format!("node {id} not found")))?;
        Ok(Response::new(pb::NodeGetResponse {
            node: Some(entry(&snap, node, &self.0.handle.config().health, now())),
            allocations: snap
                .allocs_by_node(&id)
                .map(|a| a.as_ref().into())
                .collect(),
            index: snap.latest_index(),
        }))
    }

    async fn node_offline(
        &self,
        req: Request<pb::NodeOfflineRequest>,
    ) -> Result<Response<pb::NodeOfflineResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Node, Level::Write))?;
        let id = node_id(&req.into_inner().node_id)?;
        let index = self.0.handle.node_offline(id).await?;
        Ok(Response::new(pb::NodeOfflineResponse {
            health: self.health_at(&id),
            index,
        }))
    }

    async fn node_online(
        &self,
        req: Request<pb::NodeOnlineRequest>,
    ) -> Result<Response<pb::NodeOnlineResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Node, Level::Write))?;
        let id = node_id(&req.into_inner().node_id)?;
        let index = self.0.handle.node_online(id).await?;
        Ok(Response::new(pb::NodeOnlineResponse {
            health: self.health_at(&id),
            index,
        }))
    }

    async fn node_drain(
        &self,
        req: Request<pb::NodeDrainRequest>,
    ) -> Result<Response<pb::NodeDrainResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Node, Level::Write))?;
        let drain = DrainRequest::try_from(req.into_inner())?;
        let id = drain.node_id;
        let index = self.0.handle.node_drain(drain).await?;
        Ok(Response::new(pb::NodeDrainResponse {
            eval_ids: evals_created_at(&self.0.handle.snapshot(), &id, index),
            index,
        }))
    }

    async fn node_eligibility(
        &self,
        req: Request<pb::NodeEligibilityRequest>,
    ) -> Result<Response<pb::NodeEligibilityResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Node, Level::Write))?;
        let change = EligibilityChange::try_from(req.into_inner())?;
        let id = change.node_id;
        let index = self.0.handle.node_eligibility(change).await?;
        Ok(Response::new(pb::NodeEligibilityResponse {
            eval_ids: evals_created_at(&self.0.handle.snapshot(), &id, index),
            index,
        }))
    }

    async fn node_purge(
        &self,
        req: Request<pb::NodePurgeRequest>,
    ) -> Result<Response<pb::NodePurgeResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Node, Level::Write))?;
        let id = node_id(&req.into_inner().node_id)?;
        let (evals, index) = self.0.handle.node_purge(id).await?;
        Ok(Response::new(pb::NodePurgeResponse {
            eval_ids: evals.iter().map(ToString::to_string).collect(),
            index,
        }))
    }

    async fn scheduler_get_config(
        &self,
        req: Request<pb::SchedulerGetConfigRequest>,
    ) -> Result<Response<pb::SchedulerGetConfigResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Read))?;
        let snap = self.0.read(req.into_inner().query.as_ref()).await?;
        Ok(Response::new(pb::SchedulerGetConfigResponse {
            config: Some(snap.scheduler_config().as_ref().into()),
            index: snap.latest_index(),
        }))
    }

    async fn scheduler_set_config(
        &self,
        req: Request<pb::SchedulerSetConfigRequest>,
    ) -> Result<Response<pb::SchedulerSetConfigResponse>, Status> {
        crate::auth::authorize(&req, Need::Area(Area::Operator, Level::Write))?;
        let update = SchedulerConfigUpdate::try_from(req.into_inner())?;
        let index = self.0.handle.set_scheduler_config(update).await?;
        Ok(Response::new(pb::SchedulerSetConfigResponse {
            updated: true,
            index,
        }))
    }

    async fn alloc_get(
        &self,
        req: Request<pb::AllocGetRequest>,
    ) -> Result<Response<pb::AllocGetResponse>, Status> {
        let acl = crate::auth::authorize(
            &req,
            Need::AnyNamespace(drover_core::acl::NamespaceCapability::ReadJob),
        )?;
        let req = req.into_inner();
        let id: AllocId = parse_id("alloc_id", &req.alloc_id)?;
        let snap = self.0.read(req.query.as_ref()).await?;
        let alloc = snap
            .alloc(&id)
            .ok_or_else(|| Status::not_found(format!("allocation {id} not found")))?;
        acl.check(&Need::Namespace(
            drover_core::acl::NamespaceCapability::ReadJob,
            &alloc.namespace,
        ))
        .map_err(|d| Status::permission_denied(d.to_string()))?;
        Ok(Response::new(pb::AllocGetResponse {
            allocation: Some(alloc.as_ref().into()),
            index: snap.latest_index(),
        }))
    }
    async fn alloc_list(
        &self,
        req: Request<pb::AllocListRequest>,
    ) -> Result<Response<pb::AllocListResponse>, Status> {
        use drover_core::acl::NamespaceCapability::ReadJob;
        let acl = match req.get_ref().namespace.as_str() {
            "" | "*" => crate::auth::authorize(&req, Need::AnyNamespace(ReadJob))?,
            ns => crate::auth::authorize(&req, Need::Namespace(ReadJob, ns))?,
        };
        let req = req.into_inner();
        let namespace = req.namespace.trim_start_matches('*');
        let prefix = match req.id_prefix.as_str() {
            "" => None,
            p => Some(
                drover_core::types::IdPrefix::parse(p)
                    .map_err(|e| Status::invalid_argument(format!("id_prefix: {e}")))?,
            ),
        };
        let after: Option<AllocId> = super::page::cursor(&req.next_token)?;
        let size = super::page::size(req.page_size, self.0.handle.config().max_list_page);
        let snap = self.0.read(req.query.as_ref()).await?;
        // In id order already (one range scan), so a page is what follows the cursor.
        let allocs: Box<dyn Iterator<Item = _>> = match &prefix {
            Some(p) => Box::new(snap.allocs_with_prefix(p)),
            None => Box::new(snap.allocs()),
        };
        let allocs = allocs
            .filter(|a| namespace.is_empty() || &*a.namespace == namespace)
            .filter(|a| acl.allows(&Need::Namespace(ReadJob, &a.namespace)));
        let (allocs, next_token) = super::page::take(allocs, |a| a.id, after.as_ref(), size);
        Ok(Response::new(pb::AllocListResponse {
            allocations: allocs.into_iter().map(|a| a.as_ref().into()).collect(),
            index: snap.latest_index(),
            next_token,
        }))
    }
}

/// The evals a node write created: those of jobs with allocations on the node, created at
/// the write's index. (The handle returns only the index.)
fn evals_created_at(snap: &StateSnapshot, node: &NodeId, index: u64) -> Vec<String> {
    let mut ids: Vec<String> = snap
        .evals()
        .filter(|e| e.create_index == index)
        .filter(|e| e.node_id.as_ref().is_none_or(|n| n == node))
        .map(|e| e.id.to_string())
        .collect();
    ids.sort();
    ids
}
