//! What the event stream does not carry, read again every few seconds while a session
//! lasts: who leads and the membership (from the server followed), the leader's broker,
//! plan queue and blocked evaluations (through it), and from every server the console was
//! given, what that server says of itself and its own scheduler workers.
//!
//! Who leads is read in a loop of its own and sent as soon as it is answered, so the
//! header's leader never waits on a slow or dead server elsewhere in the list.

use super::MAX_ANSWER_BYTES;
use super::servers::{Server, Servers};
use crate::app::Update;
use crate::model::{ClusterInfo, ServerState, ServerView, WorkerRow, decode_worker, role_label};
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1 as pb;
use pb::status_service_client::StatusServiceClient;
use pb::worker_service_client::WorkerServiceClient;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// How often it is all read again while a leader is known.
const POLL: Duration = Duration::from_secs(2);
/// How often while none is (or the one named does not answer its peers), and for the
/// first seconds of a session, which often starts because the server followed before died
/// (while its followers still name it): an election ends within a second or two, and the
/// header should name the new leader as soon as the servers do.
const POLL_ELECTING: Duration = Duration::from_millis(500);
/// How long a session polls at the electing pace from its start.
const SETTLING: Duration = Duration::from_secs(5);
/// Longest wait for one poll's call: far below the call timeout, so a server that hangs
/// (a follower forwarding to a leader that died) cannot hold the header back.
const POLL_CALL: Duration = Duration::from_secs(3);

