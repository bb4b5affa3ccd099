//! `drover.v1.EventService`: the event stream.
//!
//! Each subscriber gets a task with its own cursor into the server's retained event buffer
//! ([`crate::events::EventRing`]): it replays what the buffer holds from the requested
//! index, then follows new batches as they are appended. The FSM only appends to the
//! buffer and never waits: a subscriber too slow to keep up finds the buffer has dropped
//! its cursor and its stream ends with OUT_OF_RANGE, naming the index to resubscribe from.

use super::Api;
use super::subscribers::Subscriber;
use crate::events::{Behind, EventRing};
use drover_core::Index;
use drover_core::acl::Acl;
use drover_core::fsm::Event;
use drover_proto::convert::EventFilter;
use drover_proto::v1 as pb;
use drover_proto::v1::event_service_server::EventService;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// An empty message (carrying the current index) after this long without a match.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Messages queued towards one subscriber's connection; beyond it the forwarding task
/// waits while the buffer moves on, until it overtakes the subscriber.
const PER_SUBSCRIBER: usize = 64;
/// Batches read from the buffer per lock.
const READ_CHUNK: usize = 256;

/// The EventService implementation.
#[derive(Clone, Debug)]
pub struct EventApi(pub(crate) Api);

type EventStream = Pin<Box<dyn Stream<Item = Result<pb::SubscribeResponse, Status>> + Send>>;

/// The status ending a subscription whose start is no longer buffered.
fn behind_status(b: Behind, applied: Index) -> Status {
    Status::out_of_range(format!(
        "events from index {} are no longer buffered (the oldest buffered index is {}, the \
         server is at {applied}): reload state with the read RPCs and subscribe again from \
         a newer index, the one they answered at plus one",
        b.wanted, b.floor
    ))
}

#[tonic::async_trait]
impl EventService for EventApi {
    type SubscribeStream = EventStream;

    async fn subscribe(
        &self,
        req: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let acl = crate::auth::caller(&req)?;
        if !acl.may_subscribe() {
            return Err(Status::permission_denied(
                acl.check(&drover_core::acl::Need::AnyNamespace(
                    drover_core::acl::NamespaceCapability::ReadEvents,
                ))
                .err()
                .map(|d| d.to_string())
                .unwrap_or_default(),
            ));
        }
        let who = if acl.is_management() {
            Subscriber::Management
        } else {
            let bearer = req
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            Subscriber::Token(crate::secrets::digest(bearer))
        };
        let filter = EventFilter::try_from(req.into_inner())?;
        let permit = self.0.subscribers.admit(who)?;
        let handle = self.0.handle.clone();
        let ring = handle.event_ring();
        let applied = handle.applied_index();
        let cursor = match filter.from_index {
            0 => applied + 1,
            from => from,
        };
        // Refuse at once rather than open a stream only to end it.
        if let Err(b) = ring.read_from(cursor, 0) {
            return Err(behind_status(b, applied));
        }
        let (tx, out) = mpsc::channel(PER_SUBSCRIBER);
        tokio::spawn(async move {
            forward(handle, ring, filter, acl, cursor, tx).await;
            drop(permit);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out))))
    }
}

/// Groups a batch's events by index, keeping only those the subscriber wants.
fn responses(filter: &EventFilter, acl: &Acl, batch: &[Event]) -> Vec<pb::SubscribeResponse> {
    let mut out: Vec<pb::SubscribeResponse> = Vec::new();
    for e in batch.iter().filter(|e| filter.matches(e) && acl.may_see(e)) {
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
    ring: Arc<EventRing>,
    filter: EventFilter,
    acl: Arc<Acl>,
    mut cursor: Index,
    tx: mpsc::Sender<Result<pb::SubscribeResponse, Status>>,
) {
    let mut appended = ring.watch();
    let mut last_sent = tokio::time::Instant::now();
    loop {
        appended.borrow_and_update();
        let batches = match ring.read_from(cursor, READ_CHUNK) {
            Ok(b) => b,
            Err(b) => {
                tracing::debug!(cursor, floor = b.floor, "event subscriber overtaken");
                let _ = tx.send(Err(behind_status(b, handle.applied_index()))).await;
                return;
            }
        };
        if let Some(last) = batches.last().and_then(|b| b.first()) {
            cursor = last.index + 1;
            for r in batches.iter().flat_map(|b| responses(&filter, &acl, b)) {
                if tx.send(Ok(r)).await.is_err() {
                    return;
                }
                last_sent = tokio::time::Instant::now();
            }
            continue;
        }
        let keep_alive_at = last_sent + KEEP_ALIVE;
        tokio::select! {
            _ = tx.closed() => return,
            changed = appended.changed() => {
                if changed.is_err() {
                    let _ = tx.send(Err(Status::unavailable("the server is shutting down"))).await;
                    return;
                }
            }
            _ = tokio::time::sleep_until(keep_alive_at) => {
                let keep_alive = pb::SubscribeResponse {
                    events: Vec::new(),
                    index: handle.applied_index().max(cursor.saturating_sub(1)),
                };
                if tx.send(Ok(keep_alive)).await.is_err() {
                    return;
                }
                last_sent = tokio::time::Instant::now();
            }
        }
    }
}
