//! Bounds on what the API listener takes in at once, across every connection: requests in
//! flight, and the bytes of request messages being received. Per-connection bounds (tonic's
//! concurrency limit, HTTP/2's stream limit) stop one connection; these stop many.
//!
//! A request waits at most [`RequestLimits::max_wait`] for its turn, then answers
//! RESOURCE_EXHAUSTED naming the limit, so a flood is answered rather than queued without
//! end. The byte budget is charged from each gRPC message's length prefix before its body
//! is read: a message waits whole for its share, so no two requests can each hold half of
//! what the other needs, and unread bytes stay on the client under HTTP/2 flow control.
//! Messages up to [`SMALL_MESSAGE`] are not charged: the request limit already bounds
//! them, and a heartbeat must not queue behind a flood of large registrations.
//!
//! Waiting is safe only because a parked stream cannot starve its connection: the API
//! listener sizes the connection's flow-control window to hold every stream's window
//! (`super::STREAM_WINDOW`), so the bytes a parked stream has been sent never stop a
//! served stream on the same connection from receiving the rest of its message.

use crate::config::RequestLimits;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::http;

/// The largest message received without a share of the byte budget.
pub const SMALL_MESSAGE: usize = 64 << 10;

/// The shared counters behind [`LimitLayer`].
#[derive(Debug)]
pub struct Budget {
    requests: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    limits: RequestLimits,
    small: usize,
}

impl Budget {
    pub fn new(limits: RequestLimits) -> Arc<Self> {
        Self::with_small_messages(limits, SMALL_MESSAGE)
    }

    fn with_small_messages(limits: RequestLimits, small: usize) -> Arc<Self> {
        Arc::new(Self {
            requests: Arc::new(Semaphore::new(limits.max_in_flight.max(1))),
            bytes: Arc::new(Semaphore::new(limits.max_bytes_in_flight.max(1))),
            limits,
            small,
        })
    }

    fn requests_exhausted(&self) -> Status {
        Status::resource_exhausted(format!(
            "server busy: {} requests in flight (limits.max_requests_in_flight) for longer than {:?}; retry",
            self.limits.max_in_flight, self.limits.max_wait
        ))
    }

    fn bytes_exhausted(&self, message: usize) -> Status {
        Status::resource_exhausted(format!(
            "server busy: a {message}-byte message found {} bytes of requests already being received (limits.max_request_bytes_in_flight) for longer than {:?}; retry",
            self.limits.max_bytes_in_flight, self.limits.max_wait
        ))
    }

    /// What a message of `len` bytes is charged: its length, but never more than the whole
    /// budget, so a message the listener accepts can always be received on its own.
    fn charge(&self, len: usize) -> u32 {
        len.min(self.limits.max_bytes_in_flight.max(1))
            .try_into()
            .unwrap_or(u32::MAX)
    }
}

/// Wraps the API's services in [`Limit`].
#[derive(Clone, Debug)]
pub struct LimitLayer(pub Arc<Budget>);

impl<S> tower::Layer<S> for LimitLayer {
    type Service = Limit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Limit {
            inner,
            budget: self.0.clone(),
        }
    }
}

/// Holds a request-in-flight permit until the response (or a stream's head) is ready,
/// and meters the request body against the byte budget.
#[derive(Clone, Debug)]
pub struct Limit<S> {
    inner: S,
    budget: Arc<Budget>,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S> tower::Service<http::Request<Body>> for Limit<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let mut inner = crate::layers::take_ready(&mut self.inner);
        let budget = self.budget.clone();
        Box::pin(async move {
            let wait = budget.limits.max_wait;
            let acquired =
                tokio::time::timeout(wait, budget.requests.clone().acquire_owned()).await;
            let Ok(Ok(_permit)) = acquired else {
                tracing::warn!(
                    path = req.uri().path(),
                    limit = budget.limits.max_in_flight,
                    "request refused: too many requests in flight"
                );
                return Ok(budget.requests_exhausted().into_http());
            };
            let req = req.map(|body| Body::new(MeteredBody::new(body, budget.clone())));
            inner.call(req).await
        })
    }
}

