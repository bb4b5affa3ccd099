//! A node's heartbeats on one long-lived stream (`NodeService.Heartbeats`): one request
//! sent and its one answer read before the next, so nothing queues on either side. Opening
//! it costs a call; every heartbeat after that is one message each way, which costs the
//! server far less than a call of its own. Any error ends the stream: drop it and open
//! another (after the caller's backoff).
//!
//! A server older than the stream answers UNIMPLEMENTED ([`unsupported`]); its callers then
//! heartbeat with the unary `UpdateStatus`, which every server keeps serving.

use drover_proto::bearer::BearerChannel;
use drover_proto::v1 as pb;
use drover_proto::v1::node_service_client::NodeServiceClient;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status};

/// One open heartbeat stream.
#[derive(Debug)]
pub struct BeatStream {
    requests: mpsc::Sender<pb::UpdateNodeStatusRequest>,
    answers: tonic::Streaming<pb::UpdateNodeStatusResponse>,
}

impl BeatStream {
    /// Opens a stream with `client`; answers once the server took it.
    pub async fn open(mut client: NodeServiceClient<BearerChannel>) -> Result<Self, Status> {
        // One request at a time: `beat` reads each answer before it sends the next.
        let (requests, pending) = mpsc::channel(1);
        let answers = client
            .heartbeats(ReceiverStream::new(pending))
            .await?
            .into_inner();
        Ok(Self { requests, answers })
    }

    /// Sends one heartbeat and reads its answer.
    pub async fn beat(
        &mut self,
        req: pb::UpdateNodeStatusRequest,
    ) -> Result<pb::UpdateNodeStatusResponse, Status> {
        self.requests
            .send(req)
            .await
            .map_err(|_| Status::unavailable("the heartbeat stream is closed"))?;
        self.answers
            .message()
            .await?
            .ok_or_else(|| Status::unavailable("the server ended the heartbeat stream"))
    }
}

/// Whether `status` says the server has no heartbeat stream (it is older): heartbeat with
/// the unary call instead.
pub fn unsupported(status: &Status) -> bool {
    status.code() == Code::Unimplemented
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_server_without_the_stream_sends_heartbeats_back_to_unary_calls() {
        let rows = [
            (Code::Unimplemented, true),
            (Code::Unavailable, false),
            (Code::NotFound, false),
            (Code::Unauthenticated, false),
            (Code::InvalidArgument, false),
            (Code::Unknown, false),
        ];
        for (code, falls_back) in rows {
            assert_eq!(unsupported(&Status::new(code, "x")), falls_back, "{code:?}");
        }
    }
}
