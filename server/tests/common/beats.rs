//! A node's heartbeat stream (`NodeService.Heartbeats`) as a test drives it: one request
//! sent, its answer read, before the next.

use drover_proto::convert::NodeCredentials;
use drover_proto::v1 as pb;
use drover_proto::v1::node_service_client::NodeServiceClient;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// One open heartbeat stream.
pub struct Beats {
    requests: mpsc::Sender<pb::UpdateNodeStatusRequest>,
    answers: tonic::Streaming<pb::UpdateNodeStatusResponse>,
}

/// The auth `creds` present on the wire.
pub fn auth(creds: &NodeCredentials) -> pb::NodeAuth {
    pb::NodeAuth {
        node_id: creds.node_id.to_string(),
        secret_id: creds.secret_id.clone(),
    }
}

/// A heartbeat of a ready node.
pub fn ready(auth: pb::NodeAuth) -> pb::UpdateNodeStatusRequest {
    pb::UpdateNodeStatusRequest {
        auth: Some(auth),
        readiness: pb::Readiness::Ready.into(),
        last_snapshot: None,
    }
}

impl Beats {
    /// Opens a stream on `channel`.
    pub async fn open(channel: Channel) -> Beats {
        let (requests, rx) = mpsc::channel(1);
        let answers = NodeServiceClient::new(channel)
            .heartbeats(ReceiverStream::new(rx))
            .await
            .expect("the server takes the heartbeat stream")
            .into_inner();
        Beats { requests, answers }
    }

    /// Sends `req` and reads its answer (an error status ends the stream).
    pub async fn beat(
        &mut self,
        req: pb::UpdateNodeStatusRequest,
    ) -> Result<pb::UpdateNodeStatusResponse, tonic::Status> {
        self.requests.send(req).await.expect("the stream is open");
        tokio::time::timeout(super::DEADLINE, self.answers.message())
            .await
            .expect("the heartbeat is answered")?
            .ok_or_else(|| tonic::Status::internal("the stream ended without an answer"))
    }

    /// Whether the server ended the stream (no answer follows), waiting up to a second.
    pub async fn ended(&mut self) -> bool {
        matches!(
            tokio::time::timeout(Duration::from_secs(1), self.answers.message()).await,
            Ok(Ok(None) | Err(_))
        )
    }
}
