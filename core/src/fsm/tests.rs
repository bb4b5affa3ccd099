//! One test per command: its effect on the store and the events it emits.

use super::*;
use crate::mock;
use crate::state::{StateStore, Table};
use crate::types::*;
use std::sync::Arc;

const T0: Timestamp = Timestamp(1_700_000_000_000);

/// Applies `setup` at indexes 1.., then `cmd` at the next index; returns the store, the
/// events of `cmd` as (topic, type, key) and the index `cmd` was applied at. Every step
/// must leave the store consistent.
fn check(setup: &[Command], cmd: Command) -> (StateStore, Vec<(Topic, EventType, String)>, Index) {
    let mut store = StateStore::new();
    let mut index = 0;
    for c in setup {
        index += 1;
        apply(&mut store, index, c.clone())
            .unwrap_or_else(|e| panic!("setup {} failed: {e}", c.kind()));
        store.check_consistency().unwrap();
    }
    index += 1;
    let kind = cmd.kind();
    let events = apply(&mut store, index, cmd).unwrap_or_else(|e| panic!("{kind} failed: {e}"));
    store.check_consistency().unwrap();
    assert!(
        events.iter().all(|e| e.index == index),
        "every event carries the command's index"
    );
    let events = events
        .into_iter()
        .map(|e| (e.topic, e.event_type, e.key))
        .collect();
    (store, events, index)
}

fn register_node(n: u64) -> Command {
    Command::NodeRegister {
        node: mock::node(n),
        now: T0,
    }
}

fn register_job(job: &Job, eval_n: u64) -> Command {
    Command::JobRegister {
        job: job.clone(),
        eval: Some(mock::eval(eval_n, job)),
        now: T0,
    }
}

fn keys(job: &Job) -> JobKey {
    job.key()
}

#[test]
fn node_register_creates_then_keeps_operator_state() {
    let id = mock::node_id(1);
    let (s, ev, idx) = check(&[], register_node(1));
    let n = s.node(&id).unwrap();
    assert_eq!((n.create_index, n.modify_index), (idx, idx));
    assert_eq!(n.events.last().unwrap().message, "node registered");
    assert_eq!(
        ev,
        vec![(Topic::Node, EventType::NodeRegistration, id.to_string())]
    );

    let offline = Command::NodeOffline {
        node_id: id,
        now: T0,
        evals: vec![],
    };
    let (s, _, idx) = check(&[register_node(1), offline], register_node(1));
    let n = s.node(&id).unwrap();
    assert_eq!(n.create_index, 1, "re-registration keeps the create index");
    assert_eq!(n.modify_index, idx);
    assert_eq!(
        n.health,
        NodeHealth::Offlined,
        "an agent restart does not undo an offline"
    );
}

