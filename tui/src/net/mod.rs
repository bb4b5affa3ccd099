//! The background tasks that talk to the server. They never touch the screen: everything
//! they learn goes to the state as an [`Update`] over a channel, and commands come in over
//! another. The follower reconnects by itself, with exponential backoff, whenever the
//! connection drops, and reloads from the read RPCs before following the event stream
//! again.

mod commands;
pub mod load;
pub(crate) mod logs;

pub(crate) use commands::execute;

use crate::app::{Connection, Update};
use crate::app::{JobRights, Permissions};
use crate::error::ConsoleError;
use crate::model::{ClusterInfo, decode_event, role_label};
use backon::BackoffBuilder;
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1 as pb;
use pb::event_service_client::EventServiceClient;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::sync::mpsc;

/// How often the leader-only structures (workers, broker, plan queue, blocked evaluations)
/// are read again: they live in memory on the leader and are not on the event stream.
const LEADER_POLL: Duration = Duration::from_secs(2);
/// Longest wait for a unary call before it counts as a lost connection.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Answers far above tonic's 4 MiB default are normal for big clusters: the node list of
/// ten thousand nodes, the allocations of a large job.
const MAX_ANSWER_BYTES: usize = 256 * 1024 * 1024;

/// How much of one answer the server may send before the console acknowledges it. HTTP/2's
/// default (64 KiB) holds a page of allocations (a few hundred KiB) back for several round
/// trips; a load reads eight such pages at once, hence the connection's eight.
const ANSWER_WINDOW: u32 = 1 << 20;

/// The two channels to the server: unary calls time out, the event stream must not.
#[derive(Clone, Debug)]
pub(crate) struct Channels {
    pub unary: Channel,
    pub stream: Channel,
}

