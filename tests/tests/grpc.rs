//! End-to-end tests of the gRPC API: a real server on `127.0.0.1:0` with a temp data dir,
//! the test acting as node agents and operators through the generated clients.

use drover_core::mock;
use drover_proto::v1 as pb;
use drover_proto::v1::alloc_service_client::AllocServiceClient;
use drover_proto::v1::event_service_client::EventServiceClient;
use drover_proto::v1::job_service_client::JobServiceClient;
use drover_proto::v1::node_service_client::NodeServiceClient;
use drover_tests::{DEADLINE, TestServer, eventually};
use tonic::Code;
use tonic::transport::Channel;

const MAX_MESSAGE: usize = 256 * 1024;

/// A test server whose API refuses messages over [`MAX_MESSAGE`], with a connected channel.
struct Harness {
    server: TestServer,
    channel: Channel,
}

impl Harness {
    async fn start() -> Harness {
        let server = TestServer::start_with(|c| c.max_message_bytes = MAX_MESSAGE).await;
        let channel = server.channel().await;
        Harness { server, channel }
    }

    fn nodes(&self) -> NodeServiceClient<Channel> {
        NodeServiceClient::new(self.channel.clone())
    }

    fn jobs(&self) -> JobServiceClient<Channel> {
        JobServiceClient::new(self.channel.clone()).max_encoding_message_size(64 * 1024 * 1024)
    }

    async fn stop(self) {
        drop(self.channel);
        self.server.stop().await;
    }
}

fn registration(n: u64) -> pb::NodeRegistration {
    pb::NodeRegistration::from(&mock::node(n))
}

/// Registers node `n` and heartbeats it ready; returns its credentials.
async fn join(h: &Harness, n: u64) -> pb::NodeAuth {
    let mut nodes = h.nodes();
    let reg = nodes
        .register(pb::RegisterNodeRequest {
            node: Some(registration(n)),
        })
        .await
        .expect("node registers")
        .into_inner();
    let auth = pb::NodeAuth {
        node_id: reg.node_id,
        secret_id: reg.secret_id,
    };
    nodes
        .update_status(pb::UpdateNodeStatusRequest {
            auth: Some(auth.clone()),
            readiness: pb::Readiness::Ready.into(),
            last_snapshot: None,
        })
        .await
        .expect("heartbeat accepted");
    auth
}

async fn register_job(h: &Harness, job: &drover_core::types::Job) -> pb::RegisterJobResponse {
    h.jobs()
        .register(pb::RegisterJobRequest {
            job: Some(job.into()),
            enforce_index: None,
        })
        .await
        .expect("job registers")
        .into_inner()
}

