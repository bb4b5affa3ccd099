//! Fully populated core values: every optional field set, every collection non-empty, and
//! non-default values wherever a default could hide a field the conversion forgot.

#![allow(dead_code)] // each test binary uses its own subset

use drover_core::*;
use std::collections::BTreeMap;
use std::time::Duration;

pub const SEC: Duration = Duration::from_secs(1);

pub fn full_job() -> Job {
    let mut job = mock::service_job("web-app", 3);
    job.namespace = "prod".into();
    job.name = "Web application".into();
    job.priority = 73;
    job.datacenters = vec!["dc1".into(), "eu-*".into()];
    job.constraints = Operator::ALL
        .iter()
        .enumerate()
        .map(|(i, (op, _))| Constraint::new(format!("${{attr.k{i}}}"), *op, format!("v{i}")))
        .collect();
    job.update = UpdateStrategy {
        max_parallel: 4,
        stagger: Duration::from_millis(12_345),
        deployment: Some(DeploymentStrategy {
            health_check: HealthCheck::TaskStates,
            min_healthy_time: Duration::from_millis(1_500),
            healthy_deadline: Duration::from_secs(60),
            progress_deadline: Duration::from_secs(120),
            canary: 2,
            auto_promote: true,
            auto_revert: true,
        }),
    };
    job.stable = true;
    job.periodic = Some(PeriodicConfig {
        cron: "*/5 * * * *".into(),
        prohibit_overlap: true,
        time_zone: "Europe/Paris".into(),
        enabled: false,
    });
    job.parameterized = Some(ParameterizedConfig {
        payload: PayloadRequirement::Required,
        meta_required: vec!["region".into()],
        meta_optional: vec!["owner".into(), "tier".into()],
    });
    job.parent_id = Some(JobId::new("web-app-parent"));
    job.payload = vec![0, 1, 2, 254, 255];
    job.meta = BTreeMap::from([
        ("team".into(), "infra".into()),
        ("cost".into(), "42".into()),
    ]);
    job.version = 7;
    job.status = JobStatus::Running;
    job.stop = true;
    job.submit_time = Timestamp::from_millis(1_700_000_000_123);
    job.create_index = 11;
    job.modify_index = 99;
    job.job_modify_index = 98;

    let group = &mut job.groups[0];
    group.constraints = vec![Constraint::new("${node.class}", Operator::Equal, "gpu")];
    group.restart = RestartPolicy {
        attempts: 5,
        interval: 10 * SEC,
        delay: 3 * SEC,
        mode: RestartMode::Delay,
    };
    group.reschedule = ReschedulePolicy {
        attempts: 3,
        interval: 600 * SEC,
        delay: 7 * SEC,
        delay_function: DelayFunction::Fibonacci,
        max_delay: 900 * SEC,
        unlimited: false,
    };
    group.disconnect = Some(DisconnectPolicy {
        lost_after: Some(120 * SEC),
        replace: false,
        reconcile: ReconcileStrategy::LongestRunning,
        stop_on_client_after: Some(90 * SEC),
    });
    group.stop_after_client_disconnect = Some(45 * SEC);
    group.update = Some(UpdateStrategy {
        deployment: None,
        max_parallel: 2,
        stagger: 5 * SEC,
    });
    group.meta = BTreeMap::from([("g".into(), "1".into())]);

    let task = &mut group.tasks[0];
    task.config.extra = BTreeMap::from([("image".into(), "busybox".into())]);
    task.config.ports = vec!["admin".into(), "http".into()];
    task.env = BTreeMap::from([
        ("PORT".into(), "8080".into()),
        ("MODE".into(), "prod".into()),
    ]);
    task.resources = Resources::new(250, 512, 1024);
    task.snapshot = Some("snap-2024-01".into());
    task.kill_timeout = Duration::from_millis(7_500);
    task.user = Some("nobody".into());
    task.kill_signal = Some("SIGINT".into());
    task.restart = Some(drover_core::types::RestartPolicy {
        attempts: 9,
        ..Default::default()
    });
    task.meta = BTreeMap::from([("t".into(), "x".into())]);

    // A second task and group with the other enum values, so every variant travels.
    let mut sidecar = Task::raw_exec("sidecar", "/bin/true");
    sidecar.snapshot = Some(String::new());
    sidecar.lifecycle = Some(drover_core::types::Lifecycle {
        hook: drover_core::types::LifecycleHook::Poststart,
        sidecar: true,
    });
    group.tasks.push(sidecar);
    group.ephemeral_disk = Some(drover_core::types::EphemeralDisk { size_mb: 150 });
    group.network = Some(GroupNetwork {
        ports: vec![
            PortAsk::dynamic("http"),
            PortAsk {
                label: "admin".into(),
                static_port: Some(8080),
                to: Some(80),
                host_network: "public".into(),
            },
        ],
    });
    let mut batchy = TaskGroup::new("worker", 1, vec![Task::raw_exec("w", "/bin/echo")]);
    batchy.reschedule = ReschedulePolicy::batch_default();
    batchy.disconnect = Some(DisconnectPolicy::default());
    job.groups.push(batchy);
    job
}

