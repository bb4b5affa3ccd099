//! The read RPCs the console loads its copy of the cluster from, and that same load timed
//! for `drover bench` ([`measure_initial_load`]).
//!
//! A large cluster is a hundred thousand nodes and a million allocations, answered in pages
//! of at most the server's `limits.max_list_page`. So the nodes, the jobs with their
//! allocations and the evaluations are read side by side; the allocations of several jobs
//! at once, each job on a task of its own so that decoding one answer overlaps waiting for
//! the next; and every page is decoded into rows as it arrives and dropped, so the messages
//! of the whole cluster are never held next to its rows.

use crate::app::{App, Input, Update};
use crate::error::ConsoleError;
use crate::model::{
    AllocRow, AllocTable, JobRow, JobStrings, Snapshot, decode_alloc_with, decode_blocked,
    decode_job_entry, decode_node, decode_worker, health_periods, scheduling_stats,
};
use drover_core::{Evaluation, Node};
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1 as pb;
use pb::eval_service_client::EvalServiceClient;
use pb::job_service_client::JobServiceClient;
use pb::operator_service_client::OperatorServiceClient;
use pb::worker_service_client::WorkerServiceClient;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Evaluations loaded at connect time (newest first); older ones are history an operator
/// reaches through the CLI.
const EVAL_LOAD_LIMIT: u32 = 2_000;
/// Jobs whose allocations are read at once. A job's pages follow one another, so this is
/// what keeps the server and the connection busy when most allocations belong to a few
/// big jobs, and what saves a round trip per job when there are thousands of small ones;
/// few enough that a console does not flood a server it shares with the schedulers.
const ALLOC_READS: usize = 8;

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
    let (nodes, jobs, evals) = tokio::try_join!(
        read_nodes(channel, clock),
        read_jobs(channel, clock),
        read_evals(channel, clock),
    )?;
    Ok(Snapshot {
        health_periods: nodes.health_periods,
        nodes: nodes.nodes,
        allocs: jobs.allocs,
        jobs: jobs.jobs,
        evals: evals.0,
        index: nodes.index.min(jobs.index).min(evals.1),
    })
}

/// Every node, and what the node list says besides.
struct NodesRead {
    nodes: Vec<Node>,
    health_periods: Option<crate::model::HealthPeriods>,
    index: u64,
}

