//! A deterministic cluster for snapshot tests, the benchmark and demos: every health set,
//! drains, placement failures, blocked evaluations, workers in every state and a stream of
//! events, built from core's mock objects with no server.

use crate::app::{App, Connection, Input, Update};
use crate::model::{
    AllocName, AllocRow, AllocTable, BlockedKindLabel, BlockedRow, Change, ClusterInfo,
    DeploymentPart, EventRow, HealthPeriods, SchedulingStats, Snapshot, WorkerRow,
    WorkerStatusLabel, alloc_row, job_row, workload_label,
};
use drover_core::{
    AllocMetric, AllocatedPort, Allocation, ClientStatus, Deployment, DeploymentGroup,
    DeploymentStatus, Dimension, DrainStrategy, Eligibility, EvalStatus, HostAddress, JobKey,
    JobStatus, NodeHealth, NodeStatus, PortRanges, PortShortage, SuspendReason, TaskEvent,
    TaskRunState, TaskState, Timestamp, TriggeredBy, mock,
};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

/// The fixed "now" of every fixture: 2026-01-01T00:00:00Z.
pub fn now() -> Timestamp {
    Timestamp::from_millis(1_767_225_600_000)
}

/// Ids that look like real (random) ones, so short forms differ as they would in a real
/// cluster, but are the same on every run: `n` mixed by splitmix64.
fn scattered(kind: u64, n: u64) -> [u8; 16] {
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&mix(kind << 56 | n).to_be_bytes());
    bytes[8..].copy_from_slice(&mix(!(kind << 56 | n)).to_be_bytes());
    bytes
}

pub fn node_id(n: u64) -> drover_core::NodeId {
    drover_core::NodeId::from_bytes(scattered(1, n))
}

/// The id of allocation `a` of [`snapshot`].
pub fn alloc_id(a: u64) -> drover_core::AllocId {
    drover_core::AllocId::from_bytes(scattered(2, a))
}

fn ago(secs: u64) -> Timestamp {
    now().saturating_sub(Duration::from_secs(secs))
}

