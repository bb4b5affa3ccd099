//! State store benchmarks: snapshot cost at 10 vs 1,000,000 allocations (must be flat),
//! alloc upsert apply rate, encoded size per allocation, and memory per allocation at
//! 1,000,000 allocations (goal ≤ 1 KiB), measured with a counting global allocator.

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use drover_core::fsm::{self, Command};
use drover_core::mock;
use drover_core::state::StateStore;
use drover_core::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, Ordering};

/// Counts live heap bytes so memory per allocation can be measured, not estimated.
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// GlobalAlloc is an unsafe trait, so measuring memory needs this one local exception to the
// workspace's `unsafe_code = "deny"`. It only forwards to the system allocator.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const T0: Timestamp = Timestamp(1_700_000_000_000);
const NODES: u64 = 10_000;
const BATCH: u64 = 1_000;

/// A store with `allocs` running allocations spread over up to 10,000 nodes and 1 job per
/// 10 allocations, written through the FSM in plan-sized batches.
fn store_with(allocs: u64) -> StateStore {
    let mut s = StateStore::new();
    let mut index = 0;
    for n in 0..NODES.min(allocs.max(1)) {
        index += 1;
        fsm::apply(
            &mut s,
            index,
            &Command::NodeRegister {
                node: mock::node(n),
                now: T0,
            },
        )
        .unwrap();
    }
    let mut next = 0;
    while next < allocs {
        let batch: Vec<Allocation> = (next..(next + BATCH).min(allocs))
            .map(|i| {
                let job = mock::service_job(&format!("job-{}", i / 10), 10);
                mock::alloc(i, &job, mock::node_id(i % NODES), (i % 10) as u32)
            })
            .collect();
        next += batch.len() as u64;
        index += 1;
        fsm::apply(&mut s, index, &mock::place(mock::eval_id(index), batch, T0)).unwrap();
    }
    s
}

fn snapshot_cost(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot");
    for allocs in [10u64, 1_000_000] {
        let s = store_with(allocs);
        g.bench_with_input(BenchmarkId::from_parameter(allocs), &s, |b, s| {
            b.iter(|| black_box(s.snapshot()))
        });
    }
    g.finish();
}

fn apply_rate(c: &mut Criterion) {
    let mut g = c.benchmark_group("apply");
    g.throughput(Throughput::Elements(BATCH));
    let base = store_with(100_000);
    let job = mock::service_job("bench", BATCH as u32);
    let batch: Vec<Allocation> = (0..BATCH)
        .map(|i| mock::alloc(10_000_000 + i, &job, mock::node_id(i % NODES), i as u32))
        .collect();
    let cmd = mock::place(mock::eval_id(1), batch, T0);
    g.bench_function("alloc_upsert_1000_into_100k", |b| {
        b.iter_batched(
            || base.snapshot(),
            |mut s| {
                fsm::apply(&mut s, 1_000_000, &cmd).unwrap();
                s
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn footprint(_: &mut Criterion) {
    const N: u64 = 1_000_000;
    let before = LIVE.load(Ordering::Relaxed);
    let s = store_with(N);
    let after = LIVE.load(Ordering::Relaxed);
    let bytes = fsm::encode_snapshot(&s);
    let per_alloc_mem = (after - before) as f64 / N as f64;
    let per_alloc_enc = bytes.len() as f64 / N as f64;
    let one = fsm::encode_command(&mock::place(
        mock::eval_id(1),
        vec![s.allocs().next().unwrap().as_ref().clone()],
        T0,
    ));
    println!(
        "report: memory per allocation at {N} allocs on {NODES} nodes: {per_alloc_mem:.0} bytes (all tables and indexes)"
    );
    println!(
        "report: encoded snapshot per allocation: {per_alloc_enc:.0} bytes ({} MB total)",
        bytes.len() / 1_000_000
    );
    println!(
        "report: encoded single-alloc plan command: {} bytes",
        one.len()
    );
    black_box(s);
}

criterion_group!(benches, footprint, snapshot_cost, apply_rate);
criterion_main!(benches);
