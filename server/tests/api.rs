//! The gRPC API over loopback for what the server added last: Dispatch, Members, node
//! health gauges, event replay and the end of a lagging subscriber, limits, the
//! `/metrics` endpoint, and a server started from an HCL config file.

use crate::common;

use common::api::Api;
use common::http::http_get;
use common::*;
use drover_core::mock;
use drover_core::types::*;
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1 as pb;
use drover_proto::v1::event_service_client::EventServiceClient;
use drover_server::ServerConfig;
use std::time::Duration;
use tonic::Code;

fn register_request(job: &Job) -> pb::RegisterJobRequest {
    pb::RegisterJobRequest {
        job: Some(job.into()),
        enforce_index: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_over_grpc_answers_the_child_and_maps_refusals_to_codes() {
    let a = Api::start(|_| {}).await;
    let mut job = mock::batch_job("encode", 1);
    job.parameterized = Some(ParameterizedConfig {
        payload: PayloadRequirement::Forbidden,
        meta_required: vec![],
        meta_optional: vec!["codec".into()],
    });
    a.jobs().register(register_request(&job)).await.unwrap();
    a.jobs()
        .register(register_request(&mock::batch_job("plain", 1)))
        .await
        .unwrap();
    let d = a
        .jobs()
        .dispatch(pb::DispatchJobRequest {
            namespace: "default".into(),
            job_id: "encode".into(),
            payload: Vec::new(),
            meta: [("codec".to_string(), "av1".to_string())].into(),
        })
        .await
        .expect("dispatched")
        .into_inner();
    assert!(d.dispatched_job_id.starts_with("encode/dispatch-"), "{d:?}");
    assert!(!d.eval_id.is_empty() && d.index > 0, "{d:?}");
    let got = a
        .jobs()
        .get(pb::GetJobRequest {
            namespace: "default".into(),
            job_id: d.dispatched_job_id.clone(),
            query: None,
        })
        .await
        .expect("the child is readable")
        .into_inner();
    assert_eq!(
        got.job.unwrap().meta.get("codec").map(String::as_str),
        Some("av1")
    );

    // (job id, payload, code)
    let cases: Vec<(&str, &[u8], Code)> = vec![
        ("encode", b"data", Code::InvalidArgument),
        ("plain", b"", Code::FailedPrecondition),
        ("missing", b"", Code::NotFound),
        ("", b"", Code::InvalidArgument),
    ];
    for (job_id, payload, code) in cases {
        let err = a
            .jobs()
            .dispatch(pb::DispatchJobRequest {
                namespace: "default".into(),
                job_id: job_id.into(),
                payload: payload.to_vec(),
                meta: Default::default(),
            })
            .await
            .expect_err(job_id);
        assert_eq!(err.code(), code, "{job_id}: {}", err.message());
    }
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_lists_this_server_as_the_alive_leader() {
    let a = Api::start(|c| c.name = "east-1".into()).await;
    let m = a
        .status()
        .members(pb::MembersRequest {})
        .await
        .expect("members answers")
        .into_inner();
    assert_eq!(m.members.len(), 1, "{m:?}");
    let me = &m.members[0];
    assert_eq!(me.id, "1");
    assert_eq!(me.name, "east-1");
    assert_eq!(me.role, pb::RaftRole::Leader as i32);
    assert_eq!(me.status, pb::MemberStatus::Alive as i32);
    assert!(!me.version.is_empty());
    assert!(m.index > 0);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_list_and_cluster_status_carry_health_counts_and_time_left() {
    let a = Api::start(|c| {
        c.heartbeat.min_ttl = Duration::from_millis(500);
        c.heartbeat.grace = Duration::from_millis(200);
        c.health.lost_grace = Duration::from_secs(60);
        c.health.flaky_cool_down = Duration::from_secs(7 * 60);
    })
    .await;
    let agents = join_many(&a.h, 3).await;
    let (silent, offlined, alive) = (
        agents[0].creds.node_id,
        agents[1].creds.node_id,
        agents[2].clone(),
    );
    a.h.node_offline(offlined).await.unwrap();
    let h = a.h.clone();
    let beat = tokio::spawn(async move {
        loop {
            heartbeat(&h, &alive).await;
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    });
    let lost = NodeHealth::Suspended(SuspendReason::Lost);
    wait_until(&a.h, "the silent node lost", |s| {
        s.node(&silent).is_some_and(|n| n.health == lost)
    })
    .await;

    let list = a
        .operator()
        .node_list(pb::NodeListRequest::default())
        .await
        .unwrap()
        .into_inner();
    let counts = list.counts.expect("counts");
    assert_eq!(
        (
            counts.healthy,
            counts.free,
            counts.suspended_lost,
            counts.offlined
        ),
        (1, 1, 1, 1),
        "{counts:?}"
    );
    let periods = list.health_periods.expect("health periods");
    assert_eq!(
        (periods.lost_grace_ms, periods.flaky_cool_down_ms),
        (60_000, 420_000),
        "the server's configured periods, not the defaults"
    );
    for entry in &list.nodes {
        let node = entry.node.as_ref().unwrap();
        let left = entry.health_time_left_ms;
        if node.id == silent.to_string() {
            assert!(
                left.is_some_and(|ms| ms > 0 && ms <= 60_000),
                "a lost node counts down its grace: {left:?}"
            );
        } else {
            assert_eq!(left, None, "no countdown for {:?}", node.health);
        }
    }
    let status = a
        .status()
        .cluster_status(pb::ClusterStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.nodes, Some(counts));
    beat.abort();
    a.stop().await;
}

async fn subscribe(
    channel: Channel,
    from_index: u64,
) -> Result<tonic::Streaming<pb::SubscribeResponse>, tonic::Status> {
    EventServiceClient::new(channel)
        .subscribe(pb::SubscribeRequest {
            from_index,
            topics: Vec::new(),
        })
        .await
        .map(|r| r.into_inner())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_replays_retained_events_then_follows_live() {
    let a = Api::start(|_| {}).await;
    join(&a.h, 1, "").await;
    let first_job = register(&a.h, mock::service_job("one", 1)).await.index;
    let mut stream = subscribe(a.channel.clone(), 1)
        .await
        .expect("replay accepted");
    let mut indexes = Vec::new();
    let mut topics = std::collections::BTreeSet::new();
    let mut live_job = None;
    let collect = async {
        loop {
            let msg = stream.message().await.unwrap().expect("stream open");
            if msg.events.is_empty() {
                continue;
            }
            indexes.push(msg.index);
            topics.extend(msg.events.iter().map(|e| e.topic));
            if msg.index == first_job && live_job.is_none() {
                // Replayed up to the past registration: register another, seen live.
                live_job = Some(register(&a.h, mock::service_job("two", 1)).await.index);
            }
            if Some(msg.index) == live_job {
                break;
            }
        }
    };
    tokio::time::timeout(DEADLINE, collect)
        .await
        .expect("replay and live events in time");
    assert!(
        indexes.windows(2).all(|w| w[0] < w[1]),
        "index order: {indexes:?}"
    );
    assert!(
        indexes[0] < first_job,
        "replay started before the job: {indexes:?}"
    );
    assert!(
        topics.contains(&(pb::Topic::Node as i32)),
        "node events replayed"
    );
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_older_than_the_buffer_is_out_of_range() {
    let a = Api::start(|c| c.event_buffer = 4).await;
    for n in 1..=6 {
        join(&a.h, n, "").await;
    }
    let err = subscribe(a.channel.clone(), 1)
        .await
        .expect_err("index 1 is long gone");
    assert_eq!(err.code(), Code::OutOfRange, "{}", err.message());
    assert!(
        err.message().contains("subscribe again"),
        "{}",
        err.message()
    );
    // From the newest index it is fine.
    subscribe(a.channel.clone(), a.h.applied_index())
        .await
        .expect("a recent index is buffered");
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_falls_behind_is_ended_with_out_of_range() {
    let a = Api::start(|c| {
        c.event_buffer = 32;
        c.workers.count = Some(0);
    })
    .await;
    // A small flow-control window, so the server cannot park much in the connection.
    let channel = Api::endpoint(&a.api)
        .initial_stream_window_size(Some(16 * 1024))
        .initial_connection_window_size(Some(16 * 1024))
        .connect()
        .await
        .unwrap();
    let channel = Channel::plain(channel);
    let mut stream = subscribe(channel, 0).await.expect("subscribed");
    // Write while the subscriber reads nothing; the FSM must not wait for it.
    let started = std::time::Instant::now();
    for n in 0..300 {
        register(&a.h, mock::service_job(&format!("job-{n}"), 1)).await;
    }
    let writing = started.elapsed();
    let read = async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("stream ended without a status"),
                Err(status) => return status,
            }
        }
    };
    let status = tokio::time::timeout(DEADLINE, read)
        .await
        .expect("the stream ends in time");
    assert_eq!(status.code(), Code::OutOfRange, "{}", status.message());
    assert!(
        status
            .message()
            .contains("subscribe again from a newer index"),
        "{}",
        status.message()
    );
    assert!(
        writing < DEADLINE,
        "writes were not held up by the subscriber ({writing:?})"
    );
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_refuse_with_resource_exhausted_and_a_retry_hint() {
    let a = Api::start(|c| {
        c.max_jobs = 2;
        c.max_outstanding_evals = 1;
        c.limits.max_groups = 1;
        c.workers.count = Some(0);
    })
    .await;
    let mut two_groups = mock::service_job("wide", 1);
    let mut second = two_groups.groups[0].clone();
    second.name = "other".into();
    two_groups.groups.push(second);
    let err = a
        .jobs()
        .register(register_request(&two_groups))
        .await
        .expect_err("too many groups");
    assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());

    a.jobs()
        .register(register_request(&mock::service_job("a", 1)))
        .await
        .expect("first job");
    eventually(&a.h, "the eval in the broker", || async {
        a.h.broker_stats()
            .await
            .is_ok_and(|s| s.broker.total.tracked() == 1)
    })
    .await;
    let err = a
        .jobs()
        .register(register_request(&mock::service_job("b", 1)))
        .await
        .expect_err("the broker is full");
    assert_eq!(err.code(), Code::ResourceExhausted, "{}", err.message());
    assert!(err.message().contains("retry"), "{}", err.message());
    let retry = err
        .metadata()
        .get(drover_server::error::RETRY_AFTER_MS)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    assert!(retry.is_some_and(|ms| ms > 0), "retry hint: {retry:?}");
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_over_http() {
    let a = Api::start(|c| c.metrics_addr = Some("127.0.0.1:0".into())).await;
    let addr = a.server.metrics_addr().expect("metrics served");
    let agents = join_many(&a.h, 2).await;
    heartbeat(&a.h, &agents[0]).await;
    register(&a.h, mock::service_job("web", 2)).await;
    wait_until(&a.h, "placed", |s| live_allocs(s, "web").len() == 2).await;
    // Each node's watch opens with its whole set: the two allocations between them.
    let mut watched = 0;
    for agent in &agents {
        let mut stream = a
            .nodes()
            .watch_allocations(pb::WatchAllocationsRequest {
                auth: Some(pb::NodeAuth {
                    node_id: agent.creds.node_id.to_string(),
                    secret_id: agent.creds.secret_id.clone(),
                }),
                min_index: 0,
                known: Vec::new(),
            })
            .await
            .expect("watch opens")
            .into_inner();
        let first = stream.message().await.expect("message").expect("first");
        watched += first.allocations.len();
    }
    assert_eq!(watched, 2);
    a.jobs()
        .list(pb::ListJobsRequest::default())
        .await
        .expect("jobs listed");
    // The eval is acked just after its plan commits.
    eventually(&a.h, "the eval's latency", || async {
        http_get(addr, "/metrics")
            .await
            .1
            .contains("drover_eval_seconds_count{scheduler=\"service\"} 1")
    })
    .await;

    let (status, body) = http_get(addr, "/metrics").await;
    assert!(status.contains("200"), "{status}");
    for needle in [
        "drover_rpc_seconds_count{method=\"/drover.v1.JobService/List\"} 1",
        "drover_plan_apply_seconds_count 1",
        "drover_placements_total 2",
        "drover_heartbeats_total ",
        "drover_watch_allocations_total 2",
        "drover_raft_commit_seconds_bucket{",
        "command=\"apply_plan\"",
        "drover_broker_evals{scheduler=\"service\",state=\"ready\"}",
        "drover_plan_queue_depth ",
        "drover_workers{",
        "drover_nodes{health=\"healthy_running\"} 2",
        "drover_leader 1",
    ] {
        assert!(body.contains(needle), "metrics lack {needle:?}:\n{body}");
    }
    let heartbeats: f64 = body
        .lines()
        .find_map(|l| l.strip_prefix("drover_heartbeats_total "))
        .and_then(|v| v.trim().parse().ok())
        .expect("heartbeat counter");
    assert!(heartbeats >= 3.0, "{heartbeats}");
    let (status, _) = http_get(addr, "/nope").await;
    assert!(status.contains("404"), "{status}");
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_starts_from_an_hcl_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.hcl");
    let data = dir.path().join("data");
    std::fs::write(
        &path,
        format!(
            r#"
name         = "from-file"
data_dir     = "{}"
bind_addr    = "127.0.0.1:0"
metrics_addr = "127.0.0.1:0"
workers {{
  count = 1
}}
limits {{
  max_jobs = 1
}}
"#,
            data.display()
        ),
    )
    .unwrap();
    let file = ServerConfig::from_file(&path).expect("config file parses");
    // Keep the test timings; take what the file says.
    let mut config = ServerConfig::for_tests(&file.data_dir);
    config.name = file.name;
    config.bind_addr = file.bind_addr;
    config.metrics_addr = file.metrics_addr;
    config.workers.count = file.workers.count;
    config.max_jobs = file.max_jobs;
    let a = Api::start_config(config).await;
    assert!(data.exists(), "the data dir from the file is used");
    assert_eq!(a.h.workers().await.len(), 1);
    assert!(a.server.metrics_addr().is_some());
    a.jobs()
        .register(register_request(&mock::service_job("only", 1)))
        .await
        .expect("first job");
    let err = a
        .jobs()
        .register(register_request(&mock::service_job("second", 1)))
        .await
        .expect_err("max_jobs from the file");
    assert_eq!(err.code(), Code::ResourceExhausted);
    a.stop().await;
}

/// A `min_index` past everything written can never be reached: OUT_OF_RANGE at once. One
/// already applied answers at once too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritten_min_index_is_out_of_range_at_once() {
    let api = Api::start(|_| {}).await;
    let applied = api.h.applied_index();
    let list = |min_index: u64| {
        let mut evals = api.evals();
        async move {
            evals
                .list(pb::ListEvalsRequest {
                    query: Some(pb::QueryOptions {
                        min_index,
                        max_wait_ms: 0,
                    }),
                    ..Default::default()
                })
                .await
        }
    };
    let started = std::time::Instant::now();
    let err = list(applied + 1_000_000).await.expect_err("refused");
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    assert!(err.message().contains("query.min_index"), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered without waiting out the query limit"
    );
    list(applied).await.expect("an applied index answers");
}

/// Event subscribers are capped: one more is refused with RESOURCE_EXHAUSTED, and a slot
/// comes back when a subscriber goes away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_subscribers_beyond_the_cap_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::for_tests(dir.path());
    config.bind_addr = "127.0.0.1:0".into();
    let (server, h) = start_with(config).await;
    let api = server
        .serve(drover_server::api::ApiOptions {
            max_subscribers: 2,
            ..Default::default()
        })
        .await
        .unwrap();
    let channel = Channel::plain(Api::endpoint(&api).connect().await.unwrap());
    let first = subscribe(channel.clone(), 0).await.expect("first");
    let _second = subscribe(channel.clone(), 0).await.expect("second");
    let err = subscribe(channel.clone(), 0).await.expect_err("third");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("maximum of 2"), "{err:?}");
    drop(first);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while subscribe(channel.clone(), 0).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(h);
    api.shutdown().await.unwrap();
    server.shutdown().await.unwrap();
}

/// A body that is not the method's message is the caller's mistake: INVALID_ARGUMENT, not
/// INTERNAL, and the server goes on answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_is_not_a_message_is_invalid_argument() {
    let api = Api::start(|_| {}).await;
    let mut grpc = tonic::client::Grpc::new(api.channel.clone());
    grpc.ready().await.unwrap();
    // Field 1 of RegisterJobRequest is the job message: these bytes cannot be one.
    let codec = tonic_prost::ProstCodec::<pb::RaftRequest, pb::RegisterJobResponse>::default();
    let path =
        tonic::codegen::http::uri::PathAndQuery::from_static("/drover.v1.JobService/Register");
    let err = grpc
        .unary(
            tonic::Request::new(pb::RaftRequest {
                payload: vec![0xff; 36],
            }),
            path,
            codec,
        )
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    api.h
        .register_node(registration(1, ""))
        .await
        .expect("still serving");
}