/// A snapshot of `nodes` nodes and `allocs` allocations spread over ten jobs. Node `n`'s
/// health cycles so every set is present: mostly healthy, some new, lost, flaky, offlined.
pub fn snapshot(nodes: u64, allocs: u64) -> Snapshot {
    let mut node_list = Vec::with_capacity(nodes as usize);
    for n in 0..nodes {
        let mut node = mock::node(n);
        node.id = node_id(n);
        // As the console keeps nodes (see `decode_node`): no attributes, no secret.
        node.attributes.clear();
        node.secret_id.clear();
        node.datacenter = if n % 3 == 0 { "dc2" } else { "dc1" }.to_owned();
        node.node_class = if n % 4 == 0 { "gpu" } else { "std" }.to_owned();
        // `mock::node` gives every node an address on eth0; some reserve ports, and the
        // nodes of dc2 have a second, public, host network.
        if n % 2 == 0 {
            node.networks.reserved_ports =
                PortRanges::parse("22,8500-8600").expect("a valid reserved port list");
        }
        if n % 3 == 0 {
            node.networks.addresses.push(HostAddress {
                host_network: "public".into(),
                address: IpAddr::from([203, 0, 113, n as u8]),
                interface: "eth1".to_owned(),
            });
        }
        node.health_since = ago(30 + n % 50);
        node.modify_index = 10 + n;
        match n % 20 {
            1 => node.health = NodeHealth::Suspended(SuspendReason::New),
            2 => {
                node.health = NodeHealth::Suspended(SuspendReason::Lost);
                node.status = NodeStatus::Down;
            }
            3 => node.health = NodeHealth::Suspended(SuspendReason::Flaky),
            // Offlining leaves the eligibility flag alone, as the servers do.
            4 => node.health = NodeHealth::Offlined,
            5 => {
                node.eligibility = Eligibility::Ineligible;
                node.drain = Some(DrainStrategy {
                    deadline: Some(Duration::from_secs(3_600)),
                    force: false,
                    ignore_system_jobs: false,
                    started_at: ago(600),
                });
            }
            _ => {}
        }
        node_list.push(node);
    }

    let jobs: Vec<drover_core::Job> = (0..10)
        .map(|j| {
            let mut job = match j % 3 {
                0 => mock::service_job(&format!("web-{j}"), 10),
                1 => mock::batch_job(&format!("batch-{j}"), 10),
                _ => mock::system_job(&format!("sys-{j}")),
            };
            job.status = if j == 9 {
                JobStatus::Pending
            } else {
                JobStatus::Running
            };
            job.submit_time = ago(3_600 + j * 60);
            job.version = j % 3;
            job
        })
        .collect();

    // Each job's allocations differ from its first one only in id, name index, node, age
    // and status: copying that row makes a million allocations a matter of a second.
    let templates: Vec<AllocRow> = jobs
        .iter()
        .map(|job| alloc_row(&mock::alloc(0, job, node_id(0), 0)))
        .collect();
    let mut alloc_rows = AllocTable::with_capacity(allocs as usize);
    // Allocation `a` belongs to job `a % 9`; added job by job, as a load adds them.
    for a in (0..9).flat_map(|job| (job..allocs).step_by(9)) {
        let mut row = templates[(a % 9) as usize].clone();
        row.id = alloc_id(a);
        // `mock::alloc` names allocation `a` of its job `<job>.web[a / 9]`.
        row.name = AllocName::Index((a / 9) as u32);
        row.node_id = node_id(a % nodes.max(1));
        row.create_time = ago(60 + a % 3_000);
        row.client = match a % 50 {
            0 => ClientStatus::Pending,
            1 => ClientStatus::Failed,
            2 => ClientStatus::Complete,
            _ => ClientStatus::Running,
        };
        row.deployment = deployment_part(a);
        alloc_rows.upsert(row);
    }

    let mut evals = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let mut eval = mock::eval(i as u64, job);
        eval.id = drover_core::EvalId::from_bytes(scattered(3, i as u64));
        eval.create_time = ago(30 * (10 - i as u64));
        eval.create_index = 100 + i as u64;
        eval.status = match i % 4 {
            0 => EvalStatus::Complete,
            1 => EvalStatus::Pending,
            2 => EvalStatus::Blocked,
            _ => EvalStatus::Complete,
        };
        eval.modify_index = 100 + i as u64;
        eval.modify_time = eval.create_time;
        if i == 2 {
            eval.status = EvalStatus::Blocked;
            eval.triggered_by = TriggeredBy::QueuedAllocs;
            eval.failed_tg_allocs = BTreeMap::from([("web".to_owned(), placement_failure())]);
            eval.queued_allocations = BTreeMap::from([("web".to_owned(), 4)]);
        }
        if i == 9 {
            // As a scheduler leaves it: the evaluation completes with its failures and
            // hands the placements it could not make to a blocked evaluation, which records
            // no failures of its own.
            let blocked_id = drover_core::EvalId::from_bytes(scattered(3, 10));
            eval.status = EvalStatus::Complete;
            eval.failed_tg_allocs = BTreeMap::from([("web".to_owned(), placement_failure())]);
            eval.queued_allocations = BTreeMap::from([("web".to_owned(), 4)]);
            eval.blocked_eval = Some(blocked_id);
            let mut blocked = eval.clone();
            blocked.id = blocked_id;
            blocked.status = EvalStatus::Blocked;
            blocked.triggered_by = TriggeredBy::QueuedAllocs;
            blocked.status_description = "created to place remaining allocations".into();
            blocked.previous_eval = Some(eval.id);
            blocked.blocked_eval = None;
            blocked.failed_tg_allocs = BTreeMap::new();
            blocked.create_time = ago(20);
            blocked.modify_time = ago(20);
            blocked.create_index = 110;
            blocked.modify_index = 110;
            evals.push(eval);
            evals.push(blocked);
            continue;
        }
        evals.push(eval);
    }

    // Two children dispatched from batch-1, whose ids differ only at their end (as the
    // servers name them: the parent, the time, a random suffix), done by now.
    let children = ["0a1b2c3d", "9f8e7d6c"].map(|suffix| {
        let mut child = mock::batch_job(&format!("batch-1/dispatch-1767225000-{suffix}"), 1);
        child.parent_id = Some(drover_core::JobId::new("batch-1"));
        child.status = JobStatus::Dead;
        child.submit_time = ago(600);
        child
    });
    Snapshot {
        nodes: node_list,
        allocs: alloc_rows,
        jobs: jobs.iter().chain(&children).map(job_row).collect(),
        evals,
        services: services(nodes, allocs),
        deployments: deployments(),
        index: 1_000,
        health_periods: Some(server_health_periods()),
    }
}

