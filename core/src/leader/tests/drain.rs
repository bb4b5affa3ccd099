//! The drainer played through whole drains: the engine marks, a stand-in scheduler stops
//! what is marked and places its replacement, clients report, and time moves.

use super::*;

/// What a drain test looks at: the marks and completions the engine wrote.
impl Sim {
    fn drain(&mut self, n: u64, deadline: Option<Duration>, force: bool, ignore_system: bool) {
        self.write(Command::NodeDrain {
            node_id: mock::node_id(n),
            drain: Some(DrainStrategy {
                deadline,
                force,
                ignore_system_jobs: ignore_system,
                started_at: self.now,
            }),
            now: self.now,
            evals: vec![],
        });
    }

    fn place_on(&mut self, job: &Job, alloc_n: u64, node_n: u64, index: u32) {
        let job = self.store.snapshot().job(&job.key()).cloned().unwrap();
        let alloc = mock::alloc(alloc_n, &job, mock::node_id(node_n), index);
        self.write(mock::place(mock::eval_id(0), vec![alloc], self.now));
    }

    /// Allocations marked to move that are still wanted running.
    fn marked(&self) -> Vec<AllocId> {
        self.store
            .snapshot()
            .allocs()
            .filter(|a| a.links.get().migrate && !a.is_terminal())
            .map(|a| a.id)
            .collect()
    }

    /// What the scheduler does with marked allocations: stops each and places its
    /// replacement (pending) on node `to`; returns the replacements.
    fn move_marked(&mut self, to: u64, next_alloc: &mut u64) -> Vec<AllocId> {
        let snap = self.store.snapshot();
        let mut placed = Vec::new();
        for id in self.marked() {
            let old = snap.alloc(&id).unwrap().clone();
            let mut new = (*old).clone();
            new.id = mock::alloc_id(*next_alloc);
            *next_alloc += 1;
            new.node_id = mock::node_id(to);
            new.client_status = ClientStatus::Pending;
            new.links = Links::new(AllocLinks {
                previous_allocation: Some(id),
                ..AllocLinks::default()
            });
            new.state_history = Default::default();
            self.stop_and_place(old.node_id, id, Some(new));
            placed.push(mock::alloc_id(*next_alloc - 1));
        }
        placed
    }

    /// One plan: `stop` on `node` is stopped (migrated) and `place` placed; then the
    /// node's client reports `stop` complete.
    fn stop_and_place(&mut self, node: NodeId, stop: AllocId, place: Option<Allocation>) {
        let mut node_allocation = std::collections::BTreeMap::<NodeId, Vec<Arc<Allocation>>>::new();
        if let Some(a) = place {
            node_allocation.entry(a.node_id).or_default().push(a.into());
        }
        let node_update: std::collections::BTreeMap<NodeId, Vec<AllocTransition>> = [(
            node,
            vec![AllocTransition::stop(stop, "alloc is being migrated")],
        )]
        .into();
        self.write(Command::ApplyPlan {
            plan: crate::fsm::PlanApply {
                deployment: None,
                deployment_updates: Vec::new(),
                eval_id: mock::eval_id(0),
                job: None,
                node_allocation: node_allocation.into(),
                node_update: node_update.into(),
                node_preemptions: Default::default(),
                evals: Vec::new(),
            },
            now: self.now,
        });
        self.report(stop, ClientStatus::Complete);
    }

    /// The client of `alloc`'s node reports it `status`.
    fn report(&mut self, alloc: AllocId, status: ClientStatus) {
        let node_id = self.store.snapshot().alloc(&alloc).unwrap().node_id;
        self.write(Command::AllocClientUpdate {
            node_id,
            updates: vec![crate::fsm::AllocClientUpdate {
                deployment_health: None,
                alloc_id: alloc,
                client_status: status,
                client_description: Default::default(),
                task_states: Default::default(),
            }],
            evals: vec![],
            now: self.now,
        });
    }

    /// Moves the clock by `d` in steps of at most 5 s, the four nodes heartbeating at each.
    fn pass_time(&mut self, d: Duration) {
        let until = self.now.saturating_add(d);
        while self.now < until {
            let step = until.since(self.now).min(SEC * 5);
            self.advance(step);
            for n in 1..=4 {
                self.heartbeat(n);
            }
        }
    }

    fn drain_completions(&self) -> usize {
        self.decided
            .iter()
            .filter(|c| matches!(c, Command::NodeDrainComplete { .. }))
            .count()
    }
}

/// A cluster of four healthy nodes.
fn cluster() -> Sim {
    let mut sim = Sim::leading();
    for n in 1..=4 {
        sim.healthy_node(n);
    }
    sim
}

