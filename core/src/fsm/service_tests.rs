//! The service catalog in the FSM: what a node may write, what ends a registration, and
//! what hides and restores it while its node is disconnected.

use super::*;
use crate::mock;
use crate::state::{StateStore, Table};
use crate::types::*;

const T0: Timestamp = Timestamp(1_700_000_000_000);

/// A registration of the `index`th group service of `alloc`, as an agent reports it.
fn reg(alloc: AllocId, index: usize, name: &str, health: ServiceHealth) -> ServiceRegistration {
    ServiceRegistration {
        id: ServiceRegistration::make_id(alloc, None, index),
        service_name: name.into(),
        namespace: "lies".into(),
        job_id: "lies".into(),
        alloc_id: alloc,
        node_id: mock::node_id(77),
        task: None,
        address: Some("10.0.0.1".parse().expect("ip")),
        port: 8080,
        tags: vec!["a".into()],
        health,
        checks: Vec::new(),
        create_index: 0,
        modify_index: 0,
    }
}

/// One node's report: status updates and the registrations of some allocations.
fn report(
    node: NodeId,
    updates: &[(AllocId, ClientStatus)],
    services: Vec<AllocServices>,
) -> Command {
    Command::AllocClientUpdates {
        nodes: vec![NodeAllocUpdates {
            node_id: node,
            updates: updates
                .iter()
                .map(|(id, status)| AllocClientUpdate {
                    alloc_id: *id,
                    client_status: *status,
                    client_description: Default::default(),
                    task_states: Default::default(),
                    deployment_health: None,
                })
                .collect(),
            evals: vec![],
            services,
        }],
        now: T0,
    }
}

fn services(alloc: AllocId, regs: Vec<ServiceRegistration>) -> AllocServices {
    AllocServices {
        alloc_id: alloc,
        registrations: regs,
    }
}

/// Applies every command in order (each must succeed and leave the store consistent);
/// returns the store and the service events of the last one as (type, key).
fn run(cmds: &[Command]) -> (StateStore, Vec<(EventType, String)>) {
    let mut store = StateStore::new();
    let mut last = Vec::new();
    for (i, c) in cmds.iter().enumerate() {
        let events = apply(&mut store, i as Index + 1, c.clone())
            .unwrap_or_else(|e| panic!("{} failed: {e}", c.kind()));
        store
            .check_consistency()
            .unwrap_or_else(|e| panic!("after {}: {e}", c.kind()));
        last = events
            .into_iter()
            .filter(|e| e.topic == Topic::Service)
            .map(|e| (e.event_type, e.key))
            .collect();
    }
    (store, last)
}

fn setup() -> (Job, Vec<Command>) {
    let job = mock::service_job("web", 2);
    let cmds = vec![
        Command::NodeRegister {
            node: mock::node(1),
            now: T0,
        },
        Command::NodeRegister {
            node: mock::node(2),
            now: T0,
        },
        Command::JobRegister {
            job: job.clone(),
            eval: Some(mock::eval(1, &job)),
            now: T0,
        },
        mock::place(
            mock::eval_id(1),
            vec![
                mock::alloc(1, &job, mock::node_id(1), 0),
                mock::alloc(2, &job, mock::node_id(2), 1),
            ],
            T0,
        ),
    ];
    (job, cmds)
}

fn listed(s: &StateStore, name: &str) -> Vec<AllocId> {
    s.service_instances("default", name)
        .map(|r| r.alloc_id)
        .collect()
}