/// The service registrations of [`snapshot`]: the running allocations among the first 60
/// of `web-0` (a group service `web` and a task service `admin`), `web-3` (`api`) and
/// `batch-1` (`metrics`), on their node's address at port `20000 + a`, passing but for
/// every fifth (warning) and every seventh (critical), each with one http check saying so.
pub fn services(nodes: u64, allocs: u64) -> Vec<drover_core::ServiceRegistration> {
    let mut registrations = Vec::new();
    for a in (0..allocs.min(60)).filter(|a| a % 50 >= 3) {
        let (job, names): (&str, &[(&str, Option<&str>)]) = match a % 9 {
            0 => ("web-0", &[("web", None), ("admin", Some("server"))]),
            1 => ("batch-1", &[("metrics", Some("server"))]),
            3 => ("web-3", &[("api", None)]),
            _ => continue,
        };
        for (i, (name, task)) in names.iter().enumerate() {
            let alloc = alloc_id(a);
            let node = a % nodes.max(1);
            let health = match a {
                _ if a % 7 == 0 => drover_core::ServiceHealth::Critical,
                _ if a % 5 == 0 => drover_core::ServiceHealth::Warning,
                _ => drover_core::ServiceHealth::Passing,
            };
            registrations.push(drover_core::ServiceRegistration {
                id: drover_core::ServiceRegistration::make_id(alloc, *task, i),
                service_name: (*name).to_owned(),
                namespace: drover_core::DEFAULT_NAMESPACE.to_owned(),
                job_id: job.to_owned(),
                alloc_id: alloc,
                node_id: node_id(node),
                task: task.map(str::to_owned),
                address: Some(mock::node_address(node)),
                port: 20_000 + a as u16 + i as u16 * 1_000,
                tags: match *name {
                    "web" => vec!["http".to_owned(), "v2".to_owned()],
                    _ => Vec::new(),
                },
                health,
                checks: vec![service_check(health, 500 + a)],
                create_index: 500 + a,
                modify_index: 500 + a,
            });
        }
    }
    registrations
}

/// The one http check of a [`services`] registration, its status the registration's
/// health, found at second `at`.
fn service_check(health: drover_core::ServiceHealth, at: u64) -> drover_core::CheckState {
    use drover_core::ServiceHealth;
    let (code, output) = match health {
        ServiceHealth::Passing => (200, "GET /health: 200"),
        ServiceHealth::Warning => (429, "GET /health: 429\ntoo many requests"),
        ServiceHealth::Critical => (503, "GET /health: 503"),
    };
    drover_core::CheckState {
        name: "alive".to_owned(),
        check_type: drover_core::CheckType::Http,
        status: health.into(),
        output: output.to_owned(),
        http_status: Some(code),
        time: drover_core::Timestamp(at * 1_000),
    }
}

/// The id of deployment `n` of [`deployments`].
pub fn deployment_id(n: u64) -> drover_core::DeploymentId {
    drover_core::DeploymentId::from_bytes(scattered(4, n))
}

