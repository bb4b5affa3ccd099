//! `drover.v1.EvalService`: evaluations, blocked evals and the leader's queues.

use super::Api;
use super::page::{self, NewestFirstCursor};
use crate::auth::{authorize, namespace_or_default as ns_of};
use drover_core::acl::{Area, Level, NamespaceCapability as Cap, Need};
use drover_core::types::EvalId;
use drover_proto::convert::{EvalFilter, parse_id};
use drover_proto::v1 as pb;
use drover_proto::v1::eval_service_server::EvalService;
use tonic::{Request, Response, Status};

/// The EvalService implementation.
#[derive(Clone, Debug)]
pub struct EvalApi(pub(crate) Api);

#[tonic::async_trait]
impl EvalService for EvalApi {
    async fn list(
        &self,
        req: Request<pb::ListEvalsRequest>,
    ) -> Result<Response<pb::ListEvalsResponse>, Status> {
        let acl = match (
            req.get_ref().job_id.as_str(),
            req.get_ref().namespace.as_str(),
        ) {
            ("", "") | (_, "*") => authorize(&req, Need::AnyNamespace(Cap::ReadJob))?,
            (_, ns) => authorize(&req, Need::Namespace(Cap::ReadJob, ns_of(ns)))?,
        };
        let req = req.into_inner();
        let filter = EvalFilter::try_from(&req)?;
        let after: Option<NewestFirstCursor<EvalId>> = page::cursor(&req.next_token)?;
        let size = page::size(req.page_size, self.0.handle.config().max_list_page);
        let snap = self.0.read(req.query.as_ref()).await?;
        let mut evals: Vec<_> = snap
            .evals()
            .filter(|e| filter.matches(e))
            .filter(|e| acl.allows(&Need::Namespace(Cap::ReadJob, &e.namespace)))
            .collect();
        let key = |e: &&std::sync::Arc<drover_core::Evaluation>| NewestFirstCursor {
            create_index: std::cmp::Reverse(e.create_index),
            id: e.id,
        };
        evals.sort_by_key(key);
        if let Some(limit) = filter.limit {
            evals.truncate(limit);
        }
        let (evals, next_token) = page::take(evals, key, after.as_ref(), size);
        Ok(Response::new(pb::ListEvalsResponse {
            evaluations: evals.iter().map(|e| e.as_ref().into()).collect(),
            index: snap.latest_index(),
            next_token,
        }))
    }

    async fn get(
        &self,
        req: Request<pb::GetEvalRequest>,
    ) -> Result<Response<pb::GetEvalResponse>, Status> {
        let acl = authorize(&req, Need::AnyNamespace(Cap::ReadJob))?;
        let req = req.into_inner();
        let id: EvalId = parse_id("eval_id", &req.eval_id)?;
        let snap = self.0.read(req.query.as_ref()).await?;
        let eval = snap
            .eval(&id)
            .ok_or_else(|| Status::not_found(format!("evaluation {id} not found")))?;
        acl.check(&Need::Namespace(Cap::ReadJob, &eval.namespace))
            .map_err(|d| Status::permission_denied(d.to_string()))?;
        Ok(Response::new(pb::GetEvalResponse {
            evaluation: Some(eval.as_ref().into()),
            index: snap.latest_index(),
        }))
    }

    async fn blocked_list(
        &self,
        req: Request<pb::BlockedListRequest>,
    ) -> Result<Response<pb::BlockedListResponse>, Status> {
        authorize(&req, Need::Area(Area::Operator, Level::Read))?;
        let index = self.0.handle.applied_index();
        let blocked = self.0.handle.blocked_evals().await?;
        let stats = self.0.handle.broker_stats().await?;
        Ok(Response::new(pb::BlockedListResponse {
            evaluations: blocked.iter().map(Into::into).collect(),
            stats: Some((&stats.blocked).into()),
            index,
        }))
    }

    async fn broker_stats(
        &self,
        req: Request<pb::BrokerStatsRequest>,
    ) -> Result<Response<pb::BrokerStatsResponse>, Status> {
        authorize(&req, Need::Area(Area::Operator, Level::Read))?;
        let index = self.0.handle.applied_index();
        let stats = self.0.handle.broker_stats().await?;
        Ok(Response::new(pb::BrokerStatsResponse {
            stats: Some((&stats.broker).into()),
            blocked: u64::try_from(stats.blocked.total_blocked).unwrap_or(u64::MAX),
            enabled: self.0.handle.is_leader(),
            index,
            paused: self
                .0
                .handle
                .snapshot()
                .scheduler_config()
                .pause_eval_broker,
        }))
    }

    async fn plan_queue_stats(
        &self,
        req: Request<pb::PlanQueueStatsRequest>,
    ) -> Result<Response<pb::PlanQueueStatsResponse>, Status> {
        authorize(&req, Need::Area(Area::Operator, Level::Read))?;
        let index = self.0.handle.applied_index();
        let stats = self.0.handle.broker_stats().await?;
        Ok(Response::new(pb::PlanQueueStatsResponse {
            stats: Some((&stats.plan_queue).into()),
            index,
        }))
    }
}
