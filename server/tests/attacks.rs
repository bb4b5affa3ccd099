//! Attacks from outside, each kept as a test (issue 28): what a node, a task or an
//! unauthenticated client on the same machine tried, and what the servers must answer.

use crate::common;

use common::acl::Acl;
use common::{Agent, heartbeat, register, wait_until};
use drover_core::mock;
use drover_proto::convert::NodeCredentials;
use drover_proto::grant::{self, Asked};
use drover_proto::v1 as pb;
use drover_proto::v1::agent_service_server::{AgentService, AgentServiceServer};
use drover_proto::v1::alloc_service_client::AllocServiceClient;
use drover_proto::v1::node_service_client::NodeServiceClient;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

/// An agent endpoint a hostile node runs: it records every call's metadata.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<MetadataMap>>>);

type Chunks =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::AllocLogsResponse, Status>> + Send>>;

#[tonic::async_trait]
impl AgentService for Recorder {
    type LogsStream = Chunks;

    async fn logs(
        &self,
        req: Request<pb::AllocLogsRequest>,
    ) -> Result<Response<Self::LogsStream>, Status> {
        self.0.lock().unwrap().push(req.metadata().clone());
        let chunk = Ok(pb::AllocLogsResponse {
            data: b"captured\n".to_vec(),
        });
        Ok(Response::new(Box::pin(tokio_stream::iter([chunk]))))
    }

    async fn restart(
        &self,
        req: Request<pb::AllocRestartRequest>,
    ) -> Result<Response<pb::AllocRestartResponse>, Status> {
        self.0.lock().unwrap().push(req.metadata().clone());
        Ok(Response::new(pb::AllocRestartResponse { tasks: vec![] }))
    }
}

/// Serves `recorder` on a free loopback port; its URL.
async fn serve(recorder: Recorder) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(AgentServiceServer::new(recorder))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    format!("http://{addr}")
}

/// Node `n`'s registration with its agent endpoint at `address`.
fn registration_at(n: u64, address: &str) -> pb::RegisterNodeRequest {
    let mut node = mock::node(n);
    node.attributes.insert(
        drover_proto::AGENT_ADDRESS_ATTRIBUTE.into(),
        address.to_string(),
    );
    pb::RegisterNodeRequest {
        node: Some((&node).into()),
    }
}

