//! What the request conversions accept, and what the decoded filters and selectors mean.

mod common;

use common::*;
use drover_core::fsm::{Event, EventType, Topic};
use drover_core::*;
use drover_proto::convert::{self, KeyFilter, WireEnum, WorkerTarget};
use drover_proto::v1 as pb;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn a_submitted_job_ignores_what_the_servers_own() {
    let mut wire = pb::Job::from(&full_job());
    wire.status = 0; // a client leaves it unspecified
    wire.version = 12;
    wire.create_index = 5;
    wire.modify_index = 6;
    wire.job_modify_index = 7;
    wire.submit_time_unix_ms = 8;
    let job = convert::submitted_job(Some(wire)).unwrap();
    assert_eq!(job.status, JobStatus::Pending);
    assert_eq!(
        (
            job.version,
            job.create_index,
            job.modify_index,
            job.job_modify_index
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(job.submit_time, Timestamp::ZERO);
    // Everything the client does own is kept.
    let mut expected = full_job();
    expected.status = JobStatus::Pending;
    expected.version = 0;
    expected.create_index = 0;
    expected.modify_index = 0;
    expected.job_modify_index = 0;
    expected.submit_time = Timestamp::ZERO;
    expected.stable = false;
    assert_eq!(job, expected);
}

#[test]
fn register_keeps_the_check_and_set_index() {
    let reg = convert::JobRegistration::try_from(pb::RegisterJobRequest {
        job: Some((&mock::batch_job("b", 1)).into()),
        enforce_index: Some(0),
    })
    .unwrap();
    assert_eq!(reg.enforce_index, Some(0));
    assert_eq!(reg.job.id.as_str(), "b");
}

#[test]
fn job_addresses_default_their_namespace() {
    assert_eq!(
        convert::job_key("", "web").unwrap(),
        JobKey::default_ns("web")
    );
    assert_eq!(
        convert::job_key("prod", "web").unwrap(),
        JobKey::new("prod", "web")
    );
}

#[test]
fn eval_filter_matches_only_what_was_asked() {
    let job = full_job();
    let eval = full_eval(); // blocked, core scheduler, max-disconnect-timeout, job prod/web-app
    let any = convert::EvalFilter::try_from(&pb::ListEvalsRequest::default()).unwrap();
    assert_eq!(any, convert::EvalFilter::default());
    assert!(any.matches(&eval));

    let by = |f: fn(&mut pb::ListEvalsRequest)| {
        let mut r = pb::ListEvalsRequest::default();
        f(&mut r);
        convert::EvalFilter::try_from(&r).unwrap()
    };
    assert!(by(|r| r.status = pb::EvalStatus::Blocked as i32).matches(&eval));
    assert!(!by(|r| r.status = pb::EvalStatus::Pending as i32).matches(&eval));
    assert!(by(|r| r.scheduler = pb::SchedulerType::Core as i32).matches(&eval));
    assert!(!by(|r| r.scheduler = pb::SchedulerType::Batch as i32).matches(&eval));
    assert!(by(|r| r.triggered_by = pb::TriggeredBy::MaxDisconnectTimeout as i32).matches(&eval));
    assert!(!by(|r| r.triggered_by = pb::TriggeredBy::JobRegister as i32).matches(&eval));
    assert!(
        by(|r| {
            r.namespace = "prod".into();
            r.job_id = "web-app".into();
        })
        .matches(&eval)
    );
    // Same id in the default namespace is another job.
    assert!(!by(|r| r.job_id = "web-app".into()).matches(&eval));
    assert_eq!(by(|r| r.limit = 5).limit, Some(5));
    assert_eq!(job.namespace, "prod");
}

#[test]
fn node_filter_matches_health_status_place_and_id_prefix() {
    let node = full_node(); // flaky, disconnected, eu-west, gpu
    let f = |r: pb::NodeListRequest| convert::NodeFilter::try_from(&r).unwrap();
    assert!(f(pb::NodeListRequest::default()).matches(&node));
    assert!(
        f(pb::NodeListRequest {
            health: pb::NodeHealth::SuspendedFlaky as i32,
            status: pb::NodeStatus::Disconnected as i32,
            datacenter: "eu-west".into(),
            node_class: "gpu".into(),
            id_prefix: node.id.to_string()[..6].to_ascii_uppercase(),
            ..Default::default()
        })
        .matches(&node)
    );
    assert!(
        !f(pb::NodeListRequest {
            health: pb::NodeHealth::Healthy as i32,
            ..Default::default()
        })
        .matches(&node)
    );
    assert!(
        !f(pb::NodeListRequest {
            id_prefix: "ffff".into(),
            ..Default::default()
        })
        .matches(&node)
    );
}

#[test]
fn event_filter_unites_filters_of_one_topic() {
    let topic = |t: pb::Topic, keys: &[&str]| pb::TopicFilter {
        topic: t as i32,
        keys: keys.iter().map(|k| (*k).to_owned()).collect(),
    };
    let f = convert::EventFilter::try_from(pb::SubscribeRequest {
        from_index: 10,
        topics: vec![
            topic(pb::Topic::Job, &["a"]),
            topic(pb::Topic::Job, &["b"]),
            topic(pb::Topic::Node, &["n"]),
            topic(pb::Topic::Node, &[]),
        ],
    })
    .unwrap();
    assert_eq!(f.from_index, 10);
    let topics = f.topics.clone().unwrap();
    assert_eq!(
        topics[&Topic::Job],
        KeyFilter::Keys(BTreeSet::from(["a".to_owned(), "b".to_owned()]))
    );
    assert_eq!(
        topics[&Topic::Node],
        KeyFilter::Any,
        "an empty key list wins"
    );

    let job = Arc::new(mock::service_job("b", 1));
    assert!(f.matches(&Event::job(1, EventType::JobRegistered, &job)));
    let other = Arc::new(mock::service_job("c", 1));
    assert!(!f.matches(&Event::job(1, EventType::JobRegistered, &other)));
    let node = Arc::new(mock::node(1));
    assert!(f.matches(&Event::node(1, EventType::NodeHealth, &node)));
    let eval = Arc::new(mock::eval(1, &job));
    assert!(!f.matches(&Event::eval(1, &eval)), "topic not asked for");

    let all = convert::EventFilter::try_from(pb::SubscribeRequest::default()).unwrap();
    assert_eq!(all.topics, None);
    assert!(all.matches(&Event::eval(1, &eval)));
}

#[test]
fn worker_config_always_enables_core_and_drops_repeats() {
    let update = convert::WorkerConfigUpdate::try_from(pb::SetWorkerConfigRequest {
        server_id: "s2".into(),
        config: Some(pb::WorkerConfig {
            count: 3,
            enabled_schedulers: vec![
                pb::SchedulerType::Batch as i32,
                pb::SchedulerType::Batch as i32,
                pb::SchedulerType::Service as i32,
            ],
        }),
    })
    .unwrap();
    assert_eq!(update.server_id.as_deref(), Some("s2"));
    assert_eq!(update.config.count, 3);
    assert_eq!(
        update.config.enabled,
        BTreeSet::from([
            SchedulerType::Service,
            SchedulerType::Batch,
            SchedulerType::Core
        ])
    );
    let back = pb::WorkerConfig::from(&update.config);
    assert_eq!(
        convert::WorkerPoolConfig::try_from(back).unwrap(),
        update.config
    );
}

#[test]
fn worker_selectors_name_one_or_all() {
    let one = WorkerTarget::try_from(pb::PauseWorkersRequest {
        workers: Some(pb::WorkerSelector {
            target: Some(pb::worker_selector::Target::WorkerId("w-3".into())),
            server_id: String::new(),
        }),
    })
    .unwrap();
    assert_eq!(
        one,
        WorkerTarget::One {
            server_id: None,
            worker_id: "w-3".into()
        }
    );
    let all = WorkerTarget::try_from(pb::ResumeWorkersRequest {
        workers: Some(pb::WorkerSelector {
            target: Some(pb::worker_selector::Target::All(true)),
            server_id: "s1".into(),
        }),
    })
    .unwrap();
    assert_eq!(
        all,
        WorkerTarget::All {
            server_id: Some("s1".into())
        }
    );
}

#[test]
fn registration_builds_the_node_to_store() {
    let wire = pb::RegisterNodeRequest {
        node: Some(pb::NodeRegistration {
            node_id: mock::node_id(3).to_string(),
            secret_id: "old-secret".into(),
            name: "n3".into(),
            datacenter: "dc2".into(),
            node_class: "a".into(),
            attributes: BTreeMap::from([("kernel.name".into(), "linux".into())]),
            meta: BTreeMap::from([("rack".into(), "1".into())]),
            resources: Some((&Resources::new(4000, 8192, 1000)).into()),
            reserved: Some((&Resources::new(100, 100, 0)).into()),
            networks: Some(pb::NodeNetworks {
                addresses: vec![pb::HostAddress {
                    host_network: "default".into(),
                    address: "10.1.2.3".into(),
                    interface: "eth0".into(),
                }],
                reserved_ports: "22".into(),
                min_dynamic_port: 0,
                max_dynamic_port: 0,
            }),
        }),
    };
    let reg = convert::NodeRegistration::try_from(wire).unwrap();
    let previous = reg.previous.clone().unwrap();
    assert_eq!(previous.node_id, mock::node_id(3));
    assert!(
        !format!("{previous:?}").contains("old-secret"),
        "credentials never print their secret"
    );
    let node = reg.into_node(previous.node_id, previous.secret_id);
    assert_eq!(node.secret_id, "old-secret");
    assert_eq!(
        (node.datacenter.as_str(), node.node_class.as_str()),
        ("dc2", "a")
    );
    assert_eq!(node.allocatable(), Resources::new(3900, 8092, 1000));
    assert_eq!(node.meta["rack"], "1");
    assert_eq!(
        node.networks.address_of("default"),
        Some("10.1.2.3".parse().unwrap())
    );
    assert!(node.networks.reserved_ports.contains(22));
    assert_eq!(
        node.networks.dynamic_range(),
        Some((DEFAULT_MIN_DYNAMIC_PORT, DEFAULT_MAX_DYNAMIC_PORT)),
        "no range sent: the default"
    );

    let first = convert::NodeRegistration::try_from(pb::RegisterNodeRequest {
        node: Some(pb::NodeRegistration {
            resources: Some((&Resources::ZERO).into()),
            reserved: Some((&Resources::ZERO).into()),
            ..Default::default()
        }),
    })
    .unwrap();
    assert_eq!(first.previous, None);
}

#[test]
fn a_node_registers_as_itself() {
    let mut node = mock::node(4);
    node.node_class = "gpu".into();
    node.meta.insert("rack".into(), "7".into());
    let wire = pb::NodeRegistration::from(&node);
    assert!(wire.node_id.is_empty() && wire.secret_id.is_empty());
    let reg =
        convert::NodeRegistration::try_from(pb::RegisterNodeRequest { node: Some(wire) }).unwrap();
    assert_eq!(reg.previous, None, "a first registration");
    let back = reg.into_node(node.id, node.secret_id.clone());
    assert_eq!(
        (
            back.name,
            back.datacenter,
            back.node_class,
            back.attributes,
            back.meta
        ),
        (
            node.name,
            node.datacenter,
            node.node_class,
            node.attributes,
            node.meta
        )
    );
    assert_eq!(
        (back.resources, back.reserved),
        (node.resources, node.reserved)
    );
}

#[test]
fn heartbeat_carries_readiness_and_snapshot() {
    let hb = convert::Heartbeat::try_from(pb::UpdateNodeStatusRequest {
        auth: Some(pb::NodeAuth {
            node_id: mock::node_id(2).to_string(),
            secret_id: "s".into(),
        }),
        readiness: pb::Readiness::NotYet as i32,
        last_snapshot: Some("snap".into()),
    })
    .unwrap();
    assert_eq!(hb.readiness, drover_core::node_health::Readiness::NotYet);
    assert_eq!(hb.last_snapshot.as_deref(), Some("snap"));
    assert_eq!(hb.auth.node_id, mock::node_id(2));
}

#[test]
fn drain_requests_start_or_end_a_drain() {
    let start = convert::DrainRequest::try_from(pb::NodeDrainRequest {
        node_id: mock::node_id(1).to_string(),
        enable: true,
        deadline_ms: Some(60_000),
        force: false,
        ignore_system_jobs: true,
        mark_eligible: false,
    })
    .unwrap();
    let strategy = start.drain.unwrap().start(Timestamp::from_millis(1_000));
    assert_eq!(strategy.deadline, Some(Duration::from_secs(60)));
    assert_eq!(strategy.deadline_at(), Some(Timestamp::from_millis(61_000)));
    assert!(strategy.ignore_system_jobs && !strategy.force);

    let end = convert::DrainRequest::try_from(pb::NodeDrainRequest {
        node_id: mock::node_id(1).to_string(),
        mark_eligible: true,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(end.drain, None);
    assert!(end.mark_eligible);
}

#[test]
fn scheduler_config_update_keeps_cas_index() {
    let update = convert::SchedulerConfigUpdate::try_from(pb::SchedulerSetConfigRequest {
        config: Some((&full_scheduler_config()).into()),
        cas_index: Some(16),
    })
    .unwrap();
    assert_eq!(update.config, full_scheduler_config());
    assert_eq!(update.cas_index, Some(16));
    assert_eq!(
        update.config.algorithm.to_wire(),
        pb::SchedulerAlgorithm::Spread as i32
    );
}

/// Issue 14: an unspecified enum with a documented default is that default, and a job
/// may leave `update` out; unknown values are still refused (see bad_input.rs).
#[test]
fn unspecified_enums_and_an_absent_update_mean_the_documented_defaults() {
    for (job, delay) in [
        (mock::service_job("s", 1), DelayFunction::Exponential),
        (mock::batch_job("b", 1), DelayFunction::Constant),
    ] {
        let mut wire = pb::Job::from(&job);
        wire.update = None;
        let g = &mut wire.groups[0];
        g.restart.as_mut().unwrap().mode = 0;
        g.reschedule.as_mut().unwrap().delay_function = 0;
        g.disconnect = Some(pb::DisconnectPolicy {
            lost_after_ms: Some(9_000),
            replace: false,
            reconcile: 0,
            stop_on_client_after_ms: None,
        });
        let got = convert::submitted_job(Some(wire)).expect("defaults, not refusals");
        let g = &got.groups[0];
        assert_eq!(g.restart.mode, RestartMode::Fail);
        assert_eq!(g.reschedule.delay_function, delay, "{}", job.job_type);
        assert_eq!(
            g.disconnect.as_ref().unwrap().reconcile,
            ReconcileStrategy::BestScore
        );
        assert_eq!(got.update, UpdateStrategy::default());
    }
}

#[test]
fn a_system_job_without_update_and_with_a_count_is_accepted() {
    let mut job = mock::system_job("sys");
    job.groups[0].count = 3;
    let mut wire = pb::Job::from(&job);
    wire.update = None;
    let mut got = convert::submitted_job(Some(wire)).expect("decoded");
    validate::canonicalize(&mut got);
    validate::validate_job(&got, &validate::Limits::default())
        .expect("count is ignored for a system job, not refused");
}
