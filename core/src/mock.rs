//! Fixtures for tests, benchmarks and the simulator: valid objects with deterministic ids.
//!
//! Ids are derived from a number, so a test that says `mock::node_id(3)` twice means one node.

use crate::types::*;
use std::time::Duration;

fn bytes(kind: u8, n: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0] = kind;
    b[8..].copy_from_slice(&n.to_be_bytes());
    b
}

pub fn node_id(n: u64) -> NodeId {
    NodeId::from_bytes(bytes(1, n))
}

pub fn alloc_id(n: u64) -> AllocId {
    AllocId::from_bytes(bytes(2, n))
}

pub fn eval_id(n: u64) -> EvalId {
    EvalId::from_bytes(bytes(3, n))
}

/// A ready, healthy node `node-N` in `dc1` with 4,000 MHz, 8,192 MB and 100 GB, and one
/// address for ports ([`node_address`]) with the default dynamic range.
pub fn node(n: u64) -> Node {
    let mut node = Node::new(
        node_id(n),
        format!("node-{n}"),
        Resources::new(4000, 8192, 100_000),
    );
    node.secret_id = format!("secret-{n}");
    node.networks = NodeNetworks::single(node_address(n), "eth0");
    node.attributes.insert("kernel.name".into(), "linux".into());
    node.attributes.insert("cpu.arch".into(), "amd64".into());
    node.attributes
        .insert("unique.hostname".into(), format!("host-{n}"));
    // The process drivers and the simulator's; not docker, which few test nodes would run.
    for driver in ["raw_exec", "exec", "mock"] {
        node.attributes
            .insert(format!("driver.{driver}"), "1".into());
    }
    node
}

/// The address of `node(n)`: `10.0.x.y`, distinct for every `n` below 65,536.
pub fn node_address(n: u64) -> std::net::IpAddr {
    std::net::IpAddr::from([10, 0, (n >> 8) as u8, n as u8])
}

/// A job of the given type with one group `web` of `count` `raw_exec` tasks (100 MHz, 256 MB).
pub fn job_of(id: &str, job_type: JobType, count: u32) -> Job {
    let mut task = Task::raw_exec("server", "/bin/sleep");
    task.config.args = vec!["3600".into()];
    task.resources = Resources::new(100, 256, 0);
    let mut group = TaskGroup::new("web", count, vec![task]);
    group.reschedule = match job_type {
        JobType::Service => ReschedulePolicy::service_default(),
        JobType::Batch => ReschedulePolicy::batch_default(),
        JobType::System | JobType::SysBatch => ReschedulePolicy::disabled(),
    };
    let mut job = Job::new(id, job_type, vec![group]);
    job.datacenters = vec!["dc1".into()];
    job
}

pub fn service_job(id: &str, count: u32) -> Job {
    job_of(id, JobType::Service, count)
}

pub fn batch_job(id: &str, count: u32) -> Job {
    job_of(id, JobType::Batch, count)
}

pub fn system_job(id: &str) -> Job {
    job_of(id, JobType::System, 1)
}

/// A pending eval of `job` triggered by registration.
/// A service `name` on the group's port `port_label` with one tcp check every 10 s, as the
/// simulator's tests and the services bench offer it.
pub fn tcp_service(name: &str, port_label: &str, tag: &str) -> Service {
    Service {
        name: name.into(),
        port_label: port_label.into(),
        tags: vec![tag.into()],
        meta: Default::default(),
        address_mode: Default::default(),
        checks: vec![ServiceCheck {
            name: String::new(),
            kind: CheckKind::Tcp,
            interval: Duration::from_secs(10),
            timeout: Duration::from_secs(2),
            on_update: OnUpdate::RequireHealthy,
            check_restart: None,
            task: None,
        }],
    }
}

pub fn eval(n: u64, job: &Job) -> Evaluation {
    Evaluation::new(eval_id(n), job, TriggeredBy::JobRegister, Timestamp::ZERO)
}

/// Links with every field set: a replacement that was rescheduled once, preempted two
/// allocations, is followed up by an eval, was itself preempted and replaced.
pub fn full_links() -> AllocLinks {
    AllocLinks {
        reschedule_tracker: Some(Box::new(RescheduleTracker {
            events: vec![RescheduleEvent {
                time: Timestamp::from_millis(9),
                prev_alloc_id: alloc_id(1),
                prev_node_id: node_id(1),
                delay_ms: 30_000,
            }],
        })),
        previous_allocation: Some(alloc_id(1)),
        next_allocation: Some(alloc_id(6)),
        follow_up_eval_id: Some(eval_id(9)),
        preempted_by: Some(alloc_id(7)),
        preempted_allocations: vec![alloc_id(2), alloc_id(3)],
        migrate: true,
        deployment: Some(AllocDeployment {
            id: DeploymentId::from_bytes([5; 16]),
            canary: true,
            health: Some(DeploymentHealth {
                healthy: true,
                time: Timestamp::from_millis(11),
            }),
        }),
    }
}

/// A running allocation `job.web[i]` of `job` on `node`, as the plan applier would store it.
pub fn alloc(n: u64, job: &Job, node: NodeId, i: u32) -> Allocation {
    let group = &job.groups[0];
    Allocation {
        id: alloc_id(n),
        eval_id: eval_id(0),
        name: Allocation::name_for(job.id.as_str(), &group.name, i),
        namespace: job.namespace.as_str().into(),
        job_id: job.id.clone(),
        job_version: job.version,
        task_group: group.name.as_str().into(),
        node_id: node,
        desired_status: DesiredStatus::Run,
        desired_description: Default::default(),
        client_status: ClientStatus::Running,
        client_description: Default::default(),
        state_history: thin_vec::ThinVec::new(),
        task_states: Default::default(),
        links: Default::default(),
        resources: group.resources(),
        ports: thin_vec::ThinVec::new(),
        metrics: PlacementMetric::default(),
        create_index: 0,
        modify_index: 0,
        alloc_modify_index: 0,
        create_time: Timestamp::ZERO,
        modify_time: Timestamp::ZERO,
    }
}

/// A plan-apply command placing `allocs`.
pub fn place(eval: EvalId, allocs: Vec<Allocation>, now: Timestamp) -> crate::fsm::Command {
    let mut node_allocation =
        std::collections::BTreeMap::<NodeId, Vec<std::sync::Arc<Allocation>>>::new();
    for a in allocs {
        node_allocation.entry(a.node_id).or_default().push(a.into());
    }
    crate::fsm::Command::ApplyPlan {
        plan: crate::fsm::PlanApply {
            eval_id: eval,
            job: None,
            node_allocation: node_allocation.into(),
            node_update: Default::default(),
            node_preemptions: Default::default(),
            evals: Vec::new(),
            deployment: None,
            deployment_updates: Vec::new(),
        },
        now,
    }
}

/// One second, for readable test timings.
pub const SEC: Duration = Duration::from_secs(1);
