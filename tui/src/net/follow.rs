//! Following the cluster through one server at a time. A session is one server followed:
//! load (or resume), subscribe, apply events and poll until the server fails. Then the next
//! listed server gets a session at once, resuming the event stream from the last index
//! applied; the connection is reported lost only when every server failed in turn.

use super::servers::{Server, Servers};
use super::{MAX_ANSWER_BYTES, describe, load, poll};
use crate::app::{Connection, Update};
use crate::model::decode_event;
use backon::BackoffBuilder;
use drover_proto::v1 as pb;
use pb::event_service_client::EventServiceClient;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::sync::mpsc;

/// Why a session ended.
#[derive(Debug)]
enum SessionEnd {
    /// The console is closing (the state's receiver is gone).
    Closed,
    /// The stream overtook its buffer, or the server no longer holds the index to resume
    /// from: reload at once from the same server.
    Reload,
    Failed(tonic::Status),
}

impl From<tonic::Status> for SessionEnd {
    fn from(status: tonic::Status) -> Self {
        SessionEnd::Failed(status)
    }
}

/// Stops the task when dropped, so a session's poller ends with the session.
struct Polling(tokio::task::JoinHandle<Result<(), tonic::Status>>);

impl Drop for Polling {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Follows the cluster until the state's receiver is dropped.
pub async fn follow(servers: Servers, updates: mpsc::Sender<Update>) {
    let policy = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_max_delay(Duration::from_secs(5))
        .with_jitter()
        .without_max_times();
    let mut delays = policy.build();
    // The last index applied while the state holds a load: a session on another server
    // resumes the stream after it instead of loading everything again.
    let mut resume: Option<u64> = None;
    // Servers failed in turn since one last connected.
    let mut failed = 0;
    if updates
        .send(Update::Connection(Connection::Connecting))
        .await
        .is_err()
    {
        return;
    }
    loop {
        let (at, server) = servers.current();
        let mut connected = false;
        match session(server, &servers, &updates, &mut resume, &mut connected).await {
            SessionEnd::Closed => return,
            SessionEnd::Reload => {
                tracing::info!(server = %server.url, "event stream overtaken, reloading");
                resume = None;
                continue;
            }
            SessionEnd::Failed(status) => {
                if connected {
                    failed = 0;
                    delays = policy.build();
                }
                failed += 1;
                let next = servers.move_past(at);
                tracing::warn!(
                    server = %server.url, code = ?status.code(), message = %status.message(),
                    "server stopped answering"
                );
                if failed < servers.len() {
                    tracing::info!(to = %next.url, "following another server");
                    continue;
                }
                failed = 0;
                let retry_in = delays.next().unwrap_or(Duration::from_secs(5));
                let lost = Connection::Lost {
                    reason: describe(&status, servers.tls()),
                    retry_in,
                };
                if updates.send(Update::Connection(lost)).await.is_err() {
                    return;
                }
                tokio::time::sleep(retry_in).await;
            }
        }
    }
}

/// Follows `server` until it fails; `connected` says whether it got as far as following.
async fn session(
    server: &Server,
    servers: &Servers,
    updates: &mpsc::Sender<Update>,
    resume: &mut Option<u64>,
    connected: &mut bool,
) -> SessionEnd {
    let snapshot = match *resume {
        Some(_) => None,
        None => match load::snapshot(&server.unary).await {
            Ok(s) => Some(s),
            Err(status) => return SessionEnd::Failed(status),
        },
    };
    if let Some(snapshot) = &snapshot {
        let namespaces: BTreeSet<&str> = snapshot.jobs.iter().map(|j| &*j.key.namespace).collect();
        if let Some(permissions) = super::token_permissions(&server.unary, namespaces).await
            && updates
                .send(Update::Permissions(permissions))
                .await
                .is_err()
        {
            return SessionEnd::Closed;
        }
    }
    let from_index = snapshot
        .as_ref()
        .map_or(*resume, |s| Some(s.index))
        .unwrap_or(0)
        + 1;
    let mut events =
        EventServiceClient::new(server.stream.clone()).max_decoding_message_size(MAX_ANSWER_BYTES);
    let request = pb::SubscribeRequest {
        from_index,
        topics: Vec::new(),
    };
    let mut stream = match events.subscribe(request).await {
        Ok(r) => r.into_inner(),
        // This server no longer holds what the state lacks: load from it.
        Err(status) if status.code() == tonic::Code::OutOfRange => return SessionEnd::Reload,
        Err(status) => return SessionEnd::Failed(status),
    };
    let mut sends = Vec::new();
    if let Some(snapshot) = snapshot {
        *resume = Some(snapshot.index);
        sends.push(Update::Snapshot(Box::new(snapshot)));
    }
    sends.push(Update::Serving(server.url.clone()));
    sends.push(Update::Connection(Connection::Connected));
    for update in sends {
        if updates.send(update).await.is_err() {
            return SessionEnd::Closed;
        }
    }
    *connected = true;
    let mut polling = Polling(tokio::spawn(poll::run(
        server.clone(),
        servers.clone(),
        updates.clone(),
    )));
    loop {
        tokio::select! {
            message = stream.message() => match message {
                Ok(Some(batch)) => {
                    *resume = Some(resume.unwrap_or(0).max(batch.index));
                    let received = crate::now();
                    let decoded: Vec<_> = batch
                        .events
                        .into_iter()
                        .filter_map(|e| match decode_event(e, received) {
                            Ok(d) => Some(d),
                            Err(error) => {
                                tracing::warn!(%error, "skipping an event the console cannot read");
                                None
                            }
                        })
                        .collect();
                    if !decoded.is_empty() && updates.send(Update::Events(decoded)).await.is_err() {
                        return SessionEnd::Closed;
                    }
                }
                Ok(None) => return SessionEnd::Failed(tonic::Status::unavailable("event stream ended")),
                Err(status) if status.code() == tonic::Code::OutOfRange => return SessionEnd::Reload,
                Err(status) => return SessionEnd::Failed(status),
            },
            polled = &mut polling.0 => return match polled {
                Ok(Ok(())) => SessionEnd::Closed,
                Ok(Err(status)) => SessionEnd::Failed(status),
                Err(e) => SessionEnd::Failed(tonic::Status::internal(format!("the poller ended: {e}"))),
            },
        }
    }
}
