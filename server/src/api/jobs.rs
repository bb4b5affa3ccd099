//! `drover.v1.JobService`: register, plan, stop and inspect jobs.

use super::Api;
use super::page::{self, NamespacedCursor};
use crate::auth::{authorize, namespace_or_default as ns_of};
use drover_core::acl::{NamespaceCapability as Cap, Need};
use drover_core::scheduler::Env;
use drover_core::scheduler::annotate::dry_run;
use drover_core::types::{AllocId, EvalId, JobKey, NodeId};
use drover_core::validate::{canonicalize, validate_job};
use drover_proto::convert::{
    DispatchRequest, JobRegistration, job_key, job_list_entry, plan_response, submitted_job,
};
use drover_proto::v1 as pb;
use drover_proto::v1::job_service_server::JobService;
use tonic::{Request, Response, Status};

/// The JobService implementation.
#[derive(Clone, Debug)]
pub struct JobApi(pub(crate) Api);

fn not_found(key: &JobKey) -> Status {
    Status::not_found(format!("job {key} not found"))
}

/// Who may read a job, checked before state is read: a token with `read-job` in the
/// job's namespace, or a node's own identity (returned), which [`node_runs_job`] then
/// checks against the state read.
fn job_reader<T>(req: &Request<T>, namespace: &str) -> Result<Option<NodeId>, Status> {
    let acl = crate::auth::caller(req)?;
    match acl.node() {
        Some(node) => Ok(Some(node)),
        None => authorize(req, Need::Namespace(Cap::ReadJob, ns_of(namespace))).map(|_| None),
    }
}

/// A node reads only the jobs it runs: an allocation of `key` must be placed on `node`.
fn node_runs_job(
    node: Option<NodeId>,
    key: &JobKey,
    snap: &drover_core::state::StateSnapshot,
) -> Result<(), Status> {
    let Some(node) = node else { return Ok(()) };
    let runs_it = snap
        .allocs_by_node(&node)
        .any(|a| *a.namespace == *key.namespace && a.job_id == key.id);
    if runs_it {
        Ok(())
    } else {
        Err(Status::permission_denied(format!(
            "node {node} has no allocation of job {key}: a node reads only the jobs it runs"
        )))
    }
}

#[tonic::async_trait]
impl JobService for JobApi {
    async fn register(
        &self,
        req: Request<pb::RegisterJobRequest>,
    ) -> Result<Response<pb::RegisterJobResponse>, Status> {
        let ns = req
            .get_ref()
            .job
            .as_ref()
            .map_or("", |j| j.namespace.as_str());
        authorize(&req, Need::Namespace(Cap::SubmitJob, ns_of(ns)))?;
        let reg = JobRegistration::try_from(req.into_inner())?;
        let r = self.0.handle.register_job(reg).await?;
        Ok(Response::new(pb::RegisterJobResponse {
            eval_id: r.eval_id.map(|e| e.to_string()).unwrap_or_default(),
            job_modify_index: r.job_modify_index,
            job_version: r.job_version,
            index: r.index,
            warnings: Vec::new(),
        }))
    }

    async fn plan(
        &self,
        req: Request<pb::PlanJobRequest>,
    ) -> Result<Response<pb::PlanJobResponse>, Status> {
        let ns = req
            .get_ref()
            .job
            .as_ref()
            .map_or("", |j| j.namespace.as_str());
        let validate_only = req.get_ref().validate_only;
        let cap = if validate_only {
            Cap::ReadJob
        } else {
            Cap::SubmitJob
        };
        authorize(&req, Need::Namespace(cap, ns_of(ns)))?;
        let mut job = submitted_job(req.into_inner().job)?;
        canonicalize(&mut job);
        validate_job(&job, &self.0.handle.config().limits)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let snap = self.0.handle.snapshot();
        let index = snap.latest_index();
        if validate_only {
            return Ok(Response::new(pb::PlanJobResponse {
                index,
                ..Default::default()
            }));
        }
        let env = Env {
            now: crate::clock::now(),
            seed: rand::random(),
        };
        let dry = tokio::task::spawn_blocking(move || dry_run(&snap, &job, env, EvalId::random()))
            .await
            .map_err(|e| Status::internal(format!("plan failed: {e}")))?
            .map_err(|e| Status::internal(format!("plan failed: {e}")))?;
        Ok(Response::new(plan_response(&dry, index)))
    }

