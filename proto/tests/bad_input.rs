//! What a client sends is checked, never trusted: each bad input is refused with an error
//! naming the field from the root of the request, and none of them panics.

mod common;

use common::*;
use drover_core::*;
use drover_proto::convert::{self, ConvertError, Problem};
use drover_proto::v1 as pb;

type Case = (
    &'static str,
    Box<dyn Fn() -> Result<(), ConvertError>>,
    &'static str,
);

fn job_pb() -> pb::Job {
    pb::Job::from(&full_job())
}

fn node_pb() -> pb::Node {
    pb::Node::from(&full_node())
}

fn alloc_pb() -> pb::Allocation {
    pb::Allocation::from(&full_alloc())
}

fn eval_pb() -> pb::Evaluation {
    pb::Evaluation::from(&full_eval())
}

fn auth() -> Option<pb::NodeAuth> {
    Some(pb::NodeAuth {
        node_id: mock::node_id(1).to_string(),
        secret_id: "s".into(),
    })
}

fn known(alloc: u64, alloc_modify_index: u64) -> pb::KnownAllocation {
    convert::known_allocation(mock::alloc_id(alloc), alloc_modify_index)
}

fn registration() -> pb::NodeRegistration {
    pb::NodeRegistration {
        node_id: String::new(),
        secret_id: String::new(),
        name: "n1".into(),
        datacenter: "dc1".into(),
        node_class: String::new(),
        attributes: Default::default(),
        meta: Default::default(),
        resources: Some((&Resources::new(1000, 1024, 0)).into()),
        reserved: Some((&Resources::ZERO).into()),
        networks: None,
    }
}

/// Builds a case from a mutation of a valid message and the conversion to run on it.
fn case<P: 'static, T: 'static>(
    name: &'static str,
    base: fn() -> P,
    mutate: impl Fn(&mut P) + 'static,
    convert: fn(P) -> Result<T, ConvertError>,
    expected: &'static str,
) -> Case {
    (
        name,
        Box::new(move || {
            let mut p = base();
            mutate(&mut p);
            convert(p).map(|_| ())
        }),
        expected,
    )
}