pub fn full_node() -> Node {
    let mut node = mock::node(4);
    // The secret never travels in a Node message; see the test about it.
    node.secret_id = String::new();
    node.datacenter = "eu-west".into();
    node.node_class = "gpu".into();
    node.meta = BTreeMap::from([("rack".into(), "r12".into())]);
    node.reserved = Resources::new(100, 256, 1000);
    node.networks = NodeNetworks {
        addresses: vec![
            HostAddress {
                host_network: "default".into(),
                address: "10.0.0.4".parse().expect("ip"),
                interface: "eth0".into(),
            },
            HostAddress {
                host_network: "public".into(),
                address: "2001:db8::4".parse().expect("ip"),
                interface: "eth1".into(),
            },
        ],
        reserved_ports: PortRanges::parse("22,8000-8100").expect("ports"),
        min_dynamic_port: 21000,
        max_dynamic_port: 21999,
    };
    node.status = NodeStatus::Disconnected;
    node.status_description = "missed heartbeats".into();
    node.status_updated_at = Timestamp::from_millis(1_700_000_001_000);
    node.eligibility = Eligibility::Ineligible;
    node.drain = Some(DrainStrategy {
        deadline: Some(3600 * SEC),
        force: true,
        ignore_system_jobs: true,
        started_at: Timestamp::from_millis(1_700_000_000_500),
    });
    node.health = NodeHealth::Suspended(SuspendReason::Flaky);
    node.health_since = Timestamp::from_millis(1_700_000_000_900);
    node.last_snapshot = Some("snap-2024-01".into());
    node.events = vec![
        NodeEvent {
            time: Timestamp::from_millis(1),
            subsystem: "Cluster".into(),
            message: "registered".into(),
        },
        NodeEvent {
            time: Timestamp::from_millis(2),
            subsystem: "Health".into(),
            message: "flaky".into(),
        },
    ];
    node.create_index = 3;
    node.modify_index = 30;
    node
}

