//! `/v1/jobs` and `/v1/job/:id`: the route table of every job endpoint, and the reads
//! (the writes are in `job_writes`).

use super::job_writes as w;
use super::unsupported::refuse;
use super::{Ctx, blocking, pages};
use crate::nomad::alloc::allocation;
use crate::nomad::deployment::Deployment;
use crate::nomad::eval::Evaluation;
use crate::nomad::job::NomadJob;
use crate::nomad::misc::{JobListStub, JobSummary};
use crate::query::Call;
use crate::reply::{self, ApiError};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{Method, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use drover_core::types::Job;
use drover_proto::v1 as pb;

pub fn routes() -> Router<Ctx> {
    Router::new()
        .route("/v1/jobs", get(list).post(w::register_new))
        .route("/v1/jobs/parse", post(w::parse))
        .route(
            "/v1/job/{id}",
            get(read)
                .post(w::register_at)
                .put(w::register_at)
                .delete(w::deregister),
        )
        .route("/v1/job/{id}/versions", get(versions))
        .route("/v1/job/{id}/allocations", get(allocations))
        .route("/v1/job/{id}/evaluations", get(evaluations))
        .route("/v1/job/{id}/summary", get(summary))
        .route("/v1/job/{id}/deployments", get(deployments))
        .route("/v1/job/{id}/deployment", get(latest_deployment))
        .route("/v1/job/{id}/services", get(services))
        .route("/v1/job/{id}/plan", post(w::plan).put(w::plan))
        .route("/v1/job/{id}/evaluate", post(w::evaluate).put(w::evaluate))
        .route("/v1/job/{id}/revert", post(w::revert).put(w::revert))
        .route(
            "/v1/job/{id}/scale",
            post(w::scale)
                .put(w::scale)
                .get(|m: Method, u: Uri| async move {
                    refuse(
                        &m,
                        &u,
                        "drover records no scaling events; POST scales a group",
                    )
                }),
        )
        .route("/v1/job/{id}/dispatch", post(w::dispatch).put(w::dispatch))
        .route(
            "/v1/job/{id}/periodic/force",
            post(w::periodic_force).put(w::periodic_force),
        )
        .route("/v1/validate/job", post(w::validate).put(w::validate))
}

async fn list(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let (jobs, index, next) = pages(&call, |query, page_size, next_token| {
        let req = call.creds.request(pb::ListJobsRequest {
            query,
            namespace: call.list_namespace().to_string(),
            id_prefix: call.prefix().to_string(),
            page_size,
            next_token,
            parent_id: String::new(),
        });
        let mut jobs = ctx.grpc.jobs();
        async move {
            let r = jobs.list(req).await?.into_inner();
            Ok((r.jobs, r.index, r.next_token))
        }
    })
    .await?;
    let stubs: Vec<JobListStub> = jobs.iter().map(JobListStub::from).collect();
    // About half a KiB a job, summary included.
    let capacity = 512 * stubs.len() + 64;
    Ok(reply::json_sized(ctx.meta(index), &next, &stubs, capacity))
}

/// The job as registered now, in drover's types.
pub async fn current(ctx: &Ctx, call: &Call, id: &str) -> Result<(Job, u64), ApiError> {
    let r = blocking(call, |query| {
        let req = call.creds.request(pb::GetJobRequest {
            query,
            namespace: call.namespace().to_string(),
            job_id: id.to_string(),
        });
        let mut jobs = ctx.grpc.jobs();
        async move { jobs.get(req).await }
    })
    .await?;
    let job = r
        .job
        .ok_or_else(|| ApiError::NotFound(format!("job {id:?} not found")))?;
    Ok((Job::try_from(job)?, r.index))
}

async fn read(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (job, index) = current(&ctx, &call, &id).await?;
    Ok(reply::json(ctx.meta(index), "", &NomadJob::from(&job)))
}

async fn versions(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let r = blocking(&call, |query| {
        let req = call.creds.request(pb::JobVersionsRequest {
            query,
            namespace: call.namespace().to_string(),
            job_id: id.clone(),
        });
        let mut jobs = ctx.grpc.jobs();
        async move { jobs.versions(req).await }
    })
    .await?;
    let versions = r
        .versions
        .into_iter()
        .map(|j| Job::try_from(j).map(|j| NomadJob::from(&j)))
        .collect::<Result<Vec<_>, _>>()?;
    let body = serde_json::json!({ "Versions": versions, "Diffs": null });
    Ok(reply::json(ctx.meta(r.index), "", &body))
}

async fn allocations(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (allocs, index, next) = pages(&call, |query, page_size, next_token| {
        let req = call.creds.request(pb::JobAllocationsRequest {
            query,
            namespace: call.namespace().to_string(),
            job_id: id.clone(),
            page_size,
            next_token,
            list_fields_only: false,
        });
        let mut jobs = ctx.grpc.jobs();
        async move {
            let r = jobs.allocations(req).await?.into_inner();
            Ok((r.allocations, r.index, r.next_token))
        }
    })
    .await?;
    // `?all` (allocations of earlier jobs of the same id) changes nothing: drover keeps
    // every allocation of the id under it until garbage collection.
    let body: Vec<_> = allocs.iter().map(|a| allocation(a, "", "")).collect();
    Ok(reply::json(ctx.meta(index), &next, &body))
}

async fn evaluations(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let r = blocking(&call, |query| {
        let req = call.creds.request(pb::JobEvaluationsRequest {
            query,
            namespace: call.namespace().to_string(),
            job_id: id.clone(),
        });
        let mut jobs = ctx.grpc.jobs();
        async move { jobs.evaluations(req).await }
    })
    .await?;
    let body: Vec<Evaluation> = r.evaluations.iter().map(Evaluation::from).collect();
    Ok(reply::json(ctx.meta(r.index), "", &body))
}

async fn summary(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let r = blocking(&call, |query| {
        let req = call.creds.request(pb::JobSummaryRequest {
            query,
            namespace: call.namespace().to_string(),
            job_id: id.clone(),
        });
        let mut jobs = ctx.grpc.jobs();
        async move { jobs.summary(req).await }
    })
    .await?;
    let summary = r
        .summary
        .as_ref()
        .map(JobSummary::from)
        .ok_or_else(|| ApiError::NotFound(format!("job {id:?} has no summary")))?;
    Ok(reply::json(ctx.meta(r.index), "", &summary))
}

/// The job's deployments, newest first. Nomad's `?all` (deployments of an earlier job of
/// the same id) changes nothing: drover keeps them under the id until collected.
async fn job_deployments(
    ctx: &Ctx,
    call: &Call,
    id: &str,
) -> Result<(Vec<pb::Deployment>, u64), ApiError> {
    let r = blocking(call, |query| {
        let req = call.creds.request(pb::ListDeploymentsRequest {
            query,
            namespace: call.namespace().to_string(),
            job_id: id.to_string(),
        });
        let mut deployments = ctx.grpc.deployments();
        async move { deployments.list(req).await }
    })
    .await?;
    Ok((r.deployments, r.index))
}

async fn deployments(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (list, index) = job_deployments(&ctx, &call, &id).await?;
    let body: Vec<Deployment> = list.iter().map(Deployment::from).collect();
    Ok(reply::json(ctx.meta(index), "", &body))
}

/// The job's newest deployment; JSON `null` when it has none, as Nomad answers.
async fn latest_deployment(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (list, index) = job_deployments(&ctx, &call, &id).await?;
    let body: Option<Deployment> = list.first().map(Deployment::from);
    Ok(reply::json(ctx.meta(index), "", &body))
}

/// The instances of every service the job's running allocations offer; 404 for a job the
/// namespace does not have, as Nomad answers.
async fn services(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let filter = pb::ServiceInfoRequest {
        namespace: call.namespace().to_owned(),
        job_id: id,
        ..Default::default()
    };
    super::services::instances(&ctx, &call, filter).await
}
