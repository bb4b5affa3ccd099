//! The read RPCs the console loads its copy of the cluster from, and that same load timed
//! for `drover bench` ([`measure_initial_load`]).
//!
//! A large cluster is a hundred thousand nodes and a million allocations, answered in pages
//! of at most the server's `limits.max_list_page`. So the nodes, the jobs with their
//! allocations and the evaluations are read side by side; the allocations of several jobs
//! at once, each job on a task of its own so that decoding one answer overlaps waiting for
//! the next (`jobs`); the big lists are decoded into lean messages that skip what the
//! console does not keep (`lean`); and every page is decoded into rows as it arrives and
//! dropped, so the messages of the whole cluster are never held next to its rows.

mod deployments;
mod jobs;
mod lean;
mod measure;
mod services;

pub use measure::{InitialLoad, measure_initial_load};

use crate::app::Update;
use crate::model::{
    ListedNodePage, Snapshot, decode_blocked, decode_node, health_periods, scheduling_stats,
};
use drover_core::{Evaluation, Node};
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1 as pb;
use pb::eval_service_client::EvalServiceClient;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether a read of an optional part of the cluster (`what`: the service catalog,
/// deployments) failed only because the server predates it or the token may read no
/// namespace's jobs: the console then works without it rather than failing its load.
fn optional_absent(status: &tonic::Status, what: &'static str) -> bool {
    let absent = matches!(
        status.code(),
        tonic::Code::Unimplemented | tonic::Code::PermissionDenied
    );
    if absent {
        tracing::debug!(code = ?status.code(), what, "left out of the console's load");
    }
    absent
}

/// Evaluations loaded at connect time (newest first); older ones are history an operator
/// reaches through the CLI.
const EVAL_LOAD_LIMIT: u32 = 2_000;
/// Keeps what decodes and logs what does not: one bad record must not blank the console.
fn keep<T, E: std::fmt::Display>(what: &'static str, result: Result<T, E>) -> Option<T> {
    match result {
        Ok(v) => Some(v),
        Err(error) => {
            tracing::warn!(%error, what, "skipping a record the console cannot read");
            None
        }
    }
}

/// Time spent decoding answers, summed over the reads running at once.
#[derive(Clone, Debug, Default)]
struct DecodeClock(Arc<AtomicU64>);

impl DecodeClock {
    fn time<T>(&self, decode: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let decoded = decode();
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, Ordering::Relaxed);
        decoded
    }

    fn total(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

/// Nodes, jobs with their allocations, and recent evaluations.
pub(crate) async fn snapshot(channel: &Channel) -> Result<Snapshot, tonic::Status> {
    read(channel, &DecodeClock::default()).await
}

async fn read(channel: &Channel, clock: &DecodeClock) -> Result<Snapshot, tonic::Status> {
    // On tasks of their own, so their decoding runs beside the allocation table's building.
    let nodes = Task(tokio::spawn(read_nodes(channel.clone(), clock.clone())));
    let evals = Task(tokio::spawn(read_evals(channel.clone(), clock.clone())));
    let services = Task(tokio::spawn(services::read_services(
        channel.clone(),
        clock.clone(),
    )));
    let deployments = Task(tokio::spawn(deployments::read_deployments(
        channel.clone(),
        clock.clone(),
    )));
    let (nodes, jobs, evals, services, deployments) = tokio::try_join!(
        nodes.join(),
        jobs::read_jobs(channel, clock),
        evals.join(),
        services.join(),
        deployments.join()
    )?;
    let index = nodes.index.min(jobs.index).min(evals.1);
    Ok(Snapshot {
        health_periods: nodes.health_periods,
        nodes: nodes.nodes,
        allocs: jobs.allocs,
        jobs: jobs.jobs,
        evals: evals.0,
        services: services.registrations,
        deployments: deployments.deployments,
        // A table that never changed (index 0) has nothing the stream could replay.
        index: [services.index, deployments.index]
            .into_iter()
            .filter(|i| *i != 0)
            .fold(index, u64::min),
    })
}

/// A read on a task of its own, stopped when this is dropped: when one read of a load
/// fails, the others are not left running.
struct Task<T>(tokio::task::JoinHandle<Result<T, tonic::Status>>);

impl<T> Task<T> {
    async fn join(mut self) -> Result<T, tonic::Status> {
        (&mut self.0)
            .await
            .map_err(|e| tonic::Status::internal(format!("a read of the load ended: {e}")))?
    }
}

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Every node, and what the node list says besides.
struct NodesRead {
    nodes: Vec<Node>,
    health_periods: Option<crate::model::HealthPeriods>,
    index: u64,
}

async fn read_nodes(channel: Channel, clock: DecodeClock) -> Result<NodesRead, tonic::Status> {
    let mut grpc =
        tonic::client::Grpc::new(channel).max_decoding_message_size(super::MAX_ANSWER_BYTES);
    let mut request = pb::NodeListRequest::default();
    let mut read = NodesRead {
        nodes: Vec::new(),
        health_periods: None,
        index: u64::MAX,
    };
    loop {
        let page: ListedNodePage = lean::call(&mut grpc, lean::NODE_LIST, request.clone()).await?;
        read.index = read.index.min(page.index);
        if read.health_periods.is_none() {
            read.health_periods = page.health_periods.as_ref().map(health_periods);
        }
        // Every page counts all nodes: room for them all at once.
        if let Some(c) = &page.counts
            && read.nodes.is_empty()
        {
            let total = c.healthy + c.suspended_new + c.suspended_lost + c.suspended_flaky;
            read.nodes
                .reserve(usize::try_from(total + c.offlined).unwrap_or(0));
        }
        clock.time(|| {
            read.nodes.extend(
                page.nodes
                    .into_iter()
                    .filter_map(|entry| entry.node)
                    .filter_map(|n| keep("node", decode_node(n.0))),
            )
        });
        match next_page(&request.next_token, page.next_token)? {
            Some(token) => request.next_token = token,
            None => return Ok(read),
        }
    }
}

/// The token of the page after one answered to `asked`, `None` after the last page.
fn next_page(asked: &str, next: String) -> Result<Option<String>, tonic::Status> {
    if next.is_empty() {
        Ok(None)
    } else if next == asked {
        Err(tonic::Status::internal(format!(
            "the server repeated the page token {next:?}"
        )))
    } else {
        Ok(Some(next))
    }
}

async fn read_evals(
    channel: Channel,
    clock: DecodeClock,
) -> Result<(Vec<Evaluation>, u64), tonic::Status> {
    let client = EvalServiceClient::new(channel).max_decoding_message_size(super::MAX_ANSWER_BYTES);
    let request = pb::ListEvalsRequest {
        limit: EVAL_LOAD_LIMIT,
        ..Default::default()
    };
    let answer = drover_proto::paging::eval_list_all(&client, request).await?;
    let evals = clock.time(|| {
        answer
            .evaluations
            .into_iter()
            .filter_map(|e| keep("evaluation", Evaluation::try_from(e)))
            .collect()
    });
    Ok((evals, answer.index))
}

/// The broker's and plan queue's counters and the blocked evaluations, which live on the
/// leader (a follower passes the calls on), each skipped when its call fails or takes
/// longer than `patience` (they are unavailable while there is no leader).
pub(crate) async fn leader_state(channel: &Channel, patience: Duration) -> Vec<Update> {
    let evals =
        EvalServiceClient::new(channel.clone()).max_decoding_message_size(super::MAX_ANSWER_BYTES);
    let (mut a, mut b, mut c) = (evals.clone(), evals.clone(), evals);
    let (broker, plans, blocked) = tokio::join!(
        within(patience, a.broker_stats(pb::BrokerStatsRequest {})),
        within(patience, b.plan_queue_stats(pb::PlanQueueStatsRequest {})),
        within(patience, c.blocked_list(pb::BlockedListRequest {})),
    );
    let mut updates = Vec::new();
    let (broker, plans) = (broker.ok(), plans.ok());
    if broker.is_some() || plans.is_some() {
        updates.push(Update::Scheduling(scheduling_stats(broker, plans)));
    }
    match blocked {
        Ok(r) => updates.push(Update::Blocked(
            r.evaluations.into_iter().map(decode_blocked).collect(),
        )),
        Err(status) => tracing::debug!(code = ?status.code(), "blocked list unavailable"),
    }
    updates
}

/// The answer of `call`, or a deadline error after `patience`.
pub(super) async fn within<T>(
    patience: Duration,
    call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, tonic::Status> {
    match tokio::time::timeout(patience, call).await {
        Ok(answer) => answer.map(tonic::Response::into_inner),
        Err(_) => Err(tonic::Status::deadline_exceeded(format!(
            "no answer within {}s",
            patience.as_secs()
        ))),
    }
}
