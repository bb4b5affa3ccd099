//! Registration and the heartbeat: the node re-registers whenever the servers do not know
//! it (first start, or after they forgot a lost node), then heartbeats within the TTL each
//! answer returns, a random part of it early so a fleet does not beat in lockstep. Every
//! heartbeat carries the readiness check's result and, when it changed, the snapshot the
//! node ran last.
//!
//! Heartbeats travel on one long-lived stream ([`BeatStream`]), opened at the first beat
//! and kept; an error drops it, and the next beat (after the backoff) opens another. A
//! server without the stream answers UNIMPLEMENTED: the node then beats with the unary
//! call, and tries the stream again after [`STREAM_RETRY`] (the servers may have been
//! upgraded since).

use crate::beat_stream::{BeatStream, unsupported};
use crate::reporter::auth;
use crate::rpc::{CALL_TIMEOUT, Servers, request};
use crate::state::NodeIdentity;
use drover_core::node_health::Readiness;
use drover_proto::WireEnum;
use drover_proto::v1 as pb;
use rand::Rng;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tonic::Code;

/// The longest wait between attempts while the servers cannot be reached.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(2);

/// How long a node whose servers had no heartbeat stream beats with unary calls before it
/// tries the stream again.
pub const STREAM_RETRY: Duration = Duration::from_secs(10 * 60);

/// What the heartbeat shares with the rest of the agent.
#[derive(Debug)]
pub struct Link {
    /// True while the last heartbeat was accepted and the servers consider the node ready;
    /// allocation updates wait for it.
    pub ready: watch::Sender<bool>,
    /// Asks for a heartbeat now (the servers refused updates until the node heartbeats).
    pub beat_now: Notify,
    /// The snapshot the node ran last, set by task runners.
    pub last_snapshot: watch::Sender<Option<String>>,
    /// Heartbeats accepted so far; tests and operators read it.
    pub beats: watch::Sender<u64>,
}

impl Default for Link {
    fn default() -> Self {
        Self {
            ready: watch::channel(false).0,
            beat_now: Notify::new(),
            last_snapshot: watch::channel(None).0,
            beats: watch::channel(0).0,
        }
    }
}

/// When to beat next after an accepted heartbeat with this TTL: between half and three
/// quarters of it, so a late beat still lands before the servers' timer (which adds a grace
/// on top).
pub fn next_beat(ttl: Duration, rng: &mut impl Rng) -> Duration {
    let half = ttl / 2;
    let jitter_ms = u64::try_from((ttl / 4).as_millis()).unwrap_or(u64::MAX);
    half + Duration::from_millis(rng.random_range(0..=jitter_ms))
}

fn retry_wait(failures: u32) -> Duration {
    (Duration::from_millis(100) * (1 << failures.min(5))).min(MAX_RETRY_WAIT)
}

/// Registers once; the servers answer with the TTL to heartbeat within.
pub async fn register(
    servers: &Servers,
    registration: &pb::NodeRegistration,
) -> Result<pb::RegisterNodeResponse, tonic::Status> {
    let req = pb::RegisterNodeRequest {
        node: Some(registration.clone()),
    };
    let result = servers.nodes().register(request(req)).await;
    result
        .map(tonic::Response::into_inner)
        .inspect_err(|s| servers.on_error(s))
}

/// The heartbeat loop's inputs.
pub struct Heartbeat {
    pub servers: Arc<Servers>,
    pub identity: NodeIdentity,
    /// Sent again (with the identity's id and secret) whenever the servers do not know us.
    pub registration: pb::NodeRegistration,
    /// Whether the node registered already during start.
    pub registered: bool,
    pub readiness: Box<dyn Fn() -> Readiness + Send + Sync>,
    pub link: Arc<Link>,
}

impl std::fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeat")
            .field("identity", &self.identity)
            .field("registered", &self.registered)
            .finish_non_exhaustive()
    }
}

