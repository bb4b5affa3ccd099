//! The calls of a virtual node, with the retry rules they share. Registration retries
//! transient failures itself; heartbeats and reports are retried by the engine, which owns
//! their timing.

use super::connections::Connections;
use super::layout::Layout;
use super::{SimConfig, SimError};
use crate::beat_stream::{BeatStream, unsupported};
use backon::{ExponentialBuilder, Retryable};
use drover_core::types::NodeId;
use drover_proto::v1 as pb;
use std::time::Duration;
use tonic::Code;

/// Errors worth retrying: the server is busy, briefly away, or between leaders.
pub(crate) fn transient(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable
            | Code::ResourceExhausted
            | Code::DeadlineExceeded
            | Code::Aborted
            | Code::Unknown
    )
}

/// Retries of a call the engine does not time itself: registration, job reads.
pub(crate) fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_max_times(8)
        .with_jitter()
}

/// Registers node `node` (again, with `previous` credentials, after the servers forgot it).
pub(crate) async fn register(
    conns: &Connections,
    config: &SimConfig,
    layout: &Layout,
    node: u32,
    previous: Option<&pb::NodeAuth>,
) -> Result<(NodeId, pb::NodeAuth), SimError> {
    let previous = previous.map(|a| (a.node_id.clone(), a.secret_id.clone()));
    let name = Layout::name(config, node);
    let call = || {
        let mut client = conns.unary(node);
        let node_reg = layout.registration(config, node, previous.clone());
        async move {
            client
                .register(pb::RegisterNodeRequest {
                    node: Some(node_reg),
                })
                .await
        }
    };
    let resp = call
        .retry(backoff())
        .when(transient)
        .await
        .map_err(|status| SimError::Register {
            name: name.clone(),
            status,
        })?
        .into_inner();
    let id = resp
        .node_id
        .parse::<NodeId>()
        .map_err(|_| SimError::BadNodeId {
            name,
            value: resp.node_id.clone(),
        })?;
    let auth = pb::NodeAuth {
        node_id: resp.node_id,
        secret_id: resp.secret_id,
    };
    Ok((id, auth))
}

/// How long a cancelled heartbeat is given before the node abandons it: long enough for
/// the request to leave, far shorter than the server's answer in a storm.
const CANCEL_AFTER: Duration = Duration::from_millis(1);

/// A heartbeat's outcome, with the node's stream to keep for its next one.
#[derive(Debug)]
pub(crate) struct Beat {
    /// The TTL the servers answered with.
    pub(crate) result: Result<Duration, tonic::Status>,
    /// The node's heartbeat stream, open after a heartbeat answered on it.
    pub(crate) stream: Option<BeatStream>,
    /// The servers have no heartbeat stream: this heartbeat went as the unary call.
    pub(crate) unsupported: bool,
}

/// One heartbeat reporting the node ready, on the node's `stream` (opened when `None`) or,
/// with `unary` (the servers have no stream), as the unary call. With `cancel_rate`, a
/// unary decoy is abandoned first (see [`SimConfig`]).
pub(crate) async fn heartbeat(
    conns: &Connections,
    node: u32,
    auth: pb::NodeAuth,
    cancel_rate: f64,
    stream: Option<BeatStream>,
    unary: bool,
) -> Beat {
    let req = pb::UpdateNodeStatusRequest {
        auth: Some(auth),
        readiness: pb::Readiness::Ready.into(),
        last_snapshot: None,
    };
    let ttl = |ack: pb::UpdateNodeStatusResponse| Duration::from_millis(ack.heartbeat_ttl_ms);
    if cancel_rate > 0.0 && rand::random::<f64>() < cancel_rate {
        let mut client = conns.heartbeats(node);
        let decoy = client.update_status(req.clone());
        if let Ok(answered) = tokio::time::timeout(CANCEL_AFTER, decoy).await {
            return Beat {
                result: answered.map(|a| ttl(a.into_inner())),
                stream,
                unsupported: false,
            };
        }
    }
    if !unary {
        let streamed = async {
            let mut stream = match stream {
                Some(stream) => stream,
                None => BeatStream::open(conns.beat_stream(node)).await?,
            };
            let ack = stream.beat(req.clone()).await?;
            Ok::<_, tonic::Status>((ack, stream))
        }
        .await;
        match streamed {
            Ok((ack, stream)) => {
                return Beat {
                    result: Ok(ttl(ack)),
                    stream: Some(stream),
                    unsupported: false,
                };
            }
            Err(status) if !unsupported(&status) => {
                return Beat {
                    result: Err(status),
                    stream: None,
                    unsupported: false,
                };
            }
            Err(_) => {}
        }
    }
    let result = conns
        .heartbeats(node)
        .update_status(req)
        .await
        .map(|a| ttl(a.into_inner()));
    Beat {
        result,
        stream: None,
        unsupported: !unary,
    }
}
