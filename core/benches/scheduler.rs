//! Scheduler benchmarks (issue goals): place a service job of count 10,000 on 10,000 nodes
//! (≥ 200,000 placements/s single-threaded), a system job across 10,000 nodes (≤ 20 ms), and
//! reconcile a 10,000-allocation job with nothing to do (≤ 2 ms). Each run goes through the
//! whole scheduler: reconcile, stack, plan checks and the FSM write of the plan.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use drover_core::fsm::{self, Command};
use drover_core::mock;
use drover_core::scheduler::reconcile;
use drover_core::scheduler::testing::Harness;
use drover_core::state::StateStore;
use drover_core::*;
use rand::SeedableRng;
use std::hint::black_box;

const T0: Timestamp = Timestamp(1_700_000_000_000);
const NODES: u64 = 10_000;

fn cluster() -> StateStore {
    let mut s = StateStore::new();
    for n in 0..NODES {
        let node = mock::node(n);
        fsm::apply(&mut s, n + 1, &Command::NodeRegister { node, now: T0 }).unwrap();
    }
    s
}

/// The state with `job` registered, and the eval to process.
fn registered(base: &StateStore, job: &Job) -> (StateStore, Evaluation) {
    let mut s = base.snapshot();
    let eval = mock::eval(1, job);
    let cmd = Command::JobRegister {
        job: job.clone(),
        eval: Some(eval.clone()),
        now: T0,
    };
    fsm::apply(&mut s, base.latest_index() + 1, &cmd).unwrap();
    let eval = (**s.eval(&eval.id).unwrap()).clone();
    (s, eval)
}

fn service_10k(c: &mut Criterion) {
    let base = cluster();
    let job = mock::service_job("web", 10_000);
    let (state, eval) = registered(&base, &job);
    let mut g = c.benchmark_group("scheduler");
    g.sample_size(10);
    g.throughput(Throughput::Elements(10_000));
    g.bench_function("service_10000_on_10000_nodes", |b| {
        b.iter_batched(
            || Harness::from_state(&state, T0),
            |mut h| {
                h.process(&eval, 1).unwrap();
                assert_eq!(h.state.alloc_count(), 10_000);
                h
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn system_10k(c: &mut Criterion) {
    let base = cluster();
    let job = mock::system_job("sys");
    let (state, eval) = registered(&base, &job);
    let mut g = c.benchmark_group("scheduler");
    g.sample_size(10);
    g.bench_function("system_on_10000_nodes", |b| {
        b.iter_batched(
            || Harness::from_state(&state, T0),
            |mut h| {
                h.process(&eval, 1).unwrap();
                assert_eq!(h.state.alloc_count(), 10_000);
                h
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn reconcile_noop_10k(c: &mut Criterion) {
    let base = cluster();
    let job = mock::service_job("web", 10_000);
    let (state, eval) = registered(&base, &job);
    let mut h = Harness::from_state(&state, T0);
    h.process(&eval, 1).unwrap();
    let settled = h.state.snapshot();
    let key = job.key();
    let mut g = c.benchmark_group("scheduler");
    g.bench_function("reconcile_10000_allocs_nothing_to_do", |b| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        b.iter(|| {
            let r = reconcile::reconcile(&settled, &key, &eval, T0, &mut rng);
            assert!(r.place.is_empty() && r.updates.is_empty());
            black_box(r)
        })
    });
    g.finish();
}

criterion_group!(benches, service_10k, system_10k, reconcile_noop_10k);
criterion_main!(benches);
