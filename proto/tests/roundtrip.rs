//! core → proto → bytes → proto → core gives back the original, for fully populated values.

mod common;

use common::*;
use drover_core::blocked::{BlockedEvalInfo, BlockedKind};
use drover_core::fsm::{Event, EventPayload, EventType, Topic};
use drover_core::scheduler::annotate::DryRun;
use drover_core::state::{GroupSummary, JobSummary};
use drover_core::*;
use drover_proto::convert::{self, WireEnum};
use drover_proto::v1 as pb;
use prost::Message;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

/// Encodes the message and decodes it again, so the round trip covers the wire itself
/// (field numbers, `optional` presence, map encoding), not only the struct mapping.
fn through_wire<M: Message + Default>(m: &M) -> M {
    M::decode(m.encode_to_vec().as_slice()).expect("a message we encoded decodes")
}

fn round_trip<C, P>(value: &C) -> C
where
    for<'a> P: From<&'a C>,
    P: Message + Default,
    C: TryFrom<P, Error = drover_proto::ConvertError> + Debug,
{
    let wire = through_wire(&P::from(value));
    C::try_from(wire).unwrap_or_else(|e| panic!("{value:?} did not convert back: {e}"))
}

#[test]
fn job_round_trips() {
    let job = full_job();
    assert_eq!(round_trip::<Job, pb::Job>(&job), job);
}

#[test]
fn mock_jobs_of_every_type_round_trip() {
    for job in [
        mock::service_job("s", 2),
        mock::batch_job("b", 3),
        mock::system_job("y"),
        mock::job_of("sb", JobType::SysBatch, 1),
    ] {
        assert_eq!(round_trip::<Job, pb::Job>(&job), job);
    }
}

#[test]
fn node_round_trips() {
    let node = full_node();
    assert_eq!(round_trip::<Node, pb::Node>(&node), node);
}

#[test]
fn node_of_every_health_and_status_round_trips() {
    use NodeHealth::*;
    use SuspendReason::*;
    let healths = [
        Healthy,
        Suspended(New),
        Suspended(Lost),
        Suspended(Flaky),
        Offlined,
    ];
    let statuses = [
        NodeStatus::Initializing,
        NodeStatus::Ready,
        NodeStatus::Down,
        NodeStatus::Disconnected,
    ];
    for (i, health) in healths.into_iter().enumerate() {
        let mut node = full_node();
        node.health = health;
        node.status = statuses[i % statuses.len()];
        node.drain = None;
        node.last_snapshot = None;
        assert_eq!(round_trip::<Node, pb::Node>(&node), node);
    }
}

#[test]
fn node_secret_never_leaves_in_a_node_message() {
    let mut node = full_node();
    node.secret_id = "very-secret".into();
    let wire = pb::Node::from(&node).encode_to_vec();
    assert!(
        !wire
            .windows(b"very-secret".len())
            .any(|w| w == b"very-secret"),
        "the secret was encoded into a Node message"
    );
    let back = Node::try_from(pb::Node::decode(wire.as_slice()).unwrap()).unwrap();
    assert_eq!(back.secret_id, "");
    node.secret_id.clear();
    assert_eq!(back, node);
}

#[test]
fn allocation_round_trips() {
    let alloc = full_alloc();
    assert_eq!(round_trip::<Allocation, pb::Allocation>(&alloc), alloc);
}

#[test]
fn allocation_with_nothing_optional_round_trips() {
    let job = mock::service_job("j", 1);
    let alloc = mock::alloc(1, &job, mock::node_id(1), 0);
    assert_eq!(round_trip::<Allocation, pb::Allocation>(&alloc), alloc);
}

#[test]
fn allocation_with_empty_reschedule_tracker_keeps_it() {
    let mut alloc = full_alloc();
    alloc
        .links
        .update(|l| l.reschedule_tracker = Some(Box::default()));
    assert_eq!(round_trip::<Allocation, pb::Allocation>(&alloc), alloc);
}

#[test]
fn evaluation_round_trips() {
    let eval = full_eval();
    assert_eq!(round_trip::<Evaluation, pb::Evaluation>(&eval), eval);
}

