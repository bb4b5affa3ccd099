//! `/v1/evaluations` and `/v1/evaluation/:id` (read, allocations).

use super::unsupported::refuse;
use super::{Ctx, blocking, pages};
use crate::nomad::alloc::allocation;
use crate::nomad::eval::Evaluation;
use crate::query::Call;
use crate::reply::{self, ApiError};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{Method, Uri};
use axum::response::Response;
use axum::routing::get;
use drover_proto::v1 as pb;

pub fn routes() -> Router<Ctx> {
    Router::new()
        .route(
            "/v1/evaluations",
            get(list).delete(|m: Method, u: Uri| async move {
                refuse(&m, &u, "evaluations are deleted by garbage collection")
            }),
        )
        .route("/v1/evaluation/{id}", get(read))
        .route("/v1/evaluation/{id}/allocations", get(allocations))
}

async fn list(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let prefix = call.prefix().to_string();
    let job_id = call.get("job").unwrap_or("").to_string();
    let namespace = call.list_namespace().to_string();
    let (evals, index, next) = pages(&call, |query, page_size, next_token| {
        let req = call.creds.request(pb::ListEvalsRequest {
            query,
            namespace: if job_id.is_empty() {
                String::new()
            } else {
                namespace.clone()
            },
            job_id: job_id.clone(),
            page_size,
            next_token,
            id_prefix: prefix.clone(),
            in_namespace: namespace.clone(),
            ..Default::default()
        });
        let mut evals = ctx.grpc.evals();
        async move {
            let r = evals.list(req).await?.into_inner();
            Ok((r.evaluations, r.index, r.next_token))
        }
    })
    .await?;
    let body: Vec<Evaluation> = evals.iter().map(Evaluation::from).collect();
    Ok(reply::json(ctx.meta(index), &next, &body))
}

async fn get_eval(ctx: &Ctx, call: &Call, id: &str) -> Result<(pb::Evaluation, u64), ApiError> {
    let r = blocking(call, |query| {
        let req = call.creds.request(pb::GetEvalRequest {
            query,
            eval_id: id.to_string(),
        });
        let mut evals = ctx.grpc.evals();
        async move { evals.get(req).await }
    })
    .await?;
    let eval = r
        .evaluation
        .ok_or_else(|| ApiError::NotFound(format!("evaluation {id:?} not found")))?;
    Ok((eval, r.index))
}

async fn read(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (eval, index) = get_eval(&ctx, &call, &id).await?;
    Ok(reply::json(ctx.meta(index), "", &Evaluation::from(&eval)))
}

/// The allocations an evaluation's plans placed: its job's, filtered by eval id.
async fn allocations(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (eval, _) = get_eval(&ctx, &call, &id).await?;
    let mut allocs = Vec::new();
    let mut next_token = String::new();
    let index = loop {
        let req = call.creds.request(pb::JobAllocationsRequest {
            query: None,
            namespace: eval.namespace.clone(),
            job_id: eval.job_id.clone(),
            page_size: 0,
            next_token,
            list_fields_only: false,
        });
        let r = ctx.grpc.jobs().allocations(req).await?.into_inner();
        allocs.extend(r.allocations.into_iter().filter(|a| a.eval_id == eval.id));
        if r.next_token.is_empty() {
            break r.index;
        }
        next_token = r.next_token;
    };
    let body: Vec<_> = allocs.iter().map(|a| allocation(a, "", "")).collect();
    Ok(reply::json(ctx.meta(index), "", &body))
}
