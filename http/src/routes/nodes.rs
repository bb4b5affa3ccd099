//! `/v1/nodes` and `/v1/node/:id`: list, read, drain, eligibility, purge, allocations; and
//! Scoot's offline / online under `/v1/drover/node/:id/...`, which Nomad has no home for.

use super::{Ctx, blocking, body, pages};
use crate::nomad::alloc::allocation;
use crate::nomad::misc::NodeUpdateResponse;
use crate::nomad::node::{Node, node};
use crate::query::Call;
use crate::reply::{self, ApiError};
use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use bytes::Bytes;
use drover_proto::v1 as pb;
use serde::Deserialize;

pub fn routes() -> Router<Ctx> {
    Router::new()
        .route("/v1/nodes", get(list))
        .route("/v1/node/{id}", get(read))
        .route("/v1/node/{id}/allocations", get(allocations))
        .route("/v1/node/{id}/drain", post(drain).put(drain))
        .route(
            "/v1/node/{id}/eligibility",
            post(eligibility).put(eligibility),
        )
        .route("/v1/node/{id}/purge", post(purge).put(purge))
        .route("/v1/drover/node/{id}/offline", post(offline).put(offline))
        .route("/v1/drover/node/{id}/online", post(online).put(online))
}

async fn list(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let (nodes, index, next) = pages(&call, |query, page_size, next_token| {
        let req = call.creds.request(pb::NodeListRequest {
            query,
            id_prefix: call.prefix().to_string(),
            page_size,
            next_token,
            ..Default::default()
        });
        let mut op = ctx.grpc.operator();
        async move {
            let r = op.node_list(req).await?.into_inner();
            Ok((r.nodes, r.index, r.next_token))
        }
    })
    .await?;
    let body: Vec<Node> = nodes.iter().map(node).collect();
    Ok(reply::json(ctx.meta(index), &next, &body))
}

async fn get_node(ctx: &Ctx, call: &Call, id: &str) -> Result<pb::NodeGetResponse, ApiError> {
    blocking(call, |query| {
        let req = call.creds.request(pb::NodeGetRequest {
            query,
            node_id: id.to_string(),
        });
        let mut op = ctx.grpc.operator();
        async move { op.node_get(req).await }
    })
    .await
}

async fn read(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let r = get_node(&ctx, &call, &id).await?;
    let entry = r
        .node
        .ok_or_else(|| ApiError::NotFound(format!("node {id:?} not found")))?;
    Ok(reply::json(ctx.meta(r.index), "", &node(&entry)))
}

async fn allocations(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let r = get_node(&ctx, &call, &id).await?;
    let name = r
        .node
        .as_ref()
        .and_then(|e| e.node.as_ref())
        .map(|n| n.name.clone())
        .unwrap_or_default();
    let body: Vec<_> = r
        .allocations
        .iter()
        .map(|a| allocation(a, "", &name))
        .collect();
    Ok(reply::json(ctx.meta(r.index), "", &body))
}

/// Nomad's `NodeUpdateDrainRequest`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct DrainBody {
    #[serde(default)]
    drain_spec: Option<DrainSpec>,
    #[serde(default)]
    mark_eligible: Option<bool>,
    #[serde(default, rename = "NodeID")]
    node_id: String,
    #[serde(default)]
    meta: Option<std::collections::HashMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct DrainSpec {
    /// Nanoseconds; -1 forces, 0 has no deadline.
    #[serde(default)]
    deadline: i64,
    #[serde(default)]
    ignore_system_jobs: bool,
}

async fn drain(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let b: DrainBody = if bytes.is_empty() {
        // Nomad's older form: `?enable=true` with no body, a drain without deadline.
        DrainBody {
            drain_spec: call.flag("enable")?.then(DrainSpec::default),
            ..DrainBody::default()
        }
    } else {
        body(&bytes)?
    };
    if !b.node_id.is_empty() && b.node_id != id {
        return Err(ApiError::BadRequest(format!(
            "node id {:?} in the body does not match {id:?} in the path",
            b.node_id
        )));
    }
    let _ = b.meta;
    let mut req = pb::NodeDrainRequest {
        node_id: id,
        mark_eligible: b.mark_eligible.unwrap_or(false),
        ..Default::default()
    };
    if let Some(spec) = &b.drain_spec {
        req.enable = true;
        req.ignore_system_jobs = spec.ignore_system_jobs;
        match spec.deadline {
            d if d < 0 => req.force = true,
            0 => {}
            d => req.deadline_ms = Some(u64::try_from(d / 1_000_000).unwrap_or(0).max(1)),
        }
    }
    let r = ctx
        .grpc
        .operator()
        .node_drain(call.creds.request(req))
        .await?
        .into_inner();
    Ok(node_update(&ctx, r.eval_ids, r.index))
}

fn node_update(ctx: &Ctx, eval_ids: Vec<String>, index: u64) -> Response {
    let answer = NodeUpdateResponse {
        eval_ids,
        eval_create_index: index,
        node_modify_index: index,
        index,
    };
    reply::written(ctx.meta(index), &answer)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct EligibilityBody {
    eligibility: String,
    #[serde(default, rename = "NodeID")]
    node_id: String,
}

async fn eligibility(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let b: EligibilityBody = body(&bytes)?;
    if !b.node_id.is_empty() && b.node_id != id {
        return Err(ApiError::BadRequest(format!(
            "node id {:?} in the body does not match {id:?} in the path",
            b.node_id
        )));
    }
    let value = match b.eligibility.as_str() {
        "eligible" => pb::Eligibility::Eligible,
        "ineligible" => pb::Eligibility::Ineligible,
        other => {
            return Err(ApiError::BadRequest(format!(
                "Eligibility: unknown value {other:?} (one of eligible, ineligible)"
            )));
        }
    };
    let req = call.creds.request(pb::NodeEligibilityRequest {
        node_id: id,
        eligibility: value.into(),
    });
    let r = ctx
        .grpc
        .operator()
        .node_eligibility(req)
        .await?
        .into_inner();
    Ok(node_update(&ctx, r.eval_ids, r.index))
}

/// Nomad's `node purge`: answered like its other node writes, `EvalIDs` with the index.
async fn purge(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::NodePurgeRequest { node_id: id });
    let r = ctx.grpc.operator().node_purge(req).await?.into_inner();
    Ok(node_update(&ctx, r.eval_ids, r.index))
}

async fn offline(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::NodeOfflineRequest { node_id: id });
    let r = ctx.grpc.operator().node_offline(req).await?.into_inner();
    let body =
        serde_json::json!({ "Health": crate::nomad::node_health(r.health), "Index": r.index });
    Ok(reply::written(ctx.meta(r.index), &body))
}

async fn online(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::NodeOnlineRequest { node_id: id });
    let r = ctx.grpc.operator().node_online(req).await?.into_inner();
    let body =
        serde_json::json!({ "Health": crate::nomad::node_health(r.health), "Index": r.index });
    Ok(reply::written(ctx.meta(r.index), &body))
}
