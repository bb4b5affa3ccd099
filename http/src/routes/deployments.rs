//! `/v1/deployments` and `/v1/deployment/*`: deployments read (by id or a unique prefix)
//! and acted on (promote, fail, pause or resume, unblock) through `DeploymentService`.

use super::unsupported::refuse;
use super::{Ctx, blocking, body};
use crate::nomad::alloc::allocation;
use crate::nomad::deployment::{Deployment, DeploymentUpdateResponse};
use crate::query::Call;
use crate::reply::{self, ApiError};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{Method, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use bytes::Bytes;
use drover_proto::v1 as pb;
use serde::Deserialize;
use serde_json::Value;

pub fn routes() -> Router<Ctx> {
    Router::new()
        .route("/v1/deployments", get(list))
        .route("/v1/deployment/{id}", get(read))
        .route("/v1/deployment/allocations/{id}", get(allocations))
        .route("/v1/deployment/promote/{id}", post(promote).put(promote))
        .route("/v1/deployment/fail/{id}", post(fail).put(fail))
        .route("/v1/deployment/pause/{id}", post(pause).put(pause))
        .route("/v1/deployment/unblock/{id}", post(unblock).put(unblock))
        .route(
            "/v1/deployment/allocation-health/{id}",
            post(no_manual_health).put(no_manual_health),
        )
}

async fn no_manual_health(method: Method, uri: Uri) -> ApiError {
    refuse(
        &method,
        &uri,
        "drover's agents decide allocation health; it cannot be set by hand",
    )
}

/// Deployments of the namespace (`*`: every namespace the token reads), newest first
/// (`?ascending=true`: oldest first); `?prefix` narrows them by id.
async fn list(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let ascending = call.flag("ascending")?;
    let r = blocking(&call, |query| {
        let req = call.creds.request(pb::ListDeploymentsRequest {
            query,
            namespace: call.namespace().to_string(),
            job_id: String::new(),
        });
        let mut deployments = ctx.grpc.deployments();
        async move { deployments.list(req).await }
    })
    .await?;
    let prefix = call.prefix();
    let mut body: Vec<Deployment> = r
        .deployments
        .iter()
        .filter(|d| d.id.starts_with(prefix))
        .map(Deployment::from)
        .collect();
    if ascending {
        body.reverse();
    }
    Ok(reply::json(ctx.meta(r.index), "", &body))
}

/// The deployment `id` (or a unique prefix of it) names, and the index it was read at.
async fn get_deployment(
    ctx: &Ctx,
    call: &Call,
    id: &str,
) -> Result<(pb::Deployment, u64), ApiError> {
    let r = blocking(call, |query| {
        let req = call.creds.request(pb::GetDeploymentRequest {
            query,
            id: id.to_string(),
        });
        let mut deployments = ctx.grpc.deployments();
        async move { deployments.get(req).await }
    })
    .await?;
    let d = r
        .deployment
        .ok_or_else(|| ApiError::NotFound(format!("deployment {id:?} not found")))?;
    Ok((d, r.index))
}

async fn read(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (d, index) = get_deployment(&ctx, &call, &id).await?;
    Ok(reply::json(ctx.meta(index), "", &Deployment::from(&d)))
}

/// The allocations the deployment placed: its job's, filtered by deployment id.
async fn allocations(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (d, _) = get_deployment(&ctx, &call, &id).await?;
    let mut allocs = Vec::new();
    let mut next_token = String::new();
    let index = loop {
        let req = call.creds.request(pb::JobAllocationsRequest {
            query: None,
            namespace: d.namespace.clone(),
            job_id: d.job_id.clone(),
            page_size: 0,
            next_token,
            list_fields_only: false,
        });
        let r = ctx.grpc.jobs().allocations(req).await?.into_inner();
        allocs.extend(
            r.allocations
                .into_iter()
                .filter(|a| a.deployment_id == d.id),
        );
        if r.next_token.is_empty() {
            break r.index;
        }
        next_token = r.next_token;
    };
    let body: Vec<_> = allocs.iter().map(|a| allocation(a, "", "")).collect();
    Ok(reply::json(ctx.meta(index), "", &body))
}

/// A deployment write's body: the fields Nomad's clients send. `DeploymentID` may be left
/// out (the path names the deployment); when given it must be the path's.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct ActionBody {
    #[serde(default, rename = "DeploymentID")]
    deployment_id: String,
    #[serde(default)]
    all: bool,
    #[serde(default)]
    groups: Option<Vec<String>>,
    #[serde(default)]
    pause: Option<bool>,
    #[serde(default, rename = "PromotedAt")]
    _promoted_at: Value,
    #[serde(default, rename = "Region")]
    _region: Value,
    #[serde(default, rename = "Namespace")]
    _namespace: Value,
    #[serde(default, rename = "SecretID")]
    _secret_id: Value,
    #[serde(default, rename = "IdempotencyToken")]
    _idempotency_token: Value,
}

