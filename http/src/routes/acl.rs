//! `/v1/acl/...`: bootstrap, tokens and policies. Every call is the ACL service's own.

use super::{Ctx, blocking, body};
use crate::nomad::acl::{AclPolicy, AclToken, PolicyRequest, TokenRequest};
use crate::query::{Call, parse_go_duration};
use crate::reply::{self, ApiError};
use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use bytes::Bytes;
use drover_proto::v1 as pb;

pub fn routes() -> Router<Ctx> {
    Router::new()
        .route("/v1/acl/bootstrap", post(bootstrap).put(bootstrap))
        .route("/v1/acl/tokens", get(tokens))
        .route("/v1/acl/token", post(token_create).put(token_create))
        .route("/v1/acl/token/self", get(token_self))
        .route(
            "/v1/acl/token/{accessor}",
            get(token_get)
                .delete(token_delete)
                .post(token_update)
                .put(token_update),
        )
        .route("/v1/acl/policies", get(policies))
        .route(
            "/v1/acl/policy/{name}",
            get(policy_get)
                .post(policy_apply)
                .put(policy_apply)
                .delete(policy_delete),
        )
}

async fn bootstrap(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::AclBootstrapRequest {});
    let r = ctx.grpc.acl().bootstrap(req).await?.into_inner();
    let token = r.token.as_ref().map(AclToken::from);
    Ok(reply::written(ctx.meta(r.index), &token))
}

async fn tokens(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let r = blocking(&call, |query| {
        let req = call.creds.request(pb::AclTokenListRequest { query });
        let mut acl = ctx.grpc.acl();
        async move { acl.token_list(req).await }
    })
    .await?;
    let body: Vec<AclToken> = r
        .tokens
        .iter()
        .map(|t| AclToken {
            secret_id: String::new(),
            ..AclToken::from(t)
        })
        .collect();
    Ok(reply::json(ctx.meta(r.index), "", &body))
}

async fn token_create(
    State(ctx): State<Ctx>,
    call: Call,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let b: TokenRequest = body(&bytes)?;
    if b.accessor_id.as_deref().is_some_and(|a| !a.is_empty()) {
        return Err(ApiError::NotImplemented {
            endpoint: "POST /v1/acl/token (update)".into(),
            reason: "drover tokens cannot be changed; create a new one",
        });
    }
    let ttl_ms = match b.expiration_ttl.as_deref() {
        None | Some("") => 0,
        Some(t) => parse_go_duration(t)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .ok_or_else(|| {
                ApiError::BadRequest(format!("ExpirationTTL: invalid duration {t:?}"))
            })?,
    };
    let _ = b.global;
    let req = call.creds.request(pb::AclTokenCreateRequest {
        name: b.name,
        r#type: if b.kind.is_empty() {
            "client".into()
        } else {
            b.kind
        },
        policies: b.policies,
        ttl_ms,
    });
    let r = ctx.grpc.acl().token_create(req).await?.into_inner();
    let token = r.token.as_ref().map(AclToken::from);
    Ok(reply::written(ctx.meta(r.index), &token))
}

async fn token_update(Path(accessor): Path<String>) -> ApiError {
    ApiError::NotImplemented {
        endpoint: format!("POST /v1/acl/token/{accessor}"),
        reason: "drover tokens cannot be changed; create a new one",
    }
}

async fn token_self(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::AclTokenSelfRequest {
        namespace: call.namespace().to_string(),
    });
    let r = ctx.grpc.acl().token_self(req).await?.into_inner();
    let token = r.token.as_ref().map(AclToken::from);
    Ok(reply::json(ctx.meta(0), "", &token))
}

async fn token_get(
    State(ctx): State<Ctx>,
    call: Call,
    Path(accessor): Path<String>,
) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::AclTokenGetRequest {
        accessor_id: accessor,
    });
    let r = ctx.grpc.acl().token_get(req).await?.into_inner();
    let token = r.token.as_ref().map(AclToken::from);
    Ok(reply::json(ctx.meta(0), "", &token))
}

async fn token_delete(
    State(ctx): State<Ctx>,
    call: Call,
    Path(accessor): Path<String>,
) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::AclTokenDeleteRequest {
        accessor_id: accessor,
    });
    let r = ctx.grpc.acl().token_delete(req).await?.into_inner();
    Ok(reply::written(ctx.meta(r.index), &serde_json::Value::Null))
}

async fn policies(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let r = blocking(&call, |query| {
        let req = call.creds.request(pb::AclPolicyListRequest { query });
        let mut acl = ctx.grpc.acl();
        async move { acl.policy_list(req).await }
    })
    .await?;
    let body: Vec<AclPolicy> = r.policies.iter().map(|p| AclPolicy::of(p, false)).collect();
    Ok(reply::json(ctx.meta(r.index), "", &body))
}

async fn policy_get(
    State(ctx): State<Ctx>,
    call: Call,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::AclPolicyGetRequest { name });
    let r = ctx.grpc.acl().policy_get(req).await?.into_inner();
    let policy = r.policy.as_ref().map(|p| AclPolicy::of(p, true));
    Ok(reply::json(ctx.meta(0), "", &policy))
}

async fn policy_apply(
    State(ctx): State<Ctx>,
    call: Call,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let b: PolicyRequest = body(&bytes)?;
    if !b.name.is_empty() && b.name != name {
        return Err(ApiError::BadRequest(format!(
            "policy name {:?} in the body does not match {name:?} in the path",
            b.name
        )));
    }
    let _ = (b.create_index, b.modify_index);
    let req = call.creds.request(pb::AclPolicyApplyRequest {
        name,
        description: b.description,
        rules: b.rules,
    });
    let r = ctx.grpc.acl().policy_apply(req).await?.into_inner();
    Ok(reply::written(ctx.meta(r.index), &serde_json::Value::Null))
}

async fn policy_delete(
    State(ctx): State<Ctx>,
    call: Call,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let req = call.creds.request(pb::AclPolicyDeleteRequest { name });
    let r = ctx.grpc.acl().policy_delete(req).await?.into_inner();
    Ok(reply::written(ctx.meta(r.index), &serde_json::Value::Null))
}
