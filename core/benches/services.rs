//! The service catalog's cost on the FSM's write path: a batch of nodes' running reports
//! applied into a store that already holds 100,000 registrations, with and without each
//! report carrying its allocation's registration (one service, one check), as the
//! `services` scenario of `drover bench` has the simulated nodes write them. The two
//! should differ by little more than the registrations' own inserts.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use drover_core::fsm::{self, AllocClientUpdate, AllocServices, Command, NodeAllocUpdates};
use drover_core::mock;
use drover_core::state::StateStore;
use drover_core::*;

const T0: Timestamp = Timestamp(1_700_000_000_000);
const NODES: u64 = 10_000;
/// Registrations in the store before the measured batch, 100 per service.
const REGISTERED: u64 = 100_000;
/// Allocations per job, and so instances per service.
const PER_JOB: u64 = 100;
/// Reports in the measured batch: one allocation each, on as many nodes.
const BATCH: u64 = 1_000;

fn job_of(i: u64) -> Job {
    mock::service_job(&format!("job-{}", i / PER_JOB), PER_JOB as u32)
}

/// The registration a simulated node writes for allocation `i`: one group service with
/// one tcp check, passing.
fn registration(i: u64, node_id: NodeId) -> ServiceRegistration {
    let service_name = format!("{}-svc", job_of(i).id);
    ServiceRegistration {
        id: ServiceRegistration::make_id(mock::alloc_id(i), None, 0),
        checks: vec![CheckState {
            name: format!("service: {service_name:?} check"),
            check_type: CheckType::Tcp,
            status: CheckStatus::Passing,
            output: String::new(),
            http_status: None,
            time: T0,
        }],
        service_name,
        namespace: DEFAULT_NAMESPACE.into(),
        job_id: job_of(i).id.to_string(),
        alloc_id: mock::alloc_id(i),
        node_id,
        task: None,
        address: Some(mock::node_address(i % NODES)),
        port: 20_000 + (i % 10_000) as u16,
        tags: Vec::new(),
        health: ServiceHealth::Passing,
        create_index: 0,
        modify_index: 0,
    }
}

/// A running report of allocation `i`, carrying its registration when `services`.
fn report(i: u64, services: bool) -> NodeAllocUpdates {
    let node_id = mock::node_id(i % NODES);
    NodeAllocUpdates {
        node_id,
        updates: vec![AllocClientUpdate {
            alloc_id: mock::alloc_id(i),
            client_status: ClientStatus::Running,
            client_description: "tasks are running".into(),
            task_states: Default::default(),
            deployment_health: None,
        }],
        evals: Vec::new(),
        services: if services {
            vec![AllocServices {
                alloc_id: mock::alloc_id(i),
                registrations: vec![registration(i, node_id)],
            }]
        } else {
            Vec::new()
        },
    }
}

/// A store of 10,000 nodes and `REGISTERED + BATCH` placed allocations, the first
/// `REGISTERED` of them running with their registration (when `services`), written in
/// coalesced entries of 1,000 reports.
fn store(services: bool) -> StateStore {
    let mut s = StateStore::new();
    let mut index = 0;
    for n in 0..NODES {
        index += 1;
        let node = Command::NodeRegister {
            node: mock::node(n),
            now: T0,
        };
        fsm::apply(&mut s, index, node).unwrap();
    }
    let total = REGISTERED + BATCH;
    for from in (0..total).step_by(1_000) {
        let allocs = (from..(from + 1_000).min(total))
            .map(|i| {
                mock::alloc(
                    i,
                    &job_of(i),
                    mock::node_id(i % NODES),
                    (i % PER_JOB) as u32,
                )
            })
            .collect();
        index += 1;
        fsm::apply(&mut s, index, mock::place(mock::eval_id(index), allocs, T0)).unwrap();
    }
    for from in (0..REGISTERED).step_by(1_000) {
        index += 1;
        let nodes = (from..from + 1_000).map(|i| report(i, services)).collect();
        fsm::apply(
            &mut s,
            index,
            Command::AllocClientUpdates { nodes, now: T0 },
        )
        .unwrap();
    }
    s
}

fn client_updates(c: &mut Criterion) {
    let mut g = c.benchmark_group("apply");
    g.throughput(Throughput::Elements(BATCH));
    g.sample_size(20);
    let batch = |services: bool| Command::AllocClientUpdates {
        nodes: (REGISTERED..REGISTERED + BATCH)
            .map(|i| report(i, services))
            .collect(),
        now: T0,
    };
    for (name, registered, services) in [
        ("client_updates_1000_no_catalog", false, false),
        ("client_updates_1000_beside_100k_registrations", true, false),
        ("client_updates_1000_registering_into_100k", true, true),
    ] {
        let base = store(registered);
        let cmd = batch(services);
        g.bench_function(name, |b| {
            b.iter_batched(
                || (base.snapshot(), cmd.clone()),
                |(mut s, cmd)| {
                    let index = s.latest_index() + 1;
                    fsm::apply(&mut s, index, cmd).unwrap();
                    s
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, client_updates);
criterion_main!(benches);
