//! `/v1/client/...`: task logs and in-place restarts, through the servers as the gRPC
//! route takes them (the server calls the allocation's agent with the caller's token).

use super::{Ctx, body};
use crate::query::Call;
use crate::reply::{self, ApiError};
use crate::stream::{self, Relay};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use bytes::Bytes;
use drover_proto::v1 as pb;
use futures::StreamExt;
use serde::Deserialize;

pub fn routes() -> Router<Ctx> {
    Router::new()
        .route("/v1/client/fs/logs/{alloc}", get(logs))
        .route(
            "/v1/client/allocation/{alloc}/restart",
            post(restart).put(restart),
        )
}

/// `?task=&type=stdout|stderr&follow=&origin=start|end&offset=&plain=`. With `plain` the
/// body is the log's bytes; otherwise Nomad's frames (`{"Data": base64, "File", "Offset"}`),
/// one per line. `origin=end` with an `offset` reads the log's tail (drover counts whole
/// lines from the end: an offset in bytes is read as that many lines at most, 10 if 0).
async fn logs(
    State(ctx): State<Ctx>,
    call: Call,
    Path(alloc): Path<String>,
) -> Result<Response, ApiError> {
    let task = call.get("task").unwrap_or("").to_string();
    let stderr = match call.get("type").unwrap_or("stdout") {
        "stdout" => false,
        "stderr" => true,
        other => {
            return Err(ApiError::BadRequest(format!(
                "query parameter type: unknown value {other:?} (one of stdout, stderr)"
            )));
        }
    };
    let tail_lines = match call.get("origin").unwrap_or("start") {
        "start" => None,
        "end" => Some(call.number("offset")?.filter(|n| *n > 0).unwrap_or(10)),
        other => {
            return Err(ApiError::BadRequest(format!(
                "query parameter origin: unknown value {other:?} (one of start, end)"
            )));
        }
    };
    let plain = call.flag("plain")?;
    let req = call.creds.request(pb::AllocLogsRequest {
        alloc_id: alloc.clone(),
        task: task.clone(),
        stderr,
        follow: call.flag("follow")?,
        tail_lines,
    });
    let logs = ctx.grpc.allocs().logs(req).await?.into_inner();
    let file = format!(
        "alloc/logs/{task}.{}.0",
        if stderr { "stderr" } else { "stdout" }
    );
    let mut offset = 0u64;
    let frames = logs.map(move |chunk| {
        let chunk = chunk.map_err(|s| s.message().to_string())?;
        if plain {
            return Ok(Bytes::from(chunk.data));
        }
        offset += chunk.data.len() as u64;
        let frame = serde_json::json!({
            "Data": base64::engine::general_purpose::STANDARD.encode(&chunk.data),
            "File": file,
            "Offset": offset,
        });
        let mut line = serde_json::to_vec(&frame).map_err(|e| e.to_string())?;
        line.push(b'\n');
        Ok(Bytes::from(line))
    });
    let body = stream::body(
        frames,
        Relay {
            label: format!("logs of allocation {alloc}"),
            stall: ctx.opts.stream_stall,
            heartbeat: None,
        },
    );
    let content_type = if plain {
        "text/plain; charset=utf-8"
    } else {
        "application/json"
    };
    Ok(([(header::CONTENT_TYPE, content_type)], body).into_response())
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct RestartBody {
    #[serde(default)]
    task_name: String,
    #[serde(default)]
    all_tasks: bool,
}

async fn restart(
    State(ctx): State<Ctx>,
    call: Call,
    Path(alloc): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let b: RestartBody = if bytes.is_empty() {
        RestartBody::default()
    } else {
        body(&bytes)?
    };
    let _ = b.all_tasks;
    let req = call.creds.request(pb::AllocRestartRequest {
        alloc_id: alloc,
        task: b.task_name,
    });
    let r = ctx.grpc.allocs().restart(req).await?.into_inner();
    Ok(reply::json(
        ctx.meta(0),
        "",
        &serde_json::json!({ "Tasks": r.tasks }),
    ))
}