#[test]
fn a_node_registers_its_own_allocations_services_and_nothing_else() {
    let (job, mut cmds) = setup();
    let (a1, a2) = (mock::alloc_id(1), mock::alloc_id(2));
    let mut foreign_id = reg(a1, 1, "api", ServiceHealth::Passing);
    foreign_id.id = ServiceRegistration::make_id(a2, None, 0);
    cmds.push(report(
        mock::node_id(1),
        &[],
        vec![
            services(
                a1,
                vec![reg(a1, 0, "api", ServiceHealth::Passing), foreign_id],
            ),
            // Node 2's allocation: not node 1's to register.
            services(a2, vec![reg(a2, 0, "api", ServiceHealth::Passing)]),
        ],
    ));
    let (s, events) = run(&cmds);
    assert_eq!(listed(&s, "api"), [a1]);
    assert_eq!(events, [(EventType::ServiceRegistered, "api".to_owned())]);
    let r = s.service_instances("default", "api").next().expect("one");
    assert_eq!(
        (r.namespace.as_str(), r.job_id.as_str(), r.node_id),
        (job.namespace.as_str(), job.id.as_str(), mock::node_id(1)),
        "where a registration is and whose it is comes from its allocation"
    );
    assert_eq!(s.table_index(Table::Services), cmds.len() as Index);
    let summary = s.service_summaries(Some("default"));
    assert_eq!(summary.len(), 1);
    assert_eq!(
        (summary[0].instances, summary[0].health),
        (1, ServiceHealth::Passing)
    );
}

#[test]
fn a_report_replaces_an_allocations_set_and_an_unchanged_one_writes_nothing() {
    let (_, mut cmds) = setup();
    let a1 = mock::alloc_id(1);
    let first = vec![
        reg(a1, 0, "api", ServiceHealth::Passing),
        reg(a1, 1, "admin", ServiceHealth::Passing),
    ];
    cmds.push(report(
        mock::node_id(1),
        &[],
        vec![services(a1, first.clone())],
    ));
    cmds.push(report(mock::node_id(1), &[], vec![services(a1, first)]));
    let (s, events) = run(&cmds);
    assert!(
        events.is_empty(),
        "the same report again changes nothing: {events:?}"
    );
    assert_eq!(s.table_index(Table::Services), cmds.len() as Index - 1);

    cmds.push(report(
        mock::node_id(1),
        &[],
        vec![services(
            a1,
            vec![reg(a1, 0, "api", ServiceHealth::Critical)],
        )],
    ));
    let (s, events) = run(&cmds);
    assert_eq!(
        events,
        [
            (EventType::ServiceDeregistered, "admin".to_owned()),
            (EventType::ServiceRegistered, "api".to_owned()),
        ]
    );
    let r = s.service_instances("default", "api").next().expect("one");
    assert_eq!(r.health, ServiceHealth::Critical);
    assert_eq!((r.create_index, r.modify_index), (5, 7));
    assert!(listed(&s, "admin").is_empty());
}

#[test]
fn registrations_end_with_their_allocation_and_hide_while_it_is_disconnected() {
    let (job, mut cmds) = setup();
    let (a1, a2) = (mock::alloc_id(1), mock::alloc_id(2));
    cmds.push(report(
        mock::node_id(1),
        &[],
        vec![services(
            a1,
            vec![reg(a1, 0, "api", ServiceHealth::Passing)],
        )],
    ));
    cmds.push(report(
        mock::node_id(2),
        &[],
        vec![services(
            a2,
            vec![reg(a2, 0, "api", ServiceHealth::Passing)],
        )],
    ));
    let registered = cmds.len();

    // The servers mark node 2's allocation unknown (its node disconnected): hidden, kept.
    let mut unknown = mock::alloc(2, &job, mock::node_id(2), 1);
    unknown.client_status = ClientStatus::Unknown;
    cmds.push(mock::place(mock::eval_id(2), vec![unknown], T0));
    let (s, events) = run(&cmds);
    assert!(events.is_empty(), "nothing removed: {events:?}");
    assert_eq!(listed(&s, "api"), [a1]);
    assert_eq!(s.service_count(), 2);
    assert_eq!(
        s.table_index(Table::Services),
        cmds.len() as Index,
        "readers wake"
    );

    // It reconnects inside its window: listed again.
    cmds.push(report(
        mock::node_id(2),
        &[(a2, ClientStatus::Running)],
        vec![],
    ));
    let (s, _) = run(&cmds);
    assert_eq!(listed(&s, "api"), [a1, a2]);
    assert_eq!(s.table_index(Table::Services), cmds.len() as Index);

    // Node 1's task completes: its registration goes in the same entry.
    cmds.push(report(
        mock::node_id(1),
        &[(a1, ClientStatus::Complete)],
        vec![],
    ));
    let (s, events) = run(&cmds);
    assert_eq!(events, [(EventType::ServiceDeregistered, "api".to_owned())]);
    assert_eq!(listed(&s, "api"), [a2]);

    // Node 2's allocation is lost: gone too.
    let mut lost = mock::alloc(2, &job, mock::node_id(2), 1);
    lost.client_status = ClientStatus::Lost;
    cmds.push(mock::place(mock::eval_id(3), vec![lost], T0));
    let (s, events) = run(&cmds);
    assert_eq!(events, [(EventType::ServiceDeregistered, "api".to_owned())]);
    assert_eq!(s.service_count(), 0);
    assert!(registered < cmds.len());
}

