//! Property tests of the state store and FSM under random command sequences:
//! earlier snapshots never change, the same commands give the same encoded state, snapshot
//! encode -> decode -> encode is byte-identical, and derived indexes match a recount
//! (the service catalog's by-name and by-allocation indexes included, under random
//! registrations, replacements and removals).

use drover_core::fsm::{
    self, AllocClientUpdate, AllocServices, Command, NodeAllocUpdates, PlanApply,
};
use drover_core::mock;
use drover_core::state::StateStore;
use drover_core::*;
use proptest::prelude::*;

const T0: Timestamp = Timestamp(1_700_000_000_000);

#[derive(Clone, Debug)]
enum Op {
    RegisterNode(u64),
    NodeStatus(u64, u8),
    Offline(u64),
    Online(u64),
    Drain(u64, bool),
    DeregisterNode(u64),
    RegisterJob(u8, u32),
    DeregisterJob(u8, bool),
    UpsertEval(u64, u8, u8),
    CancelEval(u64),
    Place(u64, u8, u64),
    ClientUpdate(u64, u64, u8),
    Transition(u64, u8),
    Delete(u64, u64),
    /// Node, allocation, which of its three possible registrations it reports (a bit
    /// each), their service name and health, and the allocation's new client status.
    Register(u64, u64, u8, u8, u8),
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..4u64).prop_map(Op::RegisterNode),
        (0..4u64, 0..4u8).prop_map(|(n, s)| Op::NodeStatus(n, s)),
        (0..4u64).prop_map(Op::Offline),
        (0..4u64).prop_map(Op::Online),
        (0..4u64, any::<bool>()).prop_map(|(n, d)| Op::Drain(n, d)),
        (0..4u64).prop_map(Op::DeregisterNode),
        (0..3u8, 1..5u32).prop_map(|(j, c)| Op::RegisterJob(j, c)),
        (0..3u8, any::<bool>()).prop_map(|(j, p)| Op::DeregisterJob(j, p)),
        (0..8u64, 0..3u8, 0..5u8).prop_map(|(e, j, s)| Op::UpsertEval(e, j, s)),
        (0..8u64).prop_map(Op::CancelEval),
        (0..16u64, 0..3u8, 0..4u64).prop_map(|(a, j, n)| Op::Place(a, j, n)),
        (0..4u64, 0..16u64, 0..6u8).prop_map(|(n, a, s)| Op::ClientUpdate(n, a, s)),
        (0..16u64, 0..4u8).prop_map(|(a, k)| Op::Transition(a, k)),
        (0..8u64, 0..16u64).prop_map(|(e, a)| Op::Delete(e, a)),
        (0..4u64, 0..16u64, 0..8u8, 0..3u8, 0..6u8)
            .prop_map(|(n, a, which, name, s)| Op::Register(n, a, which, name, s)),
        Just(Op::Snapshot),
    ]
}

fn job(j: u8, count: u32) -> Job {
    let types = [JobType::Service, JobType::Batch, JobType::System];
    let mut job = mock::job_of(&format!("job-{j}"), types[j as usize % 3], count);
    if job.job_type == JobType::System {
        job.groups[0].count = 1;
    }
    job
}

