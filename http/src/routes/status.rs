//! `/v1/status/...`, `/v1/agent/...`, `/v1/regions` and `/v1/namespaces`: who leads, who
//! serves, and what namespaces hold jobs.

use super::{Ctx, pages};
use crate::nomad::misc::AgentMember;
use crate::query::Call;
use crate::reply::{self, ApiError};
use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::get;
use drover_proto::v1 as pb;
use serde_json::json;
use std::collections::BTreeSet;

pub fn routes() -> Router<Ctx> {
    Router::new()
        .route("/v1/status/leader", get(leader))
        .route("/v1/status/peers", get(peers))
        .route("/v1/agent/self", get(agent_self))
        .route("/v1/agent/members", get(members))
        .route("/v1/agent/health", get(health))
        .route("/v1/regions", get(regions))
        .route("/v1/namespaces", get(namespaces))
        .route("/v1/namespace/{name}", get(namespace))
}

async fn leader(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let r = ctx
        .grpc
        .status()
        .leader(call.creds.request(pb::LeaderRequest {}))
        .await?
        .into_inner();
    Ok(reply::json(ctx.meta(r.index), "", &r.leader_address))
}

async fn peers(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let r = peers_of(&ctx, &call).await?;
    let addrs: Vec<&str> = r.peers.iter().map(|p| p.address.as_str()).collect();
    Ok(reply::json(ctx.meta(r.index), "", &addrs))
}

/// The servers of the Raft configuration (`StatusService.Peers`), for every route that
/// lists or names them.
pub(super) async fn peers_of(ctx: &Ctx, call: &Call) -> Result<pb::PeersResponse, ApiError> {
    Ok(ctx
        .grpc
        .status()
        .peers(call.creds.request(pb::PeersRequest {}))
        .await?
        .into_inner())
}

async fn members_of(ctx: &Ctx, call: &Call) -> Result<pb::MembersResponse, ApiError> {
    Ok(ctx
        .grpc
        .status()
        .members(call.creds.request(pb::MembersRequest {}))
        .await?
        .into_inner())
}

async fn members(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let r = members_of(&ctx, &call).await?;
    let members: Vec<AgentMember> = r.members.iter().map(AgentMember::from).collect();
    let name = members.first().map(|m| m.name.clone()).unwrap_or_default();
    let body = json!({
        "ServerName": name,
        "ServerRegion": "global",
        "ServerDC": "dc1",
        "Members": members,
    });
    Ok(reply::json(ctx.meta(r.index), "", &body))
}

/// This server as Nomad's `agent/self` describes an agent (the fields clients read).
async fn agent_self(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let status = ctx
        .grpc
        .status()
        .cluster_status(call.creds.request(pb::ClusterStatusRequest {}))
        .await?
        .into_inner();
    let members = members_of(&ctx, &call).await?;
    let me = members
        .members
        .iter()
        .find(|m| m.id == status.server_id)
        .or(members.members.first());
    let member = me.map(AgentMember::from);
    let version = me.map(|m| m.version.clone()).unwrap_or_default();
    let body = json!({
        "config": {
            "Region": "global",
            "Datacenter": "dc1",
            "NodeName": member.as_ref().map(|m| m.name.clone()),
            "Version": { "Version": version, "VersionPrerelease": "", "VersionMetadata": "drover" },
            "Server": { "Enabled": true },
            "Client": { "Enabled": false },
            "ACL": { "Enabled": ctx.opts.acl_enabled },
        },
        "member": member,
        "stats": {
            "raft": {
                "applied_index": status.applied_index.to_string(),
                "commit_index": status.committed_index.to_string(),
                "last_log_index": status.last_log_index.to_string(),
                "term": status.term.to_string(),
            },
        },
    });
    Ok(reply::json(ctx.meta(status.index), "", &body))
}

async fn health(State(ctx): State<Ctx>) -> Response {
    let ok = ctx.cluster.known_leader();
    let body =
        json!({ "server": { "ok": ok, "message": if ok { "ok" } else { "no known leader" } } });
    let mut res = reply::json(ctx.meta(0), "", &body);
    if !ok {
        *res.status_mut() = axum::http::StatusCode::INTERNAL_SERVER_ERROR;
    }
    res
}

async fn regions(State(ctx): State<Ctx>) -> Response {
    reply::json(ctx.meta(0), "", &["global"])
}

/// The namespaces the caller can see jobs in, and `default`: drover keeps no namespace
/// objects, a namespace exists by being named. A blocking query waits on the job list.
async fn known_namespaces(ctx: &Ctx, call: &Call) -> Result<(BTreeSet<String>, u64), ApiError> {
    let (jobs, index, _) = pages(&call.blocking_only(), |query, page_size, next_token| {
        let req = call.creds.request(pb::ListJobsRequest {
            query,
            page_size,
            next_token,
            ..Default::default()
        });
        let mut jobs = ctx.grpc.jobs();
        async move {
            let r = jobs.list(req).await?.into_inner();
            Ok((r.jobs, r.index, r.next_token))
        }
    })
    .await?;
    let mut names: BTreeSet<String> = jobs.into_iter().map(|j| j.namespace).collect();
    names.insert(drover_core::DEFAULT_NAMESPACE.to_string());
    Ok((names, index))
}

fn namespace_body(name: &str) -> serde_json::Value {
    json!({ "Name": name, "Description": "", "Meta": null, "CreateIndex": 0, "ModifyIndex": 0 })
}

async fn namespaces(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let (names, index) = known_namespaces(&ctx, &call).await?;
    let prefix = call.prefix();
    let body: Vec<_> = names
        .iter()
        .filter(|n| n.starts_with(prefix))
        .map(|n| namespace_body(n))
        .collect();
    Ok(reply::json(ctx.meta(index), "", &body))
}

async fn namespace(
    State(ctx): State<Ctx>,
    call: Call,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let (names, index) = known_namespaces(&ctx, &call).await?;
    if !names.contains(&name) {
        return Err(ApiError::NotFound(format!("namespace {name:?} not found")));
    }
    Ok(reply::json(ctx.meta(index), "", &namespace_body(&name)))
}