#[test]
fn a_terminal_allocation_takes_no_registration() {
    let (_, mut cmds) = setup();
    let a1 = mock::alloc_id(1);
    cmds.push(report(
        mock::node_id(1),
        &[(a1, ClientStatus::Failed)],
        vec![services(
            a1,
            vec![reg(a1, 0, "api", ServiceHealth::Passing)],
        )],
    ));
    let (s, events) = run(&cmds);
    assert!(events.is_empty());
    assert_eq!(s.service_count(), 0);
}

#[test]
fn a_snapshot_keeps_the_catalog() {
    let (_, mut cmds) = setup();
    let a1 = mock::alloc_id(1);
    cmds.push(report(
        mock::node_id(1),
        &[],
        vec![services(
            a1,
            vec![checked(
                a1,
                vec![check("alive", CheckStatus::Warning, "slow", 1)],
            )],
        )],
    ));
    let (s, _) = run(&cmds);
    let bytes = encode_snapshot(&s);
    let back = decode_snapshot(&bytes).expect("decodes");
    back.check_consistency().expect("consistent");
    assert_eq!(listed(&back, "api"), [a1]);
    assert_eq!(
        back.service_instances("default", "api").next(),
        s.service_instances("default", "api").next(),
        "the checks' results come back"
    );
    assert_eq!(
        back.table_index(Table::Services),
        s.table_index(Table::Services)
    );
}

/// A tcp check `name` of a registration, found at `at` seconds past [`T0`].
fn check(name: &str, status: CheckStatus, output: &str, at: u64) -> CheckState {
    CheckState {
        name: name.into(),
        check_type: CheckType::Tcp,
        status,
        output: output.into(),
        http_status: None,
        time: Timestamp(T0.0 + at * 1000),
    }
}

/// Registration `index` of `alloc` with `checks`, its health what they give.
fn checked(alloc: AllocId, checks: Vec<CheckState>) -> ServiceRegistration {
    let mut r = reg(alloc, 0, "api", CheckState::health_of(&checks));
    r.checks = checks;
    r
}

#[test]
fn a_check_status_change_is_stored_with_its_output_and_time() {
    let (_, mut cmds) = setup();
    let a1 = mock::alloc_id(1);
    let passing = check("alive", CheckStatus::Passing, "tcp connect: success", 1);
    cmds.push(report(
        mock::node_id(1),
        &[],
        vec![services(a1, vec![checked(a1, vec![passing])])],
    ));
    let failing = check("alive", CheckStatus::Critical, "connection refused", 9);
    cmds.push(report(
        mock::node_id(1),
        &[],
        vec![services(a1, vec![checked(a1, vec![failing.clone()])])],
    ));
    let (s, events) = run(&cmds);
    assert_eq!(events, [(EventType::ServiceRegistered, "api".to_owned())]);
    let r = s.service_instances("default", "api").next().expect("one");
    assert_eq!(r.checks, [failing]);
    assert_eq!(r.health, ServiceHealth::Critical);
    assert_eq!(r.modify_index, cmds.len() as Index);
}