/// Turns an op into a command against the current store (so placements reference real
/// jobs most of the time), or `None` for a snapshot marker.
fn command(store: &StateStore, op: &Op) -> Option<Command> {
    let node_id = mock::node_id;
    Some(match op {
        Op::RegisterNode(n) => Command::NodeRegister {
            node: mock::node(*n),
            now: T0,
        },
        Op::NodeStatus(n, s) => Command::NodeStatus {
            node_id: node_id(*n),
            status: [
                NodeStatus::Initializing,
                NodeStatus::Ready,
                NodeStatus::Down,
                NodeStatus::Disconnected,
            ][*s as usize],
            description: String::new(),
            now: T0,
            evals: vec![],
        },
        Op::Offline(n) => Command::NodeOffline {
            node_id: node_id(*n),
            now: T0,
            evals: vec![],
        },
        Op::Online(n) => Command::NodeOnline {
            node_id: node_id(*n),
            now: T0,
            evals: vec![],
        },
        Op::Drain(n, on) => Command::NodeDrain {
            node_id: node_id(*n),
            drain: on.then(|| DrainStrategy {
                deadline: None,
                force: false,
                ignore_system_jobs: false,
                started_at: T0,
            }),
            now: T0,
            evals: vec![],
        },
        Op::DeregisterNode(n) => Command::NodeDeregister {
            node_ids: vec![node_id(*n)],
            now: T0,
        },
        Op::RegisterJob(j, c) => {
            let job = job(*j, *c);
            Command::JobRegister {
                eval: Some(mock::eval(100 + *j as u64, &job)),
                job,
                now: T0,
            }
        }
        Op::DeregisterJob(j, purge) => Command::JobDeregister {
            job: JobKey::default_ns(format!("job-{j}")),
            purge: *purge,
            eval: None,
            now: T0,
        },
        Op::UpsertEval(e, j, s) => {
            let mut eval = mock::eval(*e, &job(*j, 1));
            eval.status = EvalStatus::ALL[*s as usize % EvalStatus::ALL.len()];
            eval.queued_allocations.insert("web".into(), *s as u32);
            Command::EvalUpsert { evals: vec![eval] }
        }
        Op::CancelEval(e) => Command::EvalCancel {
            eval_ids: vec![mock::eval_id(*e)],
            reason: "test".into(),
            now: T0,
        },
        Op::Place(a, j, n) => {
            let job = store
                .job(&JobKey::default_ns(format!("job-{j}")))
                .map(|j| (**j).clone())
                .unwrap_or_else(|| job(*j, 1));
            let mut alloc = mock::alloc(*a, &job, node_id(*n), *a as u32 % 4);
            alloc.client_status = ClientStatus::Pending;
            alloc.eval_id = mock::eval_id(*a % 8);
            // Ports that sometimes coincide, so the port index sees two holders of one
            // port (which only the plan applier prevents) and must still agree.
            alloc.ports = (0..*a % 3)
                .map(|i| AllocatedPort {
                    label: format!("p{i}").into(),
                    value: 20_000 + ((*a + i) % 4) as u16,
                    to: 0,
                    host_ip: std::net::IpAddr::from([10, 0, 0, *n as u8]),
                })
                .collect();
            mock::place(alloc.eval_id, vec![alloc], T0)
        }
        Op::ClientUpdate(n, a, s) => Command::AllocClientUpdate {
            node_id: node_id(*n),
            updates: vec![AllocClientUpdate {
                deployment_health: None,
                alloc_id: mock::alloc_id(*a),
                client_status: ClientStatus::ALL[*s as usize],
                client_description: Default::default(),
                task_states: Default::default(),
            }],
            evals: vec![],
            now: T0,
        },
        Op::Transition(a, k) => {
            let id = mock::alloc_id(*a);
            let node = store.alloc(&id).map(|a| a.node_id).unwrap_or(node_id(0));
            let mut t = AllocTransition::stop(id, "test");
            match k {
                0 => {}
                1 => t.client_status = Some(ClientStatus::Lost),
                2 => {
                    t.desired_status = DesiredStatus::Run;
                    t.client_status = Some(ClientStatus::Unknown);
                }
                _ => t.desired_status = DesiredStatus::Evict,
            }
            Command::ApplyPlan {
                plan: PlanApply {
                    deployment: None,
                    deployment_updates: Vec::new(),
                    eval_id: mock::eval_id(0),
                    job: None,
                    node_allocation: Default::default(),
                    node_update: std::sync::Arc::new([(node, vec![t])].into()),
                    node_preemptions: Default::default(),
                    evals: vec![],
                },
                now: T0,
            }
        }
        Op::Delete(e, a) => Command::EvalDelete {
            eval_ids: vec![mock::eval_id(*e)],
            alloc_ids: vec![mock::alloc_id(*a)],
        },
        Op::Register(n, a, which, name, s) => {
            let alloc_id = mock::alloc_id(*a);
            let owners = [(None, 0), (None, 1), (Some("server"), 0)];
            let registrations = owners
                .iter()
                .enumerate()
                .filter(|(i, _)| which & (1 << i) != 0)
                .map(|(_, (task, index))| registration(alloc_id, *task, *index, *name, *s))
                .collect();
            // Running most of the time, so most registrations are kept and listed.
            let status = match s {
                0..=3 => ClientStatus::Running,
                _ => ClientStatus::ALL[*s as usize],
            };
            Command::AllocClientUpdates {
                nodes: vec![NodeAllocUpdates {
                    node_id: node_id(*n),
                    updates: vec![AllocClientUpdate {
                        deployment_health: None,
                        alloc_id,
                        client_status: status,
                        client_description: Default::default(),
                        task_states: Default::default(),
                    }],
                    evals: vec![],
                    services: vec![AllocServices {
                        alloc_id,
                        registrations,
                    }],
                }],
                now: T0,
            }
        }
        Op::Snapshot => return None,
    })
}

