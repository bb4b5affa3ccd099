//! `/v1/operator/...`: the scheduler configuration, and the Raft peers: read, removed and
//! handed the leadership through the ClusterService calls `drover operator raft` makes.

use super::{Ctx, blocking, body};
use crate::nomad::misc::SchedulerConfig;
use crate::query::Call;
use crate::reply::{self, ApiError};
use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{delete, get, put};
use bytes::Bytes;
use drover_proto::v1 as pb;
use serde_json::json;

pub fn routes() -> Router<Ctx> {
    Router::new()
        .route(
            "/v1/operator/scheduler/configuration",
            get(scheduler_get).post(scheduler_set).put(scheduler_set),
        )
        .route("/v1/operator/raft/configuration", get(raft_configuration))
        .route("/v1/operator/raft/peer", delete(raft_remove_peer))
        .route(
            "/v1/operator/raft/transfer-leadership",
            put(raft_transfer_leadership).post(raft_transfer_leadership),
        )
}

async fn scheduler_get(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let r = blocking(&call, |query| {
        let req = call.creds.request(pb::SchedulerGetConfigRequest { query });
        let mut op = ctx.grpc.operator();
        async move { op.scheduler_get_config(req).await }
    })
    .await?;
    let config = r.config.as_ref().map(SchedulerConfig::from);
    let body = json!({
        "SchedulerConfig": config,
        "Index": r.index,
        "KnownLeader": ctx.cluster.known_leader(),
        "LastContact": ctx.cluster.last_contact_ms(),
    });
    Ok(reply::json(ctx.meta(r.index), "", &body))
}

async fn scheduler_set(
    State(ctx): State<Ctx>,
    call: Call,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let b: SchedulerConfig = body(&bytes)?;
    if b.memory_oversubscription_enabled {
        return Err(ApiError::BadRequest(
            "MemoryOversubscriptionEnabled: a Nomad feature drover does not support".into(),
        ));
    }
    let algorithm = match b.scheduler_algorithm.as_str() {
        "" | "binpack" => pb::SchedulerAlgorithm::Binpack,
        "spread" => pb::SchedulerAlgorithm::Spread,
        other => {
            return Err(ApiError::BadRequest(format!(
                "SchedulerAlgorithm: unknown value {other:?} (one of binpack, spread)"
            )));
        }
    };
    let p = &b.preemption_config;
    let req = call.creds.request(pb::SchedulerSetConfigRequest {
        config: Some(pb::SchedulerConfig {
            algorithm: algorithm.into(),
            preemption: Some(pb::PreemptionConfig {
                system: p.system_scheduler_enabled,
                sysbatch: p.sys_batch_scheduler_enabled,
                batch: p.batch_scheduler_enabled,
                service: p.service_scheduler_enabled,
            }),
            pause_eval_broker: b.pause_eval_broker,
            reject_job_registration: b.reject_job_registration,
            modify_index: 0,
        }),
        cas_index: call.number("cas")?,
    });
    let r = ctx
        .grpc
        .operator()
        .scheduler_set_config(req)
        .await?
        .into_inner();
    let body = json!({ "Updated": r.updated, "Index": r.index });
    Ok(reply::written(ctx.meta(r.index), &body))
}

async fn raft_configuration(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let r = super::status::peers_of(&ctx, &call).await?;
    let servers: Vec<_> = r
        .peers
        .iter()
        .map(|p| {
            json!({
                "ID": p.id, "Node": p.id, "Address": p.address,
                "Leader": p.leader, "Voter": p.voter, "RaftProtocol": "3",
            })
        })
        .collect();
    let body = json!({ "Index": r.index, "Servers": servers });
    Ok(reply::json(ctx.meta(r.index), "", &body))
}

/// The server a call names with `?id=` (its Raft id) or `?address=` (its Raft address),
/// exactly one of them as Nomad takes them, both as `/v1/operator/raft/configuration`
/// lists the servers.
async fn named_server(ctx: &Ctx, call: &Call) -> Result<u64, ApiError> {
    let given = |name| call.get(name).filter(|v| !v.is_empty());
    match (given("id"), given("address")) {
        (Some(_), Some(_)) => Err(ApiError::BadRequest(
            "give the server's id or its address, not both".into(),
        )),
        (None, None) => Err(ApiError::BadRequest(
            "missing id or address: the server's Raft id or address, as \
             /v1/operator/raft/configuration lists them"
                .into(),
        )),
        (Some(id), None) => id.parse().map_err(|_| {
            ApiError::BadRequest(format!(
                "id: {id:?} is not a server id (a whole number, as \
                 /v1/operator/raft/configuration lists them)"
            ))
        }),
        (None, Some(address)) => {
            let r = super::status::peers_of(ctx, call).await?;
            r.peers
                .iter()
                .find(|p| p.address == address)
                .and_then(|p| p.id.parse().ok())
                .ok_or_else(|| {
                    ApiError::NotFound(format!(
                        "address: no server at {address:?} in the Raft configuration"
                    ))
                })
        }
    }
}

/// `DELETE /v1/operator/raft/peer?id=|address=`: `ClusterService.RemovePeer`.
async fn raft_remove_peer(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let id = named_server(&ctx, &call).await?;
    let req = call.creds.request(pb::RemovePeerRequest { id });
    let r = ctx.grpc.cluster().remove_peer(req).await?.into_inner();
    Ok(reply::written(ctx.meta(r.index), &serde_json::Value::Null))
}

/// `PUT /v1/operator/raft/transfer-leadership?id=|address=`:
/// `ClusterService.TransferLeadership`. The answer names the new leader and its term
/// (drover's addition; Nomad's clients read only the status).
async fn raft_transfer_leadership(
    State(ctx): State<Ctx>,
    call: Call,
) -> Result<Response, ApiError> {
    let id = named_server(&ctx, &call).await?;
    let req = call.creds.request(pb::TransferLeadershipRequest { id });
    let r = ctx
        .grpc
        .cluster()
        .transfer_leadership(req)
        .await?
        .into_inner();
    let body = json!({ "LeaderID": r.leader_id.to_string(), "Term": r.term });
    Ok(reply::written(ctx.meta(0), &body))
}