#[test]
fn a_drain_moves_a_group_max_parallel_at_a_time_each_replacement_healthy_first() {
    for max_parallel in [1u32, 2] {
        let mut sim = cluster();
        let mut web = mock::service_job("web", 3);
        web.groups[0].migrate.max_parallel = max_parallel;
        sim.register_job(&web, 1);
        sim.place_on(&web, 1, 1, 0);
        sim.place_on(&web, 2, 1, 1);
        sim.place_on(&web, 3, 2, 2);
        sim.pass_time(SEC * 11);
        sim.drain(1, None, false, false);
        assert_eq!(
            sim.marked().len(),
            max_parallel as usize,
            "max_parallel {max_parallel}"
        );
        assert_eq!(sim.marked()[0], mock::alloc_id(1), "the lowest slot first");
        let mut next = 10;
        let replacements = sim.move_marked(3, &mut next);
        assert!(sim.marked().is_empty());
        if max_parallel == 2 {
            assert_eq!(
                sim.node(1).drain,
                None,
                "both moved at once: the drain is done"
            );
            continue;
        }
        // The replacement runs, but is not healthy until min_healthy_time (10 s) passes.
        sim.report(replacements[0], ClientStatus::Running);
        sim.pass_time(SEC * 5);
        assert!(sim.marked().is_empty(), "not healthy yet");
        sim.pass_time(SEC * 6);
        assert_eq!(
            sim.marked(),
            vec![mock::alloc_id(2)],
            "the next one, once healthy"
        );
        assert!(sim.node(1).drain.is_some(), "not done while one is left");
        sim.move_marked(4, &mut next);
        let node = sim.node(1);
        assert_eq!(node.drain, None, "done by itself once nothing is left");
        assert_eq!(
            node.eligibility,
            Eligibility::Ineligible,
            "and stays ineligible"
        );
        assert!(
            node.events
                .last()
                .unwrap()
                .message
                .contains("drain complete")
        );
        assert_eq!(sim.drain_completions(), 1);
    }
}

#[test]
fn batch_work_finishes_unless_the_deadline_comes_first() {
    let mut sim = cluster();
    let batch = mock::batch_job("report", 1);
    let web = mock::service_job("web", 1);
    sim.register_job(&batch, 1);
    sim.register_job(&web, 2);
    sim.place_on(&batch, 1, 1, 0);
    sim.place_on(&web, 2, 1, 0);
    sim.pass_time(SEC * 11);
    sim.drain(1, Some(SEC * 60), false, false);
    // count 1, max_parallel 1: the one service allocation may move at once.
    assert_eq!(sim.marked(), vec![mock::alloc_id(2)]);
    let mut next = 10;
    sim.move_marked(2, &mut next);
    sim.pass_time(SEC * 30);
    assert!(
        sim.marked().is_empty(),
        "batch work is left to finish before the deadline"
    );
    sim.pass_time(SEC * 31);
    assert_eq!(
        sim.marked(),
        vec![mock::alloc_id(1)],
        "the deadline moves what is left"
    );
    sim.move_marked(2, &mut next);
    assert_eq!(sim.node(1).drain, None);
}

#[test]
fn system_allocations_move_last_and_never_when_spared() {
    for ignore_system in [false, true] {
        let mut sim = cluster();
        let web = mock::service_job("web", 1);
        let agent = mock::system_job("agent");
        sim.register_job(&web, 1);
        sim.register_job(&agent, 2);
        sim.place_on(&web, 1, 1, 0);
        sim.place_on(&agent, 2, 1, 0);
        sim.pass_time(SEC * 11);
        sim.drain(1, None, false, ignore_system);
        assert_eq!(sim.marked(), vec![mock::alloc_id(1)], "the service first");
        let mut next = 10;
        sim.move_marked(2, &mut next);
        if ignore_system {
            assert!(sim.marked().is_empty(), "a spared system allocation stays");
            assert_eq!(sim.node(1).drain, None, "and does not hold the drain open");
            let live = sim
                .store
                .snapshot()
                .alloc(&mock::alloc_id(2))
                .unwrap()
                .clone();
            assert!(!live.is_terminal());
        } else {
            assert_eq!(sim.marked(), vec![mock::alloc_id(2)], "then the system one");
            let evals_before = sim.live_evals("agent");
            assert!(evals_before >= 1, "the system job gets an eval to move it");
            sim.stop_and_place(mock::node_id(1), mock::alloc_id(2), None);
            assert_eq!(sim.node(1).drain, None);
        }
    }
}