/// Where the body's reader is in the gRPC framing (a 5-byte header: a compression flag
/// and a big-endian length, then the message).
#[derive(Debug)]
enum Framing {
    Header { seen: [u8; 5], len: usize },
    Message { left: usize },
}

impl Framing {
    /// Before a message's 5-byte header.
    const START: Framing = Framing::Header {
        seen: [0; 5],
        len: 0,
    };
}

/// A request body that takes each message's share of the byte budget before passing the
/// message on, and gives it back when the next message starts or the body is dropped.
struct MeteredBody {
    inner: Body,
    budget: Arc<Budget>,
    framing: Framing,
    /// Data read from `inner` but not yet passed on (its framing not yet walked).
    held: Option<Bytes>,
    /// Bytes of `held` already walked (and paid for).
    walked: usize,
    permit: Option<OwnedSemaphorePermit>,
    pending: Option<Pending>,
}

/// A message waiting for its share of the budget.
struct Pending {
    len: usize,
    acquire: Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, Status>> + Send>>,
}

impl MeteredBody {
    fn new(inner: Body, budget: Arc<Budget>) -> Self {
        Self {
            inner,
            budget,
            framing: Framing::START,
            held: None,
            walked: 0,
            permit: None,
            pending: None,
        }
    }

    fn start_acquire(&mut self, len: usize) {
        let budget = self.budget.clone();
        let charge = budget.charge(len);
        let wait = budget.limits.max_wait;
        let semaphore = budget.bytes.clone();
        self.pending = Some(Pending {
            len,
            acquire: Box::pin(async move {
                match tokio::time::timeout(wait, semaphore.acquire_many_owned(charge)).await {
                    Ok(Ok(permit)) => Ok(permit),
                    _ => Err(budget.bytes_exhausted(len)),
                }
            }),
        });
    }

    /// Walks `held` from `walked` until it is all walked (true) or a message header
    /// completed and its share must be paid first (false).
    fn walk(&mut self) -> bool {
        let Some(data) = &self.held else { return true };
        while self.walked < data.len() {
            let rest = &data[self.walked..];
            match &mut self.framing {
                Framing::Message { left } => {
                    let step = (*left).min(rest.len());
                    *left -= step;
                    self.walked += step;
                    if *left == 0 {
                        self.framing = Framing::START;
                    }
                }
                Framing::Header { seen, len } => {
                    seen[*len] = rest[0];
                    *len += 1;
                    self.walked += 1;
                    if *len == 5 {
                        let message = u32::from_be_bytes([seen[1], seen[2], seen[3], seen[4]]);
                        let message = message as usize;
                        // The previous message is whole by now: its share goes back.
                        self.permit = None;
                        self.framing = if message == 0 {
                            Framing::START
                        } else {
                            Framing::Message { left: message }
                        };
                        if message > self.budget.small {
                            self.start_acquire(message);
                            return false;
                        }
                    }
                }
            }
        }
        true
    }
}

impl HttpBody for MeteredBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        loop {
            if let Some(pending) = &mut this.pending {
                let permit = ready!(pending.acquire.as_mut().poll(cx));
                let len = pending.len;
                this.pending = None;
                match permit {
                    Ok(permit) => this.permit = Some(permit),
                    Err(status) => {
                        tracing::warn!(
                            message_bytes = len,
                            limit = this.budget.limits.max_bytes_in_flight,
                            "request refused: too many request bytes in flight"
                        );
                        this.held = None;
                        return Poll::Ready(Some(Err(status)));
                    }
                }
            }
            if this.held.is_some() {
                if !this.walk() {
                    continue;
                }
                let data = this.held.take().unwrap_or_default();
                this.walked = 0;
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.held = Some(data),
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                other => return Poll::Ready(other),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.held.is_none() && self.pending.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests;
