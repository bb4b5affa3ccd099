//! `/v1/search` (prefix) and `/v1/search/fuzzy`. drover searches by prefix only: a fuzzy
//! search answers the ids that start with its text, in the fuzzy answer's shape.

use super::{Ctx, body};
use crate::query::Call;
use crate::reply::{self, ApiError};
use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use drover_proto::v1 as pb;
use serde::Deserialize;
use serde_json::{Map, Value, json};

pub fn routes() -> Router<Ctx> {
    Router::new()
        .route("/v1/search", post(prefix).put(prefix))
        .route("/v1/search/fuzzy", post(fuzzy).put(fuzzy))
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct SearchBody {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    text: String,
    #[serde(default)]
    context: String,
    #[serde(default)]
    namespace: String,
}

fn context(name: &str) -> Result<pb::SearchContext, ApiError> {
    Ok(match name {
        "" | "all" => pb::SearchContext::Unspecified,
        "jobs" => pb::SearchContext::Jobs,
        "evals" => pb::SearchContext::Evals,
        "allocs" => pb::SearchContext::Allocs,
        "nodes" => pb::SearchContext::Nodes,
        other => {
            return Err(ApiError::BadRequest(format!(
                "Context: {other:?} is not searched by drover (one of all, jobs, evals, allocs, nodes)"
            )));
        }
    })
}

fn context_name(c: i32) -> &'static str {
    match pb::SearchContext::try_from(c) {
        Ok(pb::SearchContext::Jobs) => "jobs",
        Ok(pb::SearchContext::Evals) => "evals",
        Ok(pb::SearchContext::Allocs) => "allocs",
        Ok(pb::SearchContext::Nodes) => "nodes",
        _ => "all",
    }
}

/// The namespace searched: the body's, else the query's, else `default`.
fn namespace<'a>(call: &'a Call, b: &'a SearchBody) -> &'a str {
    if b.namespace.is_empty() {
        call.namespace()
    } else {
        &b.namespace
    }
}

async fn search(
    ctx: &Ctx,
    call: &Call,
    text: String,
    b: &SearchBody,
) -> Result<pb::PrefixSearchResponse, ApiError> {
    let req = call.creds.request(pb::PrefixSearchRequest {
        prefix: text,
        context: context(&b.context)?.into(),
        namespace: namespace(call, b).to_string(),
        limit: 0,
    });
    Ok(ctx.grpc.search().prefix_search(req).await?.into_inner())
}

async fn prefix(State(ctx): State<Ctx>, call: Call, bytes: Bytes) -> Result<Response, ApiError> {
    let b: SearchBody = body(&bytes)?;
    let r = search(&ctx, &call, b.prefix.clone(), &b).await?;
    let mut matches = Map::new();
    let mut truncations = Map::new();
    for m in &r.matches {
        matches.insert(context_name(m.context).into(), json!(m.ids));
        truncations.insert(context_name(m.context).into(), Value::Bool(m.truncated));
    }
    let body = json!({ "Matches": matches, "Truncations": truncations, "Index": r.index });
    Ok(reply::json(ctx.meta(r.index), "", &body))
}

async fn fuzzy(State(ctx): State<Ctx>, call: Call, bytes: Bytes) -> Result<Response, ApiError> {
    let b: SearchBody = body(&bytes)?;
    let r = search(&ctx, &call, b.text.clone(), &b).await?;
    // A job's scope is the namespace it was found in, as Nomad answers it.
    let job_scope = namespace(&call, &b);
    let mut matches = Map::new();
    let mut truncations = Map::new();
    for m in &r.matches {
        let scoped: Vec<Value> = m
            .ids
            .iter()
            .map(|id| json!({ "ID": id, "Scope": [if m.context == i32::from(pb::SearchContext::Jobs) { job_scope } else { "" }] }))
            .collect();
        matches.insert(context_name(m.context).into(), Value::Array(scoped));
        truncations.insert(context_name(m.context).into(), Value::Bool(m.truncated));
    }
    let body = json!({ "Matches": matches, "Truncations": truncations, "Index": r.index });
    Ok(reply::json(ctx.meta(r.index), "", &body))
}