/// A registration of `alloc` as an agent reports it, named from a small set so that
/// services share names across allocations.
fn registration(
    alloc: AllocId,
    task: Option<&str>,
    index: usize,
    name: u8,
    health: u8,
) -> ServiceRegistration {
    let health = [
        ServiceHealth::Passing,
        ServiceHealth::Warning,
        ServiceHealth::Critical,
    ][health as usize % 3];
    ServiceRegistration {
        id: ServiceRegistration::make_id(alloc, task, index),
        service_name: format!("svc-{name}"),
        namespace: String::new(),
        job_id: String::new(),
        alloc_id: alloc,
        node_id: mock::node_id(0),
        task: task.map(str::to_owned),
        address: None,
        port: 8_000 + index as u16,
        tags: vec![format!("t{name}")],
        health,
        checks: vec![CheckState {
            name: "alive".into(),
            check_type: CheckType::Tcp,
            status: health.into(),
            output: String::new(),
            http_status: None,
            time: T0,
        }],
        create_index: 0,
        modify_index: 0,
    }
}

/// Runs the ops, checking invariants after every step; returns the store and the commands.
fn run(ops: &[Op]) -> Result<(StateStore, Vec<Command>), TestCaseError> {
    let mut store = StateStore::new();
    let mut commands = Vec::new();
    let mut snapshots: Vec<(StateStore, Vec<u8>)> = Vec::new();
    for op in ops {
        let Some(cmd) = command(&store, op) else {
            let snap = store.snapshot();
            let bytes = fsm::encode_snapshot(&snap);
            snapshots.push((snap, bytes));
            continue;
        };
        let bytes = fsm::encode_command(&cmd);
        prop_assert_eq!(&fsm::decode_command(&bytes).unwrap(), &cmd);
        let before = fsm::encode_snapshot(&store);
        let index = commands.len() as u64 + 1;
        // Applied from a copy that shares the command's allocations, as the leader's own
        // plans are; the replay below applies each decoded, owning them, as a restart does.
        match fsm::apply(&mut store, index, cmd.clone()) {
            Ok(_) => {}
            Err(_) => prop_assert_eq!(
                fsm::encode_snapshot(&store),
                before,
                "a refused command changed the store"
            ),
        }
        commands.push(cmd);
        if let Err(e) = store.check_consistency() {
            return Err(TestCaseError::fail(format!("after {op:?}: {e}")));
        }
    }
    for (snap, bytes) in &snapshots {
        prop_assert_eq!(
            &fsm::encode_snapshot(snap),
            bytes,
            "an earlier snapshot changed"
        );
    }
    Ok((store, commands))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn snapshots_never_change_and_indexes_stay_consistent(ops in prop::collection::vec(op(), 1..80)) {
        run(&ops)?;
    }

    #[test]
    fn same_commands_give_same_encoded_state(ops in prop::collection::vec(op(), 1..80)) {
        let (a, commands) = run(&ops)?;
        let mut b = StateStore::new();
        for (i, cmd) in commands.iter().enumerate() {
            let decoded = fsm::decode_command(&fsm::encode_command(cmd)).unwrap();
            let _ = fsm::apply(&mut b, i as u64 + 1, decoded);
        }
        prop_assert_eq!(fsm::encode_snapshot(&a), fsm::encode_snapshot(&b));
    }

    #[test]
    fn snapshot_encode_decode_encode_is_byte_identical(ops in prop::collection::vec(op(), 1..80)) {
        let (store, _) = run(&ops)?;
        let bytes = fsm::encode_snapshot(&store);
        let decoded = fsm::decode_snapshot(&bytes).unwrap();
        prop_assert_eq!(fsm::encode_snapshot(&decoded), bytes);
        prop_assert!(decoded.check_consistency().is_ok());
        prop_assert_eq!(decoded.latest_index(), store.latest_index());
        prop_assert_eq!(decoded.table_indexes(), store.table_indexes());
        for job in store.jobs() {
            let key = job.key();
            let (mut x, mut y) = ((**store.job_summary(&key).unwrap()).clone(), (**decoded.job_summary(&key).unwrap()).clone());
            x.modify_index = 0;
            y.modify_index = 0;
            prop_assert_eq!(x, y);
        }
    }
}

