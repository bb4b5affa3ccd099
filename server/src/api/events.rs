//! `drover.v1.EventService`: the event stream.
//!
//! Each subscriber gets its own receiver of the server's bounded broadcast of applied
//! entries' events and a task that filters and forwards them. The FSM only ever sends
//! into the broadcast, which never waits: a subscriber too slow to keep up is overtaken
//! by the buffer and its stream ends with OUT_OF_RANGE.

use super::Api;
use drover_core::Index;
use drover_core::fsm::Event;
use drover_proto::convert::EventFilter;
use drover_proto::v1 as pb;
use drover_proto::v1::event_service_server::EventService;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// An empty message (carrying the current index) after this long without a match.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Messages queued towards one subscriber's connection; beyond it the forwarding task
/// waits, and the broadcast buffer absorbs the rest until it overtakes the subscriber.
const PER_SUBSCRIBER: usize = 64;

/// The EventService implementation.
#[derive(Clone, Debug)]
pub struct EventApi(pub(crate) Api);

type EventStream = Pin<Box<dyn Stream<Item = Result<pb::SubscribeResponse, Status>> + Send>>;

fn resubscribe(what: &str, oldest: Index) -> Status {
    Status::out_of_range(format!(
        "{what}; the oldest index still buffered is {oldest}: reload state with the read \
         RPCs and subscribe again from the index they answered at, plus one"
    ))
}

#[tonic::async_trait]
impl EventService for EventApi {
    type SubscribeStream = EventStream;

    async fn subscribe(
        &self,
        req: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let filter = EventFilter::try_from(req.into_inner())?;
        let handle = self.0.handle.clone();
        // Subscribe first, then read the index: every entry after it is in the receiver.
        let rx = handle.subscribe_events();
        let applied = handle.applied_index();
        // The buffer holds only what is applied from now on.
        if filter.from_index != 0 && filter.from_index <= applied {
            return Err(resubscribe(
                &format!("index {} is no longer buffered", filter.from_index),
                applied + 1,
            ));
        }
        let (tx, out) = mpsc::channel(PER_SUBSCRIBER);
        tokio::spawn(forward(handle, filter, rx, tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(out))))
    }
}

/// Groups a batch's events by index, keeping only those the subscriber wants.
fn responses(filter: &EventFilter, batch: &[Event]) -> Vec<pb::SubscribeResponse> {
    let mut out: Vec<pb::SubscribeResponse> = Vec::new();
    for e in batch
        .iter()
        .filter(|e| e.index >= filter.from_index && filter.matches(e))
    {
        match out.last_mut() {
            Some(r) if r.index == e.index => r.events.push(e.into()),
            _ => out.push(pb::SubscribeResponse {
                events: vec![e.into()],
                index: e.index,
            }),
        }
    }
    out
}

async fn forward(
    handle: crate::ServerHandle,
    filter: EventFilter,
    mut rx: broadcast::Receiver<Arc<Vec<Event>>>,
    tx: mpsc::Sender<Result<pb::SubscribeResponse, Status>>,
) {
    let mut last_sent = Index::default();
    loop {
        let batch = tokio::select! {
            _ = tx.closed() => return,
            r = tokio::time::timeout(KEEP_ALIVE, rx.recv()) => r,
        };
        match batch {
            Err(_elapsed) => {
                let keep_alive = pb::SubscribeResponse {
                    events: Vec::new(),
                    index: handle.applied_index().max(last_sent),
                };
                if tx.send(Ok(keep_alive)).await.is_err() {
                    return;
                }
            }
            Ok(Ok(batch)) => {
                for r in responses(&filter, &batch) {
                    last_sent = r.index;
                    if tx.send(Ok(r)).await.is_err() {
                        return;
                    }
                }
            }
            Ok(Err(broadcast::error::RecvError::Lagged(missed))) => {
                let status = Status::out_of_range(format!(
                    "this subscriber fell behind the event buffer ({missed} batches were \
                     dropped after index {last_sent}); reload state with the read RPCs and \
                     subscribe again from a newer index: the one they answered at, plus one \
                     (the server is at {})",
                    handle.applied_index()
                ));
                let _ = tx.send(Err(status)).await;
                return;
            }
            Ok(Err(broadcast::error::RecvError::Closed)) => {
                let _ = tx
                    .send(Err(Status::unavailable("the server is shutting down")))
                    .await;
                return;
            }
        }
    }
}