/// `call`, given up after [`POLL_CALL`] as a server that did not answer.
async fn bounded<T>(
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, tonic::Status> {
    super::load::within(POLL_CALL, call).await
}

/// Polls until the state's receiver is gone (`Ok`) or the followed server stops
/// answering (`Err`, which ends the session). Who leads is read in a loop of its own, so
/// the rest (calls a follower passes on to a leader that may be gone, servers that may not
/// answer) never holds it back.
pub(super) async fn run(
    followed: Server,
    servers: Servers,
    updates: mpsc::Sender<Update>,
) -> Result<(), tonic::Status> {
    tokio::select! {
        ended = leadership(&followed, &updates) => ended,
        () = the_rest(&followed, &servers, &updates) => Ok(()),
    }
}

/// Who leads, as the followed server says, read again at the electing pace while an
/// election may be on.
async fn leadership(
    followed: &Server,
    updates: &mpsc::Sender<Update>,
) -> Result<(), tonic::Status> {
    let settled = tokio::time::Instant::now() + SETTLING;
    loop {
        let info = cluster_info(&followed.unary).await?;
        let leader_gone = info
            .servers
            .iter()
            .any(|s| s.id == info.leader_id && !s.reachable);
        let electing =
            info.leader_id.is_empty() || leader_gone || tokio::time::Instant::now() < settled;
        if updates.send(Update::Cluster(info)).await.is_err() {
            return Ok(());
        }
        tokio::time::sleep(if electing { POLL_ELECTING } else { POLL }).await;
    }
}

/// The leader's broker, plan queue and blocked evaluations, and every listed server's own
/// view and workers; returns when the state's receiver is gone.
async fn the_rest(followed: &Server, servers: &Servers, updates: &mpsc::Sender<Update>) {
    loop {
        let (leader, (views, workers)) = tokio::join!(
            super::load::leader_state(&followed.unary, POLL_CALL),
            every_server(servers)
        );
        let mut sends = leader;
        sends.push(Update::ServerViews(views));
        sends.extend(workers.map(Update::Workers));
        for update in sends {
            if updates.send(update).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Who leads and how far the log has come, as the followed server sees it, with every
/// server's state for the header (none for a token without operator read).
async fn cluster_info(channel: &Channel) -> Result<ClusterInfo, tonic::Status> {
    let mut status =
        StatusServiceClient::new(channel.clone()).max_decoding_message_size(MAX_ANSWER_BYTES);
    let own = bounded(status.cluster_status(pb::ClusterStatusRequest {})).await?;
    let servers = bounded(status.members(pb::MembersRequest {}))
        .await
        .map(|m| m.members.iter().map(ServerState::from_member).collect())
        .unwrap_or_default();
    Ok(ClusterInfo {
        server_id: own.server_id,
        leader_id: own.leader_id,
        role: role_label(own.role),
        term: own.term,
        applied_index: own.applied_index,
        servers,
    })
}

/// What every listed server says of itself, and the workers of every server that answers
/// (`None` when none does: the last list stands rather than an empty one).
async fn every_server(servers: &Servers) -> (Vec<ServerView>, Option<Vec<WorkerRow>>) {
    let mut asks = JoinSet::new();
    for (at, server) in servers.all().iter().enumerate() {
        let server = server.clone();
        asks.spawn(async move { (at, ask(&server).await) });
    }
    let mut answers = BTreeMap::new();
    while let Some(done) = asks.join_next().await {
        if let Ok((at, answer)) = done {
            answers.insert(at, answer);
        }
    }
    let views = answers.values().filter_map(|(v, _)| v.clone()).collect();
    let lists: Vec<Vec<WorkerRow>> = answers.into_values().filter_map(|(_, w)| w).collect();
    (views, (!lists.is_empty()).then(|| merge_workers(lists)))
}

/// One server's own view and its workers, each `None` when it did not answer.
async fn ask(server: &Server) -> (Option<ServerView>, Option<Vec<WorkerRow>>) {
    let mut status = StatusServiceClient::new(server.unary.clone());
    let view = bounded(status.cluster_status(pb::ClusterStatusRequest {}))
        .await
        .ok()
        .map(|s| ServerView::from_status(&server.url, &s));
    // Nothing more to ask of a server that did not answer that.
    let workers = match view {
        Some(_) => workers_of(&server.unary).await,
        None => None,
    };
    (view, workers)
}

/// The workers a server lists (its own; every server's once servers pass the call on).
async fn workers_of(channel: &Channel) -> Option<Vec<WorkerRow>> {
    let mut client =
        WorkerServiceClient::new(channel.clone()).max_decoding_message_size(MAX_ANSWER_BYTES);
    let list = bounded(client.list(pb::ListWorkersRequest::default()))
        .await
        .inspect_err(|status| tracing::debug!(code = ?status.code(), "worker list unavailable"))
        .ok()?;
    Some(list.workers.into_iter().map(decode_worker).collect())
}

/// The workers of every answer, each worker once (by server and worker id, the first
/// answer that names it kept), ordered by server then worker.
pub(super) fn merge_workers(lists: Vec<Vec<WorkerRow>>) -> Vec<WorkerRow> {
    let mut merged = BTreeMap::new();
    for worker in lists.into_iter().flatten() {
        merged
            .entry((worker.server_id.clone(), worker.id.clone()))
            .or_insert(worker);
    }
    merged.into_values().collect()
}

/// The workers of every listed server, read again after a worker command.
pub(super) async fn all_workers(servers: &Servers) -> Option<Vec<WorkerRow>> {
    let mut asks = JoinSet::new();
    for server in servers.all() {
        let channel = server.unary.clone();
        asks.spawn(async move { workers_of(&channel).await });
    }
    let mut lists = Vec::new();
    while let Some(done) = asks.join_next().await {
        lists.extend(done.ok().flatten());
    }
    (!lists.is_empty()).then(|| merge_workers(lists))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::WorkerStatusLabel;
    use drover_core::Timestamp;

    fn worker(server: &str, id: &str, status: WorkerStatusLabel) -> WorkerRow {
        WorkerRow {
            id: id.into(),
            server_id: server.into(),
            schedulers: Vec::new(),
            started: Timestamp::from_millis(0),
            status,
            workload: "paused",
        }
    }

    /// Each server lists its own workers today, and every server's once the servers pass
    /// the call on: either way each worker is listed once, as the first answer has it.
    #[test]
    fn workers_of_every_answer_are_listed_once() {
        use WorkerStatusLabel::{Paused, Started};
        let one = vec![worker("1", "s1-w0", Paused), worker("1", "s1-w1", Paused)];
        let two = vec![worker("2", "s2-w0", Started)];
        let everyone = vec![worker("2", "s2-w0", Paused), worker("1", "s1-w0", Started)];
        let merged = merge_workers(vec![two.clone(), one.clone(), everyone]);
        let got: Vec<(&str, WorkerStatusLabel)> =
            merged.iter().map(|w| (w.id.as_str(), w.status)).collect();
        assert_eq!(
            got,
            vec![("s1-w0", Paused), ("s1-w1", Paused), ("s2-w0", Started)]
        );
    }
}
