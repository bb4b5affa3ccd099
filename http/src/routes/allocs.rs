//! `/v1/allocations` and `/v1/allocation/:id` (read, stop, services), and an allocation's
//! check results (`/v1/client/allocation/:id/checks`, which drover answers from the
//! service catalog rather than from the allocation's agent).

use super::{Ctx, blocking, pages};
use crate::nomad::alloc::allocation;
use crate::nomad::check;
use crate::query::Call;
use crate::reply::{self, ApiError};
use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use drover_proto::v1 as pb;

pub fn routes() -> Router<Ctx> {
    Router::new()
        .route("/v1/allocations", get(list))
        .route("/v1/allocation/{id}", get(read))
        .route("/v1/allocation/{id}/stop", post(stop).put(stop))
        .route("/v1/allocation/{id}/services", get(services))
        .route("/v1/client/allocation/{id}/checks", get(checks))
}

async fn list(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let (allocs, index, next) = pages(&call, |query, page_size, next_token| {
        let req = call.creds.request(pb::AllocListRequest {
            query,
            namespace: call.list_namespace().to_string(),
            id_prefix: call.prefix().to_string(),
            page_size,
            next_token,
        });
        let mut op = ctx.grpc.operator();
        async move {
            let r = op.alloc_list(req).await?.into_inner();
            Ok((r.allocations, r.index, r.next_token))
        }
    })
    .await?;
    let body: Vec<_> = allocs.iter().map(|a| allocation(a, "", "")).collect();
    Ok(reply::json(ctx.meta(index), &next, &body))
}

async fn read(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let r = blocking(&call, |query| {
        let req = call.creds.request(pb::AllocGetRequest {
            query,
            alloc_id: id.clone(),
        });
        let mut op = ctx.grpc.operator();
        async move { op.alloc_get(req).await }
    })
    .await?;
    let alloc = r
        .allocation
        .ok_or_else(|| ApiError::NotFound(format!("allocation {id:?} not found")))?;
    Ok(reply::json(
        ctx.meta(r.index),
        "",
        &allocation(&alloc, "", ""),
    ))
}

async fn stop(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::AllocStopRequest { alloc_id: id });
    let r = ctx.grpc.allocs().stop(req).await?.into_inner();
    let body = serde_json::json!({ "EvalID": r.eval_id, "Index": r.index });
    Ok(reply::written(ctx.meta(r.index), &body))
}

/// The allocation (by id or a unique prefix), or NOT_FOUND.
async fn alloc_of(ctx: &Ctx, call: &Call, id: &str) -> Result<pb::Allocation, ApiError> {
    let req = call.creds.request(pb::AllocGetRequest {
        query: None,
        alloc_id: id.to_owned(),
    });
    ctx.grpc
        .operator()
        .alloc_get(req)
        .await?
        .into_inner()
        .allocation
        .ok_or_else(|| ApiError::NotFound(format!("allocation {id:?} not found")))
}

/// The instances of the services the allocation (by id or a unique prefix) offers.
async fn services(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let alloc = alloc_of(&ctx, &call, &id).await?;
    let filter = pb::ServiceInfoRequest {
        namespace: alloc.namespace,
        alloc_id: alloc.id,
        ..Default::default()
    };
    super::services::instances(&ctx, &call, filter).await
}

/// The latest result of every check of the allocation's services, keyed by check id.
async fn checks(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let alloc = alloc_of(&ctx, &call, &id).await?;
    let answer = ctx
        .grpc
        .services()
        .info(call.creds.request(pb::ServiceInfoRequest {
            namespace: alloc.namespace,
            alloc_id: alloc.id,
            ..Default::default()
        }))
        .await?
        .into_inner();
    let body = check::alloc_checks(&alloc.name, &answer.instances);
    Ok(reply::json(ctx.meta(answer.index), "", &body))
}
