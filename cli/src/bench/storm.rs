//! `drover bench --scenario storm`: a registration storm. System jobs exist first; then
//! every simulated node registers at once, and each registration asks for a placement of
//! every system job on it. Measured: the time until every (node, job) allocation is
//! placed, the most evaluations outstanding (pending or blocked) for one job at any
//! sample, and how many evaluations the storm created per node.

use super::error::BenchError;
use super::jobs::{self, Goal};
use super::progress::Progress;
use super::report::secs;
use super::server_figures::{Probe, ServerFigures};
use super::target::Target;
use super::workload::Workload;
use crate::client::Client;
use crate::error::rpc_failed;
use drover_agent::sim::Simulator;
use drover_proto::v1 as pb;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// How often the outstanding evaluations are counted during the storm.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

#[derive(Clone, Debug, Serialize)]
pub struct StormReport {
    pub scenario: &'static str,
    pub server_address: String,
    pub nodes: u64,
    pub system_jobs: u64,
    pub allocations: u64,
    pub placed: u64,
    /// Simulator start to every allocation placed.
    pub all_placed_secs: f64,
    /// The most pending-or-blocked evaluations of one job in any sample.
    pub max_outstanding_per_job: u64,
    /// Evaluations of the run's jobs that exist at the end, over the node count.
    pub evals_created: u64,
    pub evals_per_node: f64,
    /// The chance each heartbeat was first sent as a call cancelled at once.
    pub cancel_rate: f64,
    /// The run's nodes the server holds as healthy once all is placed: a storm must lose
    /// none (a node deleted or marked down shows here as missing).
    pub nodes_healthy_at_end: u64,
    /// The server's own figures over the storm.
    pub server: ServerFigures,
}

impl StormReport {
    pub fn render(&self) -> String {
        let mut pairs = vec![
            (
                "Storm",
                format!(
                    "{} nodes registering at once with {} system jobs",
                    self.nodes, self.system_jobs
                ),
            ),
            ("Server", self.server_address.clone()),
            (
                "Allocations placed",
                format!("{} of {}", self.placed, self.allocations),
            ),
            (
                "All placed",
                format!(
                    "{:.2}s (simulator start to all placed)",
                    self.all_placed_secs
                ),
            ),
            (
                "Outstanding evals",
                format!("at most {} per job at once", self.max_outstanding_per_job),
            ),
            (
                "Evals created",
                format!(
                    "{} ({:.2} per node)",
                    self.evals_created, self.evals_per_node
                ),
            ),
            (
                "Nodes healthy at end",
                format!(
                    "{} of {} (heartbeats cancelled first: {:.0}%)",
                    self.nodes_healthy_at_end,
                    self.nodes,
                    self.cancel_rate * 100.0
                ),
            ),
        ];
        pairs.extend(self.server.pairs());
        crate::output::key_values(&pairs)
    }
}

/// The run's evaluations of `status`, counted per job.
async fn per_job(
    client: &Client,
    workload: &Workload,
    status: pb::EvalStatus,
) -> Result<BTreeMap<String, u64>, BenchError> {
    let answer = drover_proto::paging::eval_list_all(
        &client.evals(),
        pb::ListEvalsRequest {
            status: status.into(),
            ..Default::default()
        },
    )
    .await
    .map_err(rpc_failed("listing evaluations"))?;
    let mut counts = BTreeMap::new();
    for e in answer
        .evaluations
        .iter()
        .filter(|e| e.job_id.starts_with(&workload.job_prefix()))
    {
        *counts.entry(e.job_id.clone()).or_default() += 1;
    }
    Ok(counts)
}

async fn outstanding_now(client: &Client, workload: &Workload) -> Result<u64, BenchError> {
    let mut counts = per_job(client, workload, pb::EvalStatus::Pending).await?;
    for (job, n) in per_job(client, workload, pb::EvalStatus::Blocked).await? {
        *counts.entry(job).or_default() += n;
    }
    Ok(counts.into_values().max().unwrap_or(0))
}

/// Registers the system jobs, then lets the nodes loose and times the storm.
pub async fn measure(
    target: &Target,
    client: &Client,
    workload: &Workload,
    deadline: Instant,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<StormReport, BenchError> {
    progress.phase(&format!("registering {} system jobs", workload.jobs));
    for n in 0..workload.jobs {
        let job = workload.system_job(n);
        client
            .jobs()
            .register(pb::RegisterJobRequest {
                job: Some((&job).into()),
                enforce_index: None,
            })
            .await
            .map_err(|s| BenchError::Register {
                job: job.id.to_string(),
                message: s.message().to_string(),
            })?;
    }
    progress.phase(&format!("{} nodes register at once", workload.nodes));
    let max_seen = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (client, workload, max_seen) = (client.clone(), workload.clone(), max_seen.clone());
        tokio::spawn(async move {
            loop {
                if let Ok(n) = outstanding_now(&client, &workload).await {
                    max_seen.fetch_max(n, Ordering::SeqCst);
                }
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
        })
    };
    let before = Probe::take(target).await;
    let started = Instant::now();
    let sim = tokio::time::timeout_at(
        deadline,
        Simulator::start(workload.sim_config(client.address())),
    )
    .await
    .map_err(|_| BenchError::Deadline {
        what: "nodes registered",
        done: 0,
        wanted: u64::from(workload.nodes),
        timeout,
    })??;
    let placed = jobs::wait_for(client, workload, Goal::Placed, deadline, timeout, progress).await;
    let all_placed = started.elapsed();
    sampler.abort();
    let after = Probe::take(target).await;
    let last = outstanding_now(client, workload).await.unwrap_or(0);
    max_seen.fetch_max(last, Ordering::SeqCst);
    let evals =
        drover_proto::paging::eval_list_all(&client.evals(), pb::ListEvalsRequest::default())
            .await
            .map_err(rpc_failed("listing evaluations"))?
            .evaluations
            .iter()
            .filter(|e| e.job_id.starts_with(&workload.job_prefix()))
            .count() as u64;
    let nodes_healthy_at_end =
        super::nodes::count(client, workload, pb::NodeHealth::Healthy).await?;
    sim.shutdown().await;
    let placed = placed?;
    Ok(StormReport {
        scenario: "storm",
        server_address: client.address().to_string(),
        nodes: u64::from(workload.nodes),
        system_jobs: u64::from(workload.jobs),
        allocations: workload.allocations(),
        placed: placed.placed,
        all_placed_secs: secs(all_placed),
        max_outstanding_per_job: max_seen.load(Ordering::SeqCst),
        evals_created: evals,
        evals_per_node: evals as f64 / f64::from(workload.nodes.max(1)),
        cancel_rate: workload.cancel_rate,
        nodes_healthy_at_end,
        server: ServerFigures::between(&before, &after),
    })
}
