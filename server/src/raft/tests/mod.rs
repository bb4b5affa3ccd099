//! Tests of the Raft layer: storage units, openraft's storage suite, one node, a cluster.
//!
//! Every wait is a deadline on a watch (metrics, applied index) or a channel, never a sleep.

mod cluster;
mod node;
mod storage;

use super::*;
use drover_core::mock;
use drover_core::types::*;
use std::time::Duration;

/// Generous: the machine is shared and small; a healthy run takes a fraction of it.
const DEADLINE: Duration = Duration::from_secs(20);
const T0: Timestamp = Timestamp(1_700_000_000_000);

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A config with short Raft timings so tests elect quickly.
fn test_config(node_id: ServerId, dir: &Path) -> RaftConfig {
    let mut c = RaftConfig::new(node_id, dir, format!("node-{node_id}.test:4647"));
    c.heartbeat_interval = Duration::from_millis(50);
    c.election_timeout_min = Duration::from_millis(300);
    c.election_timeout_max = Duration::from_millis(600);
    c
}

async fn wait_metrics(
    node: &RaftNode,
    what: &str,
    pred: impl Fn(&RaftMetrics) -> bool,
) -> RaftMetrics {
    let mut rx = node.metrics();
    let res = tokio::time::timeout(DEADLINE, rx.wait_for(|m| pred(m)))
        .await
        .map(|r| r.map(|m| m.clone()));
    match res {
        Ok(Ok(m)) => m,
        _ => panic!(
            "node {}: timed out waiting for {what}; metrics: {:?}",
            node.node_id(),
            *rx.borrow()
        ),
    }
}

async fn wait_leader(node: &RaftNode) -> ServerId {
    match node.wait_for_leader(DEADLINE).await {
        Some(l) => l,
        None => panic!("node {}: no leader within {DEADLINE:?}", node.node_id()),
    }
}

/// Starts a single node on `dir` and waits until it leads.
async fn start_single(dir: &Path) -> RaftNode {
    let node = RaftNode::start(test_config(1, dir)).await.unwrap();
    // Raft runs on its own runtime: the leader's first entry is applied in the background,
    // so tests that count indexes start once it is.
    wait_metrics(&node, "self-election and its first entry applied", |m| {
        m.current_leader == Some(1) && m.last_applied.map(|l| l.index) == m.last_log_index
    })
    .await;
    node
}

async fn write_ok(node: &RaftNode, cmd: Command) -> Index {
    let kind = cmd.kind();
    let (index, result) = node
        .client_write(cmd)
        .await
        .unwrap_or_else(|e| panic!("{kind} write failed: {e}"));
    result.unwrap_or_else(|e| panic!("{kind} refused at index {index}: {e}"));
    index
}

fn register_node(n: u64) -> Command {
    Command::NodeRegister {
        node: mock::node(n),
        now: T0,
    }
}

fn job(n: u64) -> Job {
    mock::service_job(&format!("job-{n}"), 2)
}

fn register_job(n: u64) -> Command {
    let job = job(n);
    Command::JobRegister {
        eval: Some(mock::eval(n, &job)),
        job,
        now: T0,
    }
}

/// Places allocations `alloc_base`, `alloc_base + 1` of job `n` on node `node`.
fn place(n: u64, node: u64, alloc_base: u64) -> Command {
    let job = job(n);
    let allocs = (0..2)
        .map(|i| mock::alloc(alloc_base + i as u64, &job, mock::node_id(node), i))
        .collect();
    mock::place(mock::eval_id(n), allocs, T0)
}

/// Registers `nodes` nodes and `jobs` jobs (with evals), placing two allocations per job.
/// Returns the index of the last write.
async fn populate(node: &RaftNode, nodes: u64, jobs: u64) -> Index {
    let mut last = 0;
    for n in 1..=nodes {
        last = write_ok(node, register_node(n)).await;
    }
    for j in 1..=jobs {
        write_ok(node, register_job(j)).await;
        last = write_ok(node, place(j, 1 + j % nodes.max(1), j * 10)).await;
    }
    last
}

/// The whole state in core's deterministic encoding: equal bytes, equal state.
fn state_bytes(s: &drover_core::state::StateSnapshot) -> Vec<u8> {
    drover_core::fsm::encode_snapshot(s)
}
