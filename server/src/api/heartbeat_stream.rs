//! `NodeService.Heartbeats`: a node's heartbeats on one long-lived stream, each one DATA
//! frame each way, so a heartbeat costs the server no call of its own (no per-call task,
//! headers or trailers).
//!
//! Each heartbeat is handled as the unary `UpdateStatus` is, through the same function
//! ([`super::nodes::heartbeat`]), and routed as it would be, checked again for every
//! message: on the leader while its lease holds; on a follower, sent on to the leader as
//! the unary call over the heartbeat connection ([`Directory::heartbeat_lane`]). So a
//! stream never acknowledges a heartbeat the unary call would have refused, and a stream
//! to a follower keeps serving across a change of leader. The first heartbeat the route
//! refuses ends the stream with the unary call's status; the agent opens another.
//!
//! Bounded by construction: the answer stream reads the next request only when it is
//! polled for the next answer, and HTTP/2 polls it only while the client reads answers
//! (flow control), so a client that never reads stops being read, and nothing queues.
//!
//! [`Directory::heartbeat_lane`]: crate::forward::Directory::heartbeat_lane

use super::Api;
use crate::forward::{FORWARDED_HEADER, MAX_FORWARD};
use drover_proto::v1 as pb;
use drover_proto::v1::node_service_client::NodeServiceClient;
use std::pin::Pin;
use tokio_stream::Stream;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Request, Status, Streaming};

/// The answers of one heartbeat stream.
pub(super) type Answers =
    Pin<Box<dyn Stream<Item = Result<pb::UpdateNodeStatusResponse, Status>> + Send>>;

/// The headers a heartbeat sent on to the leader carries from its stream: the caller's
/// credentials, which the leader checks again as it checks any call's.
const RELAYED_HEADERS: &[&str] = &["authorization", crate::auth::NODE_ID_HEADER];

/// One stream's state between two heartbeats.
struct Beats {
    api: Api,
    credentials: MetadataMap,
    requests: Streaming<pb::UpdateNodeStatusRequest>,
    /// The node the stream's first heartbeat named, for the log (taken once, not per
    /// heartbeat).
    node_id: Option<String>,
}

/// The answers to the heartbeats of `req`, one per request, in order.
pub(super) fn answers(api: Api, req: Request<Streaming<pb::UpdateNodeStatusRequest>>) -> Answers {
    let mut credentials = MetadataMap::new();
    for name in RELAYED_HEADERS {
        if let Some(value) = req.metadata().get(*name) {
            credentials.insert(*name, value.clone());
        }
    }
    let beats = Beats {
        api,
        credentials,
        requests: req.into_inner(),
        node_id: None,
    };
    Box::pin(futures::stream::unfold(Some(beats), |beats| async move {
        let mut beats = beats?;
        let request = match beats.requests.message().await {
            Ok(Some(request)) => request,
            Ok(None) => return None,
            Err(status) => return Some((Err(status), None)),
        };
        if beats.node_id.is_none() {
            beats.node_id = request.auth.as_ref().map(|a| a.node_id.clone());
        }
        // Boxed: a relayed heartbeat's call is kilobytes of future, and inline it would
        // be held by every idle stream between two heartbeats.
        match Box::pin(route(&beats.api, &beats.credentials, request)).await {
            Ok(ack) => Some((Ok(ack), Some(beats))),
            Err(status) => {
                tracing::debug!(node_id = beats.node_id.as_deref().unwrap_or_default(), code = ?status.code(), reason = status.message(), "heartbeat stream ended");
                Some((Err(status), None))
            }
        }
    }))
}

/// Handles one streamed heartbeat here, or sends it to the leader as the unary call. A
/// heartbeat is small and idempotent, so one that meets a change of leader goes once more,
/// to the new leader: when the change is seen while it is on its way (as a forwarded unary
/// call does), or when the leader answers UNAVAILABLE (it lost the lead, or cannot be
/// reached) and a new one is known within an election's wait. So an agent's stream to a
/// follower outlives a change of leader rather than ending with it.
async fn route(
    api: &Api,
    credentials: &MetadataMap,
    request: pb::UpdateNodeStatusRequest,
) -> Result<pb::UpdateNodeStatusResponse, Status> {
    let directory = &api.handle.inner.directory;
    for attempt in 0..2 {
        let leader = directory.known_leader();
        let Some(lane) = directory.heartbeat_lane().await? else {
            return super::nodes::heartbeat(api, request).await;
        };
        let mut call = Request::new(request.clone());
        *call.metadata_mut() = credentials.clone();
        call.metadata_mut().insert(
            FORWARDED_HEADER,
            MetadataValue::from(api.handle.server_id()),
        );
        call.set_timeout(MAX_FORWARD);
        let mut leader_api = NodeServiceClient::new(lane);
        tokio::select! {
            answer = tokio::time::timeout(MAX_FORWARD, leader_api.update_status(call)) => {
                match answer {
                    Ok(Ok(ack)) => return Ok(ack.into_inner()),
                    Ok(Err(status))
                        if attempt == 0
                            && status.code() == Code::Unavailable
                            && directory.leader_changes_within_wait(leader).await => {}
                    Ok(Err(status)) => return Err(status),
                    Err(_) => {
                        return Err(Status::deadline_exceeded(format!(
                            "the leader did not answer a heartbeat within {MAX_FORWARD:?}; retry"
                        )));
                    }
                }
            }
            () = directory.leader_changed(leader) => {
                tracing::info!(from = ?leader, to = ?directory.known_leader(), "leader changed while relaying a heartbeat");
            }
        }
    }
    Err(Status::unavailable(
        "the leader changed while a heartbeat was on its way to it; retry",
    ))
}