#[test]
fn evaluation_of_every_status_trigger_and_scheduler_round_trips() {
    for (i, trigger) in TriggeredBy::ALL.iter().enumerate() {
        let mut eval = full_eval();
        eval.triggered_by = *trigger;
        eval.status = EvalStatus::ALL[i % EvalStatus::ALL.len()];
        eval.scheduler = SchedulerType::ALL[i % SchedulerType::ALL.len()];
        eval.node_id = None;
        eval.wait = None;
        eval.wait_until = None;
        assert_eq!(round_trip::<Evaluation, pb::Evaluation>(&eval), eval);
    }
}

#[test]
fn scheduler_config_round_trips() {
    let config = full_scheduler_config();
    assert_eq!(
        round_trip::<SchedulerConfig, pb::SchedulerConfig>(&config),
        config
    );
    let default = SchedulerConfig::default();
    assert_eq!(
        round_trip::<SchedulerConfig, pb::SchedulerConfig>(&default),
        default
    );
}

#[test]
fn alloc_metric_round_trips() {
    let m = full_metric();
    assert_eq!(round_trip::<AllocMetric, pb::AllocMetric>(&m), m);
}

#[test]
fn alloc_transitions_round_trip() {
    let mut t = AllocTransition::stop(mock::alloc_id(3), "migrating");
    assert_eq!(round_trip::<AllocTransition, pb::AllocTransition>(&t), t);
    t.desired_status = DesiredStatus::Run;
    t.client_status = Some(ClientStatus::Unknown);
    t.follow_up_eval_id = Some(mock::eval_id(4));
    t.preempted_by = Some(mock::alloc_id(5));
    assert_eq!(round_trip::<AllocTransition, pb::AllocTransition>(&t), t);
}

#[test]
fn job_summary_round_trips() {
    let mut summary = JobSummary::new(JobKey::new("prod", "web-app"));
    summary.groups = BTreeMap::from([(
        "web".into(),
        GroupSummary {
            queued: 1,
            starting: 2,
            running: 3,
            complete: 4,
            failed: 5,
            lost: 6,
            unknown: 7,
        },
    )]);
    summary.live_allocs = 5;
    summary.total_allocs = 28;
    summary.open_evals = 1;
    summary.total_evals = 4;
    summary.queued_from = Some((12, mock::eval_id(2)));
    summary.modify_index = 13;
    assert_eq!(round_trip::<JobSummary, pb::JobSummary>(&summary), summary);
    summary.queued_from = None;
    assert_eq!(round_trip::<JobSummary, pb::JobSummary>(&summary), summary);
}

#[test]
fn events_with_every_payload_round_trip() {
    let payloads = [
        (
            Topic::Job,
            EventType::JobRegistered,
            EventPayload::Job(Arc::new(full_job())),
        ),
        (
            Topic::Job,
            EventType::JobDeregistered,
            EventPayload::JobKey(JobKey::new("prod", "web-app")),
        ),
        (
            Topic::Node,
            EventType::NodeHealth,
            EventPayload::Node(Arc::new(full_node())),
        ),
        (
            Topic::Node,
            EventType::NodeDeregistration,
            EventPayload::NodeId(mock::node_id(4)),
        ),
        (
            Topic::Evaluation,
            EventType::EvaluationUpdated,
            EventPayload::Evaluation(Arc::new(full_eval())),
        ),
        (
            Topic::Evaluation,
            EventType::EvaluationDeleted,
            EventPayload::EvalId(mock::eval_id(8)),
        ),
        (
            Topic::Allocation,
            EventType::PlanResult,
            EventPayload::Allocation(Arc::new(full_alloc())),
        ),
        (
            Topic::Allocation,
            EventType::AllocationDeleted,
            EventPayload::AllocId(mock::alloc_id(5)),
        ),
        (
            Topic::Operator,
            EventType::SchedulerConfigUpdated,
            EventPayload::SchedulerConfig(Arc::new(full_scheduler_config())),
        ),
    ];
    for (i, (topic, event_type, payload)) in payloads.into_iter().enumerate() {
        let event = Event {
            topic,
            event_type,
            key: format!("key-{i}"),
            index: 1000 + i as u64,
            payload,
        };
        assert_eq!(round_trip::<Event, pb::Event>(&event), event);
    }
}

