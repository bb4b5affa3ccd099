//! Shared helpers for the server tests: start a server on a temp dir, act as node agents
//! through the handle, and wait for state with deadlines (never fixed sleeps).

// `raft_priority.rs`, a binary of its own, uses only part of this module.
#![allow(dead_code)]

pub mod acl;
pub mod api;
pub mod beats;
pub mod faulty;
pub mod http;
pub mod raw;

use drover_core::mock;
use drover_core::node_health::Readiness;
use drover_core::state::StateSnapshot;
use drover_core::types::*;
use drover_proto::convert::{Heartbeat, JobRegistration, NodeCredentials, NodeRegistration};
use drover_server::{NodeRegistered, Server, ServerConfig, ServerHandle};
use std::path::Path;
use std::time::Duration;

/// Generous: the machine is shared and small; a healthy run takes a fraction of it.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub async fn start_with(config: ServerConfig) -> (Server, ServerHandle) {
    init_tracing();
    let server = Server::start(config).await.expect("server starts");
    let h = server.handle();
    assert!(
        h.wait_for_leadership(DEADLINE).await,
        "server did not become leader"
    );
    (server, h)
}

pub async fn start(dir: &Path) -> (Server, ServerHandle) {
    start_with(ServerConfig::for_tests(dir)).await
}

/// Polls `cond` on every applied entry until it holds, or panics after the deadline.
pub async fn wait_until(
    h: &ServerHandle,
    what: &str,
    mut cond: impl FnMut(&StateSnapshot) -> bool,
) -> StateSnapshot {
    let mut rx = h.state().watch_applied();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let snap = h.snapshot();
        if cond(&snap) {
            return snap;
        }
        // Some conditions change without a write (a timer elsewhere); look again at least
        // every 100 ms.
        let step = tokio::time::Instant::now() + Duration::from_millis(100);
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out waiting for {what}");
        }
        let _ = tokio::time::timeout_at(step.min(deadline), rx.changed()).await;
    }
}

/// What a test agent keeps: its node id and secret.
#[derive(Clone, Debug)]
pub struct Agent {
    pub creds: NodeCredentials,
}

pub fn registration(n: u64, class: &str) -> NodeRegistration {
    let node = mock::node(n);
    NodeRegistration {
        previous: None,
        name: node.name,
        datacenter: node.datacenter,
        node_class: class.to_string(),
        attributes: node.attributes,
        meta: node.meta,
        resources: node.resources,
        reserved: node.reserved,
        networks: node.networks,
    }
}

pub async fn heartbeat(h: &ServerHandle, agent: &Agent) -> drover_server::HeartbeatAck {
    h.heartbeat(Heartbeat {
        auth: agent.creds.clone(),
        readiness: Readiness::Ready,
        last_snapshot: None,
    })
    .await
    .expect("heartbeat accepted")
}

/// Registers node `n` and heartbeats it ready.
pub async fn join(h: &ServerHandle, n: u64, class: &str) -> Agent {
    let reg: NodeRegistered = h
        .register_node(registration(n, class))
        .await
        .expect("node registers");
    let agent = Agent {
        creds: NodeCredentials {
            node_id: reg.node_id,
            secret_id: reg.secret_id,
        },
    };
    heartbeat(h, &agent).await;
    agent
}

/// Joins `count` nodes and waits until all of them are schedulable.
pub async fn join_many(h: &ServerHandle, count: u64) -> Vec<Agent> {
    let mut agents = Vec::new();
    for n in 1..=count {
        agents.push(join(h, n, "").await);
    }
    let ids: Vec<NodeId> = agents.iter().map(|a| a.creds.node_id).collect();
    wait_until(h, "nodes schedulable", |s| {
        ids.iter()
            .all(|id| s.node(id).is_some_and(|n| n.is_schedulable()))
    })
    .await;
    agents
}

pub async fn register(h: &ServerHandle, job: Job) -> drover_server::JobRegistered {
    h.register_job(JobRegistration {
        job,
        enforce_index: None,
    })
    .await
    .expect("job registers")
}

/// Allocations of `job` wanted running and not client-terminal.
pub fn live_allocs(s: &StateSnapshot, job: &str) -> Vec<Allocation> {
    s.allocs_by_job(&JobKey::default_ns(job))
        .filter(|a| !a.is_terminal())
        .map(|a| (**a).clone())
        .collect()
}

