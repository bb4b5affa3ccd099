//! Disconnect and reconnect with simulated nodes against a real server: a node that goes
//! silent inside its group's disconnect window and comes back keeps its allocation (any
//! replacement is stopped); one silent past the window has its allocation replaced, and on
//! return does not revive it.

use drover_agent::sim::Simulator;
use drover_core::mock;
use drover_core::state::StateSnapshot;
use drover_core::types::{
    AllocId, Allocation, ClientStatus, DesiredStatus, DisconnectPolicy, JobKey, NodeId, NodeStatus,
};
use drover_tests::{DEADLINE, TestServer, eventually};
use std::sync::Arc;
use std::time::Duration;

/// A server that notices a silent node within about a second.
async fn server() -> TestServer {
    TestServer::start_with(|c| {
        c.heartbeat.min_ttl = Duration::from_millis(400);
        c.heartbeat.grace = Duration::from_millis(200);
    })
    .await
}

async fn simulator(server: &TestServer, nodes: usize) -> Simulator {
    Simulator::start(server.sim_config(nodes, 6))
        .await
        .expect("simulator starts")
}

/// Registers a one-allocation service job whose group tolerates `window` of disconnect.
async fn register_job(server: &TestServer, id: &str, window: Duration) -> JobKey {
    let mut job = mock::service_job(id, 1);
    job.groups[0].disconnect = Some(DisconnectPolicy {
        lost_after: Some(window),
        ..DisconnectPolicy::default()
    });
    server.register(job).await
}

fn allocs(snap: &StateSnapshot, key: &JobKey) -> Vec<Arc<Allocation>> {
    snap.allocs_by_job(key).cloned().collect()
}

fn live(snap: &StateSnapshot, key: &JobKey) -> Vec<Arc<Allocation>> {
    allocs(snap, key)
        .into_iter()
        .filter(|a| !a.is_terminal())
        .collect()
}

/// Waits for the job's one allocation to run, and returns it with its node.
async fn running_original(server: &TestServer, key: &JobKey) -> (AllocId, NodeId) {
    eventually("the allocation runs", DEADLINE, || async {
        let snap = server.handle().snapshot();
        match live(&snap, key).as_slice() {
            [a] if a.client_status == ClientStatus::Running => Some((a.id, a.node_id)),
            _ => None,
        }
    })
    .await
}