impl Channels {
    /// Channels that connect on first use (and reconnect after failures by themselves).
    /// `address` may list several servers of one cluster, comma-separated: calls are then
    /// spread over those that answer, and a server that goes away is left out until it
    /// is back (any server answers; followers forward to the leader).
    pub fn lazy(
        address: &str,
        tls: &drover_proto::tls::TlsFiles,
        token: Option<&str>,
    ) -> Result<Self, ConsoleError> {
        let mut listed: Vec<&str> = address
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        if listed.is_empty() {
            // Nothing to try: let the address itself be refused, naming it.
            listed.push(address);
        }
        let endpoints = listed
            .into_iter()
            .map(|one| {
                drover_proto::tls::endpoint(one, tls)
                    .map(|e| {
                        e.connect_timeout(CONNECT_TIMEOUT)
                            .initial_stream_window_size(Some(ANSWER_WINDOW))
                            .initial_connection_window_size(Some(ANSWER_WINDOW * 8))
                    })
                    .map_err(|source| ConsoleError::Address {
                        address: one.to_owned(),
                        source,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let with_token =
            |channel| Channel::new(channel, token).map_err(|e| ConsoleError::Token(e.to_string()));
        let (unary, stream) = match endpoints.as_slice() {
            [one] => (
                one.clone().timeout(CALL_TIMEOUT).connect_lazy(),
                one.clone().connect_lazy(),
            ),
            _ => (
                tonic::transport::Channel::balance_list(
                    endpoints.iter().map(|e| e.clone().timeout(CALL_TIMEOUT)),
                ),
                tonic::transport::Channel::balance_list(endpoints.into_iter()),
            ),
        };
        Ok(Self {
            unary: with_token(unary)?,
            stream: with_token(stream)?,
        })
    }
}

/// What the console's token may do, asked of the server for the default namespace and
/// each of `namespaces`. `None` when ACLs are off or the server cannot be asked: then every
/// action is offered, and the server still refuses what the token may not do.
pub(crate) async fn token_permissions<'a>(
    channel: &Channel,
    namespaces: impl IntoIterator<Item = &'a str>,
) -> Option<Permissions> {
    use drover_proto::v1::acl_service_client::AclServiceClient;
    let mut client = AclServiceClient::new(channel.clone());
    let ask = |namespace: &str| drover_proto::v1::AclTokenSelfRequest {
        namespace: namespace.to_string(),
    };
    let first = client.token_self(ask("default")).await.ok()?.into_inner();
    if !first.acl_enabled || first.management {
        return None;
    }
    let holds = |r: &drover_proto::v1::AclTokenSelfResponse, capability: &str| {
        r.namespace_capabilities.iter().any(|c| c == capability)
    };
    let mut jobs = Rights::default();
    let mut allocs = Rights::default();
    let mut sort = |namespace: &str, answer: &drover_proto::v1::AclTokenSelfResponse| {
        jobs.sort(namespace, holds(answer, "submit-job"));
        allocs.sort(namespace, holds(answer, "alloc-lifecycle"));
    };
    sort("default", &first);
    let others: BTreeSet<&str> = namespaces.into_iter().filter(|n| *n != "default").collect();
    for namespace in others.into_iter().take(MAX_NAMESPACES_ASKED) {
        if let Ok(r) = client.token_self(ask(namespace)).await {
            sort(namespace, &r.into_inner());
        }
    }
    Some(Permissions {
        nodes: first.node == "write",
        operator: first.operator == "write",
        jobs: jobs.into(),
        allocs: allocs.into(),
    })
}

/// The namespaces asked about, split by whether the token holds a capability there.
#[derive(Default)]
struct Rights {
    allowed: BTreeSet<String>,
    denied: BTreeSet<String>,
}

impl Rights {
    fn sort(&mut self, namespace: &str, holds: bool) {
        let set = if holds {
            &mut self.allowed
        } else {
            &mut self.denied
        };
        set.insert(namespace.to_string());
    }
}

impl From<Rights> for JobRights {
    fn from(r: Rights) -> Self {
        JobRights::Asked {
            allowed: r.allowed,
            denied: r.denied,
        }
    }
}

/// Namespaces asked about at one load; jobs in others are offered and left to the server.
/// Asked again at each (re)load, so a namespace that appears is learnt at the next one.
const MAX_NAMESPACES_ASKED: usize = 64;

/// Why a session with the server ended.
#[derive(Debug)]
enum SessionEnd {
    /// The console is closing (the state's receiver is gone).
    Closed,
    /// The stream overtook its buffer or the server restarted it: reload at once.
    Reload,
    Failed(tonic::Status),
}

impl From<tonic::Status> for SessionEnd {
    fn from(status: tonic::Status) -> Self {
        SessionEnd::Failed(status)
    }
}

/// Follows the server until the state's receiver is dropped: connect, load, stream; on any
/// failure report the lost connection and retry after a growing delay.
pub(crate) async fn follow(channels: Channels, updates: mpsc::Sender<Update>) {
    let policy = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_max_delay(Duration::from_secs(5))
        .with_jitter()
        .without_max_times();
    let mut delays = policy.build();
    loop {
        if updates
            .send(Update::Connection(Connection::Connecting))
            .await
            .is_err()
        {
            return;
        }
        match session(&channels, &updates, &mut delays, &policy).await {
            SessionEnd::Closed => return,
            SessionEnd::Reload => {
                tracing::info!("event stream overtaken, reloading");
                continue;
            }
            SessionEnd::Failed(status) => {
                let retry_in = delays.next().unwrap_or(Duration::from_secs(5));
                tracing::warn!(code = ?status.code(), message = %status.message(), ?retry_in, "connection to the server lost");
                let lost = Connection::Lost {
                    reason: describe(&status),
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

/// A short reason for the status bar. A transport failure's own message is generic
/// ("transport error"); the cause at the bottom of its chain says what happened
/// ("Connection refused"), so that is the one shown.
fn describe(status: &tonic::Status) -> String {
    let mut deepest: Option<&dyn std::error::Error> = None;
    let mut cause = std::error::Error::source(status);
    while let Some(e) = cause {
        deepest = Some(e);
        cause = e.source();
    }
    let message = deepest.map_or_else(|| status.message().to_owned(), ToString::to_string);
    let first_line = message.lines().next().unwrap_or_default();
    if first_line.is_empty() {
        format!("{:?}", status.code()).to_lowercase()
    } else {
        first_line.chars().take(60).collect()
    }
}

async fn session(
    channels: &Channels,
    updates: &mpsc::Sender<Update>,
    delays: &mut backon::ExponentialBackoff,
    policy: &backon::ExponentialBuilder,
) -> SessionEnd {
    let snapshot = match load::snapshot(&channels.unary).await {
        Ok(s) => s,
        Err(status) => return SessionEnd::Failed(status),
    };
    let namespaces: BTreeSet<&str> = snapshot.jobs.iter().map(|j| &*j.key.namespace).collect();
    if let Some(permissions) = token_permissions(&channels.unary, namespaces).await
        && updates
            .send(Update::Permissions(permissions))
            .await
            .is_err()
    {
        return SessionEnd::Closed;
    }
    let from_index = snapshot.index + 1;
    let mut events = EventServiceClient::new(channels.stream.clone())
        .max_decoding_message_size(MAX_ANSWER_BYTES);
    let request = pb::SubscribeRequest {
        from_index,
        topics: Vec::new(),
    };
    let mut stream = match events.subscribe(request).await {
        Ok(r) => r.into_inner(),
        Err(status) => return SessionEnd::Failed(status),
    };
    if updates
        .send(Update::Snapshot(Box::new(snapshot)))
        .await
        .is_err()
        || updates
            .send(Update::Connection(Connection::Connected))
            .await
            .is_err()
    {
        return SessionEnd::Closed;
    }
    // Connected: the next failure starts the backoff afresh.
    *delays = policy.build();
    let mut poll = tokio::time::interval(LEADER_POLL);
    loop {
        tokio::select! {
            message = stream.message() => match message {
                Ok(Some(batch)) => {
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
            _ = poll.tick() => {
                if let Err(end) = poll_leader(&channels.unary, updates).await {
                    return end;
                }
            }
        }
    }
}

/// Reads what the event stream does not carry. A leader-only read failing while there is
/// no leader is not a lost connection: the header shows the missing leader instead.
async fn poll_leader(channel: &Channel, updates: &mpsc::Sender<Update>) -> Result<(), SessionEnd> {
    let mut status = pb::status_service_client::StatusServiceClient::new(channel.clone())
        .max_decoding_message_size(MAX_ANSWER_BYTES);
    let cluster = status
        .cluster_status(pb::ClusterStatusRequest {})
        .await?
        .into_inner();
    // Every server's state for the header; a token without operator read gets none.
    let servers = status
        .members(pb::MembersRequest {})
        .await
        .map(|m| {
            m.into_inner()
                .members
                .iter()
                .map(crate::model::ServerState::from_member)
                .collect()
        })
        .unwrap_or_default();
    let info = ClusterInfo {
        server_id: cluster.server_id,
        leader_id: cluster.leader_id,
        role: role_label(cluster.role),
        term: cluster.term,
        applied_index: cluster.applied_index,
        servers,
    };
    let mut sends = vec![Update::Cluster(info)];
    sends.extend(load::leader_state(channel).await);
    for update in sends {
        if updates.send(update).await.is_err() {
            return Err(SessionEnd::Closed);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wrong address must read as such, not as a generic transport error.
    #[tokio::test]
    async fn an_address_nobody_listens_on_is_described_by_its_cause() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let address = listener.local_addr().expect("its address").to_string();
        drop(listener);
        let channels =
            Channels::lazy(&address, &Default::default(), None).expect("a valid address");
        let status = load::snapshot(&channels.unary)
            .await
            .expect_err("nobody listens");
        let reason = describe(&status).to_lowercase();
        assert!(reason.contains("refused"), "{reason}");
    }
}
