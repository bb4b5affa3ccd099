//! One node's allocation watch: a small task that reads the server stream and hands each
//! message to the engine. It holds nothing but the stream, so 10,000 of them stay cheap, and
//! the engine aborts it to cut the node off (silence) or replaces it after a reconnect.

use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1 as pb;
use drover_proto::v1::node_service_client::NodeServiceClient;
use tokio::sync::mpsc;

/// What a watch task tells the engine; `generation` names the watch it came from.
#[derive(Debug)]
pub(crate) enum WatchEvent {
    Allocations {
        node: u32,
        generation: u32,
        change: pb::WatchAllocationsResponse,
    },
    /// The stream ended (the server went away, or refused the node); the engine reopens it.
    Ended {
        node: u32,
        generation: u32,
        status: Option<tonic::Status>,
    },
}

/// Follows node `node`'s watch; `known` is what the node holds from an earlier one.
pub(crate) async fn run(
    mut client: NodeServiceClient<Channel>,
    auth: pb::NodeAuth,
    known: Vec<pb::KnownAllocation>,
    node: u32,
    generation: u32,
    events: mpsc::UnboundedSender<WatchEvent>,
) {
    let request = pb::WatchAllocationsRequest {
        auth: Some(auth),
        min_index: 0,
        known,
    };
    let status = match client.watch_allocations(request).await {
        Err(status) => Some(status),
        Ok(response) => {
            let mut stream = response.into_inner();
            loop {
                match stream.message().await {
                    Ok(Some(msg)) => {
                        let event = WatchEvent::Allocations {
                            node,
                            generation,
                            change: msg,
                        };
                        if events.send(event).is_err() {
                            return;
                        }
                    }
                    Ok(None) => break None,
                    Err(status) => break Some(status),
                }
            }
        }
    };
    let _ = events.send(WatchEvent::Ended {
        node,
        generation,
        status,
    });
}