/// Found by the properties: an allocation written again onto another node must not keep
/// the registrations its old node reported.
#[test]
fn an_allocation_moved_to_another_node_drops_its_old_registrations() {
    let ops = [
        Op::RegisterNode(3),
        Op::Place(2, 0, 3),
        Op::Register(3, 2, 1, 0, 0),
        Op::Place(2, 0, 0),
    ];
    let (store, _) = run(&ops).unwrap();
    assert_eq!(store.alloc_services(mock::alloc_id(2)).count(), 0);
}

/// A restore past the size that builds its indexes on two threads gives the same store as
/// the writes that made it (`check_consistency` rebuilds from the tables and compares).
#[test]
fn a_large_restore_on_two_threads_rebuilds_the_same_indexes() {
    let mut store = StateStore::new();
    let mut index = 0;
    let mut apply = |store: &mut StateStore, cmd: Command| {
        index += 1;
        fsm::apply(store, index, cmd).expect("applied");
    };
    // Nodes 0..90 registered; 90..100 named by allocations only.
    for n in 0..90 {
        apply(
            &mut store,
            Command::NodeRegister {
                node: mock::node(n),
                now: T0,
            },
        );
    }
    let jobs: Vec<Job> = (0..3).map(|j| job(j, 1)).collect();
    for j in &jobs {
        apply(
            &mut store,
            Command::JobRegister {
                job: j.clone(),
                eval: None,
                now: T0,
            },
        );
    }
    let total = 60_000u64;
    for batch in 0..total / 1_000 {
        let allocs = (batch * 1_000..(batch + 1) * 1_000)
            .map(|i| {
                // A fourth job that was never registered: its summary comes from its
                // allocations alone.
                let job = jobs
                    .get(i as usize % 4)
                    .cloned()
                    .unwrap_or_else(|| job(3, 1));
                let mut a = mock::alloc(i, &job, mock::node_id(i % 100), i as u32 % 4);
                if i % 7 == 0 {
                    a.ports = [AllocatedPort {
                        label: "p0".into(),
                        value: 20_000 + (i % 1_000) as u16,
                        to: 0,
                        host_ip: std::net::IpAddr::from([10, 0, 0, (i % 100) as u8]),
                    }]
                    .into_iter()
                    .collect();
                }
                a
            })
            .collect();
        apply(&mut store, mock::place(mock::eval_id(batch), allocs, T0));
    }
    assert_eq!(store.alloc_count(), total as usize);
    store.check_consistency().expect("the rebuilt store agrees");
    let back = fsm::decode_snapshot(&fsm::encode_snapshot(&store)).expect("decodes");
    assert_eq!(
        fsm::encode_snapshot(&back),
        fsm::encode_snapshot(&store),
        "the restored store encodes as the original"
    );
    back.check_consistency()
        .expect("the restored store is consistent");
}