/// Node 2 registered under node 1's name, after `setup`: refused while node 1 is live.
#[test]
fn a_live_node_name_is_not_taken_twice() {
    let named = |n: u64, name: &str| {
        let mut node = mock::node(n);
        node.name = name.into();
        Command::NodeRegister { node, now: T0 }
    };
    let down = Command::NodeStatus {
        node_id: mock::node_id(1),
        status: NodeStatus::Down,
        description: "missed heartbeats".into(),
        now: T0,
        evals: vec![],
    };
    let rows: Vec<(&str, Vec<Command>, Command, bool)> = vec![
        (
            "another live node has it",
            vec![named(1, "web-1")],
            named(2, "web-1"),
            false,
        ),
        (
            "the same node again",
            vec![named(1, "web-1")],
            named(1, "web-1"),
            true,
        ),
        (
            "the first is down",
            vec![named(1, "web-1"), down.clone()],
            named(2, "web-1"),
            true,
        ),
        (
            "the first was renamed",
            vec![named(1, "web-1"), named(1, "web-9")],
            named(2, "web-1"),
            true,
        ),
        (
            "another name",
            vec![named(1, "web-1")],
            named(2, "web-2"),
            true,
        ),
    ];
    for (name, setup, cmd, ok) in rows {
        let mut store = StateStore::new();
        for (i, c) in setup.iter().enumerate() {
            apply(&mut store, i as u64 + 1, c.clone()).expect("setup");
        }
        let got = apply(&mut store, setup.len() as u64 + 1, cmd);
        store.check_consistency().expect("consistent");
        match (got, ok) {
            (Ok(_), true) => {}
            (
                Err(ApplyError::NodeNameInUse {
                    name: n,
                    existing,
                    status,
                }),
                false,
            ) => {
                assert_eq!(
                    (n.as_str(), existing, status.as_str()),
                    ("web-1", mock::node_id(1), "ready"),
                    "{name}"
                );
                assert!(
                    store.node(&mock::node_id(2)).is_none(),
                    "{name}: nothing written"
                );
            }
            (other, _) => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn node_commands_change_one_field_each_and_are_idempotent() {
    let id = mock::node_id(1);
    let drain = DrainStrategy {
        deadline: Some(mock::SEC),
        force: false,
        ignore_system_jobs: false,
        started_at: T0,
    };
    let cases: Vec<(&str, Command, fn(&Node) -> bool)> = vec![
        (
            "status",
            Command::NodeStatus {
                node_id: id,
                status: NodeStatus::Down,
                description: "missed heartbeats".into(),
                now: T0,
                evals: vec![],
            },
            |n| n.status == NodeStatus::Down,
        ),
        (
            "eligibility",
            Command::NodeEligibility {
                node_id: id,
                eligibility: Eligibility::Ineligible,
                now: T0,
                evals: vec![],
            },
            |n| n.eligibility == Eligibility::Ineligible,
        ),
        (
            "drain",
            Command::NodeDrain {
                node_id: id,
                drain: Some(drain),
                now: T0,
                evals: vec![],
            },
            |n| n.drain.is_some() && n.eligibility == Eligibility::Ineligible,
        ),
        (
            "offline",
            Command::NodeOffline {
                node_id: id,
                now: T0,
                evals: vec![],
            },
            |n| n.health == NodeHealth::Offlined,
        ),
        (
            "health",
            Command::NodeHealth {
                node_id: id,
                health: NodeHealth::Suspended(SuspendReason::Flaky),
                now: T0,
                evals: vec![],
            },
            |n| {
                n.health == NodeHealth::Suspended(SuspendReason::Flaky) && n.last_snapshot.is_none()
            },
        ),
        (
            "snapshot",
            Command::NodeSnapshot {
                node_id: id,
                snapshot: Some("snap-1".into()),
                now: T0,
            },
            |n| n.last_snapshot.as_deref() == Some("snap-1"),
        ),
    ];
    for (name, cmd, holds) in cases {
        let (s, ev, idx) = check(&[register_node(1)], cmd.clone());
        let n = s.node(&id).unwrap();
        assert!(holds(n), "{name}: change not applied: {n:?}");
        assert_eq!(n.modify_index, idx, "{name}");
        assert_eq!(ev.len(), 1, "{name}: one node event");
        // Applying the same command again changes nothing and emits nothing.
        let (s2, ev2, _) = check(&[register_node(1), cmd.clone()], cmd);
        assert!(ev2.is_empty(), "{name}: repeat emitted {ev2:?}");
        assert_eq!(
            s2.node(&id).unwrap().modify_index,
            idx,
            "{name}: repeat bumped the index"
        );
    }
}

#[test]
fn node_online_returns_to_healthy_only_when_ready() {
    let id = mock::node_id(1);
    let offline = Command::NodeOffline {
        node_id: id,
        now: T0,
        evals: vec![],
    };
    let online = Command::NodeOnline {
        node_id: id,
        now: T0,
        evals: vec![],
    };
    let (s, _, _) = check(&[register_node(1), offline.clone()], online.clone());
    assert_eq!(s.node(&id).unwrap().health, NodeHealth::Healthy);

    let down = Command::NodeStatus {
        node_id: id,
        status: NodeStatus::Initializing,
        description: String::new(),
        now: T0,
        evals: vec![],
    };
    let (s, _, _) = check(&[register_node(1), down, offline], online.clone());
    assert_eq!(
        s.node(&id).unwrap().health,
        NodeHealth::Suspended(SuspendReason::New)
    );

    let (_, ev, _) = check(&[register_node(1)], online);
    assert!(
        ev.is_empty(),
        "online of a node that is not offlined is a no-op"
    );
}

#[test]
fn node_drain_end_makes_node_eligible() {
    let id = mock::node_id(1);
    let drain = DrainStrategy {
        deadline: None,
        force: true,
        ignore_system_jobs: false,
        started_at: T0,
    };
    let start = Command::NodeDrain {
        node_id: id,
        drain: Some(drain),
        now: T0,
        evals: vec![],
    };
    let end = Command::NodeDrain {
        node_id: id,
        drain: None,
        now: T0,
        evals: vec![],
    };
    let (s, _, _) = check(&[register_node(1), start], end);
    let n = s.node(&id).unwrap();
    assert!(n.drain.is_none());
    assert_eq!(n.eligibility, Eligibility::Eligible);
}

#[test]
fn node_commands_on_missing_node_are_refused_and_change_nothing() {
    let id = mock::node_id(9);
    let job = mock::service_job("web", 1);
    let cmds = [
        Command::NodeStatus {
            node_id: id,
            status: NodeStatus::Down,
            description: String::new(),
            now: T0,
            evals: vec![mock::eval(1, &job)],
        },
        Command::NodeOffline {
            node_id: id,
            now: T0,
            evals: vec![],
        },
        Command::AllocClientUpdate {
            node_id: id,
            updates: vec![],
            evals: vec![],
            now: T0,
        },
    ];
    for cmd in cmds {
        let mut s = StateStore::new();
        apply(&mut s, 1, register_node(1)).unwrap();
        let before = encode_snapshot(&s);
        let kind = cmd.kind();
        let err = apply(&mut s, 2, cmd).unwrap_err();
        assert_eq!(err, ApplyError::NodeNotFound(id));
        assert_eq!(err.to_string(), format!("node {id} not found"));
        assert_eq!(encode_snapshot(&s), before, "{kind} changed the store");
    }
}

#[test]
fn node_deregister_removes_nodes() {
    let cmd = Command::NodeDeregister {
        node_ids: vec![mock::node_id(1), mock::node_id(7)],
        now: T0,
    };
    let (s, ev, _) = check(&[register_node(1), register_node(2)], cmd);
    assert!(s.node(&mock::node_id(1)).is_none());
    assert_eq!(s.node_count(), 1);
    assert_eq!(
        ev,
        vec![(
            Topic::Node,
            EventType::NodeDeregistration,
            mock::node_id(1).to_string()
        )]
    );
}

#[test]
fn job_register_writes_job_and_eval_in_one_entry() {
    let job = mock::service_job("web", 3);
    let (s, ev, idx) = check(&[], register_job(&job, 1));
    let j = s.job(&keys(&job)).unwrap();
    assert_eq!(
        (j.version, j.create_index, j.job_modify_index, j.status),
        (0, idx, idx, JobStatus::Pending)
    );
    assert_eq!(j.submit_time, T0);
    let e = s.eval(&mock::eval_id(1)).unwrap();
    assert_eq!((e.create_index, e.job_modify_index), (idx, idx));
    assert_eq!(s.evals_by_job(&keys(&job)).count(), 1);
    assert_eq!(
        ev,
        vec![
            (Topic::Job, EventType::JobRegistered, "web".into()),
            (
                Topic::Evaluation,
                EventType::EvaluationUpdated,
                mock::eval_id(1).to_string()
            ),
        ]
    );
    assert_eq!(s.job_versions(&keys(&job)).len(), 1);
}

#[test]
fn job_register_bumps_version_only_when_the_spec_changes() {
    let job = mock::service_job("web", 3);
    let (s, _, _) = check(&[register_job(&job, 1)], register_job(&job, 2));
    let j = s.job(&keys(&job)).unwrap();
    assert_eq!(
        (j.version, j.job_modify_index),
        (0, 1),
        "same spec, same version"
    );

    let mut changed = job.clone();
    changed.groups[0].count = 5;
    let (s, _, idx) = check(&[register_job(&job, 1)], register_job(&changed, 2));
    let j = s.job(&keys(&job)).unwrap();
    assert_eq!((j.version, j.job_modify_index, j.create_index), (1, idx, 1));
    let versions = s.job_versions(&keys(&job));
    assert_eq!(
        versions.iter().map(|v| v.version).collect::<Vec<_>>(),
        vec![1, 0]
    );
    assert_eq!(s.job_version(&keys(&job), 0).unwrap().groups[0].count, 3);
}

#[test]
fn job_versions_keep_only_the_newest_six() {
    let mut setup = Vec::new();
    for count in 1..=9 {
        setup.push(register_job(&mock::service_job("web", count), count as u64));
    }
    let (s, _, _) = check(&setup, register_job(&mock::service_job("web", 10), 10));
    let versions: Vec<u64> = s
        .job_versions(&JobKey::default_ns("web"))
        .iter()
        .map(|j| j.version)
        .collect();
    assert_eq!(versions, vec![9, 8, 7, 6, 5, 4]);
}

#[test]
fn job_deregister_stops_or_purges() {
    let job = mock::service_job("web", 1);
    let stop = Command::JobDeregister {
        job: keys(&job),
        purge: false,
        eval: Some(mock::eval(2, &job)),
        now: T0,
    };
    let (s, ev, _) = check(&[register_job(&job, 1)], stop);
    let j = s.job(&keys(&job)).unwrap();
    assert!(j.stop);
    assert_eq!(j.version, 1);
    assert_eq!(
        ev[0],
        (Topic::Job, EventType::JobDeregistered, "web".into())
    );

    let purge = Command::JobDeregister {
        job: keys(&job),
        purge: true,
        eval: Some(mock::eval(2, &job)),
        now: T0,
    };
    let (s, _, _) = check(&[register_job(&job, 1)], purge);
    assert!(s.job(&keys(&job)).is_none());
    assert!(s.job_versions(&keys(&job)).is_empty());
    assert!(
        s.job_summary(&keys(&job)).is_some(),
        "the summary stays while evals refer to the job"
    );

    let missing = Command::JobDeregister {
        job: JobKey::default_ns("nope"),
        purge: true,
        eval: None,
        now: T0,
    };
    assert!(matches!(
        apply(&mut StateStore::new(), 1, missing),
        Err(ApplyError::JobNotFound(_))
    ));
}

#[test]
fn plan_apply_places_and_indexes_allocations() {
    let job = mock::service_job("web", 2);
    let n1 = mock::node_id(1);
    let allocs = vec![mock::alloc(1, &job, n1, 0), mock::alloc(2, &job, n1, 1)];
    let setup = [register_node(1), register_job(&job, 1)];
    let (s, ev, idx) = check(&setup, mock::place(mock::eval_id(1), allocs, T0));
    assert_eq!(s.allocs_by_node(&n1).count(), 2);
    assert_eq!(s.allocs_by_job(&keys(&job)).count(), 2);
    assert_eq!(s.node_usage(&n1), Resources::new(200, 512, 0));
    let a = s.alloc(&mock::alloc_id(1)).unwrap();
    assert_eq!(
        (a.create_index, a.modify_index, a.alloc_modify_index),
        (idx, idx, idx)
    );
    let summary = s.job_summary(&keys(&job)).unwrap();
    assert_eq!(summary.groups["web"].running, 2);
    assert_eq!(s.job(&keys(&job)).unwrap().status, JobStatus::Running);
    assert_eq!(
        ev.iter().filter(|e| e.1 == EventType::PlanResult).count(),
        2
    );
    assert!(ev.contains(&(Topic::Job, EventType::JobStatusChanged, "web".into())));
    assert_eq!(s.table_index(Table::Allocs), idx);
}

#[test]
fn plan_apply_transitions_record_state_history_and_free_capacity() {
    let job = mock::service_job("web", 1);
    let n1 = mock::node_id(1);
    let setup = [
        register_node(1),
        register_job(&job, 1),
        mock::place(mock::eval_id(1), vec![mock::alloc(1, &job, n1, 0)], T0),
    ];
    let mut unknown = AllocTransition::stop(mock::alloc_id(1), "node disconnected");
    unknown.desired_status = DesiredStatus::Run;
    unknown.client_status = Some(ClientStatus::Unknown);
    unknown.follow_up_eval_id = Some(mock::eval_id(5));
    let cmd = Command::ApplyPlan {
        plan: PlanApply {
            deployment: None,
            deployment_updates: Vec::new(),
            eval_id: mock::eval_id(2),
            job: Some(keys(&job)),
            node_allocation: Default::default(),
            node_update: std::sync::Arc::new([(n1, vec![unknown])].into()),
            node_preemptions: Default::default(),
            evals: vec![],
        },
        now: T0,
    };
    let (s, _, _) = check(&setup, cmd);
    let a = s.alloc(&mock::alloc_id(1)).unwrap();
    assert_eq!(a.client_status, ClientStatus::Unknown);
    assert_eq!(a.last_state(), Some(ClientStatus::Unknown));
    assert_eq!(a.links.get().follow_up_eval_id, Some(mock::eval_id(5)));
    assert_eq!(
        s.node_usage(&n1),
        Resources::new(100, 256, 0),
        "an unknown alloc still holds its resources"
    );

    let stop = Command::ApplyPlan {
        plan: PlanApply {
            deployment: None,
            deployment_updates: Vec::new(),
            eval_id: mock::eval_id(2),
            job: Some(keys(&job)),
            node_allocation: Default::default(),
            node_update: std::sync::Arc::new(
                [(
                    n1,
                    vec![AllocTransition::stop(mock::alloc_id(1), "job stopped")],
                )]
                .into(),
            ),
            node_preemptions: Default::default(),
            evals: vec![],
        },
        now: T0,
    };
    let (s, _, _) = check(&setup, stop);
    assert_eq!(
        s.node_usage(&n1),
        Resources::ZERO,
        "a stop frees capacity for planning at once"
    );
    assert_eq!(
        s.job(&keys(&job)).unwrap().status,
        JobStatus::Pending,
        "no live allocation, but the registration eval is still open"
    );
}

#[test]
fn plan_apply_in_place_update_keeps_client_view_and_links_replacements() {
    let job = mock::service_job("web", 1);
    let n1 = mock::node_id(1);
    let mut placed = mock::alloc(1, &job, n1, 0);
    placed.client_status = ClientStatus::Pending;
    let running = Command::AllocClientUpdate {
        node_id: n1,
        updates: vec![AllocClientUpdate {
            deployment_health: None,
            alloc_id: placed.id,
            client_status: ClientStatus::Running,
            client_description: "up".into(),
            task_states: Default::default(),
        }],
        evals: vec![],
        now: T0,
    };
    let setup = [
        register_node(1),
        register_job(&job, 1),
        mock::place(mock::eval_id(1), vec![placed.clone()], T0),
        running,
    ];
    let mut updated = placed.clone();
    updated.job_version = 1;
    let mut replacement = mock::alloc(2, &job, n1, 0);
    replacement
        .links
        .update(|l| l.previous_allocation = Some(placed.id));
    let (s, _, _) = check(
        &setup,
        mock::place(mock::eval_id(2), vec![updated, replacement], T0),
    );
    let a = s.alloc(&placed.id).unwrap();
    assert_eq!(a.job_version, 1);
    assert_eq!(
        a.client_status,
        ClientStatus::Running,
        "the scheduler's stale pending does not win"
    );
    assert_eq!(a.create_index, 3);
    assert_eq!(a.links.get().next_allocation, Some(mock::alloc_id(2)));
}

/// Every allocation a plan writes, and every version a report writes after it, points at
/// its job's key strings as the store shares them, even when the plan arrives decoded from
/// the log (each allocation with its own copies) and its allocations change job midway.
#[test]
fn written_allocations_share_their_jobs_key_strings() {
    let (web, api) = (mock::service_job("web", 2), mock::service_job("api", 2));
    let n1 = mock::node_id(1);
    let mut replacement = mock::alloc(5, &web, n1, 0);
    replacement
        .links
        .update(|l| l.previous_allocation = Some(mock::alloc_id(1)));
    let plan = mock::place(
        mock::eval_id(3),
        vec![
            mock::alloc(3, &web, n1, 1),
            mock::alloc(4, &api, n1, 1),
            replacement,
        ],
        T0,
    );
    let setup = [
        register_node(1),
        register_job(&web, 1),
        register_job(&api, 2),
        decode_command(&encode_command(&mock::place(
            mock::eval_id(1),
            vec![mock::alloc(1, &web, n1, 0), mock::alloc(2, &api, n1, 0)],
            T0,
        )))
        .unwrap(),
        decode_command(&encode_command(&plan)).unwrap(),
    ];
    let report = Command::AllocClientUpdate {
        node_id: n1,
        updates: (1..=5)
            .map(|n| AllocClientUpdate {
                deployment_health: None,
                alloc_id: mock::alloc_id(n),
                client_status: ClientStatus::Running,
                client_description: "running".into(),
                task_states: Default::default(),
            })
            .collect(),
        evals: vec![],
        now: T0,
    };
    let (s, _, _) = check(&setup, report);
    assert_eq!(s.allocs().count(), 5);
    for a in s.allocs() {
        let shared = s.shared_job_key(&a.job_key()).expect("a summary");
        assert!(
            Arc::ptr_eq(&a.namespace, &shared.namespace) && Arc::ptr_eq(&a.job_id.0, &shared.id.0),
            "allocation {} of {} keeps its own key strings",
            a.id,
            a.job_id
        );
        assert_eq!(a.client_status, ClientStatus::Running);
        let expected = if [2, 4].map(mock::alloc_id).contains(&a.id) {
            &api
        } else {
            &web
        };
        assert_eq!(a.job_id, expected.id, "allocation {}", a.id);
    }
}

#[test]
fn alloc_client_update_applies_only_to_own_and_non_terminal_allocs() {
    let job = mock::batch_job("batch", 2);
    let (n1, n2) = (mock::node_id(1), mock::node_id(2));
    let setup = [
        register_node(1),
        register_node(2),
        register_job(&job, 1),
        mock::place(
            mock::eval_id(1),
            vec![mock::alloc(1, &job, n1, 0), mock::alloc(2, &job, n2, 1)],
            T0,
        ),
    ];
    let upd = |id, status| AllocClientUpdate {
        deployment_health: None,
        alloc_id: id,
        client_status: status,
        client_description: Default::default(),
        task_states: Default::default(),
    };
    let cmd = Command::AllocClientUpdate {
        node_id: n1,
        updates: vec![
            upd(mock::alloc_id(1), ClientStatus::Complete),
            upd(mock::alloc_id(2), ClientStatus::Failed),
        ],
        evals: vec![],
        now: T0,
    };
    let (s, ev, _) = check(&setup, cmd.clone());
    assert_eq!(
        s.alloc(&mock::alloc_id(1)).unwrap().client_status,
        ClientStatus::Complete
    );
    assert_eq!(
        s.alloc(&mock::alloc_id(2)).unwrap().client_status,
        ClientStatus::Running,
        "node 1 cannot update node 2's alloc"
    );
    assert_eq!(ev.iter().filter(|e| e.0 == Topic::Allocation).count(), 1);
    assert!(
        s.alloc(&mock::alloc_id(1))
            .unwrap()
            .state_history
            .is_empty(),
        "client updates do not write server history"
    );

    let mut setup2 = setup.to_vec();
    setup2.push(cmd);
    let back = Command::AllocClientUpdate {
        node_id: n1,
        updates: vec![upd(mock::alloc_id(1), ClientStatus::Running)],
        evals: vec![],
        now: T0,
    };
    let (s, ev, _) = check(&setup2, back);
    assert_eq!(
        s.alloc(&mock::alloc_id(1)).unwrap().client_status,
        ClientStatus::Complete,
        "terminal is final"
    );
    assert!(ev.is_empty());
}

/// A report replaces the allocation's client status, description and, when it carries
/// any, task states; a report without task states keeps the stored ones, and nothing else
/// of the allocation changes but its modify index and time.
#[test]
fn a_report_replaces_only_what_it_carries() {
    const LATER: Timestamp = Timestamp(T0.0 + 5);
    let job = mock::batch_job("batch", 1);
    let n1 = mock::node_id(1);
    let placed = mock::place(mock::eval_id(1), vec![mock::alloc(1, &job, n1, 0)], T0);
    let report = |status, description: &str, task_states| Command::AllocClientUpdate {
        node_id: n1,
        updates: vec![AllocClientUpdate {
            deployment_health: None,
            alloc_id: mock::alloc_id(1),
            client_status: status,
            client_description: description.into(),
            task_states,
        }],
        evals: vec![],
        now: LATER,
    };
    let mut states = TaskStates::new();
    states.insert(
        "work",
        TaskState {
            state: TaskRunState::Running,
            events: vec![TaskEvent::new(T0, "Started", "task started")],
            ..TaskState::default()
        },
    );
    let (before, _, _) = check(&[register_node(1), register_job(&job, 1)], placed.clone());
    let before = (**before.alloc(&mock::alloc_id(1)).unwrap()).clone();
    let setup = [register_node(1), register_job(&job, 1), placed];
    let first = report(ClientStatus::Running, "running", states.clone());
    let (s, _, idx) = check(&setup, first.clone());
    let after = s.alloc(&mock::alloc_id(1)).unwrap();
    assert_eq!(after.task_states, states);
    let mut expected = before.clone();
    expected.client_status = ClientStatus::Running;
    expected.client_description = "running".into();
    expected.task_states = states.clone();
    expected.modify_index = idx;
    expected.modify_time = LATER;
    assert_eq!(**after, expected);

    let mut setup2 = setup.to_vec();
    setup2.push(first);
    let (s, _, _) = check(
        &setup2,
        report(ClientStatus::Complete, "done", TaskStates::new()),
    );
    let after = s.alloc(&mock::alloc_id(1)).unwrap();
    assert_eq!(
        after.task_states, states,
        "a report without task states keeps them"
    );
    assert_eq!(
        (after.client_status, after.client_description.as_str()),
        (ClientStatus::Complete, "done")
    );
}

/// A coalesced entry of several nodes' reports changes state exactly as the nodes'
/// separate reports would, and a part whose node is gone is skipped, not the whole entry.
#[test]
fn coalesced_client_updates_apply_each_part_as_its_own_report() {
    let job = mock::batch_job("batch", 2);
    let (n1, n2) = (mock::node_id(1), mock::node_id(2));
    let setup = [
        register_node(1),
        register_node(2),
        register_job(&job, 1),
        mock::place(
            mock::eval_id(1),
            vec![mock::alloc(1, &job, n1, 0), mock::alloc(2, &job, n2, 1)],
            T0,
        ),
    ];
    let upd = |id, status| AllocClientUpdate {
        deployment_health: None,
        alloc_id: id,
        client_status: status,
        client_description: "done".into(),
        task_states: Default::default(),
    };
    let part = |node_id, alloc, status| NodeAllocUpdates {
        node_id,
        updates: vec![upd(mock::alloc_id(alloc), status)],
        evals: vec![],
        services: vec![],
    };
    let parts = vec![
        part(n1, 1, ClientStatus::Complete),
        // Node 9 was never registered: its part is skipped.
        part(mock::node_id(9), 2, ClientStatus::Failed),
        // Node 1 cannot update node 2's allocation, as in its own report.
        part(n1, 2, ClientStatus::Failed),
        part(n2, 2, ClientStatus::Running),
    ];
    let (batched, events, _) = check(
        &setup,
        Command::AllocClientUpdates {
            nodes: parts.clone(),
            now: T0,
        },
    );
    assert_eq!(
        events.iter().filter(|e| e.0 == Topic::Allocation).count(),
        2
    );

    let mut one_by_one = StateStore::new();
    let mut index = 0;
    for c in &setup {
        index += 1;
        apply(&mut one_by_one, index, c.clone()).unwrap();
    }
    index += 1;
    for p in parts {
        let _ = apply(
            &mut one_by_one,
            index,
            Command::AllocClientUpdate {
                node_id: p.node_id,
                updates: p.updates,
                evals: p.evals,
                now: T0,
            },
        );
    }
    assert_eq!(batched.to_parts(), one_by_one.to_parts());
    assert_eq!(
        batched.alloc(&mock::alloc_id(1)).unwrap().client_status,
        ClientStatus::Complete
    );

    let cmd = Command::AllocClientUpdates {
        nodes: vec![part(n1, 1, ClientStatus::Complete)],
        now: T0,
    };
    assert_eq!(decode_command(&encode_command(&cmd)).unwrap(), cmd);
}

#[test]
fn eval_cancel_and_delete() {
    let job = mock::service_job("web", 1);
    let mut e2 = mock::eval(2, &job);
    e2.status = EvalStatus::Complete;
    let setup = [
        register_job(&job, 1),
        Command::EvalUpsert { evals: vec![e2] },
    ];
    let cancel = Command::EvalCancel {
        eval_ids: vec![mock::eval_id(1), mock::eval_id(2), mock::eval_id(9)],
        reason: "superseded".into(),
        now: T0,
    };
    let (s, ev, _) = check(&setup, cancel);
    let e1 = s.eval(&mock::eval_id(1)).unwrap();
    assert_eq!(
        (e1.status, e1.status_description.as_str()),
        (EvalStatus::Canceled, "superseded")
    );
    assert_eq!(
        s.eval(&mock::eval_id(2)).unwrap().status,
        EvalStatus::Complete,
        "terminal evals are not re-cancelled"
    );
    assert_eq!(ev.iter().filter(|e| e.0 == Topic::Evaluation).count(), 1);
    assert_eq!(s.job(&keys(&job)).unwrap().status, JobStatus::Dead);

    let delete = Command::EvalDelete {
        eval_ids: vec![mock::eval_id(1), mock::eval_id(2)],
        alloc_ids: vec![],
    };
    let (s, ev, _) = check(&setup, delete);
    assert_eq!(s.eval_count(), 0);
    assert_eq!(
        ev.iter()
            .filter(|e| e.1 == EventType::EvaluationDeleted)
            .count(),
        2
    );
}

#[test]
fn eval_upsert_keeps_create_index_and_feeds_queued_counts() {
    let job = mock::service_job("web", 3);
    let mut e = mock::eval(1, &job);
    e.status = EvalStatus::Blocked;
    e.queued_allocations.insert("web".into(), 3);
    let (s, _, idx) = check(
        &[register_job(&job, 1)],
        Command::EvalUpsert { evals: vec![e] },
    );
    let e = s.eval(&mock::eval_id(1)).unwrap();
    assert_eq!((e.create_index, e.modify_index), (1, idx));
    assert_eq!(s.job_summary(&keys(&job)).unwrap().groups["web"].queued, 3);
}

#[test]
fn scheduler_config_compare_and_set() {
    let cfg = SchedulerConfig {
        algorithm: SchedulerAlgorithm::Spread,
        ..Default::default()
    };
    let (s, ev, idx) = check(
        &[],
        Command::SchedulerConfig {
            config: cfg.clone(),
            cas_index: Some(0),
        },
    );
    assert_eq!(s.scheduler_config().algorithm, SchedulerAlgorithm::Spread);
    assert_eq!(s.scheduler_config().modify_index, idx);
    assert_eq!(
        ev,
        vec![(
            Topic::Operator,
            EventType::SchedulerConfigUpdated,
            "scheduler".into()
        )]
    );
    let mut s = s;
    let err = apply(
        &mut s,
        idx + 1,
        Command::SchedulerConfig {
            config: cfg,
            cas_index: Some(0),
        },
    )
    .unwrap_err();
    assert_eq!(
        err,
        ApplyError::CasMismatch {
            expected: 0,
            actual: idx
        }
    );
}

#[test]
fn codec_round_trips_and_refuses_foreign_bytes() {
    let job = mock::service_job("web", 1);
    let cmd = register_job(&job, 1);
    let bytes = encode_command(&cmd);
    assert_eq!(decode_command(&bytes).unwrap(), cmd);
    let mut future = bytes.clone();
    future[2] = COMMAND_FORMAT + 1;
    let err = decode_command(&future).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "command format version {} is not supported (this build reads {COMMAND_FORMAT}); \
             it was written by a newer drover: run that version",
            COMMAND_FORMAT + 1
        )
    );
    // A log an older drover wrote is refused with what to do about it.
    let mut older = bytes.clone();
    older[2] = COMMAND_FORMAT - 1;
    let err = decode_command(&older).unwrap_err().to_string();
    assert!(err.contains("written by an older drover"), "{err}");
    assert!(err.contains("start with a fresh data dir"), "{err}");
    assert!(
        decode_command(b"xx")
            .unwrap_err()
            .to_string()
            .starts_with("not a drover command")
    );
    assert!(
        decode_command(&bytes[..bytes.len() - 3])
            .unwrap_err()
            .to_string()
            .starts_with("malformed command")
    );
    assert!(
        decode_snapshot(&bytes).is_err(),
        "a command is not a snapshot"
    );
}

/// Snapshots are encoded from the live store's tables without copying them; the bytes
/// are exactly those of the copied-out parts, so older servers read them and a restore
/// gives back the same store.
#[test]
fn snapshots_encoded_in_place_are_the_copied_parts_byte_for_byte() {
    let job = mock::service_job("web", 3);
    let mut s = StateStore::new();
    apply(&mut s, 1, register_node(1)).unwrap();
    apply(&mut s, 2, register_node(2)).unwrap();
    apply(&mut s, 3, register_job(&job, 1)).unwrap();
    apply(
        &mut s,
        4,
        mock::place(
            mock::eval_id(1),
            (0..3)
                .map(|i| mock::alloc(i, &job, mock::node_id(1 + i % 2), i as u32))
                .collect(),
            T0,
        ),
    )
    .unwrap();
    let mut copied = vec![b'd', b's', super::codec::SNAPSHOT_FORMAT];
    copied = postcard::to_extend(&(s.to_parts(), s.acl_parts()), copied).unwrap();
    let bytes = encode_snapshot(&s);
    assert_eq!(bytes, copied);
    let back = decode_snapshot(&bytes).unwrap();
    assert_eq!(back.to_parts(), s.to_parts());
    let mut streamed = Vec::new();
    super::encode_snapshot_to(&s, &mut streamed).unwrap();
    assert_eq!(streamed, bytes, "streamed and buffered encodings differ");
}

/// A writer that takes `room` bytes, then fails the way a full disk does.
struct FullAfter {
    room: usize,
}

impl std::io::Write for FullAfter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.room == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "no space left on device",
            ));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_streamed_snapshot_reports_the_writers_own_error() {
    let job = mock::service_job("web", 3);
    let mut s = StateStore::new();
    apply(&mut s, 1, register_node(1)).unwrap();
    apply(&mut s, 2, register_job(&job, 1)).unwrap();
    for room in [0, 2, 40] {
        let e = super::encode_snapshot_to(&s, FullAfter { room }).unwrap_err();
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::StorageFull,
            "room {room}: {e}"
        );
    }
}