    async fn deregister(
        &self,
        req: Request<pb::DeregisterJobRequest>,
    ) -> Result<Response<pb::DeregisterJobResponse>, Status> {
        authorize(
            &req,
            Need::Namespace(Cap::SubmitJob, ns_of(&req.get_ref().namespace)),
        )?;
        let req = req.into_inner();
        let key = job_key(&req.namespace, &req.job_id)?;
        let r = self.0.handle.deregister_job(key, req.purge).await?;
        Ok(Response::new(pb::DeregisterJobResponse {
            eval_id: r.eval_id.to_string(),
            index: r.index,
        }))
    }

    async fn get(
        &self,
        req: Request<pb::GetJobRequest>,
    ) -> Result<Response<pb::GetJobResponse>, Status> {
        let node = job_reader(&req, &req.get_ref().namespace)?;
        let req = req.into_inner();
        let key = job_key(&req.namespace, &req.job_id)?;
        let snap = self.0.read(req.query.as_ref()).await?;
        node_runs_job(node, &key, &snap)?;
        let job = snap.job(&key).ok_or_else(|| not_found(&key))?;
        Ok(Response::new(pb::GetJobResponse {
            job: Some(job.as_ref().into()),
            index: snap.latest_index(),
        }))
    }

    async fn list(
        &self,
        req: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        let acl = match req.get_ref().namespace.as_str() {
            "" | "*" => authorize(&req, Need::AnyNamespace(Cap::ReadJob))?,
            ns => authorize(&req, Need::Namespace(Cap::ReadJob, ns))?,
        };
        let mut req = req.into_inner();
        if req.namespace == "*" {
            req.namespace.clear();
        }
        let after: Option<NamespacedCursor> = page::cursor(&req.next_token)?;
        let size = page::size(req.page_size, self.0.handle.config().max_list_page);
        let snap = self.0.read(req.query.as_ref()).await?;
        let mut jobs: Vec<_> = snap
            .jobs()
            .filter(|j| req.namespace.is_empty() || j.namespace == req.namespace)
            .filter(|j| acl.allows(&Need::Namespace(Cap::ReadJob, &j.namespace)))
            .filter(|j| j.id.to_string().starts_with(&req.id_prefix))
            .filter(|j| {
                req.parent_id.is_empty()
                    || j.parent_id
                        .as_ref()
                        .is_some_and(|p| p.as_str() == req.parent_id)
            })
            .map(|j| job_list_entry(j, snap.job_summary(&j.key()).map(|s| s.as_ref())))
            .collect();
        jobs.sort_by(|a, b| (&a.namespace, &a.id).cmp(&(&b.namespace, &b.id)));
        let key = |e: &pb::JobListEntry| NamespacedCursor {
            namespace: e.namespace.clone(),
            id: e.id.clone(),
        };
        let (jobs, next_token) = page::take(jobs, key, after.as_ref(), size);
        Ok(Response::new(pb::ListJobsResponse {
            jobs,
            index: snap.latest_index(),
            next_token,
        }))
    }

    async fn versions(
        &self,
        req: Request<pb::JobVersionsRequest>,
    ) -> Result<Response<pb::JobVersionsResponse>, Status> {
        let node = job_reader(&req, &req.get_ref().namespace)?;
        let req = req.into_inner();
        let key = job_key(&req.namespace, &req.job_id)?;
        let snap = self.0.read(req.query.as_ref()).await?;
        node_runs_job(node, &key, &snap)?;
        if snap.job(&key).is_none() {
            return Err(not_found(&key));
        }
        let mut versions = snap.job_versions(&key);
        versions.sort_by_key(|j| std::cmp::Reverse(j.version));
        Ok(Response::new(pb::JobVersionsResponse {
            versions: versions.iter().map(|j| j.as_ref().into()).collect(),
            index: snap.latest_index(),
        }))
    }

