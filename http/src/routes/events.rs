//! `/v1/event/stream`: the servers' event stream as Nomad's NDJSON, one batch per line and
//! `{}` as a heartbeat every ten seconds.

use super::Ctx;
use crate::nomad::event::{Event, Frame, topic_of};
use crate::query::Call;
use crate::reply::ApiError;
use crate::stream::{self, Relay};
use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use drover_proto::v1 as pb;
use futures::StreamExt;
use std::time::Duration;

pub fn routes() -> Router<Ctx> {
    Router::new().route("/v1/event/stream", get(stream))
}

/// `?topic=Node` or `?topic=Node:<key>` (repeatable; `*` for every topic or key).
fn topics(call: &Call) -> Result<Vec<pb::TopicFilter>, ApiError> {
    let mut out: Vec<pb::TopicFilter> = Vec::new();
    for spec in call.all("topic") {
        let (name, key) = spec.split_once(':').unwrap_or((spec, "*"));
        let topic = topic_of(name).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "query parameter topic: unknown topic {name:?} (one of Job, Node, Evaluation, Allocation, Operator, *)"
            ))
        })?;
        if topic == pb::Topic::Unspecified {
            return Ok(Vec::new());
        }
        let keys = if key == "*" {
            Vec::new()
        } else {
            vec![key.to_string()]
        };
        match out.iter_mut().find(|f| f.topic == i32::from(topic)) {
            Some(f) if f.keys.is_empty() || keys.is_empty() => f.keys.clear(),
            Some(f) => f.keys.extend(keys),
            None => out.push(pb::TopicFilter {
                topic: topic.into(),
                keys,
            }),
        }
    }
    Ok(out)
}

async fn stream(State(ctx): State<Ctx>, call: Call) -> Result<Response, ApiError> {
    let namespace = call.get("namespace").unwrap_or("").to_string();
    let req = call.creds.request(pb::SubscribeRequest {
        from_index: call.number("index")?.unwrap_or(0),
        topics: topics(&call)?,
    });
    // The subscription is made before answering, so a refused token is a 403, not an
    // empty stream.
    let events = ctx.grpc.events().subscribe(req).await?.into_inner();
    let frames = events.map(move |batch| {
        let batch = batch.map_err(|s| s.message().to_string())?;
        let events: Vec<Event> = batch
            .events
            .iter()
            .map(Event::from)
            .filter(|e| {
                namespace.is_empty()
                    || namespace == "*"
                    || e.namespace.is_empty()
                    || e.namespace == namespace
            })
            .collect();
        let mut line = serde_json::to_vec(&Frame {
            index: batch.index,
            events,
        })
        .map_err(|e| e.to_string())?;
        line.push(b'\n');
        Ok(Bytes::from(line))
    });
    let body = stream::body(
        frames,
        Relay {
            label: "event stream".into(),
            stall: ctx.opts.stream_stall,
            heartbeat: Some((Duration::from_secs(10), Bytes::from_static(b"{}\n"))),
        },
    );
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}