#[test]
fn check_results_are_kept_within_their_bounds() {
    let (_, mut cmds) = setup();
    let a1 = mock::alloc_id(1);
    let loud = check("alive", CheckStatus::Critical, &"x".repeat(64 * 1024), 1);
    let mut many = vec![loud; MAX_REGISTRATION_CHECKS + 10];
    many[0].name = "n".repeat(10 * 1024);
    cmds.push(report(
        mock::node_id(1),
        &[],
        vec![services(a1, vec![checked(a1, many)])],
    ));
    let (s, _) = run(&cmds);
    let r = s.service_instances("default", "api").next().expect("one");
    assert_eq!(r.checks.len(), MAX_REGISTRATION_CHECKS);
    assert!(r.checks.iter().all(|c| c.output.len() == MAX_CHECK_OUTPUT));
    assert_eq!(r.checks[0].name.len(), MAX_CHECK_NAME);
}

#[test]
fn a_node_cannot_write_checks_of_another_nodes_allocation() {
    let (_, mut cmds) = setup();
    let a2 = mock::alloc_id(2);
    let passing = check("alive", CheckStatus::Passing, "ok", 1);
    cmds.push(report(
        mock::node_id(2),
        &[],
        vec![services(a2, vec![checked(a2, vec![passing.clone()])])],
    ));
    let forged = check("alive", CheckStatus::Critical, "forged", 2);
    cmds.push(report(
        mock::node_id(1),
        &[],
        vec![services(a2, vec![checked(a2, vec![forged])])],
    ));
    let (s, events) = run(&cmds);
    assert!(events.is_empty(), "{events:?}");
    let r = s.service_instances("default", "api").next().expect("one");
    assert_eq!(r.checks, [passing]);
    assert_eq!(r.health, ServiceHealth::Passing);
}

/// A `service` block with one script check per `on_update`.
fn defined(name: &str, on_update: &[OnUpdate]) -> Service {
    Service {
        name: name.into(),
        port_label: String::new(),
        tags: Vec::new(),
        meta: Default::default(),
        address_mode: AddressMode::Auto,
        checks: on_update
            .iter()
            .map(|&on_update| ServiceCheck {
                name: String::new(),
                kind: CheckKind::Script {
                    command: "/bin/true".into(),
                    args: Vec::new(),
                },
                interval: std::time::Duration::from_secs(10),
                timeout: std::time::Duration::from_secs(1),
                on_update,
                check_restart: None,
                task: None,
            })
            .collect(),
    }
}

