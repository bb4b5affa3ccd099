//! Streamed answers (task logs, the event stream): a gRPC stream relayed into the HTTP
//! body through a bounded channel. A client that stops reading fills the channel; once
//! it has not taken anything for the stall limit it is dropped with a log line, and the
//! gRPC stream behind it is dropped with it, so a stuck client holds neither memory nor a
//! subscriber slot on the server.

use axum::body::Body;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use std::time::Duration;
use tokio::sync::mpsc;

/// Frames a client may have unread before the relay waits for it.
const BUFFERED_FRAMES: usize = 32;

/// How a relay treats its stream.
#[derive(Clone, Debug)]
pub struct Relay {
    /// What the log line calls the stream (`event stream`, `logs of <alloc>`).
    pub label: String,
    /// How long a client may leave a full buffer unread before it is dropped.
    pub stall: Duration,
    /// Sent when the stream has been quiet this long (Nomad's `{}` heartbeat); `None`: never.
    pub heartbeat: Option<(Duration, Bytes)>,
}

/// The HTTP body that relays `frames` (each already encoded); the stream ends the body,
/// an error ends it early (logged, as the client only sees the body stop).
pub fn body<S>(frames: S, relay: Relay) -> Body
where
    S: Stream<Item = Result<Bytes, String>> + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Bytes>(BUFFERED_FRAMES);
    tokio::spawn(pump(frames, tx, relay));
    let out = tokio_stream::wrappers::ReceiverStream::new(rx);
    Body::from_stream(out.map(Ok::<Bytes, std::convert::Infallible>))
}

async fn pump<S>(frames: S, tx: mpsc::Sender<Bytes>, relay: Relay)
where
    S: Stream<Item = Result<Bytes, String>> + Send + 'static,
{
    let mut frames = std::pin::pin!(frames);
    loop {
        let next = match &relay.heartbeat {
            Some((every, _)) => tokio::time::timeout(*every, frames.next()).await.ok(),
            None => Some(frames.next().await),
        };
        let frame = match next {
            // Quiet for a heartbeat's length.
            None => match &relay.heartbeat {
                Some((_, beat)) => beat.clone(),
                None => continue,
            },
            Some(None) => return,
            Some(Some(Ok(frame))) => frame,
            Some(Some(Err(e))) => {
                tracing::info!(stream = %relay.label, error = %e, "stream ended by the server");
                return;
            }
        };
        match tokio::time::timeout(relay.stall, tx.send(frame)).await {
            Ok(Ok(())) => {}
            // The client went away.
            Ok(Err(_)) => return,
            Err(_) => {
                tracing::warn!(
                    stream = %relay.label,
                    stall = ?relay.stall,
                    buffered = BUFFERED_FRAMES,
                    "dropping an HTTP stream client that stopped reading"
                );
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// Sets its flag when dropped: the relay let go of the stream behind it.
    struct Dropped(Arc<AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_client_that_never_reads_is_dropped_with_bounded_buffers() {
        let taken = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = Dropped(dropped.clone());
        let counter = taken.clone();
        // An endless source: every frame it is asked for is counted.
        let frames = futures::stream::repeat_with(move || {
            let _keep = &guard;
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(Bytes::from_static(b"{\"Index\":1}\n"))
        });
        let body = body(
            frames,
            Relay {
                label: "test stream".into(),
                stall: Duration::from_millis(100),
                heartbeat: None,
            },
        );
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !dropped.load(Ordering::SeqCst) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the stalled client was never dropped"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let taken = taken.load(Ordering::SeqCst);
        assert!(
            taken <= BUFFERED_FRAMES + 2,
            "took {taken} frames for a client that read none"
        );
        drop(body);
    }

    #[tokio::test]
    async fn a_quiet_stream_sends_heartbeats() {
        let frames = futures::stream::pending::<Result<Bytes, String>>();
        let body = body(
            frames,
            Relay {
                label: "quiet".into(),
                stall: Duration::from_secs(5),
                heartbeat: Some((Duration::from_millis(20), Bytes::from_static(b"{}\n"))),
            },
        );
        let mut data = body.into_data_stream();
        let first = tokio::time::timeout(Duration::from_secs(10), data.next())
            .await
            .expect("a heartbeat in time")
            .expect("the body goes on")
            .expect("no error");
        assert_eq!(&first[..], b"{}\n");
    }
}