async fn alloc_status(server: &TestServer, id: AllocId) -> Option<(DesiredStatus, ClientStatus)> {
    let snap = server.handle().snapshot();
    snap.alloc(&id).map(|a| (a.desired_status, a.client_status))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_inside_the_window_keeps_the_original() {
    let server = server().await;
    let sim = simulator(&server, 3).await;
    let key = register_job(&server, "keep", Duration::from_secs(30)).await;
    let (original, node) = running_original(&server, &key).await;

    sim.silence(&[node]).await.expect("silences");
    eventually(
        "the node is disconnected and its allocation unknown",
        DEADLINE,
        || async {
            let snap = server.handle().snapshot();
            let disconnected = snap.node(&node)?.status == NodeStatus::Disconnected;
            let unknown = snap.alloc(&original)?.client_status == ClientStatus::Unknown;
            (disconnected && unknown).then_some(())
        },
    )
    .await;

    sim.restore(&[node]).await.expect("restores");
    eventually(
        "the original runs again and nothing else does",
        DEADLINE,
        || async {
            let snap = server.handle().snapshot();
            let ready = snap.node(&node)?.status == NodeStatus::Ready;
            let live = live(&snap, &key);
            let only_original = matches!(live.as_slice(),
            [a] if a.id == original && a.client_status == ClientStatus::Running);
            (ready && only_original).then_some(())
        },
    )
    .await;
    // The replacement's node learns of its stop through its own watch, after the servers
    // wrote it: wait for the nodes to catch up rather than read them at one instant.
    eventually("only the original runs on the nodes", DEADLINE, || async {
        let stats = sim.stats().await.ok()?;
        (stats.running_allocs == 1 && stats.silent == 0).then_some(())
    })
    .await;
    assert_eq!(
        alloc_status(&server, original).await,
        Some((DesiredStatus::Run, ClientStatus::Running)),
        "the original is still the one the servers run"
    );
    let snap = server.handle().snapshot();
    let still_live: Vec<AllocId> = live(&snap, &key).iter().map(|a| a.id).collect();
    assert_eq!(still_live, vec![original], "nothing else was started");

    sim.shutdown().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_past_the_window_is_replaced_and_not_revived() {
    let server = server().await;
    let sim = simulator(&server, 3).await;
    let key = register_job(&server, "replace", Duration::from_millis(500)).await;
    let (original, node) = running_original(&server, &key).await;

    sim.silence(&[node]).await.expect("silences");
    let replacement = eventually("the original is lost and replaced", DEADLINE, || async {
        let snap = server.handle().snapshot();
        let lost = snap.alloc(&original)?.client_status == ClientStatus::Lost;
        let live = live(&snap, &key);
        match live.as_slice() {
            [r] if lost
                && r.id != original
                && r.node_id != node
                && r.client_status == ClientStatus::Running =>
            {
                Some(r.id)
            }
            _ => None,
        }
    })
    .await;

    sim.restore(&[node]).await.expect("restores");
    eventually(
        "the node is back and the simulator runs only the replacement",
        DEADLINE,
        || async {
            let snap = server.handle().snapshot();
            let ready = snap.node(&node)?.status == NodeStatus::Ready;
            let stats = sim.stats().await.ok()?;
            (ready && stats.running_allocs == 1 && stats.silent == 0).then_some(())
        },
    )
    .await;
    let snap = server.handle().snapshot();
    let live = live(&snap, &key);
    assert_eq!(live.len(), 1, "one allocation survives: {live:?}");
    assert_eq!(live[0].id, replacement);
    assert!(
        snap.alloc(&original).is_none_or(|a| a.is_terminal()),
        "the original stays terminal"
    );

    sim.shutdown().await;
    server.stop().await;
}

/// Item 3 of issue 14: a node that missed its heartbeat while it runs a disconnect-tolerant
/// allocation goes `disconnected` and `suspended:lost`; when it heartbeats again inside the
/// lost grace it is `ready` and healthy in state, not left lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_node_that_heartbeats_inside_the_grace_is_healthy_again() {
    use drover_core::types::{NodeHealth, SuspendReason};
    let server = server().await;
    let sim = simulator(&server, 2).await;
    let key = register_job(&server, "tolerant", Duration::from_secs(30)).await;
    let (_, node) = running_original(&server, &key).await;

    sim.silence(&[node]).await.expect("silences");
    eventually("the node is disconnected and lost", DEADLINE, || async {
        let n = server.handle().snapshot().node(&node).cloned()?;
        (n.status == NodeStatus::Disconnected
            && n.health == NodeHealth::Suspended(SuspendReason::Lost))
        .then_some(())
    })
    .await;

    sim.restore(&[node]).await.expect("restores");
    eventually("the node is ready and healthy again", DEADLINE, || async {
        let n = server.handle().snapshot().node(&node).cloned()?;
        (n.status == NodeStatus::Ready && n.health == NodeHealth::Healthy).then_some(())
    })
    .await;

    sim.shutdown().await;
    server.stop().await;
}

/// Registers a system job whose group tolerates `window` of disconnect.
async fn register_system_job(server: &TestServer, id: &str, window: Duration) -> JobKey {
    let mut job = mock::system_job(id);
    job.groups[0].disconnect = Some(DisconnectPolicy {
        lost_after: Some(window),
        ..DisconnectPolicy::default()
    });
    server.register(job).await
}

/// Waits for the system job to run on every one of `nodes` nodes; returns the allocation on
/// each node.
async fn running_everywhere(
    server: &TestServer,
    key: &JobKey,
    nodes: usize,
) -> Vec<(NodeId, AllocId)> {
    eventually("the system job runs on every node", DEADLINE, || async {
        let snap = server.handle().snapshot();
        let live = live(&snap, key);
        let running: Vec<(NodeId, AllocId)> = live
            .iter()
            .filter(|a| a.client_status == ClientStatus::Running)
            .map(|a| (a.node_id, a.id))
            .collect();
        (live.len() == nodes && running.len() == nodes).then_some(running)
    })
    .await
}

/// At most one live allocation of the job on each node.
fn assert_once_per_node(snap: &StateSnapshot, key: &JobKey) {
    let mut seen = std::collections::BTreeSet::new();
    for a in live(snap, key) {
        assert!(
            seen.insert(a.node_id),
            "two live allocations on {}",
            a.node_id
        );
    }
}

/// Nomad's reconnect fix for system jobs: inside the window the node's allocation goes
/// `unknown` (still wanted), a follow-up eval waits for the window's end, and when the node
/// comes back the same allocation continues: no stop, no second placement on the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_job_silent_inside_the_window_keeps_its_allocation() {
    let server = server().await;
    let sim = simulator(&server, 3).await;
    let key = register_system_job(&server, "sys-keep", Duration::from_secs(30)).await;
    let placed = running_everywhere(&server, &key, 3).await;
    let (node, original) = placed[0];

    sim.silence(&[node]).await.expect("silences");
    eventually(
        "the node is disconnected, its allocation unknown and still wanted, a follow-up waits",
        DEADLINE,
        || async {
            let snap = server.handle().snapshot();
            let disconnected = snap.node(&node)?.status == NodeStatus::Disconnected;
            let a = snap.alloc(&original)?;
            let unknown =
                a.client_status == ClientStatus::Unknown && a.desired_status == DesiredStatus::Run;
            let follow_up = snap
                .evals_by_job(&key)
                .any(|e| !e.is_terminal() && e.wait_until.is_some());
            (disconnected && unknown && follow_up).then_some(())
        },
    )
    .await;
    assert_once_per_node(&server.handle().snapshot(), &key);

    sim.restore(&[node]).await.expect("restores");
    eventually(
        "the same allocation runs again on the node",
        DEADLINE,
        || async {
            let snap = server.handle().snapshot();
            let ready = snap.node(&node)?.status == NodeStatus::Ready;
            let a = snap.alloc(&original)?;
            let running = a.client_status == ClientStatus::Running;
            (ready && running && live(&snap, &key).len() == 3).then_some(())
        },
    )
    .await;
    let snap = server.handle().snapshot();
    assert_once_per_node(&snap, &key);
    let on_node: Vec<AllocId> = allocs(&snap, &key)
        .iter()
        .filter(|a| a.node_id == node)
        .map(|a| a.id)
        .collect();
    assert_eq!(
        on_node,
        vec![original],
        "no other allocation was ever placed there"
    );
    assert_eq!(
        alloc_status(&server, original).await,
        Some((DesiredStatus::Run, ClientStatus::Running))
    );

    sim.shutdown().await;
    server.stop().await;
}