/// Item 1: a node registered with the join token names an address of its own choosing;
/// an operator with the management token reads the logs of an allocation placed there.
/// The address receives a grant for that allocation, never the operator's token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_token_never_reaches_an_address_a_node_chose() {
    let acl = Acl::start().await;
    let join = acl.token("join", r#"agent { policy = "write" }"#).await;
    let recorder = Recorder::default();
    let evil = serve(recorder.clone()).await;

    let registered = NodeServiceClient::new(acl.channel(Some(&join)))
        .register(registration_at(1, &evil))
        .await
        .expect("the join token registers a node")
        .into_inner();
    let agent = Agent {
        creds: NodeCredentials {
            node_id: registered.node_id.parse().unwrap(),
            secret_id: registered.secret_id.clone(),
        },
    };
    let h = &acl.api.h;
    heartbeat(h, &agent).await;
    register(h, mock::service_job("web", 1)).await;
    let snap = wait_until(h, "an allocation on the node", |s| {
        s.allocs_by_node(&agent.creds.node_id).next().is_some()
    })
    .await;
    let alloc = snap.allocs_by_node(&agent.creds.node_id).next().unwrap().id;

    // A read-only token is refused before anything leaves the server, told which
    // namespace it lacks the grant in.
    let reader = acl
        .token("reader", r#"namespace "*" { policy = "read" }"#)
        .await;
    let refused = AllocServiceClient::new(acl.channel(Some(&reader)))
        .logs(pb::AllocLogsRequest {
            alloc_id: alloc.to_string(),
            ..Default::default()
        })
        .await
        .expect_err("read does not grant read-logs");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    assert!(
        refused
            .message()
            .contains("read-logs on namespace \"default\""),
        "{}",
        refused.message()
    );
    assert!(
        recorder.0.lock().unwrap().is_empty(),
        "nothing reached the node"
    );

    let mut logs = AllocServiceClient::new(acl.channel(Some(&acl.management)))
        .logs(pb::AllocLogsRequest {
            alloc_id: alloc.to_string(),
            ..Default::default()
        })
        .await
        .expect("the server passes the call on")
        .into_inner();
    let first = logs.message().await.expect("a chunk").expect("one chunk");
    assert_eq!(first.data, b"captured\n");
    let restarted = AllocServiceClient::new(acl.channel(Some(&acl.management)))
        .restart(pb::AllocRestartRequest {
            alloc_id: alloc.to_string(),
            task: "server".into(),
        })
        .await;
    assert!(restarted.is_ok(), "{restarted:?}");

    let seen = recorder.0.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        2,
        "one logs call and one restart reached the node"
    );
    for metadata in &seen {
        let headers = format!("{:?}", metadata.clone().into_headers());
        assert!(
            !headers.contains(&acl.management),
            "the management token reached the node: {headers}"
        );
        assert!(metadata.get("authorization").is_none(), "{headers}");
    }
    let header = |i: usize| {
        seen[i]
            .get(grant::GRANT_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let now = drover_server::clock::now().as_millis();
    let node = agent.creds.node_id.to_string();
    let alloc_id = alloc.to_string();
    let logs_grant = header(0);
    let verified = grant::verify(
        logs_grant.as_deref(),
        &registered.secret_id,
        &node,
        Asked {
            alloc_id: &alloc_id,
            task: "",
            access: pb::AllocAccess::ReadLogs,
        },
        now,
    )
    .expect("a grant for that allocation's logs, signed for that node");
    assert_eq!(verified.alloc_id, alloc_id);
    let other = mock::alloc_id(99).to_string();
    assert!(
        grant::verify(
            logs_grant.as_deref(),
            &registered.secret_id,
            &node,
            Asked {
                alloc_id: &other,
                task: "",
                access: pb::AllocAccess::ReadLogs,
            },
            now,
        )
        .is_err(),
        "the grant is worth nothing for another allocation"
    );
    assert!(
        grant::verify(
            logs_grant.as_deref(),
            &registered.secret_id,
            &node,
            Asked {
                alloc_id: &alloc_id,
                task: "",
                access: pb::AllocAccess::Lifecycle,
            },
            now,
        )
        .is_err(),
        "a logs grant does not restart"
    );
    assert!(
        grant::verify(
            header(1).as_deref(),
            &registered.secret_id,
            &node,
            Asked {
                alloc_id: &alloc_id,
                task: "server",
                access: pb::AllocAccess::Lifecycle,
            },
            now,
        )
        .is_ok(),
        "the restart carried a lifecycle grant for the task"
    );
    acl.api.stop().await;
}

/// Item 1 (c): without TLS, a node's address changes only with that node's own secret, a
/// second node cannot take its name, and a loopback address from another host is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_address_is_changed_only_by_the_node() {
    let acl = Acl::start().await;
    let join = acl.token("join", r#"agent { policy = "write" }"#).await;
    let mut nodes = NodeServiceClient::new(acl.channel(Some(&join)));
    let first = nodes
        .register(registration_at(1, "http://127.0.0.1:4000"))
        .await
        .expect("registers")
        .into_inner();
    let h = &acl.api.h;
    let node_id = first.node_id.parse().unwrap();
    heartbeat(
        h,
        &Agent {
            creds: NodeCredentials {
                node_id,
                secret_id: first.secret_id.clone(),
            },
        },
    )
    .await;

    // The same name from a new registration: refused, naming the live node.
    let taken = nodes
        .register(registration_at(1, "http://127.0.0.1:5000"))
        .await
        .expect_err("a second live node with the same name");
    assert_eq!(taken.code(), tonic::Code::FailedPrecondition, "{taken:?}");
    assert!(
        taken.message().contains(&first.node_id),
        "{}",
        taken.message()
    );

    // The node's id with a wrong secret: refused.
    let mut hijack = registration_at(1, "http://127.0.0.1:5000");
    let reg = hijack.node.as_mut().unwrap();
    reg.node_id = first.node_id.clone();
    reg.secret_id = "guessed".into();
    let refused = nodes.register(hijack).await.expect_err("wrong secret");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");

    // Unspecified and non-http addresses are refused before anything is written.
    for bad in ["http://0.0.0.0:5000", "file:///etc/passwd"] {
        let refused = nodes
            .register(registration_at(2, bad))
            .await
            .expect_err(bad);
        assert_eq!(
            refused.code(),
            tonic::Code::InvalidArgument,
            "{bad}: {refused:?}"
        );
        assert!(
            refused.message().contains("drover.agent.address"),
            "{}",
            refused.message()
        );
    }
    let snap = h.snapshot();
    let node = snap.node(&node_id).expect("the node");
    assert_eq!(
        node.attributes
            .get(drover_proto::AGENT_ADDRESS_ATTRIBUTE)
            .map(String::as_str),
        Some("http://127.0.0.1:4000"),
        "the address is the one the node registered"
    );
    assert_eq!(snap.nodes().count(), 1, "nothing else registered");
    acl.api.stop().await;
}

/// Item 5: a node's own identity reads the jobs of the allocations placed on it, and no
/// other job (another team's env and passwords included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_reads_only_the_jobs_it_runs() {
    use drover_proto::bearer::BearerChannel;
    use drover_proto::v1::job_service_client::JobServiceClient;
    let acl = Acl::start().await;
    let h = &acl.api.h;
    let agent = common::join(h, 1, "").await;
    register(h, mock::service_job("mine", 1)).await;
    let mut theirs = mock::service_job("theirs", 1);
    theirs.namespace = "team-b".into();
    theirs.groups[0].tasks[0].resources = drover_core::types::Resources::new(100_000, 1, 0);
    register(h, theirs).await;
    wait_until(h, "the node's allocation", |s| {
        s.allocs_by_node(&agent.creds.node_id).next().is_some()
    })
    .await;
    let as_node = BearerChannel::for_node(
        acl.raw.clone(),
        &agent.creds.node_id.to_string(),
        &agent.creds.secret_id,
    )
    .unwrap();
    let mut jobs = JobServiceClient::new(as_node);
    let get = |ns: &str, id: &str| pb::GetJobRequest {
        namespace: ns.into(),
        job_id: id.into(),
        ..Default::default()
    };
    let mine = jobs.get(get("default", "mine")).await;
    assert!(mine.is_ok(), "the node reads the job it runs: {mine:?}");
    let versions = jobs
        .versions(pb::JobVersionsRequest {
            namespace: "default".into(),
            job_id: "mine".into(),
            ..Default::default()
        })
        .await;
    assert!(versions.is_ok(), "{versions:?}");
    for (ns, id) in [("team-b", "theirs"), ("default", "nosuchjob")] {
        let refused = jobs.get(get(ns, id)).await.expect_err(id);
        assert_eq!(
            refused.code(),
            tonic::Code::PermissionDenied,
            "{id}: {refused:?}"
        );
        assert!(
            refused.message().contains("reads only the jobs it runs"),
            "{}",
            refused.message()
        );
    }
    let list = jobs
        .list(pb::ListJobsRequest {
            namespace: "*".into(),
            ..Default::default()
        })
        .await
        .expect_err("a node lists no jobs");
    assert_eq!(list.code(), tonic::Code::PermissionDenied);
    acl.api.stop().await;
}

/// Item 5: a token with `read-events` cannot hold every subscriber slot: it gets its share,
/// and a management token can still subscribe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_events_token_cannot_lock_out_management() {
    use drover_proto::v1::event_service_client::EventServiceClient;
    let acl = Acl::start().await;
    let reader = acl
        .token(
            "events",
            r#"namespace "*" { capabilities = ["read-events"] }"#,
        )
        .await;
    let mut held = Vec::new();
    let refused = loop {
        let mut client = EventServiceClient::new(acl.channel(Some(&reader)));
        match client.subscribe(pb::SubscribeRequest::default()).await {
            Ok(stream) => held.push(stream.into_inner()),
            Err(status) => break status,
        }
        assert!(held.len() <= 256, "the token took every slot");
    };
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        held.len() < 64,
        "one token held {} subscriptions",
        held.len()
    );
    let management = EventServiceClient::new(acl.channel(Some(&acl.management)))
        .subscribe(pb::SubscribeRequest::default())
        .await;
    assert!(management.is_ok(), "{management:?}");
    acl.api.stop().await;
}

/// Item 5: one join token registers new nodes at its rate, not 200 in 0.2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_token_registers_nodes_at_its_rate() {
    let acl = Acl::start_with(|c| {
        c.node_register_rate = drover_server::api::RegisterRate {
            per_second: 0.5,
            burst: 5,
        }
    })
    .await;
    let join = acl.token("join", r#"agent { policy = "write" }"#).await;
    let mut nodes = NodeServiceClient::new(acl.channel(Some(&join)));
    for n in 1..=5 {
        nodes
            .register(registration_at(n, "http://127.0.0.1:4000"))
            .await
            .unwrap_or_else(|e| panic!("node {n} within the burst: {e}"));
    }
    let refused = nodes
        .register(registration_at(6, "http://127.0.0.1:4000"))
        .await
        .expect_err("past the burst");
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(refused.metadata().get("retry-after-ms").is_some());
    assert_eq!(acl.api.h.snapshot().nodes().count(), 5);
    acl.api.stop().await;
}
