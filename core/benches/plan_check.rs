//! Plan applier check cost: one 1,000-allocation plan spread over 1,000 nodes, each node
//! already running two allocations (goal: at most 1 ms per check). Measured for:
//! - the plain check of a plan that fits (decisions plus the per-node maps of the committed
//!   part, which `result` and `apply` share; the allocations themselves are the plan's);
//! - the decisions alone: an all-at-once plan refused at its last node checks every node
//!   and copies nothing;
//! - a check through the applier while a plan of the same size is in flight (the overlay is
//!   built once per latest state, so this is the steady state).

use criterion::{Criterion, criterion_group, criterion_main};
use drover_core::fsm::{self, Command};
use drover_core::mock;
use drover_core::plan_check::{PlanApplier, check_plan};
use drover_core::state::StateStore;
use drover_core::*;
use std::hint::black_box;
use std::time::Duration;

const T0: Timestamp = Timestamp(1_700_000_000_000);
const NODES: u64 = 1_000;
const EXISTING_PER_NODE: u64 = 2;

fn alloc_on(a: u64, node: u64) -> Allocation {
    mock::alloc(
        a,
        &mock::service_job("web", 1),
        mock::node_id(node),
        a as u32,
    )
}

/// 1,000 nodes with two running allocations each.
fn cluster() -> StateStore {
    let mut s = StateStore::new();
    let mut index = 0;
    for n in 0..NODES {
        index += 1;
        fsm::apply(
            &mut s,
            index,
            Command::NodeRegister {
                node: mock::node(n),
                now: T0,
            },
        )
        .expect("register");
    }
    let existing = (0..NODES * EXISTING_PER_NODE)
        .map(|a| alloc_on(a, a % NODES))
        .collect();
    fsm::apply(
        &mut s,
        index + 1,
        mock::place(mock::eval_id(0), existing, T0),
    )
    .expect("place");
    s
}

/// One new allocation per node, ids after `first`.
fn plan(eval: u64, first: u64) -> Plan {
    let mut p = Plan::new(mock::eval_id(eval), 50, None, 0);
    for n in 0..NODES {
        p.append_alloc(alloc_on(first + n, n));
    }
    p
}

fn plan_check(c: &mut Criterion) {
    let s = cluster();
    let p = plan(1, 1_000_000);
    let out = check_plan(&s, &p);
    assert!(
        out.result.rejected_nodes.is_empty() && out.apply.is_some(),
        "the bench plan must fit"
    );

    let mut g = c.benchmark_group("plan_check");
    g.bench_function("check_plan_1000_allocs_1000_nodes", |b| {
        b.iter(|| check_plan(black_box(&s), black_box(&p)))
    });

    let mut refused = p.clone();
    refused.all_at_once = true;
    let last = refused
        .node_allocation
        .values_mut()
        .next_back()
        .expect("plan has nodes");
    std::sync::Arc::make_mut(&mut last[0]).resources.memory_mb = 1_000_000;
    let out = check_plan(&s, &refused);
    assert!(out.apply.is_none() && out.result.rejected_nodes.len() == 1);
    g.bench_function("decisions_only_1000_nodes", |b| {
        b.iter(|| check_plan(black_box(&s), black_box(&refused)))
    });

    let mut applier = PlanApplier::default();
    let first = applier
        .check(&s, &p)
        .expect("state is current")
        .apply
        .expect("fits");
    applier.begin_commit(first, T0).expect("nothing in flight");
    let next = plan(2, 2_000_000);
    assert!(
        applier
            .check(&s, &next)
            .expect("current")
            .result
            .rejected_nodes
            .is_empty()
    );
    g.bench_function("applier_check_1000_allocs_against_in_flight_plan", |b| {
        b.iter(|| {
            applier
                .check(black_box(&s), black_box(&next))
                .expect("current")
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! { name = benches; config = config(); targets = plan_check }
criterion_main!(benches);