/// One of every status: `web-0`'s finished rollout (0), `web-3`'s canaries waiting for
/// promotion, one healthy (1), `web-6`'s paused rollout with an unhealthy allocation (2),
/// and two of job `api` in namespace `staging`: version 1 failed (3), version 0 cancelled
/// by it (4).
pub fn deployments() -> Vec<Deployment> {
    use drover_core::deployment_describe as describe;
    let group = |desired: u32, placed: u32, healthy: u32, unhealthy: u32| DeploymentGroup {
        desired_total: desired,
        placed,
        healthy,
        unhealthy,
        progress_deadline: Duration::from_secs(600),
        ..Default::default()
    };
    let deployment =
        |n: u64, job: &str, version: u64, status, description: &str, groups| Deployment {
            id: deployment_id(n),
            namespace: drover_core::DEFAULT_NAMESPACE.to_owned(),
            job_id: job.into(),
            job_version: version,
            job_create_index: 10,
            status,
            description: description.to_owned(),
            groups: BTreeMap::from([groups]),
            create_time: ago(300 + n * 600),
            create_index: 400 - n * 50,
            modify_index: 900 - n * 50,
        };
    let canaries = DeploymentGroup {
        desired_canaries: 2,
        placed_canaries: vec![alloc_id(3), alloc_id(12)],
        require_progress_by: Some(now().saturating_add(Duration::from_secs(420))),
        ..group(10, 2, 1, 0)
    };
    let paused = DeploymentGroup {
        auto_revert: true,
        require_progress_by: Some(now().saturating_add(Duration::from_secs(60))),
        ..group(10, 4, 3, 1)
    };
    let mut failed = deployment(
        3,
        "api",
        1,
        DeploymentStatus::Failed,
        describe::UNHEALTHY_REVERTED,
        ("api".to_owned(), group(3, 3, 1, 2)),
    );
    failed.namespace = "staging".to_owned();
    let mut cancelled = deployment(
        4,
        "api",
        0,
        DeploymentStatus::Cancelled,
        describe::NEWER_JOB,
        ("api".to_owned(), group(3, 1, 1, 0)),
    );
    cancelled.namespace = "staging".to_owned();
    vec![
        deployment(
            0,
            "web-0",
            0,
            DeploymentStatus::Successful,
            describe::SUCCESSFUL,
            ("web".to_owned(), group(10, 10, 10, 0)),
        ),
        deployment(
            1,
            "web-3",
            0,
            DeploymentStatus::Running,
            describe::RUNNING_NEEDS_PROMOTION,
            ("web".to_owned(), canaries),
        ),
        deployment(
            2,
            "web-6",
            0,
            DeploymentStatus::Paused,
            describe::PAUSED,
            ("web".to_owned(), paused),
        ),
        failed,
        cancelled,
    ]
}

/// Allocation `a`'s part in the [`deployments`]: the first ten of `web-0`, healthy; the
/// two canaries of `web-3` (3 healthy, 12 not decided); the first four of `web-6` (33
/// unhealthy).
fn deployment_part(a: u64) -> Option<DeploymentPart> {
    let (n, canary, healthy) = match a {
        _ if a % 9 == 0 && a < 90 => (0, false, Some(true)),
        3 => (1, true, Some(true)),
        12 => (1, true, None),
        6 | 15 | 24 => (2, false, Some(true)),
        33 => (2, false, Some(false)),
        _ => return None,
    };
    Some(DeploymentPart {
        id: deployment_id(n),
        canary,
        healthy,
    })
}