/// Every variant of every mapped enum survives the wire and lands on a distinct number, so
/// no two core values can be confused (the round trips above only see the variants the
/// fixtures use).
#[test]
fn every_enum_variant_maps_to_a_distinct_wire_value_and_back() {
    fn check<E: WireEnum + PartialEq + Debug>(all: &[E]) {
        let mut seen = std::collections::BTreeSet::new();
        for v in all {
            let wire = v.to_wire();
            assert_ne!(wire, 0, "{v:?} maps to UNSPECIFIED");
            assert!(seen.insert(wire), "{v:?} shares wire value {wire}");
            assert_eq!(E::from_wire("f", wire).unwrap(), *v);
        }
    }
    check(&JobType::ALL);
    check(&[JobStatus::Pending, JobStatus::Running, JobStatus::Dead]);
    check(&Operator::ALL.map(|(op, _)| op));
    check(&[
        PayloadRequirement::Optional,
        PayloadRequirement::Required,
        PayloadRequirement::Forbidden,
    ]);
    check(&[RestartMode::Fail, RestartMode::Delay]);
    check(&[
        DelayFunction::Constant,
        DelayFunction::Exponential,
        DelayFunction::Fibonacci,
    ]);
    check(&[
        ReconcileStrategy::BestScore,
        ReconcileStrategy::KeepOriginal,
        ReconcileStrategy::KeepReplacement,
        ReconcileStrategy::LongestRunning,
    ]);
    check(&[
        NodeStatus::Initializing,
        NodeStatus::Ready,
        NodeStatus::Down,
        NodeStatus::Disconnected,
    ]);
    check(&[Eligibility::Eligible, Eligibility::Ineligible]);
    check(&[
        NodeHealth::Healthy,
        NodeHealth::Suspended(SuspendReason::New),
        NodeHealth::Suspended(SuspendReason::Lost),
        NodeHealth::Suspended(SuspendReason::Flaky),
        NodeHealth::Offlined,
    ]);
    check(&[
        DesiredStatus::Run,
        DesiredStatus::Stop,
        DesiredStatus::Evict,
    ]);
    check(&ClientStatus::ALL);
    check(&[
        TaskRunState::Pending,
        TaskRunState::Running,
        TaskRunState::Dead,
    ]);
    check(&SchedulerType::ALL);
    check(TriggeredBy::ALL);
    check(EvalStatus::ALL);
    check(&[SchedulerAlgorithm::Binpack, SchedulerAlgorithm::Spread]);
    check(&Topic::ALL);
    check(&[
        EventType::JobRegistered,
        EventType::JobDeregistered,
        EventType::JobStatusChanged,
        EventType::NodeRegistration,
        EventType::NodeDeregistration,
        EventType::NodeStatus,
        EventType::NodeEligibility,
        EventType::NodeDrain,
        EventType::NodeHealth,
        EventType::NodeSnapshot,
        EventType::EvaluationUpdated,
        EventType::EvaluationDeleted,
        EventType::AllocationUpdated,
        EventType::AllocationClientUpdated,
        EventType::AllocationDeleted,
        EventType::PlanResult,
        EventType::SchedulerConfigUpdated,
    ]);
    use drover_core::node_health::Readiness;
    check(&[Readiness::Ready, Readiness::NotYet, Readiness::Never]);
    check(&[
        CheckStatus::Pending,
        CheckStatus::Passing,
        CheckStatus::Warning,
        CheckStatus::Critical,
    ]);
}

