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
    placed(&server, &first).await;
    // Not a wait for an outcome: the gap is the scenario. The second node's first update
    // must come well inside the first node's interval, where a shared clock would send it
    // early; nothing the server or the simulator does marks that moment to poll for.
    tokio::time::sleep(GAP).await;
    let second = register_on(&server, "second", ids[1]).await;

    // The server's own times: when the plan placed each allocation, and when it applied the
    // node's report of it running.
    for (name, key) in [("first", &first), ("second", &second)] {
        let waited = running_after_placement(&server, key).await;
        assert!(
            waited >= INTERVAL.mul_f64(0.9),
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

/// Waits until the job's allocation is placed.
async fn placed(server: &TestServer, key: &JobKey) {
    eventually(&format!("{key:?} placed"), DEADLINE, || async {
        let snap = server.handle().snapshot();
        snap.allocs_by_job(key).next().map(|_| ())
    })
    .await
}

/// Waits until the job's allocation is reported running; returns how long after its
/// placement the server applied that report.
async fn running_after_placement(server: &TestServer, key: &JobKey) -> Duration {
    eventually(&format!("{key:?} running"), DEADLINE, || async {
        let snap = server.handle().snapshot();
        let a = snap
            .allocs_by_job(key)
            .find(|a| a.client_status == ClientStatus::Running)?;
        Some(a.modify_time.since(a.create_time))
    })
    .await
}