    async fn allocations(
        &self,
        req: Request<pb::JobAllocationsRequest>,
    ) -> Result<Response<pb::JobAllocationsResponse>, Status> {
        authorize(
            &req,
            Need::Namespace(Cap::ReadJob, ns_of(&req.get_ref().namespace)),
        )?;
        let req = req.into_inner();
        let key = job_key(&req.namespace, &req.job_id)?;
        let after: Option<AllocId> = page::cursor(&req.next_token)?;
        let size = page::size(req.page_size, self.0.handle.config().max_list_page);
        let snap = self.0.read(req.query.as_ref()).await?;
        if snap.job(&key).is_none() {
            return Err(not_found(&key));
        }
        let allocs = snap.allocs_by_job_after(&key, after.as_ref());
        let (allocs, next_token) = page::take(allocs, |a| a.id, None, size);
        // A console's load asks for the listed fields only: the rest cost most of the work.
        let convert: fn(&drover_core::Allocation) -> pb::Allocation = match req.list_fields_only {
            true => drover_proto::convert::listed_allocation,
            false => |a| a.into(),
        };
        Ok(Response::new(pb::JobAllocationsResponse {
            allocations: allocs.into_iter().map(|a| convert(a)).collect(),
            index: snap.latest_index(),
            next_token,
        }))
    }

    async fn evaluations(
        &self,
        req: Request<pb::JobEvaluationsRequest>,
    ) -> Result<Response<pb::JobEvaluationsResponse>, Status> {
        let node = job_reader(&req, &req.get_ref().namespace)?;
        let req = req.into_inner();
        let key = job_key(&req.namespace, &req.job_id)?;
        let snap = self.0.read(req.query.as_ref()).await?;
        node_runs_job(node, &key, &snap)?;
        if snap.job(&key).is_none() {
            return Err(not_found(&key));
        }
        let mut evals: Vec<_> = snap.evals_by_job(&key).collect();
        evals.sort_by_key(|e| std::cmp::Reverse(e.create_index));
        Ok(Response::new(pb::JobEvaluationsResponse {
            evaluations: evals.iter().map(|e| e.as_ref().into()).collect(),
            index: snap.latest_index(),
        }))
    }

    async fn summary(
        &self,
        req: Request<pb::JobSummaryRequest>,
    ) -> Result<Response<pb::JobSummaryResponse>, Status> {
        authorize(
            &req,
            Need::Namespace(Cap::ReadJob, ns_of(&req.get_ref().namespace)),
        )?;
        let req = req.into_inner();
        let key = job_key(&req.namespace, &req.job_id)?;
        let snap = self.0.read(req.query.as_ref()).await?;
        let summary = snap.job_summary(&key).ok_or_else(|| not_found(&key))?;
        Ok(Response::new(pb::JobSummaryResponse {
            summary: Some(summary.as_ref().into()),
            index: snap.latest_index(),
        }))
    }

    async fn dispatch(
        &self,
        req: Request<pb::DispatchJobRequest>,
    ) -> Result<Response<pb::DispatchJobResponse>, Status> {
        authorize(
            &req,
            Need::Namespace(Cap::DispatchJob, ns_of(&req.get_ref().namespace)),
        )?;
        let req = DispatchRequest::try_from(req.into_inner())?;
        let d = self.0.handle.dispatch_job(req).await?;
        Ok(Response::new(pb::DispatchJobResponse {
            dispatched_job_id: d.job_id.to_string(),
            eval_id: d.eval_id.to_string(),
            index: d.index,
        }))
    }

    async fn periodic_force(
        &self,
        req: Request<pb::PeriodicForceRequest>,
    ) -> Result<Response<pb::PeriodicForceResponse>, Status> {
        authorize(
            &req,
            Need::Namespace(Cap::SubmitJob, ns_of(&req.get_ref().namespace)),
        )?;
        let req = req.into_inner();
        let key = job_key(&req.namespace, &req.job_id)?;
        let d = self.0.handle.force_periodic(key).await?;
        Ok(Response::new(pb::PeriodicForceResponse {
            child_job_id: d.job_id.to_string(),
            eval_id: d.eval_id.to_string(),
            index: d.index,
        }))
    }
}
