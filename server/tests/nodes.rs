//! Node life through the server handle: heartbeats, disconnects, offline / online and
//! node authentication.

use crate::common;

use common::*;
use drover_core::fsm::AllocClientUpdate;
use drover_core::mock;
use drover_core::types::*;
use drover_proto::convert::{AllocUpdates, ClientAllocUpdate};
use drover_server::{ServerConfig, ServerError, ServerHandle};
use std::time::Duration;

/// Heartbeats `agents` on an interval, as their agents would, until aborted.
fn keep_alive(h: &ServerHandle, agents: Vec<Agent>) -> tokio::task::JoinHandle<()> {
    let h = h.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(150));
        loop {
            tick.tick().await;
            for a in &agents {
                let _ = h
                    .heartbeat(drover_proto::convert::Heartbeat {
                        auth: a.creds.clone(),
                        readiness: drover_core::node_health::Readiness::Ready,
                        last_snapshot: None,
                    })
                    .await;
            }
        }
    })
}

fn short_ttl(dir: &std::path::Path) -> ServerConfig {
    let mut c = ServerConfig::for_tests(dir);
    c.heartbeat.min_ttl = Duration::from_millis(500);
    c.heartbeat.grace = Duration::from_millis(200);
    c
}

fn running(alloc: &Allocation) -> ClientAllocUpdate {
    ClientAllocUpdate {
        update: AllocClientUpdate {
            deployment_health: None,
            alloc_id: alloc.id,
            client_status: ClientStatus::Running,
            client_description: Default::default(),
            task_states: Default::default(),
        },
        infra_failure: false,
        services: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_goes_down_and_its_allocations_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start_with(short_ttl(dir.path())).await;
    let agents = join_many(&h, 3).await;
    let alive = keep_alive(&h, agents.clone());
    register(&h, big_service_job("web", 2)).await;
    let snap = wait_until(&h, "2 placed", |s| live_allocs(s, "web").len() == 2).await;
    let victim_node = live_allocs(&snap, "web")[0].node_id;
    let victim_alloc = live_allocs(&snap, "web")[0].id;
    alive.abort();
    let survivors: Vec<Agent> = agents
        .into_iter()
        .filter(|a| a.creds.node_id != victim_node)
        .collect();
    let alive = keep_alive(&h, survivors);

    wait_until(&h, "the silent node down", |s| {
        s.node(&victim_node)
            .is_some_and(|n| n.status == NodeStatus::Down)
    })
    .await;
    let snap = wait_until(&h, "its allocation lost and replaced", |s| {
        s.alloc(&victim_alloc)
            .is_some_and(|a| a.client_status == ClientStatus::Lost)
            && live_allocs(s, "web").len() == 2
    })
    .await;
    assert!(
        live_allocs(&snap, "web")
            .iter()
            .all(|a| a.node_id != victim_node),
        "no live allocation on the down node"
    );
    assert_eq!(
        snap.node(&victim_node).unwrap().health,
        NodeHealth::Suspended(SuspendReason::Lost)
    );
    alive.abort();
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_window_makes_the_node_disconnected_and_its_allocations_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start_with(short_ttl(dir.path())).await;
    let agents = join_many(&h, 1).await;
    let agent = agents[0].clone();
    let mut job = mock::service_job("tolerant", 1);
    job.groups[0].disconnect = Some(DisconnectPolicy {
        lost_after: Some(Duration::from_secs(600)),
        replace: false,
        ..DisconnectPolicy::default()
    });
    register(&h, job).await;
    let snap = wait_until(&h, "placed", |s| live_allocs(s, "tolerant").len() == 1).await;
    let alloc = live_allocs(&snap, "tolerant")[0].clone();
    h.update_allocs(AllocUpdates {
        auth: agent.creds.clone(),
        updates: vec![running(&alloc)],
    })
    .await
    .expect("update from a ready node");

    let node_id = agent.creds.node_id;
    wait_until(&h, "node disconnected", |s| {
        s.node(&node_id)
            .is_some_and(|n| n.status == NodeStatus::Disconnected)
    })
    .await;
    wait_until(&h, "allocation unknown", |s| {
        s.alloc(&alloc.id)
            .is_some_and(|a| a.client_status == ClientStatus::Unknown)
    })
    .await;

    // Before the reconnect heartbeat: refused, with a clear message.
    let err = h
        .update_allocs(AllocUpdates {
            auth: agent.creds.clone(),
            updates: vec![running(&alloc)],
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ServerError::FailedPrecondition { reason } if reason.contains("heartbeat first")),
        "{err:?}"
    );
    assert_eq!(
        tonic::Status::from(err).code(),
        tonic::Code::FailedPrecondition
    );

    heartbeat(&h, &agent).await;
    wait_until(&h, "node ready again", |s| {
        s.node(&node_id)
            .is_some_and(|n| n.status == NodeStatus::Ready)
    })
    .await;
    h.update_allocs(AllocUpdates {
        auth: agent.creds.clone(),
        updates: vec![running(&alloc)],
    })
    .await
    .expect("accepted after the heartbeat");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_node_gets_no_placements_until_onlined() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    let agents = join_many(&h, 2).await;
    let off = agents[0].creds.node_id;
    h.node_offline(off).await.unwrap();
    h.node_offline(off).await.expect("offline is idempotent");
    let snap = wait_until(&h, "node offlined", |s| {
        s.node(&off)
            .is_some_and(|n| n.health == NodeHealth::Offlined)
    })
    .await;
    assert!(!snap.node(&off).unwrap().is_schedulable());

    register(&h, big_service_job("web", 2)).await;
    let snap = wait_until(&h, "one placed, one blocked", |s| {
        live_allocs(s, "web").len() == 1
            && s.evals_by_job(&JobKey::default_ns("web"))
                .any(|e| e.status == EvalStatus::Blocked)
    })
    .await;
    assert!(
        live_allocs(&snap, "web").iter().all(|a| a.node_id != off),
        "nothing placed on the offlined node"
    );

    h.node_online(off).await.unwrap();
    h.node_online(off).await.expect("online is idempotent");
    let snap = wait_until(&h, "placed on the onlined node", |s| {
        live_allocs(s, "web").len() == 2
    })
    .await;
    assert!(live_allocs(&snap, "web").iter().any(|a| a.node_id == off));
    assert_eq!(snap.node(&off).unwrap().health, NodeHealth::Healthy);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cannot_update_another_nodes_allocations() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    let agents = join_many(&h, 2).await;
    register(&h, big_service_job("web", 2)).await;
    let snap = wait_until(&h, "2 placed", |s| live_allocs(s, "web").len() == 2).await;
    let (a, b) = (&agents[0], &agents[1]);
    let on_b = live_allocs(&snap, "web")
        .into_iter()
        .find(|x| x.node_id == b.creds.node_id)
        .expect("one allocation per node");

    // Node A, with its own valid secret, names B's allocation.
    let err = h
        .update_allocs(AllocUpdates {
            auth: a.creds.clone(),
            updates: vec![running(&on_b)],
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServerError::PermissionDenied { .. }),
        "{err:?}"
    );

    // A's secret presented as node B.
    let mut forged = b.creds.clone();
    forged.secret_id = a.creds.secret_id.clone();
    let err = h
        .update_allocs(AllocUpdates {
            auth: forged,
            updates: vec![running(&on_b)],
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServerError::Unauthenticated { .. }),
        "{err:?}"
    );
    assert_eq!(
        h.snapshot().alloc(&on_b.id).unwrap().client_status,
        ClientStatus::Pending,
        "unchanged"
    );

    // B itself may.
    h.update_allocs(AllocUpdates {
        auth: b.creds.clone(),
        updates: vec![running(&on_b)],
    })
    .await
    .unwrap();
    assert_eq!(
        h.snapshot().alloc(&on_b.id).unwrap().client_status,
        ClientStatus::Running
    );
    server.shutdown().await.unwrap();
}

/// The server chooses node identities and keeps only a digest of each secret: state never
/// holds a secret a node could present, and credentials for a node state does not know get
/// a fresh identity instead of the one the client named.
#[tokio::test(flavor = "multi_thread")]
async fn node_secrets_are_kept_as_digests_and_chosen_by_the_server() {
    use drover_proto::convert::{Heartbeat, NodeCredentials};
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    let agent = join(&h, 1, "").await;
    let stored = h
        .snapshot()
        .node(&agent.creds.node_id)
        .unwrap()
        .secret_id
        .clone();
    assert!(stored.starts_with("sha256:"), "{stored}");
    assert!(!stored.contains(&agent.creds.secret_id));
    // The digest is not a credential.
    let err = h
        .heartbeat(Heartbeat {
            auth: NodeCredentials {
                node_id: agent.creds.node_id,
                secret_id: stored.clone(),
            },
            readiness: drover_core::node_health::Readiness::Ready,
            last_snapshot: None,
        })
        .await
        .expect_err("the digest is refused");
    assert!(
        matches!(err, ServerError::Unauthenticated { .. }),
        "{err:?}"
    );
    heartbeat(&h, &agent).await;

    // Re-registering keeps the identity with the right secret, refuses a wrong one.
    let mut again = registration(1, "");
    again.previous = Some(agent.creds.clone());
    let reg = h.register_node(again.clone()).await.expect("re-registers");
    assert_eq!(reg.node_id, agent.creds.node_id);
    again.previous = Some(NodeCredentials {
        node_id: agent.creds.node_id,
        secret_id: "not-the-secret".into(),
    });
    assert!(matches!(
        h.register_node(again).await,
        Err(ServerError::Unauthenticated { .. })
    ));

    // Credentials of a node state does not hold: a fresh identity, not the named one.
    let chosen = NodeCredentials {
        node_id: mock::node_id(99),
        secret_id: "a-secret-the-client-chose".into(),
    };
    let mut named = registration(2, "");
    named.previous = Some(chosen.clone());
    let reg = h.register_node(named).await.expect("registers");
    assert_ne!(reg.node_id, chosen.node_id);
    assert_ne!(reg.secret_id, chosen.secret_id);
    assert!(h.snapshot().node(&chosen.node_id).is_none());
    server.shutdown().await.unwrap();
}

/// A heartbeat answers the status and health it leaves the node in: read back after the
/// write when it wrote one (a node coming up or coming back), taken from the state it was
/// decided on when it wrote nothing (a steady heartbeat), and a steady heartbeat still
/// holds the node up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_answers_the_status_it_leaves_the_node_in() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start_with(short_ttl(dir.path())).await;
    let reg = h
        .register_node(registration(1, ""))
        .await
        .expect("node registers");
    let agent = Agent {
        creds: drover_proto::convert::NodeCredentials {
            node_id: reg.node_id,
            secret_id: reg.secret_id,
        },
    };
    let id = agent.creds.node_id;
    let stored = |h: &ServerHandle| h.snapshot().node(&id).map(|n| (n.status, n.health));

    // Coming up: the heartbeat writes `ready` and answers it.
    let up = heartbeat(&h, &agent).await;
    assert_eq!(up.status, NodeStatus::Ready, "{up:?}");
    assert!(up.index > reg.index, "{up:?} after {}", reg.index);

    // Steady: several TTLs of heartbeats that change nothing keep the node up, each
    // answering what state holds.
    let ttl = Duration::from_millis(500);
    let until = tokio::time::Instant::now() + ttl * 4;
    let mut tick = tokio::time::interval(ttl / 4);
    while tokio::time::Instant::now() < until {
        tick.tick().await;
        let ack = heartbeat(&h, &agent).await;
        assert_eq!(Some((ack.status, ack.health)), stored(&h), "{ack:?}");
        assert_eq!(ack.status, NodeStatus::Ready, "{ack:?}");
        assert!(ack.index <= h.snapshot().latest_index(), "{ack:?}");
    }

    // Offlined by an operator: a steady heartbeat answers the health state now holds.
    h.node_offline(id).await.expect("offlined");
    let ack = heartbeat(&h, &agent).await;
    assert_eq!(Some((ack.status, ack.health)), stored(&h), "{ack:?}");
    assert_ne!(ack.health, NodeHealth::Healthy, "{ack:?}");
    h.node_online(id).await.expect("onlined");

    // Silent past its TTL: down. The next heartbeat brings it back and answers `ready`.
    wait_until(&h, "the silent node down", |s| {
        s.node(&id).is_some_and(|n| n.status == NodeStatus::Down)
    })
    .await;
    let back = heartbeat(&h, &agent).await;
    assert_eq!(back.status, NodeStatus::Ready, "{back:?}");
    assert_eq!(stored(&h).map(|(s, _)| s), Some(NodeStatus::Ready));
    server.shutdown().await.unwrap();
}