/// Allocation `a` of [`snapshot`] as `AllocGet` returns it when its detail opens: running
/// on its node's eth0 address with a dynamic port `http` and a static port `admin` mapped
/// to the task's 9090, and one task that started and was sampled (37 MHz, 112 MB).
pub fn alloc_detail(a: u64, nodes: u64) -> Allocation {
    let job = mock::service_job("web-0", 10);
    let node = a % nodes.max(1);
    let mut alloc = mock::alloc(a, &job, node_id(node), (a / 9) as u32);
    alloc.id = alloc_id(a);
    let host_ip = mock::node_address(node);
    alloc.ports = [
        AllocatedPort {
            label: "http".into(),
            value: 23_517,
            to: 0,
            host_ip,
        },
        AllocatedPort {
            label: "admin".into(),
            value: 8_080,
            to: 9_090,
            host_ip,
        },
    ]
    .into_iter()
    .collect();
    alloc.task_states.insert(
        "server",
        TaskState {
            state: TaskRunState::Running,
            started_at: Some(ago(50)),
            events: vec![TaskEvent::new(
                ago(50),
                "Started",
                "task started by the raw_exec driver",
            )],
            usage: Some(drover_core::TaskUsage {
                cpu_mhz: 37,
                memory_mb: 112,
            }),
            ..TaskState::default()
        },
    );
    alloc
}

/// What a server with the default health settings sends.
pub fn server_health_periods() -> HealthPeriods {
    HealthPeriods::default()
}

fn placement_failure() -> AllocMetric {
    AllocMetric {
        nodes_evaluated: 12,
        nodes_filtered: 5,
        nodes_available: BTreeMap::from([("dc1".to_owned(), 12)]),
        class_filtered: BTreeMap::from([("gpu".to_owned(), 3)]),
        constraint_filtered: BTreeMap::from([("${attr.kernel.name} = windows".to_owned(), 5)]),
        nodes_exhausted: 7,
        class_exhausted: BTreeMap::from([("std".to_owned(), 7)]),
        dimension_exhausted: BTreeMap::from([(Dimension::Memory, 7)]),
        ports_exhausted: BTreeMap::from([(PortShortage::Taken(8080), 2)]),
        coalesced_failures: 3,
        score: 0.0,
    }
}

pub fn workers() -> Vec<WorkerRow> {
    use drover_proto::v1::WorkloadStatus as W;
    let statuses = [
        (WorkerStatusLabel::Started, W::WaitingToDequeue),
        (WorkerStatusLabel::Started, W::Scheduling),
        (WorkerStatusLabel::Paused, W::Paused),
        (WorkerStatusLabel::Pausing, W::Submitting),
    ];
    (0..4)
        .map(|i| WorkerRow {
            id: format!("worker-{i}"),
            server_id: "server-1".to_owned(),
            schedulers: vec![
                "service".into(),
                "batch".into(),
                "system".into(),
                "sysbatch".into(),
                "_core".into(),
            ],
            started: ago(5_000),
            status: statuses[i].0,
            workload: workload_label(statuses[i].1 as i32),
        })
        .collect()
}

pub fn blocked() -> Vec<BlockedRow> {
    vec![
        BlockedRow {
            eval_id: drover_core::EvalId::from_bytes(scattered(3, 10)).to_string(),
            job: JobKey::default_ns("web-9"),
            kind: BlockedKindLabel::Captured,
            node_id: String::new(),
            class_eligibility: BTreeMap::from([("gpu".into(), false), ("std".into(), true)]),
            escaped: false,
            triggered_by: "queued-allocs".into(),
            blocked_since: ago(300),
            unblocked_by: "capacity on a node of class std".into(),
        },
        BlockedRow {
            eval_id: drover_core::EvalId::from_bytes(scattered(3, 2)).to_string(),
            job: JobKey::default_ns("sys-2"),
            kind: BlockedKindLabel::Escaped,
            node_id: String::new(),
            class_eligibility: BTreeMap::new(),
            escaped: true,
            triggered_by: "queued-allocs".into(),
            blocked_since: ago(90),
            unblocked_by: "any capacity change".into(),
        },
    ]
}

fn stats() -> SchedulingStats {
    SchedulingStats {
        ready: 3,
        unacked: 2,
        pending: 1,
        waiting: 0,
        blocked: 2,
        failed: 0,
        broker_enabled: true,
        broker_paused: false,
        plan_depth: 1,
        plan_peak: 9,
        plans_enqueued: 420,
        plans_dequeued: 419,
    }
}

