//! `drover bench --scenario detect`: how long a dead node goes unnoticed. Every node is up
//! and one service job runs; then one node that holds some of its allocations goes
//! silent (no heartbeat, no report, as if its power were cut). Measured from that moment:
//! until the server marks the node down (or disconnected), and until every allocation it
//! held has a replacement placed elsewhere.
//!
//! A node is silenced at a random point of its heartbeat cycle, so one run gives one
//! sample between the shortest wait (the TTL just ran out) and the longest (it had just
//! heartbeated): the report also states that bound from the server's settings.

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
use drover_core::NodeId;
use drover_proto::v1 as pb;
use serde::Serialize;
use std::time::Duration;
use tokio::time::Instant;

/// How often the node and the job are read while waiting.
const POLL_EVERY: Duration = Duration::from_millis(50);

#[derive(Clone, Debug, Serialize)]
pub struct DetectReport {
    pub scenario: &'static str,
    pub server_address: String,
    pub nodes: u64,
    /// The job's allocations, and how many were on the node that went silent.
    pub allocations: u64,
    pub allocations_on_silent_node: u64,
    /// Silence → the node's status is `down` or `disconnected`.
    pub marked_secs: f64,
    /// What it was marked.
    pub marked_status: String,
    /// Silence → every allocation of the job placed again off the silent node.
    pub replaced_secs: f64,
    pub server: ServerFigures,
}

impl DetectReport {
    pub fn render(&self) -> String {
        let mut pairs = vec![
            (
                "Detect",
                format!(
                    "one of {} nodes goes silent while holding {} of {} allocations",
                    self.nodes, self.allocations_on_silent_node, self.allocations
                ),
            ),
            ("Server", self.server_address.clone()),
            (
                "Marked",
                format!("{} after {:.2}s", self.marked_status, self.marked_secs),
            ),
            (
                "Replaced",
                format!(
                    "{:.2}s (silence to every allocation placed again)",
                    self.replaced_secs
                ),
            ),
        ];
        pairs.extend(self.server.pairs());
        crate::output::key_values(&pairs)
    }
}

/// The run: nodes up, the job placed, one node silenced, then the two waits.
pub async fn measure(
    target: &Target,
    client: &Client,
    workload: &Workload,
    deadline: Instant,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<DetectReport, BenchError> {
    let sim = super::nodes::start(client, workload, deadline, timeout, progress).await?;
    let measured = silence_one(target, client, workload, &sim, deadline, timeout, progress).await;
    sim.shutdown().await;
    measured
}

async fn silence_one(
    target: &Target,
    client: &Client,
    workload: &Workload,
    sim: &Simulator,
    deadline: Instant,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<DetectReport, BenchError> {
    progress.phase(&format!(
        "placing one job of {} allocations",
        workload.count
    ));
    jobs::submit(client, workload, 1, deadline, timeout).await?;
    jobs::wait_for(client, workload, Goal::Running, deadline, timeout, progress).await?;
    let job_id = workload.job_id(0);
    let before = allocations(client, &job_id).await?;
    let node = before
        .iter()
        .find(|a| live(a))
        .map(|a| a.node_id.clone())
        .ok_or(BenchError::Deadline {
            what: "allocations placed",
            done: 0,
            wanted: u64::from(workload.count),
            timeout,
        })?;
    let on_node: Vec<String> = before
        .iter()
        .filter(|a| live(a) && a.node_id == node)
        .map(|a| a.id.clone())
        .collect();
    let node_id: NodeId = node.parse().map_err(|_| BenchError::Setting {
        flag: "--scenario",
        reason: format!("the server named node {node:?}, which is not a node id"),
    })?;

    progress.phase(&format!(
        "node {node} goes silent with {} allocations",
        on_node.len()
    ));
    let probe = Probe::take(target).await;
    sim.silence(&[node_id]).await?;
    let silenced = Instant::now();
    let (marked_status, marked) = loop {
        let status = node_status(client, &node).await?;
        if matches!(status, pb::NodeStatus::Down | pb::NodeStatus::Disconnected) {
            break (status, silenced.elapsed());
        }
        progress.tick(|| {
            format!(
                "{:.1}s: node still {}",
                secs(silenced.elapsed()),
                status.as_str_name()
            )
        });
        if Instant::now() >= deadline {
            return Err(BenchError::Deadline {
                what: "silent nodes marked",
                done: 0,
                wanted: 1,
                timeout,
            });
        }
        tokio::time::sleep(POLL_EVERY).await;
    };
    progress.phase(&format!(
        "marked {} after {:.2}s; waiting for replacements",
        marked_status.as_str_name(),
        secs(marked)
    ));
    let replaced = loop {
        let now = allocations(client, &job_id).await?;
        let elsewhere = now.iter().filter(|a| live(a) && a.node_id != node).count() as u64;
        if elsewhere >= u64::from(workload.count) {
            break silenced.elapsed();
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Deadline {
                what: "allocations replaced",
                done: elsewhere,
                wanted: u64::from(workload.count),
                timeout,
            });
        }
        tokio::time::sleep(POLL_EVERY).await;
    };
    let after = Probe::take(target).await;
    Ok(DetectReport {
        scenario: "detect",
        server_address: client.address().to_string(),
        nodes: u64::from(workload.nodes),
        allocations: u64::from(workload.count),
        allocations_on_silent_node: on_node.len() as u64,
        marked_secs: secs(marked),
        marked_status: marked_status
            .as_str_name()
            .trim_start_matches("NODE_STATUS_")
            .to_lowercase(),
        replaced_secs: secs(replaced),
        server: ServerFigures::between(&probe, &after),
    })
}

/// Placed to run and not finished: what counts as the job's allocation on a node.
fn live(a: &pb::Allocation) -> bool {
    a.desired_status() == pb::DesiredStatus::Run
        && matches!(
            a.client_status(),
            pb::ClientStatus::Pending | pb::ClientStatus::Running
        )
}

async fn allocations(client: &Client, job_id: &str) -> Result<Vec<pb::Allocation>, BenchError> {
    let answer = drover_proto::paging::job_allocations_all(
        &client.jobs(),
        pb::JobAllocationsRequest {
            job_id: job_id.to_string(),
            ..Default::default()
        },
    )
    .await
    .map_err(rpc_failed("listing the job's allocations"))?;
    Ok(answer.allocations)
}

async fn node_status(client: &Client, node: &str) -> Result<pb::NodeStatus, BenchError> {
    let answer = client
        .operator()
        .node_get(pb::NodeGetRequest {
            node_id: node.to_string(),
            ..Default::default()
        })
        .await
        .map_err(rpc_failed("reading the silent node"))?
        .into_inner();
    Ok(answer
        .node
        .and_then(|e| e.node)
        .map_or(pb::NodeStatus::Unspecified, |n| n.status()))
}
