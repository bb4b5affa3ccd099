//! ACLs end to end over real gRPC: every RPC the API serves, found in the descriptor set
//! (so a new RPC without a check fails here), refuses a missing token and a token without
//! the capability, and lets the right token through; and the console's case, a read-only
//! token that cannot offline a node.

use crate::common;

use common::acl::Acl;
use common::api::Api;
use drover_proto::bearer::BearerChannel;
use drover_proto::v1 as pb;
use drover_proto::v1::acl_service_client::AclServiceClient;
use tonic::Code;

/// Any message: requests go out empty (every field at its default), answers are not read.
#[derive(Clone, PartialEq, prost::Message)]
struct Empty {}

/// The RPCs that take no ACL token: node calls proven by the node's secret in the
/// message, the leader and peer lookups agents and clients use to find servers, and the
/// bootstrap that creates the first token.
const NO_TOKEN: &[&str] = &[
    "drover.v1.NodeService/UpdateStatus",
    "drover.v1.NodeService/Heartbeats",
    "drover.v1.NodeService/WatchAllocations",
    "drover.v1.NodeService/UpdateAllocations",
    "drover.v1.StatusService/Leader",
    "drover.v1.StatusService/Peers",
    "drover.v1.AclService/Bootstrap",
];

/// The policy that grants each RPC; `None`: a management token; `Some("")`: any token.
fn grant(rpc: &str) -> Option<&'static str> {
    const READ_JOB: &str = r#"namespace "default" { capabilities = ["read-job"] }"#;
    const SUBMIT: &str = r#"namespace "default" { capabilities = ["submit-job"] }"#;
    const DISPATCH: &str = r#"namespace "default" { capabilities = ["dispatch-job"] }"#;
    const EVENTS: &str = r#"namespace "default" { capabilities = ["read-events"] }"#;
    const NODE_READ: &str = r#"node { policy = "read" }"#;
    const NODE_WRITE: &str = r#"node { policy = "write" }"#;
    const OP_READ: &str = r#"operator { policy = "read" }"#;
    const OP_WRITE: &str = r#"operator { policy = "write" }"#;
    const AGENT: &str = r#"agent { policy = "write" }"#;
    const LOGS: &str = r#"namespace "default" { capabilities = ["read-logs"] }"#;
    const LIFECYCLE: &str = r#"namespace "default" { capabilities = ["alloc-lifecycle"] }"#;
    let (service, method) = rpc.split_once('/').expect("service/method");
    Some(match (service.trim_start_matches("drover.v1."), method) {
        ("JobService", "Register" | "Plan" | "Deregister" | "PeriodicForce") => SUBMIT,
        ("JobService", "Dispatch") => DISPATCH,
        ("JobService", _) => READ_JOB,
        ("EvalService", "List" | "Get") => READ_JOB,
        ("EvalService", _) => OP_READ,
        ("EventService", "Subscribe") => EVENTS,
        ("NodeService", "Register") => AGENT,
        ("OperatorService", "NodeList" | "NodeGet") => NODE_READ,
        ("OperatorService", "SchedulerGetConfig") => OP_READ,
        ("OperatorService", "SchedulerSetConfig") => OP_WRITE,
        ("OperatorService", "AllocGet" | "AllocList") => READ_JOB,
        (
            "OperatorService",
            "NodeOffline" | "NodeOnline" | "NodeDrain" | "NodeEligibility" | "NodePurge",
        ) => NODE_WRITE,
        ("WorkerService", "List" | "GetConfig") => OP_READ,
        ("WorkerService", _) => OP_WRITE,
        ("SearchService", "PrefixSearch") => READ_JOB,
        ("ServiceService", _) => READ_JOB,
        ("StatusService", _) => OP_READ,
        ("ClusterService", "ListPeers") => OP_READ,
        ("ClusterService", _) => OP_WRITE,
        ("AllocService", "Logs") => LOGS,
        // An empty request asks for no access: any of the two capabilities lets it be
        // decoded (and refused as invalid).
        ("AllocService", _) => LIFECYCLE,
        ("DeploymentService", "List" | "Get") => READ_JOB,
        ("DeploymentService", _) => SUBMIT,
        ("AclService", "TokenSelf") => "",
        ("AclService", _) => return None,
        _ => panic!("{rpc}: no row in the ACL table; say what it needs"),
    })
}

