//! Selection stack cost. Goals: a service job of count 10,000 placed on 10,000 nodes at
//! 200,000 placements/s or more (single-threaded), and a system job across 10,000 nodes in
//! 20 ms or less. Each iteration builds the stack and places every allocation, appending
//! each to the plan as a scheduler would, so later selects see earlier placements.
//! `service_10000_selects_only` counts only the time spent in `select` in the service loop;
//! `plan_only_10000_allocs` measures the appending alone (cloning an allocation and adding it
//! to the plan), the share of the loops that is the scheduler's rather than the stack's.

// A benchmark times itself: the sans-IO rule (core/clippy.toml) is for the library.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use drover_core::fsm::{self, Command};
use drover_core::mock;
use drover_core::scheduler::feasible::ready_nodes_in_dcs;
use drover_core::scheduler::stack::{CandidateLimit, SelectOptions, Stack};
use drover_core::state::StateStore;
use drover_core::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::hint::black_box;
use std::time::{Duration, Instant};

const NODES: u64 = 10_000;
const COUNT: u32 = 10_000;

fn cluster() -> StateStore {
    let mut s = StateStore::new();
    for n in 0..NODES {
        let cmd = Command::NodeRegister {
            node: mock::node(n),
            now: Timestamp(1_700_000_000_000),
        };
        fsm::apply(&mut s, n + 1, cmd).expect("register");
    }
    s
}

/// Places every allocation of `job`'s first group with one stack; returns how many fit and
/// the time spent inside `select` alone.
fn place_service_timed(s: &StateStore, job: &Job, template: &Allocation) -> (usize, Duration) {
    let (nodes, _) = ready_nodes_in_dcs(s, job);
    let mut stack = Stack::new(s, job, CandidateLimit::Log2);
    stack.set_nodes(nodes, &mut ChaCha8Rng::seed_from_u64(1));
    let mut plan = Plan::new(mock::eval_id(1), job.priority, Some(job.key()), 0);
    let opts = SelectOptions::default();
    let group = &job.groups[0];
    let mut placed = 0;
    let mut selecting = Duration::ZERO;
    for i in 0..u64::from(group.count) {
        let start = Instant::now();
        let r = stack.select(group, &plan, &opts);
        selecting += start.elapsed();
        let Some(r) = r else {
            break;
        };
        let mut a = template.clone();
        a.id = mock::alloc_id(i);
        a.node_id = r.node.id;
        plan.append_alloc(a);
        placed += 1;
    }
    (placed, selecting)
}

fn place_service(s: &StateStore, job: &Job, template: &Allocation) -> usize {
    place_service_timed(s, job, template).0
}

/// One allocation per node, the stack given one node at a time as a system scheduler does.
fn place_system(s: &StateStore, job: &Job, template: &Allocation) -> usize {
    let (nodes, per_dc) = ready_nodes_in_dcs(s, job);
    let mut stack = Stack::new(s, job, CandidateLimit::All);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut plan = Plan::new(mock::eval_id(1), job.priority, Some(job.key()), 0);
    let opts = SelectOptions::default();
    let mut placed = 0;
    for (i, node) in nodes.into_iter().enumerate() {
        stack.set_nodes(vec![node], &mut rng);
        stack.set_nodes_available(per_dc.clone());
        let Some(r) = stack.select(&job.groups[0], &plan, &opts) else {
            continue;
        };
        let mut a = template.clone();
        a.id = mock::alloc_id(i as u64);
        a.node_id = r.node.id;
        plan.append_alloc(a);
        placed += 1;
    }
    placed
}

/// The scheduler's share of the loops above: building and dropping the plan, no selects.
fn plan_only(job: &Job, template: &Allocation) -> usize {
    let mut plan = Plan::new(mock::eval_id(1), job.priority, Some(job.key()), 0);
    for i in 0..NODES {
        let mut a = template.clone();
        a.id = mock::alloc_id(i);
        a.node_id = mock::node_id(i);
        plan.append_alloc(a);
    }
    plan.node_allocation.len()
}

fn stack(c: &mut Criterion) {
    let s = cluster();
    let service = mock::service_job("web", COUNT);
    let system = mock::system_job("sys");
    let service_alloc = mock::alloc(0, &service, mock::node_id(0), 0);
    let system_alloc = mock::alloc(0, &system, mock::node_id(0), 0);
    assert_eq!(
        place_service(&s, &service, &service_alloc),
        COUNT as usize,
        "every service allocation must fit"
    );
    assert_eq!(
        place_system(&s, &system, &system_alloc),
        NODES as usize,
        "every node must take the system allocation"
    );

    let mut g = c.benchmark_group("stack");
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements(u64::from(COUNT)));
    g.bench_function("service_10000_allocs_10000_nodes", |b| {
        b.iter(|| place_service(black_box(&s), black_box(&service), &service_alloc))
    });
    // The stack's share of the loop above: only the time inside `select`.
    g.bench_function("service_10000_selects_only", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| place_service_timed(black_box(&s), black_box(&service), &service_alloc).1)
                .sum()
        })
    });
    g.throughput(Throughput::Elements(NODES));
    g.bench_function("system_10000_nodes", |b| {
        b.iter(|| place_system(black_box(&s), black_box(&system), &system_alloc))
    });
    g.bench_function("plan_only_10000_allocs", |b| {
        b.iter(|| plan_only(black_box(&service), &service_alloc))
    });
    g.finish();
}

criterion_group!(benches, stack);
criterion_main!(benches);