fn cases() -> Vec<Case> {
    vec![
        // --- Jobs ---
        case(
            "missing cpu of the second task",
            job_pb,
            |j| j.groups[0].tasks[1].resources.as_mut().unwrap().cpu_mhz = None,
            Job::try_from,
            "job.groups[web].tasks[sidecar].resources.cpu: missing",
        ),
        case(
            "missing resources of a task",
            job_pb,
            |j| j.groups[1].tasks[0].resources = None,
            Job::try_from,
            "job.groups[worker].tasks[w].resources: missing",
        ),
        case(
            "missing task config",
            job_pb,
            |j| j.groups[0].tasks[0].config = None,
            Job::try_from,
            "job.groups[web].tasks[server].config: missing",
        ),
        case(
            "a network mode drover does not run",
            job_pb,
            |j| j.groups[0].network.as_mut().unwrap().mode = "bridge".into(),
            Job::try_from,
            "job.groups[web].network.mode: network mode \"bridge\": drover runs host networking only (mode \"host\")",
        ),
        case(
            "a static port beyond 65535",
            job_pb,
            |j| j.groups[0].network.as_mut().unwrap().ports[1].static_port = Some(70_000),
            Job::try_from,
            "job.groups[web].network.ports[1].static_port: not a port (1-65535)",
        ),
        case(
            "a port mapped to 0",
            job_pb,
            |j| j.groups[0].network.as_mut().unwrap().ports[0].to = Some(0),
            Job::try_from,
            "job.groups[web].network.ports[0].to: not a port (1-65535)",
        ),
        case(
            "unknown job type",
            job_pb,
            |j| j.job_type = 42,
            Job::try_from,
            "job.job_type: unknown value 42",
        ),
        case(
            "unspecified job type",
            job_pb,
            |j| j.job_type = 0,
            Job::try_from,
            "job.job_type: unspecified",
        ),
        case(
            "negative enum number",
            job_pb,
            |j| j.job_type = -1,
            Job::try_from,
            "job.job_type: unknown value -1",
        ),
        case(
            "priority too large for a u8",
            job_pb,
            |j| j.priority = 300,
            Job::try_from,
            "job.priority: 300 is out of range (at most 255)",
        ),
        case(
            "priority at u32::MAX",
            job_pb,
            |j| j.priority = u32::MAX,
            Job::try_from,
            "job.priority: 4294967295 is out of range (at most 255)",
        ),
        case(
            "empty job id",
            job_pb,
            |j| j.id.clear(),
            Job::try_from,
            "job.id: missing",
        ),
        case(
            "a duplicate group name is named by index",
            job_pb,
            |j| {
                j.groups[1].name = j.groups[0].name.clone();
                j.groups[1].tasks[0].config = None;
            },
            Job::try_from,
            "job.groups[1].tasks[w].config: missing",
        ),
        case(
            "missing restart policy",
            job_pb,
            |j| j.groups[0].restart = None,
            Job::try_from,
            "job.groups[web].restart: missing",
        ),
        case(
            "missing reschedule policy",
            job_pb,
            |j| j.groups[1].reschedule = None,
            Job::try_from,
            "job.groups[worker].reschedule: missing",
        ),
        case(
            "unknown restart mode",
            job_pb,
            |j| j.groups[0].restart.as_mut().unwrap().mode = 9,
            Job::try_from,
            "job.groups[web].restart.mode: unknown value 9",
        ),
        case(
            "unknown reconcile strategy",
            job_pb,
            |j| j.groups[0].disconnect.as_mut().unwrap().reconcile = 7,
            Job::try_from,
            "job.groups[web].disconnect.reconcile: unknown value 7",
        ),
        case(
            "unknown job constraint operator",
            job_pb,
            |j| j.constraints[3].operator = 99,
            Job::try_from,
            "job.constraints[3].operator: unknown value 99",
        ),
        case(
            "unspecified group constraint operator",
            job_pb,
            |j| j.groups[0].constraints[0].operator = 0,
            Job::try_from,
            "job.groups[web].constraints[0].operator: unspecified",
        ),
        case(
            "unknown payload requirement",
            job_pb,
            |j| j.parameterized.as_mut().unwrap().payload = 5,
            Job::try_from,
            "job.parameterized.payload: unknown value 5",
        ),
        case(
            "unknown status on a job the servers sent",
            job_pb,
            |j| j.status = 12,
            Job::try_from,
            "job.status: unknown value 12",
        ),
        case(
            "register without a job",
            || pb::RegisterJobRequest {
                job: None,
                enforce_index: None,
            },
            |_| {},
            convert::JobRegistration::try_from,
            "job: missing",
        ),
        case(
            "register with a task missing memory",
            || pb::RegisterJobRequest {
                job: Some(job_pb()),
                enforce_index: Some(0),
            },
            |r| {
                let t = &mut r.job.as_mut().unwrap().groups[0].tasks[0];
                t.resources.as_mut().unwrap().memory_mb = None;
            },
            convert::JobRegistration::try_from,
            "job.groups[web].tasks[server].resources.memory: missing",
        ),
        case(
            "dispatch without a job id",
            || pb::DispatchJobRequest {
                namespace: "prod".into(),
                job_id: String::new(),
                payload: vec![],
                meta: Default::default(),
            },
            |_| {},
            convert::DispatchRequest::try_from,
            "job_id: missing",
        ),
        // --- Nodes ---
        case(
            "node id that is not a uuid",
            node_pb,
            |n| n.id = "xyz".into(),
            Node::try_from,
            "node.id: \"xyz\" is not a uuid",
        ),
        case(
            "unknown node health",
            node_pb,
            |n| n.health = 9,
            Node::try_from,
            "node.health: unknown value 9",
        ),
        case(
            "unspecified node status",
            node_pb,
            |n| n.status = 0,
            Node::try_from,
            "node.status: unspecified",
        ),
        case(
            "unknown eligibility",
            node_pb,
            |n| n.eligibility = 3,
            Node::try_from,
            "node.eligibility: unknown value 3",
        ),
        case(
            "missing reserved resources",
            node_pb,
            |n| n.reserved = None,
            Node::try_from,
            "node.reserved: missing",
        ),
        case(
            "a node address that is not an ip",
            node_pb,
            |n| n.networks.as_mut().unwrap().addresses[1].address = "eth0".into(),
            Node::try_from,
            "node.networks.addresses[1].address: not an IP address",
        ),
        case(
            "reserved ports that do not parse",
            || pb::RegisterNodeRequest {
                node: Some(registration()),
            },
            |r| {
                r.node.as_mut().unwrap().networks = Some(pb::NodeNetworks {
                    reserved_ports: "22,9000-80".into(),
                    ..Default::default()
                })
            },
            convert::NodeRegistration::try_from,
            "node.networks.reserved_ports: range \"9000-80\" ends before it starts",
        ),
        case(
            "a dynamic range bound beyond 65535",
            node_pb,
            |n| n.networks.as_mut().unwrap().max_dynamic_port = 65_536,
            Node::try_from,
            "node.networks.max_dynamic_port: not a port (1-65535)",
        ),
        case(
            "registration without a node",
            || pb::RegisterNodeRequest { node: None },
            |_| {},
            convert::NodeRegistration::try_from,
            "node: missing",
        ),
        case(
            "registration without disk",
            || pb::RegisterNodeRequest {
                node: Some(registration()),
            },
            |r| r.node.as_mut().unwrap().resources.as_mut().unwrap().disk_mb = None,
            convert::NodeRegistration::try_from,
            "node.resources.disk: missing",
        ),
        case(
            "re-registration with a bad id",
            || pb::RegisterNodeRequest {
                node: Some(registration()),
            },
            |r| {
                let n = r.node.as_mut().unwrap();
                n.node_id = "not-a-uuid".into();
                n.secret_id = "s".into();
            },
            convert::NodeRegistration::try_from,
            "node.node_id: \"not-a-uuid\" is not a uuid",
        ),
        case(
            "re-registration without its secret",
            || pb::RegisterNodeRequest {
                node: Some(registration()),
            },
            |r| r.node.as_mut().unwrap().node_id = mock::node_id(1).to_string(),
            convert::NodeRegistration::try_from,
            "node.secret_id: required with node_id (re-registration proves the node)",
        ),
        case(
            "heartbeat without auth",
            || pb::UpdateNodeStatusRequest {
                auth: None,
                readiness: pb::Readiness::Ready as i32,
                last_snapshot: None,
            },
            |_| {},
            convert::Heartbeat::try_from,
            "auth: missing",
        ),
        case(
            "heartbeat with an empty secret",
            || pb::UpdateNodeStatusRequest {
                auth: auth(),
                readiness: pb::Readiness::Ready as i32,
                last_snapshot: None,
            },
            |h| h.auth.as_mut().unwrap().secret_id.clear(),
            convert::Heartbeat::try_from,
            "auth.secret_id: missing",
        ),
        case(
            "heartbeat with unspecified readiness",
            || pb::UpdateNodeStatusRequest {
                auth: auth(),
                readiness: 0,
                last_snapshot: None,
            },
            |_| {},
            convert::Heartbeat::try_from,
            "readiness: unspecified",
        ),
        case(
            "watch with a bad node id",
            || pb::WatchAllocationsRequest {
                auth: auth(),
                min_index: 0,
                known: Vec::new(),
            },
            |w| w.auth.as_mut().unwrap().node_id = "42".into(),
            convert::WatchRequest::try_from,
            "auth.node_id: \"42\" is not a uuid",
        ),
        case(
            "watch naming a held allocation by a bad id",
            || pb::WatchAllocationsRequest {
                auth: auth(),
                min_index: 0,
                known: vec![known(1, 7), known(2, 9)],
            },
            |w| w.known[1].id = "x".into(),
            convert::WatchRequest::try_from,
            "known[1].id: \"x\" is not a uuid",
        ),
        case(
            "watch naming a held allocation twice",
            || pb::WatchAllocationsRequest {
                auth: auth(),
                min_index: 0,
                known: vec![known(1, 7), known(2, 9), known(3, 4)],
            },
            |w| w.known[2].id = w.known[0].id.clone(),
            convert::WatchRequest::try_from,
            "known[2].id: names an allocation an earlier entry names",
        ),
        case(
            "alloc update with an unknown client status",
            || pb::UpdateAllocationsRequest {
                auth: auth(),
                updates: vec![update_pb(), update_pb()],
            },
            |u| u.updates[1].client_status = 17,
            convert::AllocUpdates::try_from,
            "updates[1].client_status: unknown value 17",
        ),
        case(
            "alloc update with an unspecified task state",
            || pb::UpdateAllocationsRequest {
                auth: auth(),
                updates: vec![update_pb()],
            },
            |u| u.updates[0].task_states.get_mut("server").unwrap().state = 0,
            convert::AllocUpdates::try_from,
            "updates[0].task_states[\"server\"].state: unspecified",
        ),
        case(
            "alloc update without an alloc id",
            || pb::UpdateAllocationsRequest {
                auth: auth(),
                updates: vec![update_pb()],
            },
            |u| u.updates[0].alloc_id.clear(),
            convert::AllocUpdates::try_from,
            "updates[0].alloc_id: missing",
        ),
        // --- Allocations ---
        case(
            "unspecified task run state",
            alloc_pb,
            |a| a.task_states.get_mut("server").unwrap().state = 0,
            Allocation::try_from,
            "alloc.task_states[\"server\"].state: unspecified",
        ),
        case(
            "bad node id in the reschedule tracker",
            alloc_pb,
            |a| a.reschedule_tracker.as_mut().unwrap().events[0].prev_node_id = "n".into(),
            Allocation::try_from,
            "alloc.reschedule_tracker.events[0].prev_node_id: \"n\" is not a uuid",
        ),
        case(
            "bad preempted allocation id",
            alloc_pb,
            |a| a.preempted_allocations[1] = "zz".into(),
            Allocation::try_from,
            "alloc.preempted_allocations[1]: \"zz\" is not a uuid",
        ),
        case(
            "unknown state history status",
            alloc_pb,
            |a| a.state_history[2].client_status = 8,
            Allocation::try_from,
            "alloc.state_history[2].client_status: unknown value 8",
        ),
        case(
            "an allocated port without its address",
            alloc_pb,
            |a| a.ports[0].host_ip.clear(),
            Allocation::try_from,
            "alloc.ports[0].host_ip: missing",
        ),
        case(
            "an allocated port 0",
            alloc_pb,
            |a| a.ports[1].value = 0,
            Allocation::try_from,
            "alloc.ports[1].value: not a port (1-65535)",
        ),
        case(
            "missing placement metric",
            alloc_pb,
            |a| a.metrics = None,
            Allocation::try_from,
            "alloc.metrics: missing",
        ),
        case(
            "bad optional id",
            alloc_pb,
            |a| a.next_allocation = "next".into(),
            Allocation::try_from,
            "alloc.next_allocation: \"next\" is not a uuid",
        ),
        // --- Evaluations ---
        case(
            "unknown eval status",
            eval_pb,
            |e| e.status = 77,
            Evaluation::try_from,
            "eval.status: unknown value 77",
        ),
        case(
            "unknown resource dimension in a failure metric",
            eval_pb,
            |e| {
                let m = e.failed_tg_allocs.get_mut("web").unwrap();
                m.dimension_exhausted.insert("gpu".into(), 1);
            },
            Evaluation::try_from,
            "eval.failed_tg_allocs[\"web\"].dimension_exhausted[\"gpu\"]: unknown key \"gpu\"",
        ),
        case(
            "eval priority overflowing a u8",
            eval_pb,
            |e| e.priority = 256,
            Evaluation::try_from,
            "eval.priority: 256 is out of range (at most 255)",
        ),
        case(
            "unspecified trigger",
            eval_pb,
            |e| e.triggered_by = 0,
            Evaluation::try_from,
            "eval.triggered_by: unspecified",
        ),
        case(
            "eval without an id",
            eval_pb,
            |e| e.id.clear(),
            Evaluation::try_from,
            "eval.id: missing",
        ),
        case(
            "eval list with an unknown status filter",
            pb::ListEvalsRequest::default,
            |r| r.status = 31,
            |r| convert::EvalFilter::try_from(&r),
            "status: unknown value 31",
        ),
        case(
            "eval list with a namespace but no job",
            pb::ListEvalsRequest::default,
            |r| r.namespace = "prod".into(),
            |r| convert::EvalFilter::try_from(&r),
            "job_id: required when namespace is set",
        ),
        // --- Operator and workers ---
        case(
            "scheduler config without preemption",
            || pb::SchedulerSetConfigRequest {
                config: Some((&full_scheduler_config()).into()),
                cas_index: None,
            },
            |r| r.config.as_mut().unwrap().preemption = None,
            convert::SchedulerConfigUpdate::try_from,
            "config.preemption: missing",
        ),
        case(
            "scheduler config with an unknown algorithm",
            || pb::SchedulerSetConfigRequest {
                config: Some((&full_scheduler_config()).into()),
                cas_index: None,
            },
            |r| r.config.as_mut().unwrap().algorithm = 3,
            convert::SchedulerConfigUpdate::try_from,
            "config.algorithm: unknown value 3",
        ),
        case(
            "node list with an unknown health filter",
            pb::NodeListRequest::default,
            |r| r.health = 6,
            |r| convert::NodeFilter::try_from(&r),
            "health: unknown value 6",
        ),
        case(
            "drain end with a deadline",
            || pb::NodeDrainRequest {
                node_id: mock::node_id(1).to_string(),
                ..Default::default()
            },
            |r| r.deadline_ms = Some(1000),
            convert::DrainRequest::try_from,
            "enable: false ends a drain, so deadline_ms, force and ignore_system_jobs must be unset",
        ),
        case(
            "eligibility unspecified",
            || pb::NodeEligibilityRequest {
                node_id: mock::node_id(1).to_string(),
                eligibility: 0,
            },
            |_| {},
            convert::EligibilityChange::try_from,
            "eligibility: unspecified",
        ),
        case(
            "pause with no target",
            || pb::PauseWorkersRequest {
                workers: Some(pb::WorkerSelector::default()),
            },
            |_| {},
            convert::WorkerTarget::try_from,
            "workers.target: set worker_id or all",
        ),
        case(
            "resume with all = false",
            || pb::ResumeWorkersRequest {
                workers: Some(pb::WorkerSelector {
                    target: Some(pb::worker_selector::Target::All(false)),
                    server_id: String::new(),
                }),
            },
            |_| {},
            convert::WorkerTarget::try_from,
            "workers.all: must be true when set",
        ),
        case(
            "worker config with an unknown scheduler",
            || pb::SetWorkerConfigRequest {
                server_id: String::new(),
                config: Some(pb::WorkerConfig {
                    count: 2,
                    enabled_schedulers: vec![pb::SchedulerType::Batch as i32, 40],
                }),
            },
            |_| {},
            convert::WorkerConfigUpdate::try_from,
            "config.enabled_schedulers[1]: unknown value 40",
        ),
        // --- Events ---
        case(
            "subscription with an unspecified topic",
            pb::SubscribeRequest::default,
            |r| {
                r.topics = vec![
                    pb::TopicFilter {
                        topic: pb::Topic::Job as i32,
                        keys: vec![],
                    },
                    pb::TopicFilter {
                        topic: 0,
                        keys: vec![],
                    },
                ]
            },
            convert::EventFilter::try_from,
            "topics[1].topic: unspecified",
        ),
        case(
            "event without a payload",
            || {
                pb::Event::from(&drover_core::fsm::Event {
                    topic: drover_core::fsm::Topic::Node,
                    event_type: drover_core::fsm::EventType::NodeDeregistration,
                    key: "k".into(),
                    index: 1,
                    payload: drover_core::fsm::EventPayload::NodeId(mock::node_id(1)),
                })
            },
            |e| e.payload = None,
            drover_core::fsm::Event::try_from,
            "event.payload: missing",
        ),
        case(
            "event carrying a bad allocation",
            || {
                pb::Event::from(&drover_core::fsm::Event::alloc(
                    3,
                    drover_core::fsm::EventType::AllocationUpdated,
                    &std::sync::Arc::new(full_alloc()),
                ))
            },
            |e| {
                if let Some(pb::event::Payload::Allocation(a)) = e.payload.as_mut() {
                    a.desired_status = 0;
                }
            },
            drover_core::fsm::Event::try_from,
            "event.allocation.desired_status: unspecified",
        ),
    ]
}

