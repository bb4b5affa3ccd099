//! The `/v1` routes, one module per Nomad resource area. Every handler translates the
//! HTTP request into gRPC calls on the in-process API ([`crate::grpc`]) and the answer
//! into Nomad's JSON ([`crate::nomad`]); none decides anything the gRPC API does not.
//!
//! Paths Nomad serves that drover does not answer 501 with a JSON error naming the
//! endpoint ([`unsupported`]); other paths 404; a known path with the wrong method 405.

mod acl;
mod allocs;
mod client;
mod deployments;
mod evals;
mod events;
mod job_writes;
mod jobs;
mod nodes;
mod operator;
mod search;
mod services;
mod status;
mod unsupported;

use crate::grpc::Grpc;
use crate::query::Call;
use crate::reply::{ApiError, Meta};
use crate::{ClusterView, HttpOptions};
use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use drover_proto::v1 as pb;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::sync::Arc;
use tower::ServiceExt;

/// What every handler shares.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub grpc: Grpc,
    pub cluster: Arc<dyn ClusterView>,
    pub opts: Arc<HttpOptions>,
}

impl Ctx {
    /// The headers of an answer reflecting state at `index`.
    pub fn meta(&self, index: u64) -> Meta {
        Meta {
            index,
            known_leader: self.cluster.known_leader(),
            last_contact_ms: self.cluster.last_contact_ms(),
        }
    }
}

/// Every route of the API, behind [`escape_job_id`] (a rewrite must come before routing).
pub fn router(ctx: Ctx) -> Router {
    let routes = routes(ctx).map_request(escape_job_id);
    Router::new().fallback_service(routes)
}

/// The sub-resources of `/v1/job/:id/...`, the longest first where one ends another.
const JOB_ENDPOINTS: &[&str] = &[
    "/periodic/force",
    "/allocations",
    "/evaluations",
    "/evaluate",
    "/deployments",
    "/deployment",
    "/submission",
    "/versions",
    "/services",
    "/dispatch",
    "/summary",
    "/actions",
    "/action",
    "/revert",
    "/stable",
    "/scale",
    "/plan",
];

/// A job id may hold `/` (a dispatched or periodic child is `parent/dispatch-...`), and
/// Nomad's clients put it in the path unescaped: `/v1/job/parent/dispatch-1/allocations`.
/// Nomad reads a known endpoint off the path's end and takes the rest as the id; so does
/// this, escaping the id's slashes so that `{id}` routes match it whole.
fn escape_job_id(mut req: axum::extract::Request) -> axum::extract::Request {
    let Some(rest) = req.uri().path().strip_prefix("/v1/job/") else {
        return req;
    };
    let (id, endpoint) = JOB_ENDPOINTS
        .iter()
        .find_map(|e| {
            rest.strip_suffix(e)
                .filter(|id| !id.is_empty())
                .map(|id| (id, *e))
        })
        .unwrap_or((rest, ""));
    if !id.contains('/') {
        return req;
    }
    let mut path = format!("/v1/job/{}{endpoint}", id.replace('/', "%2F"));
    if let Some(query) = req.uri().query() {
        path = format!("{path}?{query}");
    }
    let mut parts = req.uri().clone().into_parts();
    if let Ok(escaped) = path.parse() {
        parts.path_and_query = Some(escaped);
        if let Ok(uri) = axum::http::Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
    }
    req
}

fn routes(ctx: Ctx) -> Router {
    let max_body = ctx.opts.max_body_bytes;
    Router::new()
        .merge(jobs::routes())
        .merge(nodes::routes())
        .merge(allocs::routes())
        .merge(evals::routes())
        .merge(deployments::routes())
        .merge(acl::routes())
        .merge(status::routes())
        .merge(operator::routes())
        .merge(events::routes())
        .merge(search::routes())
        .merge(services::routes())
        .merge(client::routes())
        .merge(unsupported::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .with_state(ctx)
}

async fn not_found(uri: axum::http::Uri) -> impl IntoResponse {
    (
        StatusCode::NOT_FOUND,
        format!("invalid url path {}: no such endpoint", uri.path()),
    )
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> impl IntoResponse {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method {method} is not allowed on {}", uri.path()),
    )
}

/// Runs a read as a Nomad blocking query: with `?index=`, `read` gets the query options
/// that wait for state past it. When the wait runs out the server answers UNAVAILABLE;
/// Nomad answers the current state then, so the read is made again without waiting.
pub async fn blocking<T, F, Fut>(call: &Call, read: F) -> Result<T, ApiError>
where
    F: Fn(Option<pb::QueryOptions>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let query = call.blocking()?;
    match read(query).await {
        Err(s) if unblocked(query, &s).await => Ok(read(None).await?.into_inner()),
        other => Ok(other?.into_inner()),
    }
}

/// Whether a blocking read that failed with `status` is answered with the current state
/// instead: its wait ran out (UNAVAILABLE), or it asked for an index the log has not
/// reached by more than one write (OUT_OF_RANGE), which Nomad waits out in full.
async fn unblocked(query: Option<pb::QueryOptions>, status: &tonic::Status) -> bool {
    let Some(query) = query else {
        return false;
    };
    match status.code() {
        tonic::Code::Unavailable => true,
        tonic::Code::OutOfRange => {
            let wait = match query.max_wait_ms {
                0 => crate::query::DEFAULT_WAIT,
                ms => std::time::Duration::from_millis(ms),
            };
            tokio::time::sleep(wait).await;
            true
        }
        _ => false,
    }
}

/// A JSON request body, refused with 400 naming the position of a syntax error or the
/// unknown field.
pub fn body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::BadRequest(json_error(&e)))
}

/// serde_json's error as Nomad-style text with its position.
pub fn json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let cut = text.rfind(" at line ").unwrap_or(text.len());
    format!(
        "invalid json at line {} column {}: {}",
        e.line(),
        e.column(),
        &text[..cut]
    )
}

/// Every page of a list, the first as a blocking query: `fetch` is given the query
/// options, a page size and the previous page's token, and answers a page with its index
/// and next token. With `per_page` set only one page is fetched and its token handed back,
/// as Nomad's pagination does; without it every page is (Nomad's lists are whole).
pub async fn pages<T, F, Fut>(call: &Call, fetch: F) -> Result<(Vec<T>, u64, String), ApiError>
where
    F: Fn(Option<pb::QueryOptions>, u32, String) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, u64, String), tonic::Status>>,
{
    let (per_page, token) = call.page()?;
    let query = call.blocking()?;
    let (mut items, index, mut next) = match fetch(query, per_page, token.clone()).await {
        Err(s) if unblocked(query, &s).await => fetch(None, per_page, token).await?,
        other => other?,
    };
    if per_page > 0 {
        return Ok((items, index, next));
    }
    while !next.is_empty() {
        let (more, _, token) = fetch(None, 0, next).await?;
        items.extend(more);
        next = token;
    }
    Ok((items, index, String::new()))
}