/// A stream of events as the server sends them, one second apart, each with its object.
fn events(count: u64) -> Vec<(Change, EventRow)> {
    use drover_proto::v1 as pb;
    use pb::event::Payload;
    let web0 = mock::service_job("web-0", 10);
    let mut node = mock::node(4);
    node.id = node_id(4);
    node.health = NodeHealth::Offlined;
    node.eligibility = Eligibility::Ineligible;
    let mut alloc = mock::alloc(3, &web0, node_id(3), 3);
    alloc.id = alloc_id(3);
    alloc.client_status = ClientStatus::Pending;
    let mut eval = mock::eval(10, &mock::service_job("web-9", 10));
    eval.id = drover_core::EvalId::from_bytes(scattered(3, 10));
    eval.status = EvalStatus::Blocked;
    eval.triggered_by = TriggeredBy::QueuedAllocs;
    let kinds: [(&str, &str, String, String, Payload); 4] = [
        (
            "allocation",
            "plan-result",
            alloc.id.to_string(),
            "web-0.web[3] run/pending".into(),
            Payload::Allocation(pb::Allocation::from(&alloc)),
        ),
        (
            "evaluation",
            "eval-updated",
            eval.id.to_string(),
            "web-9 queued-allocs blocked".into(),
            Payload::Evaluation(pb::Evaluation::from(&eval)),
        ),
        (
            "job",
            "job-registered",
            web0.id.to_string(),
            "web-0 v0 running".into(),
            Payload::Job(pb::Job::from(&web0)),
        ),
        (
            "node",
            "node-health",
            node.id.to_string(),
            "node-4 ready offlined".into(),
            Payload::Node(pb::Node::from(&node)),
        ),
    ];
    (0..count)
        .map(|i| {
            let (topic, event_type, key, summary, payload) = &kinds[(i % 4) as usize];
            let row = EventRow {
                seq: 0,
                index: 1_001 + i,
                topic,
                event_type,
                key: key.clone(),
                summary: summary.clone(),
                received: ago(count - i),
                payload: Some(std::sync::Arc::new(payload.clone())),
            };
            (Change::LogOnly, row)
        })
        .collect()
}

/// The cluster as server 2 sees it while it leads (term 4), with `members` as (id, role,
/// reachable from server 2), each named `drover-<id>` at `10.0.0.<id>:4648`.
pub fn led_by_2(members: &[(&str, &'static str, bool)]) -> ClusterInfo {
    ClusterInfo {
        server_id: "2".into(),
        leader_id: "2".into(),
        role: "leader",
        term: 4,
        applied_index: 1_020,
        servers: members
            .iter()
            .map(|(id, role, reachable)| crate::model::ServerState {
                id: (*id).into(),
                name: format!("drover-{id}"),
                role,
                reachable: *reachable,
                address: format!("10.0.0.{id}:4648"),
                version: "0.1.0".into(),
            })
            .collect(),
    }
}

/// An app of `width` x `height` holding the fixture cluster, connected, at [`now`].
pub fn app(nodes: u64, allocs: u64, width: u16, height: u16) -> App {
    let mut app = App::new("127.0.0.1:4647", false, now());
    let updates = [
        Update::Connection(Connection::Connected),
        Update::Snapshot(Box::new(snapshot(nodes, allocs))),
        Update::Cluster(ClusterInfo {
            server_id: "server-1".into(),
            leader_id: "server-1".into(),
            role: "leader",
            term: 3,
            applied_index: 1_020,
            servers: Vec::new(),
        }),
        Update::Workers(workers()),
        Update::Scheduling(stats()),
        Update::Blocked(blocked()),
        Update::Events(events(12)),
    ];
    for update in updates {
        app.handle(Input::Update(update));
    }
    for (second, placed) in [3u64, 5, 8, 13, 9, 4, 12, 20, 16, 7]
        .into_iter()
        .enumerate()
    {
        for _ in 0..placed {
            app.placements
                .record(now().saturating_sub(Duration::from_secs(10 - second as u64)));
        }
    }
    app.handle(Input::Tick(now()));
    app.handle(Input::Resize { width, height });
    app
}