/// Calls `rpc` with an empty request; the status code and message (OK when accepted).
async fn call(channel: &BearerChannel, rpc: &str, streaming: bool) -> (Code, String) {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.expect("ready");
    let path: tonic::codegen::http::uri::PathAndQuery = format!("/{rpc}").parse().expect("path");
    let codec = tonic_prost::ProstCodec::<Empty, Empty>::default();
    let result = if streaming {
        grpc.server_streaming(tonic::Request::new(Empty {}), path, codec)
            .await
            .map(|_| ())
    } else {
        grpc.unary(tonic::Request::new(Empty {}), path, codec)
            .await
            .map(|_| ())
    };
    match result {
        Ok(()) => (Code::Ok, String::new()),
        Err(s) => (s.code(), s.message().to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_checks_the_token_before_it_acts() {
    let acl = Acl::start().await;
    let nothing = acl
        .token("nothing", r#"namespace "other" { policy = "deny" }"#)
        .await;
    let mut failures = Vec::new();
    for (n, (rpc, streaming)) in common::api_rpcs().into_iter().enumerate() {
        let exempt = NO_TOKEN.contains(&rpc.as_str());
        let (code, msg) = call(&acl.channel(None), &rpc, streaming).await;
        let missing_refused = code == Code::Unauthenticated && msg.contains("missing acl token");
        if exempt == missing_refused {
            failures.push(format!("{rpc} without a token: {code:?} {msg}"));
        }
        if exempt {
            continue;
        }
        let (code, msg) = call(&acl.channel(Some("not-a-real-token")), &rpc, streaming).await;
        if code != Code::Unauthenticated {
            failures.push(format!("{rpc} with an unknown token: {code:?} {msg}"));
        }
        let rules = grant(&rpc);
        let (code, msg) = call(&acl.channel(Some(&nothing)), &rpc, streaming).await;
        let wanted = if rules == Some("") {
            code != Code::PermissionDenied
        } else {
            code == Code::PermissionDenied
        };
        if !wanted {
            failures.push(format!(
                "{rpc} with a token granting nothing: {code:?} {msg}"
            ));
        }
        let secret = match rules {
            None => acl.management.clone(),
            Some("") => nothing.clone(),
            Some(rules) => acl.token(&format!("grant-{n}"), rules).await,
        };
        let (code, msg) = call(&acl.channel(Some(&secret)), &rpc, streaming).await;
        if matches!(code, Code::Unauthenticated | Code::PermissionDenied) {
            failures.push(format!("{rpc} with the granting token: {code:?} {msg}"));
        }
    }
    assert!(
        failures.is_empty(),
        "ACL table failures:\n{}",
        failures.join("\n")
    );
    acl.api.stop().await;
}

/// The topics of the events `stream` delivers up to index `last` (everything written
/// before it subscribed is replayed from the buffer).
async fn topics_until(stream: &mut tonic::Streaming<pb::SubscribeResponse>, last: u64) -> Vec<i32> {
    let deadline = tokio::time::Instant::now() + common::DEADLINE;
    let mut topics = std::collections::BTreeSet::new();
    let mut seen = 0;
    while seen < last {
        let msg = tokio::time::timeout_at(deadline, stream.message())
            .await
            .expect("events arrive")
            .expect("stream ok")
            .expect("stream open");
        seen = seen.max(msg.index);
        topics.extend(msg.events.iter().map(|e| e.topic));
    }
    topics.into_iter().collect()
}

fn node_registration(n: u64) -> pb::RegisterNodeRequest {
    pb::RegisterNodeRequest {
        node: Some((&drover_core::mock::node(n)).into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_do_what_their_policies_say_and_nothing_more() {
    use drover_proto::v1::event_service_client::EventServiceClient;
    use drover_proto::v1::job_service_client::JobServiceClient;
    use drover_proto::v1::node_service_client::NodeServiceClient;
    use drover_proto::v1::operator_service_client::OperatorServiceClient;
    let acl = Acl::start().await;
    let agent = acl.token("agent", r#"agent { policy = "write" }"#).await;
    let read_only = acl
        .token(
            "read-only",
            r#"
            namespace "*" { policy = "read" }
            node { policy = "read" }
            operator { policy = "read" }
            "#,
        )
        .await;
    let ops = acl
        .token(
            "ops",
            r#"
            namespace "default" { policy = "write" }
            node { policy = "write" }
            "#,
        )
        .await;

    // A node registers only with the join credential.
    let refused = NodeServiceClient::new(acl.channel(None))
        .register(node_registration(1))
        .await
        .expect_err("no join credential");
    assert_eq!(
        refused.code(),
        Code::Unauthenticated,
        "{}",
        refused.message()
    );
    let refused = NodeServiceClient::new(acl.channel(Some(&read_only)))
        .register(node_registration(1))
        .await
        .expect_err("a read-only token is no join credential");
    assert_eq!(refused.code(), Code::PermissionDenied);
    assert!(
        refused.message().contains("agent:write"),
        "{}",
        refused.message()
    );
    let node = NodeServiceClient::new(acl.channel(Some(&agent)))
        .register(node_registration(1))
        .await
        .expect("the join token registers a node")
        .into_inner();

    // The console's case: a read-only token sees nodes but cannot offline one; the
    // server refuses, naming the capability, and nothing changes.
    let mut as_reader = OperatorServiceClient::new(acl.channel(Some(&read_only)));
    let listed = as_reader
        .node_list(pb::NodeListRequest::default())
        .await
        .expect("read-only lists nodes")
        .into_inner();
    assert_eq!(listed.nodes.len(), 1);
    let offline = pb::NodeOfflineRequest {
        node_id: node.node_id.clone(),
    };
    let refused = as_reader
        .node_offline(offline.clone())
        .await
        .expect_err("read-only cannot offline");
    assert_eq!(refused.code(), Code::PermissionDenied);
    assert!(
        refused.message().contains("write-node"),
        "{}",
        refused.message()
    );
    let id: drover_core::NodeId = node.node_id.parse().expect("node id");
    assert_ne!(
        acl.api.h.snapshot().node(&id).expect("node").health,
        drover_core::NodeHealth::Offlined
    );
    OperatorServiceClient::new(acl.channel(Some(&ops)))
        .node_offline(offline)
        .await
        .expect("write-node offlines");

    // Jobs: the ops token submits in default but not in prod; the reader cannot submit.
    let job = drover_core::mock::service_job("web", 1);
    let mut prod = drover_core::mock::service_job("api", 1);
    prod.namespace = "prod".into();
    let register = |job: &drover_core::Job| pb::RegisterJobRequest {
        job: Some(job.into()),
        enforce_index: None,
    };
    JobServiceClient::new(acl.channel(Some(&ops)))
        .register(register(&job))
        .await
        .expect("submit-job in default");
    let refused = JobServiceClient::new(acl.channel(Some(&ops)))
        .register(register(&prod))
        .await
        .expect_err("no rule for prod");
    assert_eq!(refused.code(), Code::PermissionDenied);
    assert!(
        refused
            .message()
            .contains("submit-job on namespace \"prod\""),
        "{}",
        refused.message()
    );
    let refused = JobServiceClient::new(acl.channel(Some(&read_only)))
        .register(register(&job))
        .await
        .expect_err("read cannot submit");
    assert_eq!(refused.code(), Code::PermissionDenied);

    // The node's own identity is a credential (it is known, not refused as unknown), but
    // it reads only the jobs of allocations placed on it (attacks.rs has the other half).
    let as_node = BearerChannel::for_node(acl.raw.clone(), &node.node_id, &node.secret_id)
        .expect("node credential");
    let refused = JobServiceClient::new(as_node)
        .get(pb::GetJobRequest {
            query: None,
            namespace: "default".into(),
            job_id: "web".into(),
        })
        .await
        .expect_err("the node runs nothing of web");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let wrong =
        BearerChannel::for_node(acl.raw.clone(), &node.node_id, "not-its-secret").expect("header");
    let refused = JobServiceClient::new(wrong)
        .get(pb::GetJobRequest {
            query: None,
            namespace: "default".into(),
            job_id: "web".into(),
        })
        .await
        .expect_err("wrong node secret");
    assert_eq!(refused.code(), Code::Unauthenticated);

    // Events: a token that may read only nodes gets node events and no job events.
    let nodes_only = acl.token("nodes-only", r#"node { policy = "read" }"#).await;
    let mut stream = EventServiceClient::new(acl.channel(Some(&nodes_only)))
        .subscribe(pb::SubscribeRequest {
            from_index: 1,
            ..Default::default()
        })
        .await
        .expect("subscribe")
        .into_inner();
    // Everything written so far (node registration and offline, the job and its eval)
    // is replayed from the buffer; read up to the last index and look at what came.
    let last = acl.api.h.applied_index();
    assert_eq!(
        topics_until(&mut stream, last).await,
        [pb::Topic::Node as i32],
        "only node events reach a node-only token"
    );
    let mut jobs_too = EventServiceClient::new(acl.channel(Some(&acl.management)))
        .subscribe(pb::SubscribeRequest {
            from_index: 1,
            ..Default::default()
        })
        .await
        .expect("subscribe")
        .into_inner();
    let topics = topics_until(&mut jobs_too, last).await;
    assert!(
        topics.contains(&(pb::Topic::Job as i32)),
        "a management token sees the job events the node-only one did not: {topics:?}"
    );

    // Bootstrap happens once; a deleted token stops working at once.
    let again = AclServiceClient::new(acl.channel(None))
        .bootstrap(pb::AclBootstrapRequest {})
        .await
        .expect_err("second bootstrap");
    assert_eq!(again.code(), Code::FailedPrecondition);
    let me = AclServiceClient::new(acl.channel(Some(&ops)))
        .token_self(pb::AclTokenSelfRequest::default())
        .await
        .expect("self")
        .into_inner();
    assert_eq!(me.node, "write");
    assert!(
        me.namespace_capabilities
            .contains(&"submit-job".to_string())
    );
    acl.admin()
        .token_delete(pb::AclTokenDeleteRequest {
            accessor_id: me.token.expect("token").accessor_id,
        })
        .await
        .expect("delete");
    let refused = AclServiceClient::new(acl.channel(Some(&ops)))
        .token_self(pb::AclTokenSelfRequest::default())
        .await
        .expect_err("deleted");
    assert_eq!(refused.code(), Code::Unauthenticated);
    acl.api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_policies_and_tokens_are_refused_naming_the_field() {
    let acl = Acl::start().await;
    let refused = acl
        .admin()
        .policy_apply(pb::AclPolicyApplyRequest {
            name: "bad".into(),
            description: String::new(),
            rules: r#"namespace "x" { policy = "admin" }"#.into(),
        })
        .await
        .expect_err("bad level");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused.message().contains(r#"namespace "x".policy"#),
        "{}",
        refused.message()
    );
    let refused = acl
        .admin()
        .token_create(pb::AclTokenCreateRequest {
            name: "t".into(),
            r#type: "client".into(),
            policies: vec!["missing".into()],
            ttl_ms: 0,
        })
        .await
        .expect_err("unknown policy");
    assert_eq!(refused.code(), Code::NotFound, "{}", refused.message());
    assert!(
        refused.message().contains("\"missing\""),
        "{}",
        refused.message()
    );
    let refused = acl
        .admin()
        .token_create(pb::AclTokenCreateRequest {
            name: "t".into(),
            r#type: "root".into(),
            policies: vec![],
            ttl_ms: 0,
        })
        .await
        .expect_err("unknown type");
    assert!(
        refused.message().contains("type: \"root\""),
        "{}",
        refused.message()
    );

    // An expired token is refused like an unknown one.
    let short = acl
        .admin()
        .token_create(pb::AclTokenCreateRequest {
            name: "short".into(),
            r#type: "management".into(),
            policies: vec![],
            ttl_ms: 1,
        })
        .await
        .expect("short-lived token")
        .into_inner()
        .token
        .expect("token");
    let deadline = tokio::time::Instant::now() + common::DEADLINE;
    loop {
        let r = AclServiceClient::new(acl.channel(Some(&short.secret_id)))
            .token_self(pb::AclTokenSelfRequest::default())
            .await;
        match r {
            Err(e) if e.code() == Code::Unauthenticated => {
                assert!(e.message().contains("expired"), "{}", e.message());
                break;
            }
            _ if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await
            }
            other => panic!("the token never expired: {other:?}"),
        }
    }
    acl.api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_acls_off_everything_is_allowed_and_acl_calls_say_why_not() {
    let api = Api::start(|_| {}).await;
    let refused = AclServiceClient::new(api.channel.clone())
        .bootstrap(pb::AclBootstrapRequest {})
        .await
        .expect_err("acl off");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert!(
        refused.message().contains("acl is disabled"),
        "{}",
        refused.message()
    );
    let me = AclServiceClient::new(api.channel.clone())
        .token_self(pb::AclTokenSelfRequest::default())
        .await
        .expect("self without acl")
        .into_inner();
    assert!(!me.acl_enabled && me.management);
    api.stop().await;
}
