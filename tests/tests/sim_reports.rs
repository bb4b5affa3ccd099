//! Simulated nodes send their allocation reports on their own clocks, as the real agent
//! does: a node's report goes out `report_interval` after its own first pending update,
//! never early in another node's batch. One clock for all would send every node's report
//! in the same instant, a burst that independent nodes do not make and that the server's
//! latency would then be measured against.

use drover_agent::sim::{SimConfig, Simulator};
use drover_core::mock;
use drover_core::types::{ClientStatus, Constraint, JobKey, NodeId, Operator};
use drover_tests::{DEADLINE, TestServer, eventually};
use std::time::Duration;
use tokio::time::Instant;

const INTERVAL: Duration = Duration::from_secs(2);
/// How long after the first node's allocation is seen placed the second node's job is
/// registered: inside the first node's interval.
const GAP: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_reports_an_interval_after_its_own_first_update() {
    let server = TestServer::start().await;
    let sim = Simulator::start(SimConfig {
        report_interval: INTERVAL,
        ..server.sim_config(2, 3)
    })
    .await
    .expect("simulator starts");
    let ids = sim.node_ids().to_vec();

    let first = register_on(&server, "first", ids[0]).await;
    let first_placed = seen(&server, &first, None).await;
    tokio::time::sleep(GAP).await;
    let second = register_on(&server, "second", ids[1]).await;
    let second_placed = seen(&server, &second, None).await;
    let first_running = seen(&server, &first, Some(ClientStatus::Running)).await;
    let second_running = seen(&server, &second, Some(ClientStatus::Running)).await;

    // Polling sees each moment up to 50 ms late; the margin is far wider than that and far
    // narrower than the GAP a shared clock would shorten the second wait by.
    let floor = INTERVAL.mul_f64(0.75);
    for (name, placed, running) in [
        ("first", first_placed, first_running),
        ("second", second_placed, second_running),
    ] {
        let waited = running - placed;
        assert!(
            waited >= floor,
            "the {name} node reported {waited:?} after its allocation was placed, \
             sooner than its own interval of {INTERVAL:?} allows"
        );
    }
    sim.shutdown().await;
    server.stop().await;
}

/// Registers a one-allocation job that only `node` may run.
async fn register_on(server: &TestServer, id: &str, node: NodeId) -> JobKey {
    let mut job = mock::service_job(id, 1);
    job.constraints.push(Constraint::new(
        "${node.unique.id}",
        Operator::Equal,
        node.to_string(),
    ));
    server.register(job).await
}

/// When the job's allocation is first seen on the server: placed (`None`) or with the
/// node's reported `status`.
async fn seen(server: &TestServer, key: &JobKey, status: Option<ClientStatus>) -> Instant {
    let what = format!("{key:?}'s allocation {status:?}");
    eventually(&what, DEADLINE, || async {
        let snap = server.handle().snapshot();
        let reached = snap
            .allocs_by_job(key)
            .any(|a| status.is_none_or(|s| a.client_status == s));
        reached.then(Instant::now)
    })
    .await
}
