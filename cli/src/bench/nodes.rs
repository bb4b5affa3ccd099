//! The first phase: the run's simulated nodes register, heartbeat and become healthy.
//!
//! The simulator returns once every node is `ready`; a node is schedulable only once the
//! server's readiness check has also made it healthy, so the phase ends when the server
//! lists every node of the run's datacenter as healthy.

use super::error::BenchError;
use super::progress::Progress;
use super::workload::Workload;
use crate::client::Client;
use crate::error::rpc_failed;
use drover_agent::sim::Simulator;
use drover_proto::v1 as pb;
use std::time::Duration;
use tokio::time::Instant;

/// How often the server is asked for its node list: a list of ten thousand nodes is a few
/// megabytes, so this is slower than the allocation polls; registration takes seconds.
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Starts the simulator and waits until the server holds all its nodes healthy; returns
/// the running simulator. The deadline covers both.
pub async fn start(
    client: &Client,
    workload: &Workload,
    deadline: Instant,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<Simulator, BenchError> {
    progress.phase(&format!(
        "registering {} simulated nodes with {}",
        workload.nodes,
        client.address()
    ));
    let wanted = u64::from(workload.nodes);
    let config = workload.sim_config(client.address());
    let sim = match tokio::time::timeout_at(deadline, Simulator::start(config)).await {
        Ok(sim) => sim?,
        Err(_) => {
            return Err(BenchError::Deadline {
                what: "nodes registered",
                done: count(client, workload, pb::NodeHealth::Unspecified).await?,
                wanted,
                timeout,
            });
        }
    };
    loop {
        let healthy = count(client, workload, pb::NodeHealth::Healthy).await?;
        progress.tick(|| format!("{healthy} of {wanted} nodes healthy"));
        if healthy >= wanted {
            return Ok(sim);
        }
        if Instant::now() >= deadline {
            sim.shutdown().await;
            return Err(BenchError::Deadline {
                what: "nodes healthy",
                done: healthy,
                wanted,
                timeout,
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// How many of the run's nodes the server holds with `health` (any health: `Unspecified`).
pub(super) async fn count(
    client: &Client,
    workload: &Workload,
    health: pb::NodeHealth,
) -> Result<u64, BenchError> {
    let answer = drover_proto::paging::node_list_all(
        &client.operator(),
        pb::NodeListRequest {
            health: health.into(),
            datacenter: workload.datacenter(),
            ..Default::default()
        },
    )
    .await
    .map_err(rpc_failed("listing the benchmark's nodes"))?;
    Ok(answer.nodes.len() as u64)
}