/// A service job whose allocations (3,000 MHz) fit only one per mock node.
pub fn big_service_job(id: &str, count: u32) -> Job {
    let mut job = mock::service_job(id, count);
    job.groups[0].tasks[0].resources = Resources::new(3000, 256, 0);
    job
}

/// Polls an async condition (leader or worker state, not only Raft state) until it holds,
/// looking again on every applied entry and at least every 50 ms; panics at the deadline.
pub async fn eventually<F, Fut>(h: &ServerHandle, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut rx = h.state().watch_applied();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if cond().await {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out waiting for {what}");
        }
        let step = tokio::time::Instant::now() + Duration::from_millis(50);
        let _ = tokio::time::timeout_at(step.min(deadline), rx.changed()).await;
    }
}

/// Free loopback ports, held only while chosen: a cluster's Raft addresses must be named
/// before its servers start.
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// Test configs for a cluster of `n` servers on loopback that know each other by their
/// Raft addresses and share `secret`, each with its own data dir (kept alive by the
/// returned dirs).
pub fn cluster_configs(n: u64, secret: &str) -> (Vec<ServerConfig>, Vec<tempfile::TempDir>) {
    let ports = free_ports(n as usize);
    let members: std::collections::BTreeMap<u64, String> = (1..=n)
        .map(|id| (id, format!("127.0.0.1:{}", ports[id as usize - 1])))
        .collect();
    (1..=n)
        .map(|id| {
            let dir = tempfile::tempdir().unwrap();
            let mut config = ServerConfig::for_tests(dir.path());
            config.server_id = id;
            config.name = format!("drover-{id}");
            config.raft_addr = Some(members[&id].clone());
            config.cluster_secret = Some(secret.into());
            config.bootstrap = drover_server::raft::Bootstrap::Cluster(members.clone());
            (config, dir)
        })
        .unzip()
}

/// The index of the server all of `servers` agree leads.
pub async fn agreed_leader(servers: &[Server]) -> usize {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let leaders: Vec<_> = servers.iter().map(|s| s.handle().leader()).collect();
        if let Some(Some(l)) = leaders.first()
            && leaders.iter().all(|x| x == &Some(*l))
            && servers[*l as usize - 1].handle().is_leader()
        {
            return *l as usize - 1;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no agreed leader: {leaders:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The `db` service instance an agent registers for `alloc` (127.0.0.1:5432, no tags),
/// with `health` and `checks`.
pub fn db_instance(
    alloc: &Allocation,
    health: ServiceHealth,
    checks: Vec<CheckState>,
) -> ServiceRegistration {
    ServiceRegistration {
        id: ServiceRegistration::make_id(alloc.id, None, 0),
        service_name: "db".into(),
        namespace: String::new(),
        job_id: String::new(),
        alloc_id: alloc.id,
        node_id: alloc.node_id,
        task: None,
        address: Some("127.0.0.1".parse().expect("ip")),
        port: 5432,
        tags: Vec::new(),
        health,
        checks,
        create_index: 0,
        modify_index: 0,
    }
}

/// Registers node 1 on whichever server leads, trying again while an election settles.
pub async fn register_on_leader(servers: &[Server]) -> NodeRegistered {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        for s in servers.iter().filter(|s| s.handle().is_leader()) {
            if let Ok(reg) = s.handle().register_node(registration(1, "")).await {
                return reg;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no write on a leader"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every RPC of the drover services the client API serves (Raft is on its own listener,
/// AgentService on agents),
/// from the embedded descriptor set, with whether it streams its answer: tests that must
/// cover every RPC walk this, so a new RPC is covered without editing them.
pub fn api_rpcs() -> Vec<(String, bool)> {
    use prost::Message;
    let set = prost_types::FileDescriptorSet::decode(drover_proto::FILE_DESCRIPTOR_SET)
        .expect("descriptor set");
    let mut rpcs = Vec::new();
    for file in set.file {
        for service in file
            .service
            .iter()
            .filter(|s| !matches!(s.name(), "RaftService" | "AgentService"))
        {
            for m in &service.method {
                rpcs.push((
                    format!("{}.{}/{}", file.package(), service.name(), m.name()),
                    m.server_streaming(),
                ));
            }
        }
    }
    assert!(rpcs.len() > 40, "found only {} rpcs", rpcs.len());
    rpcs
}