async fn job_allocs(h: &Harness, id: &str) -> Vec<pb::Allocation> {
    h.jobs()
        .allocations(pb::JobAllocationsRequest {
            job_id: id.into(),
            ..Default::default()
        })
        .await
        .expect("allocations")
        .into_inner()
        .allocations
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_nodes_and_a_system_job_give_ten_allocations() {
    let h = Harness::start().await;
    for n in 1..=10 {
        join(&h, n).await;
    }
    let reg = register_job(&h, &mock::system_job("sys")).await;
    assert!(!reg.eval_id.is_empty());
    let allocs = eventually("10 allocations", DEADLINE, || async {
        let a = job_allocs(&h, "sys").await;
        (a.len() == 10).then_some(a)
    })
    .await;
    let nodes: std::collections::BTreeSet<_> = allocs.iter().map(|a| a.node_id.clone()).collect();
    assert_eq!(nodes.len(), 10, "one allocation per node");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_reflection_answer() {
    use tonic_health_probe::*;
    let h = Harness::start().await;
    for name in drover_proto::SERVICE_NAMES {
        assert_eq!(
            health_status(&h.channel, name).await,
            1,
            "{name} is SERVING"
        );
    }
    let services = reflection_services(&h.channel).await;
    for name in drover_proto::SERVICE_NAMES {
        assert!(
            services.iter().any(|s| s == name),
            "{name} listed in {services:?}"
        );
    }
    h.stop().await;
}

/// Minimal clients of the standard health and reflection services, written against the
/// raw gRPC codec so the tests need no extra generated code.
mod tonic_health_probe {
    use tonic::transport::Channel;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct HealthCheckRequest {
        #[prost(string, tag = "1")]
        pub service: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct HealthCheckResponse {
        #[prost(int32, tag = "1")]
        pub status: i32,
    }

    pub async fn health_status(channel: &Channel, service: &str) -> i32 {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        grpc.ready().await.expect("ready");
        let path =
            tonic::codegen::http::uri::PathAndQuery::from_static("/grpc.health.v1.Health/Check");
        let res: tonic::Response<HealthCheckResponse> = grpc
            .unary(
                tonic::Request::new(HealthCheckRequest {
                    service: service.into(),
                }),
                path,
                tonic_prost::ProstCodec::default(),
            )
            .await
            .expect("health check");
        res.into_inner().status
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ReflectionRequest {
        #[prost(string, tag = "1")]
        pub host: String,
        #[prost(oneof = "Req", tags = "7")]
        pub message_request: Option<Req>,
    }
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Req {
        #[prost(string, tag = "7")]
        ListServices(String),
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ReflectionResponse {
        #[prost(message, optional, tag = "6")]
        pub list_services_response: Option<ListServiceResponse>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ListServiceResponse {
        #[prost(message, repeated, tag = "1")]
        pub service: Vec<ServiceResponse>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ServiceResponse {
        #[prost(string, tag = "1")]
        pub name: String,
    }

    pub async fn reflection_services(channel: &Channel) -> Vec<String> {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        grpc.ready().await.expect("ready");
        let path = tonic::codegen::http::uri::PathAndQuery::from_static(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        );
        let req = ReflectionRequest {
            host: String::new(),
            message_request: Some(Req::ListServices(String::new())),
        };
        let res = grpc
            .streaming::<_, ReflectionRequest, ReflectionResponse, _>(
                tonic::Request::new(tokio_stream::iter([req])),
                path,
                tonic_prost::ProstCodec::default(),
            )
            .await
            .expect("reflection");
        let mut stream = res.into_inner();
        let first = stream
            .message()
            .await
            .expect("reflection answer")
            .expect("one message");
        first
            .list_services_response
            .expect("list services")
            .service
            .into_iter()
            .map(|s| s.name)
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_job_lists_every_problem() {
    let h = Harness::start().await;
    let mut job = mock::service_job("bad", 1);
    job.priority = 0;
    let mut dup = job.groups[0].clone();
    dup.count = 1;
    job.groups.push(dup);
    let err = h
        .jobs()
        .register(pb::RegisterJobRequest {
            job: Some((&job).into()),
            enforce_index: None,
        })
        .await
        .expect_err("invalid job refused");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let msg = err.message();
    assert!(msg.contains("priority"), "{msg}");
    assert!(msg.contains("groups[1]"), "second problem listed: {msg}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_request_is_refused_and_the_server_lives_on() {
    let h = Harness::start().await;
    let mut job = mock::service_job("huge", 1);
    job.meta
        .insert("blob".into(), "x".repeat(MAX_MESSAGE + 1024));
    let err = h
        .jobs()
        .register(pb::RegisterJobRequest {
            job: Some((&job).into()),
            enforce_index: None,
        })
        .await
        .expect_err("oversized request refused");
    assert!(
        matches!(err.code(), Code::OutOfRange | Code::ResourceExhausted),
        "{err:?}"
    );
    // The server still answers on the same channel.
    join(&h, 1).await;
    register_job(&h, &mock::service_job("small", 1)).await;
    eventually("the small job placed", DEADLINE, || async {
        (job_allocs(&h, "small").await.len() == 1).then_some(())
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cannot_update_another_nodes_allocations() {
    let h = Harness::start().await;
    let a = join(&h, 1).await;
    let b = join(&h, 2).await;
    register_job(&h, &mock::system_job("sys")).await;
    let allocs = eventually("2 allocations", DEADLINE, || async {
        let a = job_allocs(&h, "sys").await;
        (a.len() == 2).then_some(a)
    })
    .await;
    let on_b = allocs
        .iter()
        .find(|x| x.node_id == b.node_id)
        .expect("an allocation on node B");
    let update = pb::AllocClientUpdate {
        alloc_id: on_b.id.clone(),
        client_status: pb::ClientStatus::Running.into(),
        ..Default::default()
    };
    // A's own credentials, B's allocation.
    let err = h
        .nodes()
        .update_allocations(pb::UpdateAllocationsRequest {
            auth: Some(a.clone()),
            updates: vec![update.clone()],
        })
        .await
        .expect_err("refused");
    assert!(
        matches!(err.code(), Code::PermissionDenied | Code::Unauthenticated),
        "{err:?}"
    );
    // B's id with A's secret.
    let err = h
        .nodes()
        .update_allocations(pb::UpdateAllocationsRequest {
            auth: Some(pb::NodeAuth {
                node_id: b.node_id.clone(),
                secret_id: a.secret_id.clone(),
            }),
            updates: vec![update.clone()],
        })
        .await
        .expect_err("refused");
    assert!(
        matches!(err.code(), Code::PermissionDenied | Code::Unauthenticated),
        "{err:?}"
    );
    // B itself may.
    h.nodes()
        .update_allocations(pb::UpdateAllocationsRequest {
            auth: Some(b),
            updates: vec![update],
        })
        .await
        .expect("B updates its own allocation");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_stream_sees_every_topic_in_index_order() {
    let h = Harness::start().await;
    let mut stream = EventServiceClient::new(h.channel.clone())
        .subscribe(pb::SubscribeRequest {
            from_index: 0,
            topics: Vec::new(),
        })
        .await
        .expect("subscribes")
        .into_inner();
    join(&h, 1).await;
    register_job(&h, &mock::service_job("web", 1)).await;
    let mut seen = std::collections::BTreeSet::new();
    let mut last = 0;
    let want = [
        pb::Topic::Node as i32,
        pb::Topic::Job as i32,
        pb::Topic::Evaluation as i32,
        pb::Topic::Allocation as i32,
    ];
    let collect = async {
        while !want.iter().all(|t| seen.contains(t)) {
            let msg = stream
                .message()
                .await
                .expect("stream healthy")
                .expect("stream open");
            assert!(msg.index >= last, "index order: {} after {last}", msg.index);
            last = msg.index;
            for e in msg.events {
                assert_eq!(e.index, msg.index);
                seen.insert(e.topic);
            }
        }
    };
    tokio::time::timeout(DEADLINE, collect)
        .await
        .expect("every topic seen in time");
    h.stop().await;
}

/// A node's allocation watch sends the whole set first, then only what the servers
/// changed: a stop sends that allocation, and the node's own status report nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_allocation_watch_sends_the_set_then_only_changes() {
    let h = Harness::start().await;
    let auth = join(&h, 1).await;
    let mut stream = h
        .nodes()
        .watch_allocations(pb::WatchAllocationsRequest {
            auth: Some(auth.clone()),
            min_index: 0,
            known: Vec::new(),
        })
        .await
        .expect("watch opens")
        .into_inner();
    let mut next = async || {
        tokio::time::timeout(DEADLINE, stream.message())
            .await
            .expect("a message before the deadline")
            .expect("the stream stays up")
            .expect("the stream does not end")
    };
    let first = next().await;
    assert!(first.complete, "the first message is the whole set");
    assert!(first.allocations.is_empty() && first.removed.is_empty());
    register_job(&h, &mock::service_job("web", 2)).await;
    let mut placed = std::collections::BTreeMap::new();
    let mut index = first.index;
    while placed.len() < 2 {
        let msg = next().await;
        assert!(!msg.complete, "later messages carry changes only");
        assert!(msg.index > index, "indexes increase");
        index = msg.index;
        for a in msg.allocations {
            placed.insert(a.id.clone(), a);
        }
    }
    let (reported, _) = placed.first_key_value().expect("two placed");
    let (stopped, _) = placed.last_key_value().expect("two placed");
    h.nodes()
        .update_allocations(pb::UpdateAllocationsRequest {
            auth: Some(auth),
            updates: vec![pb::AllocClientUpdate {
                alloc_id: reported.clone(),
                client_status: pb::ClientStatus::Running.into(),
                ..Default::default()
            }],
        })
        .await
        .expect("update accepted");
    AllocServiceClient::new(h.channel.clone())
        .stop(pb::AllocStopRequest {
            alloc_id: stopped.clone(),
        })
        .await
        .expect("stop accepted");
    // The node's own report is not sent back (Nomad's AllocModifyIndex): the next message
    // is the servers' stop of the other allocation, written after the report.
    let msg = next().await;
    assert!(!msg.complete && msg.removed.is_empty());
    let sent: Vec<(&str, i32)> = msg
        .allocations
        .iter()
        .map(|a| (a.id.as_str(), a.desired_status))
        .collect();
    assert!(
        sent.contains(&(stopped.as_str(), pb::DesiredStatus::Stop.into())),
        "the stop is sent: {sent:?}"
    );
    assert!(
        sent.iter().all(|(id, _)| id != reported),
        "the node's own report is not sent back: {sent:?}"
    );
    h.stop().await;
}

/// The first message of a watch opened with what the node holds.
async fn first_watch_message(
    h: &Harness,
    auth: &pb::NodeAuth,
    known: Vec<pb::KnownAllocation>,
) -> Result<pb::WatchAllocationsResponse, tonic::Status> {
    let mut stream = h
        .nodes()
        .watch_allocations(pb::WatchAllocationsRequest {
            auth: Some(auth.clone()),
            min_index: 0,
            known,
        })
        .await?
        .into_inner();
    let first = tokio::time::timeout(DEADLINE, stream.message())
        .await
        .expect("a message before the deadline")?;
    Ok(first.expect("the stream does not end"))
}

/// A node that reconnects names what it holds; its first message is then only what differs
/// (sent even when nothing does), not the whole set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnecting_watch_sends_only_what_differs_from_what_the_node_holds() {
    let h = Harness::start().await;
    let auth = join(&h, 1).await;
    register_job(&h, &mock::service_job("web", 2)).await;
    let held = eventually("both allocations are placed", DEADLINE, || async {
        let first = first_watch_message(&h, &auth, Vec::new()).await.ok()?;
        assert!(
            first.complete,
            "without known, the first message is the whole set"
        );
        (first.allocations.len() == 2).then_some(first.allocations)
    })
    .await;
    let known = |a: &pb::Allocation, alloc_modify_index: u64| pb::KnownAllocation {
        id: a.id.clone(),
        alloc_modify_index,
    };

    let all_current: Vec<_> = held
        .iter()
        .map(|a| known(a, a.alloc_modify_index))
        .collect();
    let first = first_watch_message(&h, &auth, all_current)
        .await
        .expect("watch opens");
    assert!(!first.complete, "a difference, not the whole set");
    assert!(
        first.allocations.is_empty() && first.removed.is_empty(),
        "nothing differs: {first:?}"
    );
    assert!(first.index > 0);

    let foreign = mock::alloc_id(999).to_string();
    let mut stale_and_foreign = vec![
        known(&held[0], held[0].alloc_modify_index - 1),
        known(&held[1], held[1].alloc_modify_index),
    ];
    stale_and_foreign.push(pb::KnownAllocation {
        id: foreign.clone(),
        alloc_modify_index: 1,
    });
    let first = first_watch_message(&h, &auth, stale_and_foreign)
        .await
        .expect("watch opens");
    assert!(!first.complete);
    let sent: Vec<&str> = first.allocations.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(
        sent,
        vec![held[0].id.as_str()],
        "only the stale one is sent"
    );
    assert_eq!(
        first.removed,
        vec![foreign],
        "what the node no longer has is named"
    );

    let bad = first_watch_message(
        &h,
        &auth,
        vec![pb::KnownAllocation {
            id: "not-an-id".into(),
            alloc_modify_index: 1,
        }],
    )
    .await
    .expect_err("a bad id is refused");
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    assert!(bad.message().contains("known[0].id"), "{}", bad.message());
    h.stop().await;
}

/// Prefix search: a node's first characters find it, a job name's first letters find the
/// job, every context answers, and a prefix no id can have is refused naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_search_finds_ids_and_names() {
    use drover_proto::v1::search_service_client::SearchServiceClient;
    let h = Harness::start().await;
    let auth = join(&h, 1).await;
    register_job(&h, &mock::service_job("webapp", 1)).await;
    let mut search = SearchServiceClient::new(h.channel.clone());
    let ask = |prefix: &str, context: pb::SearchContext| pb::PrefixSearchRequest {
        prefix: prefix.to_string(),
        context: context as i32,
        namespace: String::new(),
        limit: 0,
    };

    let found = search
        .prefix_search(ask(&auth.node_id[..8], pb::SearchContext::Nodes))
        .await
        .expect("search answers")
        .into_inner();
    assert_eq!(found.matches.len(), 1);
    assert_eq!(found.matches[0].ids, vec![auth.node_id.clone()]);
    assert!(!found.matches[0].truncated);

    let all = search
        .prefix_search(ask("web", pb::SearchContext::Unspecified))
        .await
        .expect("search answers")
        .into_inner();
    let jobs = all
        .matches
        .iter()
        .find(|m| m.context == pb::SearchContext::Jobs as i32)
        .expect("jobs searched");
    assert_eq!(jobs.ids, vec!["webapp".to_string()]);
    assert_eq!(all.matches.len(), 4, "every context answers");

    let refused = search
        .prefix_search(ask("web", pb::SearchContext::Evals))
        .await
        .expect_err("not hex");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused.message().starts_with("prefix: "),
        "{}",
        refused.message()
    );
    h.stop().await;
}

/// Issue 14, item 13: a job that loses its allocations to preemption is evaluated again in
/// the same commit; with no room left it waits in a blocked eval and never reads `dead`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempted_jobs_are_evaluated_again_and_wait_blocked() {
    use drover_core::types::{JobStatus, Resources};
    let h = Harness::start().await;
    for n in 1..=3 {
        join(&h, n).await;
    }
    let mut low = mock::service_job("low", 3);
    low.priority = 20;
    low.groups[0].tasks[0].resources = Resources::new(3500, 256, 0);
    register_job(&h, &low).await;
    eventually("the low job fills the three nodes", DEADLINE, || async {
        (job_allocs(&h, "low").await.len() == 3).then_some(())
    })
    .await;

    let mut sys = mock::system_job("sys");
    sys.priority = 90;
    sys.groups[0].tasks[0].resources = Resources::new(1000, 256, 0);
    register_job(&h, &sys).await;
    eventually("the system job runs everywhere", DEADLINE, || async {
        (job_allocs(&h, "sys").await.len() == 3).then_some(())
    })
    .await;

    let snap = h.server.handle().snapshot();
    let key = low.key();
    let evicted = snap
        .allocs_by_job(&key)
        .filter(|a| a.links.get().preempted_by.is_some())
        .count();
    assert_eq!(evicted, 3, "every low allocation was preempted");
    assert!(
        snap.evals_by_job(&key)
            .any(|e| e.triggered_by == drover_core::types::TriggeredBy::Preemption),
        "the preempted job got an eval"
    );
    eventually(
        "the preempted job waits blocked, not dead",
        DEADLINE,
        || async {
            let snap = h.server.handle().snapshot();
            let blocked = snap
                .evals_by_job(&key)
                .any(|e| e.status == drover_core::types::EvalStatus::Blocked);
            let status = snap.job(&key)?.status;
            (blocked && status != JobStatus::Dead).then_some(())
        },
    )
    .await;
    h.stop().await;
}
