//! A leader cut off from the other two servers while clients and nodes still reach all
//! three (issue 29, item 0), played in process through a faulty Raft transport: both ways
//! (nothing passes between the leader and the others) and one way (the leader's own calls
//! are lost; it still answers the others').
//!
//! The majority elects a new leader; the old one must stop acting as leader within its
//! lease (no node heartbeat acknowledged there), the nodes must move to the servers that
//! lead (none is marked down), and once the partition heals every acknowledged write is on
//! all three servers.

use crate::common;

use common::faulty::{Faults, FaultyTransport};
use common::{DEADLINE, cluster_configs, registration};
use drover_core::mock;
use drover_core::node_health::Readiness;
use drover_core::types::*;
use drover_proto::convert::{Heartbeat, JobRegistration, NodeCredentials};
use drover_server::{Server, ServerConfig, ServerHandle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "test-cluster-secret-0123";
const NODES: u64 = 6;

/// How the leader is cut off.
#[derive(Clone, Copy, Debug)]
enum Cut {
    BothWays,
    ItsCallsLost,
}

/// What the nodes and the client saw: heartbeats acknowledged, per server and time, and the
/// jobs whose registration was acknowledged.
#[derive(Debug, Default)]
struct Seen {
    acks: Vec<(usize, Instant)>,
    jobs: Vec<String>,
}

type Handles = Arc<Vec<ServerHandle>>;

/// Heartbeats every node every 200 ms through the server it last used, moving to the next
/// server at once when one refuses or fails (what agents do).
fn nodes(
    handles: Handles,
    creds: Vec<NodeCredentials>,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
) {
    for auth in creds {
        let (handles, seen, stop) = (handles.clone(), seen.clone(), stop.clone());
        tokio::spawn(async move {
            let mut at = 0;
            while !stop.load(Ordering::SeqCst) {
                for _ in 0..handles.len() {
                    let hb = Heartbeat {
                        auth: auth.clone(),
                        readiness: Readiness::Ready,
                        last_snapshot: None,
                    };
                    let call = handles[at].heartbeat(hb);
                    match tokio::time::timeout(Duration::from_secs(2), call).await {
                        Ok(Ok(_)) => {
                            seen.lock().unwrap().acks.push((at, Instant::now()));
                            break;
                        }
                        _ => at = (at + 1) % handles.len(),
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
    }
}

/// Registers a job every 100 ms on whichever server takes it, remembering what was
/// acknowledged. Like a real client, it goes back first to the server that took the last
/// one, and tries the others in turn after a failure.
fn client(handles: Handles, seen: Arc<Mutex<Seen>>, stop: Arc<AtomicBool>) {
    tokio::spawn(async move {
        let mut n = 0;
        let mut first = 0;
        while !stop.load(Ordering::SeqCst) {
            let id = format!("job-{n}");
            n += 1;
            for i in (0..handles.len()).map(|k| (first + k) % handles.len()) {
                let reg = JobRegistration {
                    job: mock::service_job(&id, 1),
                    enforce_index: None,
                };
                if let Ok(Ok(_)) =
                    tokio::time::timeout(Duration::from_secs(2), handles[i].register_job(reg)).await
                {
                    seen.lock().unwrap().jobs.push(id.clone());
                    first = i;
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

async fn leader_of(handles: &[ServerHandle], except: Option<usize>) -> usize {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(i) = (0..handles.len()).find(|i| Some(*i) != except && handles[*i].is_leader())
        {
            return i;
        }
        assert!(tokio::time::Instant::now() < deadline, "no leader elected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Registers node 1 with whichever server leads once the start-up elections are past (the
/// leader that takes the registration), and says which one that was.
async fn register_at_leader(handles: &[ServerHandle]) -> (usize, drover_server::NodeRegistered) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let at = leader_of(handles, None).await;
        if let Ok(reg) = handles[at].register_node(registration(1, "")).await {
            return (at, reg);
        }
        assert!(tokio::time::Instant::now() < deadline, "node registers");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts a server per config, each calling the others through the faults.
async fn start_faulty(configs: &[ServerConfig], faults: &Arc<Faults>) -> Vec<Server> {
    let mut servers = Vec::new();
    for config in configs {
        let faults = faults.clone();
        let from = config.server_id;
        servers.push(
            Server::start_with_raft_transport(config.clone(), move |grpc| {
                Arc::new(FaultyTransport {
                    from,
                    inner: Arc::new(grpc),
                    faults,
                })
            })
            .await
            .expect("server starts"),
        );
    }
    servers
}

async fn partition_the_leader(cut: Cut) {
    let (configs, _dirs) = cluster_configs(3, SECRET);
    let faults = Arc::new(Faults::default());
    let servers = start_faulty(&configs, &faults).await;
    let handles: Handles = Arc::new(servers.iter().map(Server::handle).collect());
    let mut creds = Vec::new();
    for n in 1..=NODES {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        let reg = loop {
            let at = leader_of(&handles, None).await;
            if let Ok(reg) = handles[at].register_node(registration(n, "")).await {
                break reg;
            }
            assert!(tokio::time::Instant::now() < deadline, "node {n} registers");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        creds.push(NodeCredentials {
            node_id: reg.node_id,
            secret_id: reg.secret_id,
        });
    }
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    nodes(handles.clone(), creds.clone(), seen.clone(), stop.clone());
    client(handles.clone(), seen.clone(), stop.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let old = leader_of(&handles, None).await;

    // Cut the leader off for longer than a failover TTL and its grace (5.5 s here): nodes
    // still acknowledged by it alone would be marked down by the new leader.
    let old_id = configs[old].server_id;
    let cut_at = Instant::now();
    match cut {
        Cut::BothWays => faults.isolated.lock().unwrap().insert(old_id),
        Cut::ItsCallsLost => faults.muted.lock().unwrap().insert(old_id),
    };
    let new = leader_of(&handles, Some(old)).await;
    let elected_after = cut_at.elapsed();
    // A write taken by the old leader is answered, not held until the partition heals:
    // UNAVAILABLE once its lease has lapsed, or "not the leader" once it knows better.
    let stale = JobRegistration {
        job: mock::service_job("to-the-old-leader", 1),
        enforce_index: None,
    };
    let answered = tokio::time::timeout(Duration::from_secs(5), handles[old].register_job(stale))
        .await
        .unwrap_or_else(|_| panic!("{cut:?}: a write to the old leader waits for the heal"));
    assert!(
        matches!(
            answered,
            Err(drover_server::ServerError::Unavailable { .. }
                | drover_server::ServerError::NotLeader { .. })
        ),
        "{cut:?}: the old leader took a write: {answered:?}"
    );
    let hold = Duration::from_secs(7);
    tokio::time::sleep(hold.saturating_sub(cut_at.elapsed())).await;
    let down: Vec<NodeId> = handles[new]
        .snapshot()
        .nodes()
        .filter(|n| n.status == NodeStatus::Down)
        .map(|n| n.id)
        .collect();
    faults.isolated.lock().unwrap().clear();
    faults.muted.lock().unwrap().clear();
    stop.store(true, Ordering::SeqCst);

    let lease = drover_server::leader::lease(&configs[old].raft);
    let acked_by_old_late = seen
        .lock()
        .unwrap()
        .acks
        .iter()
        .filter(|(server, at)| *server == old && *at > cut_at + lease + Duration::from_millis(300))
        .count();
    assert_eq!(
        acked_by_old_late, 0,
        "{cut:?}: the cut-off leader acknowledged heartbeats after its lease"
    );
    assert!(down.is_empty(), "{cut:?}: nodes marked down: {down:?}");
    assert!(
        elected_after < Duration::from_secs(5),
        "{cut:?}: elected after {elected_after:?}"
    );

    // Healed: every acknowledged write is on every server.
    let acked = seen.lock().unwrap().jobs.clone();
    assert!(
        acked.len() > 20,
        "{cut:?}: only {} jobs acknowledged",
        acked.len()
    );
    for (i, h) in handles.iter().enumerate() {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let snap = h.snapshot();
            let missing: Vec<&String> = acked
                .iter()
                .filter(|id| snap.job(&JobKey::default_ns(id)).is_none())
                .collect();
            if missing.is_empty() {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{cut:?}: server {} lacks acknowledged jobs {missing:?}",
                i + 1
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    for s in servers {
        s.shutdown().await.expect("server stops");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_cut_off_both_ways_stops_leading_and_loses_nothing() {
    partition_the_leader(Cut::BothWays).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_whose_calls_are_lost_stops_leading_and_loses_nothing() {
    partition_the_leader(Cut::ItsCallsLost).await;
}

/// The leader's answers are lost for three leases (the followers still hear it, so none
/// stands for election): its lease lapses and it refuses node heartbeats, but it keeps its
/// duties, and once answers return it acknowledges nodes again in the same term without
/// rebuilding them from state (a loaded cluster's slow followers cost no re-establish).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lapsed_lease_suspends_the_duties_and_a_quorum_resumes_them_in_the_same_term() {
    let (configs, _dirs) = cluster_configs(3, SECRET);
    let faults = Arc::new(Faults::default());
    let servers = start_faulty(&configs, &faults).await;
    let handles: Vec<ServerHandle> = servers.iter().map(Server::handle).collect();
    let (at, reg) = register_at_leader(&handles).await;
    let leader = &handles[at];
    let auth = NodeCredentials {
        node_id: reg.node_id,
        secret_id: reg.secret_id,
    };
    let beat = || Heartbeat {
        auth: auth.clone(),
        readiness: Readiness::Ready,
        last_snapshot: None,
    };
    leader.heartbeat(beat()).await.expect("acknowledged");
    let term = leader.raft_metrics().current_term;
    let (established_before, lapses_before) = leader.metrics().leadership_counts();

    let lease = drover_server::leader::lease(&configs[at].raft);
    // The lease runs from the last quorum acknowledgement, not from the moment the leader
    // goes deaf: on a loaded machine that acknowledgement may already be some way back.
    // Raft reports its metrics once a tick, so the age read here may be one tick short.
    let acked_ago = Duration::from_millis(
        leader
            .raft_metrics()
            .millis_since_quorum_ack
            .unwrap_or_default(),
    ) + configs[at].raft.heartbeat_interval;
    let read_at = Instant::now();
    faults.deaf.lock().unwrap().insert(configs[at].server_id);
    let deaf_at = Instant::now();
    let lease_left = lease.saturating_sub(acked_ago + (deaf_at - read_at));
    let refused = loop {
        let answer = leader.heartbeat(beat()).await;
        if answer.is_err() {
            break deaf_at.elapsed();
        }
        assert!(
            deaf_at.elapsed() < lease * 3,
            "heartbeats still acknowledged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        refused >= lease_left,
        "refused after {refused:?}, inside the lease ({lease_left:?} of {lease:?} left when \
         the leader went deaf)"
    );
    tokio::time::sleep((lease * 3).saturating_sub(deaf_at.elapsed())).await;
    assert!(leader.heartbeat(beat()).await.is_err(), "still suspended");
    faults.deaf.lock().unwrap().clear();

    let deadline = tokio::time::Instant::now() + DEADLINE;
    while leader.heartbeat(beat()).await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "never resumed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(leader.is_leader());
    assert_eq!(leader.raft_metrics().current_term, term, "no election");
    let (established, lapses) = leader.metrics().leadership_counts();
    assert_eq!(
        established, established_before,
        "resumed without rebuilding from state"
    );
    assert!(lapses > lapses_before);
    for s in servers {
        s.shutdown().await.expect("server stops");
    }
}

/// A leader whose first entry never commits (the three-server bench stopped its last peer
/// just after electing it; here entries are lost while heartbeats pass, so a quorum still
/// confirms it) never establishes its duties, and stopping it must not wait for that entry
/// to apply: openraft's own barrier waits for it without a limit, and once held a stopped
/// server up forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_whose_first_entry_never_commits_stops_without_waiting_for_it() {
    let (configs, _dirs) = cluster_configs(3, SECRET);
    let faults = Arc::new(Faults::default());
    let mut servers = start_faulty(&configs, &faults).await;
    let handles: Vec<ServerHandle> = servers.iter().map(Server::handle).collect();
    let old = leader_of(&handles, None).await;
    let old_term = handles[old].raft_metrics().current_term;
    faults.entries_lost.store(true, Ordering::SeqCst);
    faults
        .isolated
        .lock()
        .unwrap()
        .insert(configs[old].server_id);

    let deadline = tokio::time::Instant::now() + DEADLINE;
    let elected = loop {
        let raft_leader = (0..handles.len()).find(|&i| {
            let m = handles[i].raft_metrics();
            i != old
                && m.current_term > old_term
                && m.state == openraft::ServerState::Leader
                && m.current_leader == Some(configs[i].server_id)
        });
        if let Some(i) = raft_leader {
            break i;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no new leader elected"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // For two leases it stays Raft's leader without its duties: its start is under way
    // when the stop comes.
    let lease = drover_server::leader::lease(&configs[elected].raft);
    let watched = Instant::now();
    while watched.elapsed() < lease * 2 {
        let m = handles[elected].raft_metrics();
        assert_eq!(
            m.state,
            openraft::ServerState::Leader,
            "still Raft's leader"
        );
        assert!(!handles[elected].is_leader(), "duties never established");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let stopping = Instant::now();
    let stopped =
        tokio::time::timeout(Duration::from_secs(10), servers.remove(elected).shutdown()).await;
    assert!(
        matches!(stopped, Ok(Ok(()))),
        "the unconfirmed leader did not stop within 10 s: {stopped:?}"
    );
    eprintln!("unconfirmed leader stopped in {:?}", stopping.elapsed());
    for s in servers {
        s.shutdown().await.expect("server stops");
    }
}

/// The heartbeat stream under the same fault: a leader whose answers are lost stops
/// acknowledging streamed heartbeats once its lease lapses, both on a stream to it and on
/// one to a follower (which sends each heartbeat on to it): a stream opened before the
/// lapse never carries an acknowledgement the lease does not allow. Each stream ends
/// UNAVAILABLE, and once answers return, a new stream to the follower is acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_past_its_lease_acknowledges_no_streamed_heartbeat() {
    use common::beats::{Beats, auth, ready};
    let (mut configs, _dirs) = cluster_configs(3, SECRET);
    for c in &mut configs {
        c.bind_addr = "127.0.0.1:0".into();
    }
    let faults = Arc::new(Faults::default());
    let servers = start_faulty(&configs, &faults).await;
    let mut apis = Vec::new();
    for s in &servers {
        apis.push(
            s.serve(drover_server::api::ApiOptions::default())
                .await
                .expect("api serves"),
        );
    }
    let handles: Vec<ServerHandle> = servers.iter().map(Server::handle).collect();
    let (at, reg) = register_at_leader(&handles).await;
    let node = NodeCredentials {
        node_id: reg.node_id,
        secret_id: reg.secret_id,
    };
    let follower = (at + 1) % servers.len();
    let open = |i: usize| {
        let endpoint =
            tonic::transport::Endpoint::from_shared(format!("http://{}", apis[i].local_addr()))
                .unwrap();
        async move { Beats::open(endpoint.connect().await.expect("connects")).await }
    };
    let mut streams = vec![
        ("to the leader", open(at).await),
        ("to a follower", open(follower).await),
    ];
    for (what, stream) in &mut streams {
        stream
            .beat(ready(auth(&node)))
            .await
            .unwrap_or_else(|e| panic!("{what}: acknowledged before the fault: {e}"));
    }

    let lease = drover_server::leader::lease(&configs[at].raft);
    faults.deaf.lock().unwrap().insert(configs[at].server_id);
    let deaf_at = Instant::now();
    for (what, stream) in &mut streams {
        let refused = loop {
            match stream.beat(ready(auth(&node))).await {
                Ok(_) => {
                    let acked_after = deaf_at.elapsed();
                    assert!(
                        acked_after < lease + Duration::from_millis(300),
                        "{what}: acknowledged {acked_after:?} after the fault, past the lease of {lease:?}"
                    );
                }
                Err(status) => break status,
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(
            refused.code(),
            tonic::Code::Unavailable,
            "{what}: {refused:?}"
        );
        assert!(stream.ended().await, "{what}: the stream ends");
    }
    faults.deaf.lock().unwrap().clear();

    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let mut stream = open(follower).await;
        if stream.beat(ready(auth(&node))).await.is_ok() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no stream acknowledged after the heal"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for api in apis {
        api.shutdown().await.unwrap();
    }
    for s in servers {
        s.shutdown().await.expect("server stops");
    }
}