fn update_pb() -> pb::AllocClientUpdate {
    let alloc = full_alloc();
    pb::AllocClientUpdate {
        deployment_health: None,
        alloc_id: alloc.id.to_string(),
        client_status: pb::ClientStatus::Running as i32,
        client_description: Default::default(),
        task_states: alloc
            .task_states
            .iter()
            .map(|(k, t)| (k.to_owned(), t.into()))
            .collect(),
        infra_failure: false,
        services: None,
    }
}

#[test]
fn every_bad_input_is_refused_naming_its_field() {
    let mut failures = Vec::new();
    for (name, run, expected) in cases() {
        match run() {
            Ok(()) => failures.push(format!("{name}: accepted, expected `{expected}`")),
            Err(e) if e.to_string() != expected => {
                failures.push(format!("{name}: got `{e}`, expected `{expected}`"))
            }
            Err(_) => {}
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn the_valid_bases_of_the_bad_cases_are_accepted() {
    // Otherwise a case could pass because its base was already broken.
    Job::try_from(job_pb()).unwrap();
    Node::try_from(node_pb()).unwrap();
    Allocation::try_from(alloc_pb()).unwrap();
    Evaluation::try_from(eval_pb()).unwrap();
    convert::AllocUpdates::try_from(pb::UpdateAllocationsRequest {
        auth: auth(),
        updates: vec![update_pb()],
    })
    .unwrap();
    let watch = convert::WatchRequest::try_from(pb::WatchAllocationsRequest {
        auth: auth(),
        min_index: 0,
        known: vec![known(3, 4), known(1, 7), known(2, 9)],
    })
    .unwrap();
    let sorted: Vec<_> = [(1, 7), (2, 9), (3, 4)]
        .map(|(n, i)| (mock::alloc_id(n), i))
        .into();
    assert_eq!(watch.known, Some(sorted), "known comes back sorted by id");
    convert::NodeRegistration::try_from(pb::RegisterNodeRequest {
        node: Some(registration()),
    })
    .unwrap();
}

#[test]
fn errors_expose_path_and_problem_and_become_invalid_argument() {
    let mut j = job_pb();
    j.groups[0].tasks[1].resources.as_mut().unwrap().cpu_mhz = None;
    let e = Job::try_from(j).unwrap_err();
    assert_eq!(e.path(), "job.groups[web].tasks[sidecar].resources.cpu");
    assert_eq!(e.problem(), &Problem::Missing);
    let status = tonic::Status::from(e);
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "job.groups[web].tasks[sidecar].resources.cpu: missing"
    );
}