#[test]
fn a_registrations_definition_is_the_block_of_the_version_its_allocation_runs() {
    let mut job = mock::service_job("web", 1);
    job.groups[0].services = vec![
        defined("a", &[]),
        defined("b", &[OnUpdate::RequireHealthy, OnUpdate::Ignore]),
    ];
    job.groups[0].tasks[0].services = vec![defined("t", &[OnUpdate::IgnoreWarnings])];
    let task = job.groups[0].tasks[0].name.clone();
    let mut updated = job.clone();
    updated.groups[0].services[1] = defined("b", &[OnUpdate::Ignore]);
    let (mut s, _) = run(&[
        Command::NodeRegister {
            node: mock::node(1),
            now: T0,
        },
        Command::JobRegister {
            job: job.clone(),
            eval: None,
            now: T0,
        },
    ]);
    let placed = s.job(&job.key()).expect("registered").as_ref().clone();
    let alloc = mock::alloc(1, &placed, mock::node_id(1), 0);
    for (i, c) in [
        mock::place(mock::eval_id(1), vec![alloc.clone()], T0),
        Command::JobRegister {
            job: updated,
            eval: None,
            now: T0,
        },
    ]
    .iter()
    .enumerate()
    {
        apply(&mut s, 10 + i as Index, c.clone()).expect("applied");
    }
    assert_eq!(s.job(&job.key()).expect("job").version, 1);
    let on_update = |task: Option<&str>, index: usize| {
        let mut r = reg(alloc.id, index, "x", ServiceHealth::Passing);
        r.id = ServiceRegistration::make_id(alloc.id, task, index);
        r.task = task.map(str::to_owned);
        s.service_definition(&r).map(|d| {
            (
                d.name.clone(),
                d.checks.iter().map(|c| c.on_update).collect(),
            )
        })
    };
    let table: [(Option<&str>, usize, Option<(&str, Vec<OnUpdate>)>); 4] = [
        (None, 0, Some(("a", vec![]))),
        (
            None,
            1,
            Some(("b", vec![OnUpdate::RequireHealthy, OnUpdate::Ignore])),
        ),
        (Some(&task), 0, Some(("t", vec![OnUpdate::IgnoreWarnings]))),
        (None, 2, None),
    ];
    for (task, index, want) in table {
        let want = want.map(|(n, o)| (n.to_owned(), o));
        assert_eq!(on_update(task, index), want, "{task:?} {index}");
    }
}

#[test]
fn each_service_keeps_the_index_its_own_instances_last_changed_at() {
    let (job, mut cmds) = setup();
    let (a1, a2) = (mock::alloc_id(1), mock::alloc_id(2));
    let mut unknown = mock::alloc(2, &job, mock::node_id(2), 1);
    unknown.client_status = ClientStatus::Unknown;
    let setup_len = cmds.len() as Index;
    // Each step and (api, db) after it, as offsets from the setup's last index; `None`:
    // the service has no registration and follows the catalog's table index.
    let steps: Vec<(&str, Command, Option<Index>, Option<Index>)> = vec![
        (
            "a1 registers api",
            report(
                mock::node_id(1),
                &[],
                vec![services(
                    a1,
                    vec![reg(a1, 0, "api", ServiceHealth::Passing)],
                )],
            ),
            Some(1),
            None,
        ),
        (
            "a2 registers db",
            report(
                mock::node_id(2),
                &[],
                vec![services(a2, vec![reg(a2, 0, "db", ServiceHealth::Passing)])],
            ),
            Some(1),
            Some(2),
        ),
        (
            "db's health changes",
            report(
                mock::node_id(2),
                &[],
                vec![services(a2, vec![reg(a2, 0, "db", ServiceHealth::Warning)])],
            ),
            Some(1),
            Some(3),
        ),
        (
            "the servers hide a2 (its node disconnected)",
            mock::place(mock::eval_id(2), vec![unknown], T0),
            Some(1),
            Some(4),
        ),
        (
            "a2 runs again",
            report(mock::node_id(2), &[(a2, ClientStatus::Running)], vec![]),
            Some(1),
            Some(5),
        ),
        (
            "a1 completes: api has no instance left",
            report(mock::node_id(1), &[(a1, ClientStatus::Complete)], vec![]),
            None,
            Some(5),
        ),
    ];
    for (what, cmd, api, db) in steps {
        cmds.push(cmd);
        let (s, _) = run(&cmds);
        let table = s.table_index(Table::Services);
        let at = |o: Option<Index>| o.map_or(table, |o| setup_len + o);
        assert_eq!(
            (
                s.service_index("default", "api"),
                s.service_index("default", "db")
            ),
            (at(api), at(db)),
            "after {what}"
        );
    }
    let (s, _) = run(&cmds);
    let back = decode_snapshot(&encode_snapshot(&s)).expect("decodes");
    assert_eq!(
        back.service_index("default", "db"),
        s.table_index(Table::Services),
        "a restored store starts each service at the table index, never below"
    );
}