#[test]
fn force_moves_everything_at_once() {
    let mut sim = cluster();
    let mut web = mock::service_job("web", 3);
    web.groups[0].migrate.max_parallel = 1;
    let batch = mock::batch_job("report", 1);
    let agent = mock::system_job("agent");
    for (i, job) in [&web, &batch, &agent].into_iter().enumerate() {
        sim.register_job(job, i as u64 + 1);
    }
    sim.place_on(&web, 1, 1, 0);
    sim.place_on(&web, 2, 1, 1);
    sim.place_on(&batch, 3, 1, 0);
    sim.place_on(&agent, 4, 1, 0);
    sim.drain(1, None, true, false);
    let mut marked = sim.marked();
    marked.sort();
    assert_eq!(marked, (1..=4).map(mock::alloc_id).collect::<Vec<_>>());
}

#[test]
fn a_new_leader_resumes_a_drain_and_a_mark_being_written_is_not_made_twice() {
    let mut sim = cluster();
    let web = mock::service_job("web", 2);
    sim.register_job(&web, 1);
    sim.place_on(&web, 1, 1, 0);
    sim.place_on(&web, 2, 1, 1);
    sim.pass_time(SEC * 11);
    // The drain is written while no leader decides (the leader that wrote it fell over).
    sim.engine.revoke();
    sim.drain(1, None, false, false);
    assert!(sim.marked().is_empty(), "no leader, no marks");

    // The pure decision: one of the two may move; not while its mark is being written.
    let snap = sim.store.snapshot();
    let draining: std::collections::BTreeSet<NodeId> = [mock::node_id(1)].into();
    let fresh = drain_plan(&snap, &draining, &Default::default(), sim.now);
    let first = vec![mock::alloc_id(1)];
    assert_eq!(fresh.migrate.get(&web.key()), Some(&first));
    let writing: std::collections::BTreeSet<AllocId> = first.iter().copied().collect();
    let again = drain_plan(&snap, &draining, &writing, sim.now);
    assert!(
        again.migrate.is_empty(),
        "a mark being written counts as made: {again:?}"
    );

    sim.lead();
    sim.pass_time(Duration::from_millis(1));
    assert_eq!(sim.marked(), first, "the new leader picks the drain up");
}

impl Sim {
    /// The client of `alloc`'s node reports it running with one service registration whose
    /// checks are `health`.
    fn report_service(&mut self, alloc: AllocId, health: ServiceHealth) {
        let node_id = self.store.snapshot().alloc(&alloc).unwrap().node_id;
        let registration = ServiceRegistration {
            id: ServiceRegistration::make_id(alloc, None, 0),
            service_name: "web".into(),
            namespace: String::new(),
            job_id: String::new(),
            alloc_id: alloc,
            node_id,
            task: None,
            address: None,
            port: 0,
            tags: Vec::new(),
            health,
            checks: Vec::new(),
            create_index: 0,
            modify_index: 0,
        };
        self.write(Command::AllocClientUpdates {
            nodes: vec![crate::fsm::NodeAllocUpdates {
                node_id,
                updates: vec![crate::fsm::AllocClientUpdate {
                    deployment_health: None,
                    alloc_id: alloc,
                    client_status: ClientStatus::Running,
                    client_description: Default::default(),
                    task_states: Default::default(),
                }],
                evals: vec![],
                services: vec![crate::fsm::AllocServices {
                    alloc_id: alloc,
                    registrations: vec![registration],
                }],
            }],
            now: self.now,
        });
    }
}

#[test]
fn with_migrate_health_check_checks_a_replacement_must_pass_its_checks_first() {
    for health_check in [HealthCheck::Checks, HealthCheck::TaskStates] {
        let mut sim = cluster();
        let mut web = mock::service_job("web", 2);
        web.groups[0].migrate.health_check = health_check;
        sim.register_job(&web, 1);
        sim.place_on(&web, 1, 1, 0);
        sim.place_on(&web, 2, 1, 1);
        sim.pass_time(SEC * 11);
        sim.drain(1, None, false, false);
        assert_eq!(sim.marked(), vec![mock::alloc_id(1)]);
        let mut next = 10;
        let replacement = sim.move_marked(3, &mut next)[0];
        sim.report_service(replacement, ServiceHealth::Critical);
        sim.pass_time(SEC * 11);
        if health_check == HealthCheck::TaskStates {
            assert_eq!(
                sim.marked(),
                vec![mock::alloc_id(2)],
                "task states: running long enough is healthy"
            );
            continue;
        }
        assert!(
            sim.marked().is_empty(),
            "running 11 s, but its check fails: the drain waits"
        );
        // Healthy time counts from the report that made the checks pass.
        sim.report_service(replacement, ServiceHealth::Passing);
        sim.pass_time(SEC * 9);
        assert!(sim.marked().is_empty(), "passing for 9 s of 10");
        sim.pass_time(SEC * 2);
        assert_eq!(
            sim.marked(),
            vec![mock::alloc_id(2)],
            "the next one, once the replacement's checks passed for min_healthy_time"
        );
    }
}