#[test]
fn snapshots_do_not_change_after_later_writes() {
    let job = mock::service_job("web", 1);
    let mut s = StateStore::new();
    apply(&mut s, 1, register_node(1)).unwrap();
    let snap = s.snapshot();
    let before = encode_snapshot(&snap);
    apply(&mut s, 2, register_job(&job, 1)).unwrap();
    apply(
        &mut s,
        3,
        mock::place(
            mock::eval_id(1),
            vec![mock::alloc(1, &job, mock::node_id(1), 0)],
            T0,
        ),
    )
    .unwrap();
    assert_eq!(encode_snapshot(&snap), before);
    assert_eq!(snap.latest_index(), 1);
    assert_eq!(s.latest_index(), 3);
}

/// A heartbeat that brings a node `ready` and `healthy` writes two commands; the jobs it
/// makes evals for get one each, on the last write, whatever each command carried.
#[test]
fn one_node_event_makes_one_eval_per_job() {
    let web = mock::service_job("web", 1);
    let sys = mock::system_job("sys");
    let node_id = mock::node_id(1);
    let status = |evals| Command::NodeStatus {
        node_id,
        status: NodeStatus::Ready,
        description: "heartbeat received".into(),
        now: T0,
        evals,
    };
    let health = |evals| Command::NodeHealth {
        node_id,
        health: NodeHealth::Healthy,
        now: T0,
        evals,
    };
    let snapshot = Command::NodeSnapshot {
        node_id,
        snapshot: None,
        now: T0,
    };
    let (s1, w2, s3, s4) = (
        mock::eval(1, &sys),
        mock::eval(2, &web),
        mock::eval(3, &sys),
        mock::eval(4, &sys),
    );
    // (commands in, eval ids each command carries after)
    let cases: Vec<(Vec<Command>, Vec<Vec<EvalId>>)> = vec![
        (
            vec![
                status(vec![s1.clone(), w2.clone()]),
                health(vec![s3.clone()]),
            ],
            vec![vec![], vec![s1.id, w2.id]],
        ),
        (
            vec![status(vec![s1.clone()]), health(vec![])],
            vec![vec![s1.id], vec![]],
        ),
        (
            vec![status(vec![]), health(vec![s3.clone(), s4])],
            vec![vec![], vec![s3.id]],
        ),
        (
            vec![status(vec![w2.clone()]), snapshot.clone()],
            vec![vec![w2.id], vec![]],
        ),
        (vec![snapshot], vec![vec![]]),
    ];
    for (mut commands, want) in cases {
        one_eval_per_job(&mut commands);
        let got: Vec<Vec<EvalId>> = commands
            .iter_mut()
            .map(|c| {
                c.node_evals_mut()
                    .map(|evals| evals.iter().map(|e| e.id).collect())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(got, want);
    }
}

fn register_checked(job: &Job, eval_n: u64, enforce_index: Index) -> Command {
    Command::JobRegisterChecked {
        job: job.clone(),
        eval: Some(mock::eval(eval_n, job)),
        now: T0,
        enforce_index,
    }
}

#[test]
fn job_register_checked_applies_only_at_the_enforced_index() {
    let job = mock::service_job("web", 3);
    // 0 means "must not exist": the first one wins...
    let (s, _, idx) = check(&[], register_checked(&job, 1, 0));
    assert_eq!(s.job(&keys(&job)).unwrap().job_modify_index, idx);
    // ...and a second writer that also expected 0 is refused with nothing written.
    let mut s = s;
    let mut changed = job.clone();
    changed.groups[0].count = 5;
    let before = s.latest_index();
    let err = apply(&mut s, idx + 1, register_checked(&changed, 2, 0)).unwrap_err();
    assert_eq!(
        err,
        ApplyError::JobIndexMismatch {
            job: keys(&job),
            expected: 0,
            actual: idx
        }
    );
    assert_eq!(
        err.to_string(),
        format!("job default/web is at modify index {idx}, not the enforced index 0")
    );
    assert_eq!(s.job(&keys(&job)).unwrap().groups[0].count, 3);
    assert!(s.eval(&mock::eval_id(2)).is_none(), "no eval written");
    assert_eq!(s.latest_index(), before, "nothing written");
    // The current index is accepted.
    let events = apply(&mut s, idx + 1, register_checked(&changed, 2, idx)).unwrap();
    assert!(!events.is_empty());
    assert_eq!(s.job(&keys(&job)).unwrap().groups[0].count, 5);
    s.check_consistency().unwrap();
}

#[test]
fn job_register_checked_round_trips_and_keeps_older_variant_tags() {
    let job = mock::service_job("web", 1);
    let cmd = register_checked(&job, 1, 7);
    assert_eq!(decode_command(&encode_command(&cmd)).unwrap(), cmd);
    // Format-1 logs written before the variant existed still decode: the variants before it
    // keep their position (postcard's tag is the byte after the 3-byte header).
    let plain = encode_command(&register_job(&job, 1));
    assert_eq!(plain[3], 9, "JobRegister keeps tag 9");
    let cfg = encode_command(&Command::SchedulerConfig {
        config: SchedulerConfig::default(),
        cas_index: None,
    });
    assert_eq!(cfg[3], 16, "SchedulerConfig keeps tag 16");
}

#[test]
fn job_deregister_cancels_the_jobs_blocked_evals_in_the_same_entry() {
    for purge in [false, true] {
        let job = mock::service_job("web", 1);
        let mut blocked = mock::eval(3, &job);
        blocked.status = EvalStatus::Blocked;
        let mut done = mock::eval(1, &job);
        done.status = EvalStatus::Complete;
        let setup = [
            register_job(&job, 1),
            Command::EvalUpsert {
                evals: vec![done, blocked],
            },
        ];
        let stop = Command::JobDeregister {
            job: keys(&job),
            purge,
            eval: Some(mock::eval(2, &job)),
            now: T0,
        };
        let (s, ev, idx) = check(&setup, stop);
        let e = s.eval(&mock::eval_id(3)).unwrap();
        assert_eq!(e.status, EvalStatus::Canceled, "purge {purge}");
        assert_eq!(e.status_description, "job deregistered");
        assert_eq!(e.modify_index, idx, "cancelled in the deregistering entry");
        assert!(ev.contains(&(
            Topic::Evaluation,
            EventType::EvaluationUpdated,
            mock::eval_id(3).to_string()
        )));
        // Once the deregistration eval completes, nothing keeps the job open.
        let mut s = s;
        let mut dereg = (**s.eval(&mock::eval_id(2)).unwrap()).clone();
        dereg.status = EvalStatus::Complete;
        apply(&mut s, idx + 1, Command::EvalUpsert { evals: vec![dereg] }).unwrap();
        let open = s
            .evals_by_job(&keys(&job))
            .filter(|e| !e.is_terminal())
            .count();
        assert_eq!(open, 0, "purge {purge}: no eval outlives the job");
        if !purge {
            assert_eq!(s.job(&keys(&job)).unwrap().status, JobStatus::Dead);
        }
    }
}

#[test]
fn alloc_stop_marks_the_allocation_and_writes_the_replacing_eval() {
    let job = mock::service_job("web", 2);
    let n1 = mock::node_id(1);
    let setup = [
        register_node(1),
        register_job(&job, 1),
        mock::place(mock::eval_id(1), vec![mock::alloc(1, &job, n1, 0)], T0),
    ];
    let mut eval = mock::eval(2, &job);
    eval.triggered_by = TriggeredBy::AllocStop;
    let stop = Command::AllocStop {
        alloc_id: mock::alloc_id(1),
        eval: eval.clone(),
        now: T0,
    };
    let (s, ev, idx) = check(&setup, stop.clone());
    let a = s.alloc(&mock::alloc_id(1)).unwrap();
    assert_eq!(a.desired_status, DesiredStatus::Stop);
    assert_eq!(a.desired_description, "alloc stopped by operator");
    assert_eq!(a.alloc_modify_index, idx);
    assert_eq!(s.eval(&eval.id).unwrap().status, EvalStatus::Pending);
    assert!(ev.contains(&(
        Topic::Allocation,
        EventType::AllocationUpdated,
        mock::alloc_id(1).to_string()
    )));
    assert!(ev.contains(&(
        Topic::Evaluation,
        EventType::EvaluationUpdated,
        eval.id.to_string()
    )));
    assert_eq!(decode_command(&encode_command(&stop)).unwrap(), stop);

    // Stopping it again only writes the eval; an unknown allocation is refused.
    let mut again = setup.to_vec();
    again.push(stop.clone());
    let (s, ev, _) = check(&again, stop);
    assert_eq!(s.alloc(&mock::alloc_id(1)).unwrap().alloc_modify_index, 4);
    assert_eq!(ev.len(), 1, "{ev:?}");
    let mut store = StateStore::new();
    let unknown = Command::AllocStop {
        alloc_id: mock::alloc_id(9),
        eval,
        now: T0,
    };
    let err = apply(&mut store, 1, unknown).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("allocation {} not found", mock::alloc_id(9))
    );
}

/// A worker that scheduled from a snapshot taken before the stop may block an eval after
/// it: the FSM writes it canceled, so no eval of a stopped (or purged) job stays open.
#[test]
fn an_eval_blocked_after_its_job_stopped_is_written_canceled() {
    for (purge, running) in [(false, false), (true, false), (false, true)] {
        let job = mock::service_job("web", 1);
        let mut setup = vec![register_job(&job, 1)];
        if !running {
            setup.push(Command::JobDeregister {
                job: keys(&job),
                purge,
                eval: None,
                now: T0,
            });
        }
        let mut late = mock::eval(3, &job);
        late.status = EvalStatus::Blocked;
        let (s, _, _) = check(&setup, Command::EvalUpsert { evals: vec![late] });
        let e = s.eval(&mock::eval_id(3)).unwrap();
        let want = if running {
            EvalStatus::Blocked
        } else {
            EvalStatus::Canceled
        };
        assert_eq!(e.status, want, "purge {purge}, running {running}");
    }
}

/// One applier over a run of entries ends as applying them one by one does: the same
/// store, byte for byte, and the same events. The run has batches large enough for the
/// allocation indexes to be lent to the helper thread, each followed by entries that may
/// overlap them (reports, evals, the next plan) and by entries that must wait for them (a
/// node going down, whose evals read the node's allocations; a job purged).
#[test]
fn an_applier_run_ends_as_entries_applied_one_by_one() {
    const PER_PLAN: u64 = 300;
    let (web, api) = (mock::service_job("web", 600), mock::service_job("api", 600));
    let plan = |eval, job: &Job, first: u64| {
        let allocs = (first..first + PER_PLAN)
            // Nodes 1..=40 exist; 41..=44 never registered (allocations name gone nodes).
            .map(|n| mock::alloc(n, job, mock::node_id(1 + n % 44), n as u32))
            .collect();
        decode_command(&encode_command(&mock::place(
            mock::eval_id(eval),
            allocs,
            T0,
        )))
        .unwrap()
    };
    let reports = |first: u64| {
        let mut by_node = std::collections::BTreeMap::<NodeId, Vec<AllocClientUpdate>>::new();
        for n in first..first + PER_PLAN {
            by_node
                .entry(mock::node_id(1 + n % 44))
                .or_default()
                .push(AllocClientUpdate {
                    deployment_health: None,
                    alloc_id: mock::alloc_id(n),
                    client_status: ClientStatus::Running,
                    client_description: "running".into(),
                    task_states: Default::default(),
                });
        }
        Command::AllocClientUpdates {
            nodes: by_node
                .into_iter()
                .map(|(node_id, updates)| NodeAllocUpdates {
                    node_id,
                    updates,
                    evals: vec![],
                    services: vec![],
                })
                .collect(),
            now: T0,
        }
    };
    let mut run: Vec<Command> = (1..=40).map(register_node).collect();
    run.extend([register_job(&web, 1), register_job(&api, 2)]);
    run.extend([
        plan(1, &web, 0),
        reports(0),
        Command::EvalUpsert {
            evals: vec![mock::eval(3, &web)],
        },
        plan(2, &api, 1_000),
        Command::NodeStatus {
            node_id: mock::node_id(3),
            status: NodeStatus::Down,
            description: "missed heartbeats".into(),
            now: T0,
            evals: vec![mock::eval(4, &web), mock::eval(5, &api)],
        },
        reports(1_000),
        plan(6, &web, 2_000),
        Command::JobDeregister {
            job: keys(&api),
            purge: true,
            eval: None,
            now: T0,
        },
        reports(2_000),
    ]);

    let mut one_by_one = StateStore::new();
    let mut events_one_by_one = Vec::new();
    for (i, cmd) in run.iter().enumerate() {
        events_one_by_one.push(apply(&mut one_by_one, i as Index + 1, cmd.clone()));
    }
    let mut together = StateStore::new();
    let mut events_together = Vec::new();
    {
        let mut applier = Applier::new(&mut together);
        for (i, cmd) in run.iter().enumerate() {
            events_together.push(applier.apply(i as Index + 1, cmd.clone()));
        }
    }
    together.check_consistency().unwrap();
    one_by_one.check_consistency().unwrap();
    assert!(events_together.iter().all(Result::is_ok));
    assert_eq!(events_together, events_one_by_one);
    assert_eq!(encode_snapshot(&together), encode_snapshot(&one_by_one));
    assert_eq!(together.alloc_count(), 3 * PER_PLAN as usize);
    assert_eq!(
        together.allocs_by_node(&mock::node_id(43)).count(),
        one_by_one.allocs_by_node(&mock::node_id(43)).count()
    );
}