/// Past the window the system allocation is lost and the node is down; nothing runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_job_silent_past_the_window_is_lost_and_the_node_down() {
    let server = server().await;
    let sim = simulator(&server, 3).await;
    let key = register_system_job(&server, "sys-lose", Duration::from_millis(800)).await;
    let placed = running_everywhere(&server, &key, 3).await;
    let (node, original) = placed[0];

    sim.silence(&[node]).await.expect("silences");
    eventually(
        "the allocation is lost and the node down",
        DEADLINE,
        || async {
            let snap = server.handle().snapshot();
            let down = snap.node(&node)?.status == NodeStatus::Down;
            let lost = snap.alloc(&original)?.client_status == ClientStatus::Lost;
            (down && lost).then_some(())
        },
    )
    .await;
    let snap = server.handle().snapshot();
    assert_once_per_node(&snap, &key);
    assert!(
        live(&snap, &key).iter().all(|a| a.node_id != node),
        "nothing is placed on a down node"
    );

    sim.restore(&[node]).await.expect("restores");
    eventually(
        "the node is back with one allocation of the job",
        DEADLINE,
        || async {
            let snap = server.handle().snapshot();
            let ready = snap.node(&node)?.status == NodeStatus::Ready;
            let stats = sim.stats().await.ok()?;
            (ready && live(&snap, &key).len() == 3 && stats.running_allocs == 3).then_some(())
        },
    )
    .await;
    let snap = server.handle().snapshot();
    assert_once_per_node(&snap, &key);
    assert!(
        snap.alloc(&original).is_none_or(|a| a.is_terminal()),
        "the lost original stays terminal"
    );

    sim.shutdown().await;
    server.stop().await;
}

/// A service job's node that stays silent past its window goes `down`, not `disconnected`
/// for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_job_node_silent_past_the_window_goes_down() {
    let server = server().await;
    let sim = simulator(&server, 3).await;
    let key = register_job(&server, "svc-down", Duration::from_millis(800)).await;
    let (original, node) = running_original(&server, &key).await;

    sim.silence(&[node]).await.expect("silences");
    eventually(
        "the node is down and the original lost",
        DEADLINE,
        || async {
            let snap = server.handle().snapshot();
            let down = snap.node(&node)?.status == NodeStatus::Down;
            let lost = snap.alloc(&original)?.client_status == ClientStatus::Lost;
            (down && lost).then_some(())
        },
    )
    .await;

    sim.shutdown().await;
    server.stop().await;
}

/// A node that comes back names what it holds, so its new watch carries only what the
/// servers changed meanwhile (here nothing) rather than every allocation again: what keeps
/// ten thousand nodes reconnecting to a restarted server from costing it a million
/// allocations' encoding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_back_before_it_is_missed_is_sent_nothing_again() {
    // The default heartbeat TTL: the node's short silence goes unnoticed by the servers.
    let server = TestServer::start().await;
    let sim = simulator(&server, 1).await;
    let node = sim.node_ids()[0];
    let key = server.register(mock::service_job("steady", 5)).await;
    let before = eventually("the five run on the node", DEADLINE, || async {
        let snap = server.handle().snapshot();
        let running = live(&snap, &key)
            .iter()
            .filter(|a| a.client_status == ClientStatus::Running)
            .count();
        let stats = sim.stats().await.ok()?;
        (running == 5 && stats.running_allocs == 5).then_some(stats)
    })
    .await;
    assert!(before.watch_allocations >= 5, "{before:?}");

    sim.silence(&[node]).await.expect("silences");
    sim.restore(&[node]).await.expect("restores");
    let after = eventually("the node watches again", DEADLINE, || async {
        let stats = sim.stats().await.ok()?;
        (stats.silent == 0 && stats.watch_messages > before.watch_messages).then_some(stats)
    })
    .await;
    assert_eq!(
        after.watch_allocations, before.watch_allocations,
        "the new watch carried no allocation the node already held: {after:?}"
    );
    assert_eq!(after.running_allocs, 5);
    let snap = server.handle().snapshot();
    assert_eq!(snap.node(&node).map(|n| n.status), Some(NodeStatus::Ready));
    assert_eq!(live(&snap, &key).len(), 5, "nothing was replaced");

    sim.shutdown().await;
    server.stop().await;
}