/// The node-facing request types survive a trip through the wire too, since agents build
/// them from core values.
#[test]
fn client_alloc_updates_round_trip_through_the_request() {
    let alloc = full_alloc();
    let update = convert::ClientAllocUpdate {
        update: drover_core::fsm::AllocClientUpdate {
            alloc_id: alloc.id,
            client_status: ClientStatus::Failed,
            client_description: "exit 1".into(),
            task_states: alloc.task_states.clone(),
            deployment_health: Some(false),
        },
        infra_failure: true,
        services: None,
    };
    // A running allocation's registration with its checks' latest results.
    let check = |name: &str, check_type, status, http_status| CheckState {
        name: name.into(),
        check_type,
        status,
        output: format!("{name}: said so"),
        http_status,
        time: Timestamp(1_700_000_000_123),
    };
    let checked = convert::ClientAllocUpdate {
        update: drover_core::fsm::AllocClientUpdate {
            alloc_id: alloc.id,
            client_status: ClientStatus::Running,
            client_description: String::new().into(),
            task_states: Default::default(),
            deployment_health: None,
        },
        infra_failure: false,
        services: Some(vec![ServiceRegistration {
            id: ServiceRegistration::make_id(alloc.id, Some("web"), 0),
            service_name: "web".into(),
            namespace: "default".into(),
            job_id: "shop".into(),
            alloc_id: alloc.id,
            node_id: mock::node_id(4),
            task: Some("web".into()),
            address: Some("10.0.0.4".parse().expect("ip")),
            port: 8080,
            tags: vec!["v1".into()],
            health: ServiceHealth::Critical,
            checks: vec![
                check("up", CheckType::Http, CheckStatus::Critical, Some(503)),
                check("port", CheckType::Tcp, CheckStatus::Passing, None),
                check("script", CheckType::Script, CheckStatus::Pending, None),
                check("slow", CheckType::Http, CheckStatus::Warning, Some(429)),
            ],
            create_index: 0,
            modify_index: 0,
        }]),
    };
    let request = pb::UpdateAllocationsRequest {
        auth: Some(pb::NodeAuth {
            node_id: mock::node_id(4).to_string(),
            secret_id: "secret-4".into(),
        }),
        updates: vec![(&update).into(), (&checked).into()],
    };
    let decoded = convert::AllocUpdates::try_from(through_wire(&request)).unwrap();
    assert_eq!(decoded.auth.node_id, mock::node_id(4));
    assert_eq!(decoded.auth.secret_id, "secret-4");
    assert_eq!(decoded.updates, vec![update, checked]);
}

#[test]
fn plan_response_reports_the_dry_run() {
    let job = mock::service_job("web", 2);
    let (n1, n2) = (mock::node_id(1), mock::node_id(2));
    let mut plan = Plan::new(mock::eval_id(1), 50, Some(job.key()), 9);
    plan.append_alloc(mock::alloc(1, &job, n2, 0));
    plan.append_alloc(mock::alloc(2, &job, n2, 1));
    plan.append_update(n1, AllocTransition::stop(mock::alloc_id(3), "old version"));
    let dry = DryRun {
        plan: Some(plan),
        desired: BTreeMap::from([(
            "web".into(),
            DesiredUpdates {
                place: 2,
                stop: 1,
                ..DesiredUpdates::default()
            },
        )]),
        failures: BTreeMap::from([("web".into(), full_metric())]),
        job_version: 3,
        spec_changed: false,
    };
    let resp = through_wire(&convert::plan_response(&dry, 41));
    assert!(resp.has_changes, "placements are changes");
    assert!(!resp.spec_changed);
    assert_eq!((resp.job_version, resp.index), (3, 41));
    assert_eq!(
        DesiredUpdates::from(resp.desired_updates["web"]),
        dry.desired["web"]
    );
    assert_eq!(
        AllocMetric::try_from(resp.failures["web"].clone()).unwrap(),
        full_metric()
    );
    // One entry per touched node, in id order, each with only its own changes.
    let nodes: Vec<_> = resp.nodes.iter().map(|n| n.node_id.clone()).collect();
    assert_eq!(nodes, vec![n1.to_string(), n2.to_string()]);
    assert_eq!(
        (resp.nodes[0].place.len(), resp.nodes[0].update.len()),
        (0, 1)
    );
    assert_eq!(
        (resp.nodes[1].place.len(), resp.nodes[1].update.len()),
        (2, 0)
    );
    assert_eq!(
        Allocation::try_from(resp.nodes[1].place[0].clone()).unwrap(),
        mock::alloc(1, &job, n2, 0)
    );

    let unchanged = DryRun {
        job_version: 3,
        ..DryRun::default()
    };
    let resp = convert::plan_response(&unchanged, 41);
    assert!(!resp.has_changes);
    assert!(resp.nodes.is_empty());
}

