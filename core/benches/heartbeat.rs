//! The leader's decision on a steady heartbeat at 50,000 nodes: the tracker's look at the
//! node and the reset of its timer, under the lock every heartbeat takes
//! (`LeaderEngine::node_heartbeat`). Issue 35's goal 4 wants a whole heartbeat in 25 µs of
//! server CPU; this is the part of it that grows with the cluster.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use drover_core::fsm::{self, Command};
use drover_core::leader::{LeaderConfig, LeaderEngine};
use drover_core::mock;
use drover_core::node_health::Readiness;
use drover_core::state::StateStore;
use drover_core::{Node, Plan, Timestamp};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

const NODES: u64 = 50_000;

fn steady_heartbeats(c: &mut Criterion) {
    let mut store = StateStore::new();
    let mut now = Timestamp::from_millis(1_700_000_000_000);
    for (index, n) in (1..).zip(0..NODES) {
        let node = mock::node(n);
        fsm::apply(&mut store, index, Command::NodeRegister { node, now })
            .expect("a mock node registers");
    }
    let mut engine: LeaderEngine<Plan> =
        LeaderEngine::new(LeaderConfig::default(), 7).expect("default config");
    engine.establish(&store.snapshot(), now);
    let nodes: Vec<Arc<Node>> = {
        let snap = store.snapshot();
        (0..NODES)
            .map(|n| snap.node(&mock::node_id(n)).expect("registered").clone())
            .collect()
    };
    // Two rounds settle what a new leader's first heartbeats decide (readiness, health);
    // after them a heartbeat decides nothing to write.
    let mut index = NODES + 1;
    for _ in 0..2 {
        for node in &nodes {
            let snap = store.snapshot();
            let outcome = engine
                .node_heartbeat(
                    &snap,
                    &snap.node(&node.id).expect("kept").clone(),
                    Readiness::Ready,
                    now,
                )
                .expect("leading")
                .expect("tracked");
            for cmd in outcome.commands {
                index += 1;
                fsm::apply(&mut store, index, cmd).expect("the engine's own write applies");
            }
        }
        now = now.saturating_add(Duration::from_secs(1));
    }
    let snap = store.snapshot();
    let nodes: Vec<Arc<Node>> = nodes
        .iter()
        .map(|n| snap.node(&n.id).expect("kept").clone())
        .collect();
    let settled = engine
        .node_heartbeat(&snap, &nodes[0], Readiness::Ready, now)
        .expect("leading")
        .expect("tracked");
    assert!(
        settled.commands.is_empty(),
        "a settled node's heartbeat writes nothing"
    );
    let mut group = c.benchmark_group("heartbeat");
    group.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    group.bench_function("steady_50k_nodes", |b| {
        b.iter(|| {
            i = (i + 7919) % nodes.len();
            // 20,000 heartbeats a second: the clock moves 50 µs a heartbeat.
            now = now.saturating_add(Duration::from_micros(50));
            let outcome = engine
                .node_heartbeat(&snap, &nodes[i], Readiness::Ready, now)
                .expect("leading")
                .expect("tracked");
            black_box(outcome)
        })
    });
    group.finish();
}

criterion_group!(benches, steady_heartbeats);
criterion_main!(benches);