impl Heartbeat {
    /// Runs until the task is aborted.
    pub async fn run(mut self) {
        let node_id = self.identity.node_id;
        let mut failures: u32 = 0;
        let mut acked_snapshot: Option<String> = None;
        let mut route = Route::default();
        loop {
            if !self.registered {
                match register(&self.servers, &self.registration).await {
                    Ok(_) => {
                        tracing::info!(%node_id, server = %self.servers.address(), "node registered");
                        self.registered = true;
                        failures = 0;
                    }
                    Err(status) => {
                        failures = failures.saturating_add(1);
                        tracing::warn!(%node_id, code = ?status.code(), message = status.message(), "registration failed; retrying");
                        tokio::time::sleep(retry_wait(failures)).await;
                        continue;
                    }
                }
            }
            let snapshot = self.link.last_snapshot.borrow().clone();
            let changed = snapshot
                .clone()
                .filter(|s| Some(s) != acked_snapshot.as_ref());
            let req = pb::UpdateNodeStatusRequest {
                auth: Some(auth(&self.identity)),
                readiness: (self.readiness)().to_wire(),
                last_snapshot: changed,
            };
            let wait = match route.beat(&self.servers, req).await {
                Ok(resp) => {
                    failures = 0;
                    acked_snapshot = snapshot;
                    let ready = resp.status == pb::NodeStatus::Ready as i32;
                    if self.link.ready.send_replace(ready) != ready {
                        tracing::info!(%node_id, ready, "node readiness on the servers changed");
                    }
                    self.link.beats.send_modify(|b| *b += 1);
                    next_beat(
                        Duration::from_millis(resp.heartbeat_ttl_ms.max(100)),
                        &mut rand::rng(),
                    )
                }
                Err(status) if status.code() == Code::NotFound => {
                    tracing::warn!(%node_id, "servers do not know this node; registering again");
                    self.link.ready.send_replace(false);
                    self.registered = false;
                    continue;
                }
                Err(status) => {
                    failures = failures.saturating_add(1);
                    self.servers.on_error(&status);
                    if self.link.ready.send_replace(false) {
                        tracing::warn!(%node_id, code = ?status.code(), message = status.message(), "heartbeat failed; allocations keep running");
                    }
                    retry_wait(failures)
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.link.beat_now.notified() => {}
            }
        }
    }
}

/// Where heartbeats go: the stream, or unary calls for a while after the servers said
/// they have no stream.
#[derive(Debug, Default)]
struct Route {
    stream: Option<BeatStream>,
    unary_since: Option<tokio::time::Instant>,
}

impl Route {
    /// One heartbeat, within [`CALL_TIMEOUT`] (opening the stream included).
    async fn beat(
        &mut self,
        servers: &Servers,
        req: pb::UpdateNodeStatusRequest,
    ) -> Result<pb::UpdateNodeStatusResponse, tonic::Status> {
        if self
            .unary_since
            .is_some_and(|since| since.elapsed() < STREAM_RETRY)
        {
            return unary(servers, req).await;
        }
        self.unary_since = None;
        let streamed = tokio::time::timeout(CALL_TIMEOUT, async {
            let stream = match &mut self.stream {
                Some(stream) => stream,
                None => self.stream.insert(BeatStream::open(servers.nodes()).await?),
            };
            stream.beat(req.clone()).await
        })
        .await
        .unwrap_or_else(|_| {
            Err(tonic::Status::deadline_exceeded(format!(
                "no heartbeat answer on the stream within {CALL_TIMEOUT:?}"
            )))
        });
        match streamed {
            Ok(ack) => Ok(ack),
            Err(status) if unsupported(&status) => {
                self.stream = None;
                self.unary_since = Some(tokio::time::Instant::now());
                tracing::info!(server = %servers.address(), retry_in = ?STREAM_RETRY, "the server has no heartbeat stream; heartbeating with unary calls");
                unary(servers, req).await
            }
            Err(status) => {
                self.stream = None;
                Err(status)
            }
        }
    }
}

async fn unary(
    servers: &Servers,
    req: pb::UpdateNodeStatusRequest,
) -> Result<pb::UpdateNodeStatusResponse, tonic::Status> {
    servers
        .nodes()
        .update_status(request(req))
        .await
        .map(tonic::Response::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn beats_land_between_half_and_three_quarters_of_the_ttl() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for ttl_ms in [100u64, 2_000, 10_000, 60_000] {
            let ttl = Duration::from_millis(ttl_ms);
            for _ in 0..200 {
                let d = next_beat(ttl, &mut rng);
                assert!(d >= ttl / 2 && d <= ttl * 3 / 4, "{ttl:?}: {d:?}");
            }
        }
        assert_eq!(retry_wait(0), Duration::from_millis(100));
        assert_eq!(retry_wait(30), MAX_RETRY_WAIT);
    }
}