pub fn full_alloc() -> Allocation {
    let job = full_job();
    let mut a = mock::alloc(5, &job, mock::node_id(4), 2);
    a.eval_id = mock::eval_id(8);
    a.desired_status = DesiredStatus::Evict;
    a.desired_description = "preempted".into();
    a.client_status = ClientStatus::Unknown;
    a.client_description = "node disconnected".into();
    a.state_history = vec![
        AllocStateEntry {
            client_status: ClientStatus::Pending,
            time: Timestamp::from_millis(10),
        },
        AllocStateEntry {
            client_status: ClientStatus::Running,
            time: Timestamp::from_millis(20),
        },
        AllocStateEntry {
            client_status: ClientStatus::Unknown,
            time: Timestamp::from_millis(30),
        },
    ]
    .into();
    a.task_states = TaskStates::from_iter([
        (
            "server",
            TaskState {
                state: TaskRunState::Dead,
                failed: true,
                restarts: 2,
                started_at: Some(Timestamp::from_millis(11)),
                finished_at: Some(Timestamp::from_millis(29)),
                events: vec![
                    TaskEvent::new(Timestamp::from_millis(12), "Started", ""),
                    TaskEvent::new(
                        Timestamp::from_millis(28),
                        "Driver Failure",
                        "executable not found",
                    )
                    .with_exit_code(Some(-127))
                    .with_infra_failure(true),
                ],
                usage: Some(drover_core::types::TaskUsage {
                    cpu_mhz: 250,
                    memory_mb: 48,
                }),
            },
        ),
        (
            "sidecar",
            TaskState {
                state: TaskRunState::Running,
                ..TaskState::default()
            },
        ),
    ]);
    a.links = mock::full_links().into();
    a.ports = vec![
        AllocatedPort {
            label: "http".into(),
            value: 21042,
            to: 0,
            host_ip: "10.0.0.4".parse().expect("ip"),
        },
        AllocatedPort {
            label: "admin".into(),
            value: 8080,
            to: 80,
            host_ip: "2001:db8::4".parse().expect("ip"),
        },
    ]
    .into();
    a.metrics = PlacementMetric {
        nodes_evaluated: 12,
        nodes_filtered: 3,
        nodes_exhausted: 4,
        score: 0.8125,
    };
    a.create_index = 40;
    a.modify_index = 44;
    a.alloc_modify_index = 42;
    a.create_time = Timestamp::from_millis(1_700_000_000_000);
    a.modify_time = Timestamp::from_millis(1_700_000_000_777);
    a
}

pub fn full_metric() -> AllocMetric {
    AllocMetric {
        nodes_evaluated: 10,
        nodes_filtered: 4,
        nodes_available: BTreeMap::from([("dc1".into(), 6), ("dc2".into(), 4)]),
        class_filtered: BTreeMap::from([("windows".into(), 2)]),
        constraint_filtered: BTreeMap::from([("${attr.kernel.name} = linux".into(), 2)]),
        nodes_exhausted: 6,
        class_exhausted: BTreeMap::from([("a".into(), 6)]),
        dimension_exhausted: BTreeMap::from([
            (Dimension::Cpu, 3),
            (Dimension::Memory, 2),
            (Dimension::Disk, 1),
        ]),
        ports_exhausted: BTreeMap::from([
            (PortShortage::Taken(8080), 3),
            (PortShortage::Reserved(22), 1),
            (PortShortage::DynamicExhausted, 1),
            (PortShortage::NoHostNetwork("public".into()), 2),
        ]),
        coalesced_failures: 9,
        score: 1.25e-3,
    }
}

pub fn full_eval() -> Evaluation {
    let job = full_job();
    let mut e = mock::eval(8, &job);
    e.priority = 99;
    e.scheduler = SchedulerType::Core;
    e.triggered_by = TriggeredBy::MaxDisconnectTimeout;
    e.job_modify_index = 98;
    e.node_id = Some(mock::node_id(4));
    e.status = EvalStatus::Blocked;
    e.status_description = "created to place remaining allocations".into();
    e.wait = Some(Duration::from_millis(1_500));
    e.wait_until = Some(Timestamp::from_millis(1_700_000_100_000));
    e.previous_eval = Some(mock::eval_id(7));
    e.next_eval = Some(mock::eval_id(10));
    e.blocked_eval = Some(mock::eval_id(11));
    e.class_eligibility = BTreeMap::from([("a".into(), true), ("windows".into(), false)]);
    e.escaped_computed_class = true;
    e.failed_tg_allocs = BTreeMap::from([("web".into(), full_metric())]);
    e.queued_allocations = BTreeMap::from([("web".into(), 3), ("worker".into(), 0)]);
    e.snapshot_index = 97;
    e.related_alloc = Some(mock::alloc_id(5));
    e.create_index = 100;
    e.modify_index = 101;
    e.create_time = Timestamp::from_millis(5);
    e.modify_time = Timestamp::from_millis(6);
    e
}

pub fn full_scheduler_config() -> SchedulerConfig {
    SchedulerConfig {
        algorithm: SchedulerAlgorithm::Spread,
        preemption: PreemptionConfig {
            system: false,
            sysbatch: true,
            batch: true,
            service: false,
        },
        pause_eval_broker: true,
        reject_job_registration: true,
        modify_index: 17,
    }
}
