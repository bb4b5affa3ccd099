//! State store benchmarks: snapshot cost at 10 vs 1,000,000 allocations (must be flat),
//! a restart's snapshot load (decode and rebuild every index) at 1,000,000 allocations,
//! alloc upsert apply rate, the cost of a node's status report into a million allocations
//! behind a reader's snapshot, encoded size per allocation, and memory per allocation at
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
    store_of_jobs(allocs, 10)
}

/// [`store_with`] with `per_job` allocations to each job.
fn store_of_jobs(allocs: u64, per_job: u64) -> StateStore {
    let mut s = StateStore::new();
    let mut index = 0;
    for n in 0..NODES.min(allocs.max(1)) {
        index += 1;
        fsm::apply(
            &mut s,
            index,
            Command::NodeRegister {
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
                let job = mock::service_job(&format!("job-{}", i / per_job), per_job as u32);
                mock::alloc(i, &job, mock::node_id(i % NODES), (i % per_job) as u32)
            })
            .collect();
        next += batch.len() as u64;
        index += 1;
        fsm::apply(&mut s, index, mock::place(mock::eval_id(index), batch, T0)).unwrap();
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

/// What a restarting server does with its snapshot file's bytes: decode the tables and
/// rebuild every index (issue 35: restart ≤ 3 s at a million allocations).
fn snapshot_load(c: &mut Criterion) {
    let mut g = c.benchmark_group("restore");
    g.sample_size(10);
    let bytes = fsm::encode_snapshot(&store_with(1_000_000));
    g.bench_function("decode_1m", |b| {
        b.iter(|| black_box(fsm::decode_snapshot(&bytes).unwrap()))
    });
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
    // Each run applies the command as the log hands it over: decoded, owning its
    // allocations.
    let encoded = fsm::encode_command(&cmd);
    g.bench_function("alloc_upsert_1000_into_100k", |b| {
        b.iter_batched(
            || (base.snapshot(), fsm::decode_command(&encoded).unwrap()),
            |(mut s, cmd)| {
                fsm::apply(&mut s, 1_000_000, cmd).unwrap();
                s
            },
            BatchSize::SmallInput,
        )
    });
    // A running report each for 1,000 placed allocations, each on its own node and job (the
    // costliest case: nothing shared between two writes), into a million
    // behind a live snapshot: the state a busy server's FSM writes into, where readers'
    // snapshots share every tree node so each first write copies its path.
    let base = store_with(1_000_000);
    let reports: Vec<Command> = base
        .allocs()
        .step_by(997)
        .take(1_000)
        .map(|a| Command::AllocClientUpdate {
            node_id: a.node_id,
            updates: vec![running_report(a.id)],
            evals: Vec::new(),
            now: T0,
        })
        .collect();
    g.bench_function("client_update_1000_into_1m", |b| {
        b.iter_batched(
            || (base.snapshot(), reports.clone()),
            |(mut s, reports)| {
                let mut index = s.latest_index();
                for cmd in reports {
                    index += 1;
                    fsm::apply(&mut s, index, cmd).unwrap();
                }
                s
            },
            BatchSize::SmallInput,
        )
    });
    // The same reports as the server's write coalescer groups them: one command of 1,000
    // nodes' parts, whose indexes change in one batch.
    let grouped = Command::AllocClientUpdates {
        nodes: reports
            .iter()
            .filter_map(|cmd| match cmd {
                Command::AllocClientUpdate {
                    node_id, updates, ..
                } => Some(fsm::NodeAllocUpdates {
                    node_id: *node_id,
                    updates: updates.clone(),
                    evals: Vec::new(),
                    services: Vec::new(),
                }),
                _ => None,
            })
            .collect(),
        now: T0,
    };
    g.bench_function("client_updates_1000_grouped_into_1m", |b| {
        b.iter_batched(
            || (base.snapshot(), grouped.clone()),
            |(mut s, grouped)| {
                let index = s.latest_index() + 1;
                fsm::apply(&mut s, index, grouped).unwrap();
                s
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// What a node reports once an allocation's one task runs: the status, a description and
/// the task's state with the two events an agent sends (received, started).
fn running_report(alloc: AllocId) -> fsm::AllocClientUpdate {
    let event = |kind: &str, message: &str| TaskEvent::new(T0, kind, message);
    let state = TaskState {
        state: TaskRunState::Running,
        failed: false,
        restarts: 0,
        started_at: Some(T0),
        finished_at: None,
        events: vec![
            event("Received", "task received by the simulator"),
            event("Started", "mock task started"),
        ],
        usage: None,
    };
    fsm::AllocClientUpdate {
        deployment_health: None,
        alloc_id: alloc,
        client_status: ClientStatus::Running,
        client_description: "Tasks are running".into(),
        task_states: [("server", state)].into_iter().collect(),
    }
}

/// Applies every allocation's running report, a node's worth per command as agents send
/// them (the store's allocations then look as they do on a live cluster).
fn report_running(s: &mut StateStore) {
    let mut by_node = std::collections::BTreeMap::<NodeId, Vec<AllocId>>::new();
    for a in s.allocs() {
        by_node.entry(a.node_id).or_default().push(a.id);
    }
    let mut index = s.latest_index();
    for (node_id, ids) in by_node {
        index += 1;
        let cmd = Command::AllocClientUpdate {
            node_id,
            updates: ids.into_iter().map(running_report).collect(),
            evals: Vec::new(),
            now: T0,
        };
        fsm::apply(s, index, cmd).unwrap();
    }
}

fn footprint(_: &mut Criterion) {
    const N: u64 = 1_000_000;
    let per_alloc = |bytes: isize| bytes as f64 / N as f64;
    let before = LIVE.load(Ordering::Relaxed);
    let mut s = store_with(N);
    let placed = LIVE.load(Ordering::Relaxed);
    let one = fsm::encode_command(&mock::place(
        mock::eval_id(1),
        vec![s.allocs().next().unwrap().as_ref().clone()],
        T0,
    ));
    let placed_snapshot = fsm::encode_snapshot(&s).len();
    report_running(&mut s);
    let running = LIVE.load(Ordering::Relaxed);
    let running_bytes = fsm::encode_snapshot(&s);
    let running_snapshot = running_bytes.len();
    // What a restarted server holds once it has loaded that snapshot: the same tables and
    // indexes, built from sorted input rather than write by write.
    let before_restore = LIVE.load(Ordering::Relaxed);
    let restored = fsm::decode_snapshot(&running_bytes).unwrap();
    let after_restore = LIVE.load(Ordering::Relaxed);
    drop(running_bytes);
    println!(
        "report: memory per allocation at {N} allocs on {NODES} nodes: {:.0} bytes placed, {:.0} bytes once each reports its task running (all tables and indexes)",
        per_alloc(placed - before),
        per_alloc(running - before),
    );
    println!(
        "report: memory per allocation after loading the running store's snapshot: {:.0} bytes",
        per_alloc(after_restore - before_restore),
    );
    println!(
        "report: encoded snapshot per allocation: {:.0} bytes placed ({} MB), {:.0} bytes running ({} MB)",
        per_alloc(placed_snapshot as isize),
        placed_snapshot / 1_000_000,
        per_alloc(running_snapshot as isize),
        running_snapshot / 1_000_000,
    );
    println!(
        "report: encoded single-alloc plan command: {} bytes",
        one.len()
    );
    black_box((s, restored));
    // Jobs of one allocation and of a thousand, beside the ten above: the per-job index
    // holds a small job's entries apart from a large one's.
    const SHAPE_N: u64 = 100_000;
    for per_job in [1, 1_000] {
        let before = LIVE.load(Ordering::Relaxed);
        let s = store_of_jobs(SHAPE_N, per_job);
        let placed = LIVE.load(Ordering::Relaxed);
        println!(
            "report: memory per allocation at {SHAPE_N} allocs in jobs of {per_job}: {:.0} bytes placed",
            (placed - before) as f64 / SHAPE_N as f64,
        );
        black_box(s);
    }
}

criterion_group!(benches, footprint, snapshot_cost, snapshot_load, apply_rate);
criterion_main!(benches);