async fn read_nodes(channel: &Channel, clock: &DecodeClock) -> Result<NodesRead, tonic::Status> {
    let mut client = OperatorServiceClient::new(channel.clone())
        .max_decoding_message_size(super::MAX_ANSWER_BYTES);
    let mut request = pb::NodeListRequest::default();
    let mut read = NodesRead {
        nodes: Vec::new(),
        health_periods: None,
        index: u64::MAX,
    };
    loop {
        let page = client.node_list(request.clone()).await?.into_inner();
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
                    .filter_map(|n| keep("node", decode_node(n))),
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

/// Every job and every allocation.
struct JobsRead {
    jobs: Vec<JobRow>,
    allocs: AllocTable,
    index: u64,
}

async fn read_jobs(channel: &Channel, clock: &DecodeClock) -> Result<JobsRead, tonic::Status> {
    let client =
        JobServiceClient::new(channel.clone()).max_decoding_message_size(super::MAX_ANSWER_BYTES);
    let list = drover_proto::paging::job_list_all(&client, pb::ListJobsRequest::default()).await?;
    let expected: usize = list
        .jobs
        .iter()
        .filter_map(|entry| entry.summary.as_ref())
        .map(|summary| summary.total_allocs as usize)
        .sum();
    let mut read = JobsRead {
        jobs: Vec::with_capacity(list.jobs.len()),
        allocs: AllocTable::with_capacity(expected),
        index: list.index,
    };
    // Jobs in list order; a job purged before its allocations were read is left out.
    let mut listed: Vec<Option<JobRow>> = Vec::with_capacity(list.jobs.len());
    let mut found = vec![false; list.jobs.len()];
    let mut reads = JoinSet::new();
    let mut entries = list.jobs.into_iter().enumerate();
    loop {
        while reads.len() < ALLOC_READS
            && let Some((at, entry)) = entries.next()
        {
            let request = pb::JobAllocationsRequest {
                namespace: entry.namespace.clone(),
                job_id: entry.id.clone(),
                ..Default::default()
            };
            let row = keep("job", decode_job_entry(entry));
            let strings = row
                .as_ref()
                .map(|row| JobStrings::of(row.key.clone()))
                .unwrap_or_default();
            listed.push(row);
            let (client, clock) = (client.clone(), clock.clone());
            reads.spawn(async move { (at, job_allocs(client, request, strings, clock).await) });
        }
        let Some(done) = reads.join_next().await else {
            break;
        };
        let (at, answer) = done.map_err(|e| tonic::Status::internal(e.to_string()))?;
        if let Some((rows, index)) = answer? {
            found[at] = true;
            read.index = read.index.min(index);
            read.allocs.insert_batch(rows);
        }
    }
    read.jobs = listed
        .into_iter()
        .zip(found)
        .filter_map(|(row, found)| row.filter(|_| found))
        .collect();
    Ok(read)
}

/// Every allocation of one job, page by page, decoded as each page arrives. `None` when
/// the job was purged since it was listed.
async fn job_allocs(
    mut client: JobServiceClient<Channel>,
    mut request: pb::JobAllocationsRequest,
    mut strings: JobStrings,
    clock: DecodeClock,
) -> Result<Option<(Vec<AllocRow>, u64)>, tonic::Status> {
    let mut rows = Vec::new();
    let mut index = u64::MAX;
    loop {
        let page = match client.allocations(request.clone()).await {
            Ok(answer) => answer.into_inner(),
            Err(status) if status.code() == tonic::Code::NotFound => return Ok(None),
            Err(status) => return Err(status),
        };
        index = index.min(page.index);
        clock.time(|| {
            rows.extend(
                page.allocations
                    .into_iter()
                    .filter_map(|a| keep("allocation", decode_alloc_with(a, &mut strings))),
            )
        });
        match next_page(&request.next_token, page.next_token)? {
            Some(token) => request.next_token = token,
            None => return Ok(Some((rows, index))),
        }
    }
}

async fn read_evals(
    channel: &Channel,
    clock: &DecodeClock,
) -> Result<(Vec<Evaluation>, u64), tonic::Status> {
    let client =
        EvalServiceClient::new(channel.clone()).max_decoding_message_size(super::MAX_ANSWER_BYTES);
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

/// Workers, broker and plan queue counters and blocked evaluations, each skipped when its
/// call fails (the broker's and tracker's are unavailable while there is no leader).
pub(crate) async fn leader_state(channel: &Channel) -> Vec<Update> {
    let mut workers = WorkerServiceClient::new(channel.clone())
        .max_decoding_message_size(super::MAX_ANSWER_BYTES);
    let mut evals =
        EvalServiceClient::new(channel.clone()).max_decoding_message_size(super::MAX_ANSWER_BYTES);
    let mut updates = Vec::new();
    match workers.list(pb::ListWorkersRequest::default()).await {
        Ok(r) => updates.push(Update::Workers(
            r.into_inner()
                .workers
                .into_iter()
                .map(decode_worker)
                .collect(),
        )),
        Err(status) => tracing::debug!(code = ?status.code(), "worker list unavailable"),
    }
    let broker = evals
        .broker_stats(pb::BrokerStatsRequest {})
        .await
        .map(|r| r.into_inner())
        .ok();
    let plans = evals
        .plan_queue_stats(pb::PlanQueueStatsRequest {})
        .await
        .map(|r| r.into_inner())
        .ok();
    if broker.is_some() || plans.is_some() {
        updates.push(Update::Scheduling(scheduling_stats(broker, plans)));
    }
    match evals.blocked_list(pb::BlockedListRequest {}).await {
        Ok(r) => updates.push(Update::Blocked(
            r.into_inner()
                .evaluations
                .into_iter()
                .map(decode_blocked)
                .collect(),
        )),
        Err(status) => tracing::debug!(code = ?status.code(), "blocked list unavailable"),
    }
    updates
}

/// How long the console's initial load took, phase by phase, and what it loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitialLoad {
    /// Reading every list, from the first call to the last answer decoded (wall clock).
    pub read: Duration,
    /// Of `read`, the time spent decoding answers into the console's rows, summed over the
    /// reads that ran at once (so on several cores it may exceed `read`).
    pub decode: Duration,
    /// Taking the loaded state over and drawing the first frame of the nodes view (its
    /// rows sorted from scratch), on the console's own thread.
    pub build: Duration,
    pub nodes: usize,
    pub jobs: usize,
    pub allocs: usize,
    pub evals: usize,
}

impl InitialLoad {
    /// From the first call to the first frame.
    pub fn total(&self) -> Duration {
        self.read + self.build
    }
}

/// Loads the cluster from the server at `address` (plain gRPC, `host:port` or a URL,
/// several comma-separated as for the console) exactly as the console does when it starts,
/// through the same channels and reads, then builds the console's state from it and draws
/// its first frame into an 80x24 screen in memory; and says how long each part took. For
/// `drover bench`: the console's start-up time against a real server of a given size.
/// `token` is the ACL token's secret, as `--token` gives it to the console.
pub async fn measure_initial_load(
    address: &str,
    token: Option<String>,
) -> Result<InitialLoad, ConsoleError> {
    let channels = super::Channels::lazy(address, &Default::default(), token.as_deref())?;
    // Made before the load starts, as the console makes it at start-up.
    let mut app = App::new(address, false, crate::now());
    app.handle(Input::Resize {
        width: 80,
        height: 24,
    });
    let clock = DecodeClock::default();
    let started = Instant::now();
    let snapshot = read(&channels.unary, &clock)
        .await
        .map_err(|status| ConsoleError::Load(Box::new(status)))?;
    let read_time = started.elapsed();
    let (nodes, jobs, allocs, evals) = (
        snapshot.nodes.len(),
        snapshot.jobs.len(),
        snapshot.allocs.len(),
        snapshot.evals.len(),
    );
    let started = Instant::now();
    app.handle(Input::Update(Update::Snapshot(Box::new(snapshot))));
    app.prepare_frame();
    let theme = crate::ui::Theme { color: true };
    let drawn = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).and_then(
        |mut screen| {
            screen
                .draw(|frame| crate::ui::draw(frame, &app, &theme))
                .map(|_| ())
        },
    );
    // A screen in memory cannot fail to draw.
    let Ok(()) = drawn;
    Ok(InitialLoad {
        read: read_time,
        decode: clock.total(),
        build: started.elapsed(),
        nodes,
        jobs,
        allocs,
        evals,
    })
}