/// The body of a write on deployment `id`; an empty body is an empty object.
fn action_body(bytes: &Bytes, id: &str) -> Result<ActionBody, ApiError> {
    let b: ActionBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        ActionBody::default()
    } else {
        body(bytes)?
    };
    if !b.deployment_id.is_empty() && b.deployment_id != id {
        return Err(ApiError::BadRequest(format!(
            "DeploymentID {:?} in the body does not match {id:?} in the path",
            b.deployment_id
        )));
    }
    Ok(b)
}

/// The groups a promote body names: none for `All` (every group with canaries).
fn promoted_groups(b: &ActionBody) -> Result<Vec<String>, ApiError> {
    match (&b.groups, b.all) {
        (_, true) => Ok(Vec::new()),
        (Some(groups), false) if !groups.is_empty() => Ok(groups.clone()),
        _ => Err(ApiError::BadRequest(
            "All or Groups: set All, or name the groups to promote".into(),
        )),
    }
}

fn acted(ctx: &Ctx, r: &pb::DeploymentActionResponse) -> Response {
    reply::written(ctx.meta(r.index), &DeploymentUpdateResponse::from(r))
}

async fn promote(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let groups = promoted_groups(&action_body(&bytes, &id)?)?;
    let req = call
        .creds
        .request(pb::PromoteDeploymentRequest { id, groups });
    let r = ctx.grpc.deployments().promote(req).await?.into_inner();
    Ok(acted(&ctx, &r))
}

async fn fail(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    action_body(&bytes, &id)?;
    let req = call.creds.request(pb::DeploymentIdRequest { id });
    let r = ctx.grpc.deployments().fail(req).await?.into_inner();
    Ok(acted(&ctx, &r))
}

/// `{"Pause": true}` pauses a running deployment, `{"Pause": false}` resumes a paused one.
async fn pause(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let pause = action_body(&bytes, &id)?.pause.ok_or_else(|| {
        ApiError::BadRequest("Pause: missing (true pauses, false resumes)".into())
    })?;
    let req = call.creds.request(pb::DeploymentIdRequest { id });
    let mut deployments = ctx.grpc.deployments();
    let r = if pause {
        deployments.pause(req).await
    } else {
        deployments.resume(req).await
    }?
    .into_inner();
    Ok(acted(&ctx, &r))
}

async fn unblock(
    State(ctx): State<Ctx>,
    call: Call,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    action_body(&bytes, &id)?;
    let req = call.creds.request(pb::DeploymentIdRequest { id });
    let r = ctx.grpc.deployments().unblock(req).await?.into_inner();
    Ok(acted(&ctx, &r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_promote_body_names_every_group_or_some() {
        let table: [(&str, Result<Vec<&str>, &str>); 6] = [
            (r#"{"All": true}"#, Ok(vec![])),
            (r#"{"All": true, "Groups": ["a"]}"#, Ok(vec![])),
            (r#"{"Groups": ["a", "b"]}"#, Ok(vec!["a", "b"])),
            (
                r#"{"DeploymentID": "d1", "Groups": ["a"], "Namespace": "default"}"#,
                Ok(vec!["a"]),
            ),
            (r#"{"Groups": []}"#, Err("All or Groups")),
            ("", Err("All or Groups")),
        ];
        for (text, want) in table {
            let got = action_body(&Bytes::from(text), "d1").and_then(|b| promoted_groups(&b));
            match (got, want) {
                (Ok(groups), Ok(want)) => assert_eq!(groups, want, "{text}"),
                (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{text}: {e}"),
                (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_body_naming_another_deployment_or_an_unknown_field_is_refused() {
        let table = [
            (r#"{"DeploymentID": "d2"}"#, "does not match"),
            (r#"{"Paused": true}"#, "unknown field `Paused`"),
            ("{", "invalid json"),
        ];
        for (text, want) in table {
            let err = action_body(&Bytes::from(text), "d1").expect_err(text);
            assert!(
                matches!(&err, ApiError::BadRequest(m) if m.contains(want)),
                "{text}: {err}"
            );
        }
        let b = action_body(&Bytes::from(r#"{"DeploymentID":"d1","Pause":false}"#), "d1")
            .expect("a pause body");
        assert_eq!(b.pause, Some(false));
    }
}
