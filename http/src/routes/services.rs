//! `/v1/services` and `/v1/service/:name`: the service catalog. A blocking query
//! (`?index=N&wait=`) waits for the catalog itself to change past `N`, as Nomad's does.

use super::Ctx;
use crate::nomad::service::NomadServiceRegistration;
use crate::query::{Call, DEFAULT_WAIT, MAX_WAIT, parse_go_duration};
use crate::reply::{self, ApiError};
use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::get;
use drover_proto::v1 as pb;
use serde::Serialize;
use std::collections::BTreeMap;

pub fn routes() -> Router<Ctx> {
    Router::new()
        .route("/v1/services", get(list))
        .route("/v1/service/{name}", get(read))
}

/// `?index` and `?wait` as the catalog read's `wait_index` and `max_wait_ms`.
pub fn wait(call: &Call) -> Result<(u64, u64), ApiError> {
    let index = call.number("index")?.unwrap_or(0);
    let wait = match call.get("wait") {
        Some(w) if !w.is_empty() => parse_go_duration(w).ok_or_else(|| {
            ApiError::BadRequest(format!("query parameter wait: invalid duration {w:?}"))
        })?,
        _ => DEFAULT_WAIT,
    };
    let ms = u64::try_from(wait.min(MAX_WAIT).as_millis()).unwrap_or(u64::MAX);
    Ok((index, ms))
}

/// One namespace's services, as Nomad's `api.ServiceRegistrationListStub`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct NamespaceServices {
    namespace: String,
    services: Vec<ServiceStub>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct ServiceStub {
    service_name: String,
    tags: Vec<String>,
}

async fn list(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let (wait_index, max_wait_ms) = wait(&call)?;
    let namespace = match call.namespace() {
        "*" => "*".to_owned(),
        ns => ns.to_owned(),
    };
    let answer = ctx
        .grpc
        .services()
        .list(call.creds.request(pb::ListServicesRequest {
            query: None,
            namespace,
            wait_index,
            max_wait_ms,
            with_checks: false,
        }))
        .await?
        .into_inner();
    let mut by_namespace: BTreeMap<String, Vec<ServiceStub>> = BTreeMap::new();
    for s in answer.services {
        by_namespace
            .entry(s.namespace)
            .or_default()
            .push(ServiceStub {
                service_name: s.name,
                tags: s.tags,
            });
    }
    let body: Vec<NamespaceServices> = by_namespace
        .into_iter()
        .map(|(namespace, services)| NamespaceServices {
            namespace,
            services,
        })
        .collect();
    Ok(reply::json(ctx.meta(answer.index), "", &body))
}

async fn read(
    State(ctx): State<Ctx>,
    Path(name): Path<String>,
    call: Call,
) -> Result<Response, ApiError> {
    let filter = pb::ServiceInfoRequest {
        namespace: call.namespace().to_owned(),
        name,
        ..Default::default()
    };
    instances(&ctx, &call, filter).await
}

/// The instances `filter` picks (a service by name, a job's or an allocation's), as
/// Nomad's `ServiceRegistration` list, waiting as the call's `?index`/`?wait` ask: the
/// one answer of `/v1/service/:name`, `/v1/job/:id/services` and
/// `/v1/allocation/:id/services`.
pub async fn instances(
    ctx: &Ctx,
    call: &Call,
    filter: pb::ServiceInfoRequest,
) -> Result<Response, ApiError> {
    let (wait_index, max_wait_ms) = wait(call)?;
    let answer = ctx
        .grpc
        .services()
        .info(call.creds.request(pb::ServiceInfoRequest {
            wait_index,
            max_wait_ms,
            ..filter
        }))
        .await?
        .into_inner();
    let body: Vec<NomadServiceRegistration> = answer
        .instances
        .iter()
        .map(NomadServiceRegistration::from)
        .collect();
    Ok(reply::json(ctx.meta(answer.index), "", &body))
}