#[test]
fn leader_gauges_keep_every_counter() {
    use drover_core::broker::{BrokerStats, QueueCounts};
    let mut stats = BrokerStats::default();
    for (i, counts) in stats.by_type.iter_mut().enumerate() {
        *counts = QueueCounts {
            ready: i,
            unacked: i + 1,
            pending: i + 2,
            waiting: i + 3,
            cancelable: i + 4,
            failed: i + 5,
        };
    }
    stats.total.ready = 99;
    let wire = pb::BrokerStats::from(&stats);
    assert_eq!(wire.total.unwrap().ready, 99);
    let order: Vec<i32> = wire.by_scheduler.iter().map(|s| s.scheduler).collect();
    let expected: Vec<i32> = SchedulerType::ALL.iter().map(|t| t.to_wire()).collect();
    assert_eq!(
        order, expected,
        "one entry per scheduler type, in enum order"
    );
    let sysbatch = wire.by_scheduler[3].counts.unwrap();
    assert_eq!(
        (sysbatch.ready, sysbatch.unacked, sysbatch.failed),
        (3, 4, 8)
    );

    let info = BlockedEvalInfo {
        eval_id: mock::eval_id(1),
        job: JobKey::new("prod", "web"),
        kind: BlockedKind::System {
            node: mock::node_id(2),
        },
        class_eligibility: BTreeMap::from([("a".into(), true)]),
        escaped: false,
        triggered_by: TriggeredBy::QueuedAllocs,
        snapshot_index: 5,
        blocked_since: Timestamp::from_millis(77),
        outstanding: true,
        unblocked_by: "node 00000000 gains capacity".into(),
    };
    let b = pb::BlockedEval::from(&info);
    assert_eq!(b.kind, pb::BlockedKind::System as i32);
    assert_eq!(b.node_id, mock::node_id(2).to_string());
    assert_eq!(b.job.unwrap().namespace, "prod");
    assert_eq!(
        (b.snapshot_index, b.blocked_since_unix_ms, b.outstanding),
        (5, 77, true)
    );

    let blocked = drover_core::blocked::BlockedStats {
        total_blocked: 6,
        total_captured: 3,
        total_escaped: 1,
        total_system: 2,
        total_failed: 1,
        duplicates: 4,
        by_class: BTreeMap::from([("a".into(), 3)]),
    };
    let wire = pb::BlockedStats::from(&blocked);
    assert_eq!(
        (
            wire.total_blocked,
            wire.total_captured,
            wire.total_escaped,
            wire.total_system,
            wire.total_failed,
            wire.duplicates
        ),
        (6, 3, 1, 2, 1, 4)
    );
    assert_eq!(wire.by_class, BTreeMap::from([("a".into(), 3)]));

    let queue = drover_core::plan_check::PlanQueueStats {
        depth: 2,
        peak_depth: 9,
        enqueued: 100,
        dequeued: 98,
    };
    let wire = pb::PlanQueueStats::from(&queue);
    assert_eq!(
        (wire.depth, wire.peak_depth, wire.enqueued, wire.dequeued),
        (2, 9, 100, 98)
    );

    let gauges = drover_core::node_health::HealthGauges {
        healthy: 7,
        free: 3,
        running: 4,
        suspended_new: 1,
        suspended_lost: 2,
        suspended_flaky: 5,
        offlined: 6,
    };
    let wire = pb::NodeHealthCounts::from(&gauges);
    assert_eq!(
        [
            wire.healthy,
            wire.free,
            wire.running,
            wire.suspended_new,
            wire.suspended_lost,
            wire.suspended_flaky,
            wire.offlined
        ],
        [7, 3, 4, 1, 2, 5, 6]
    );
}
