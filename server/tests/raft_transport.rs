//! The server-to-server transport: Raft is served on its own listener, only to servers
//! that present the cluster secret, and servers with the secret form a cluster over it.

use crate::common;

use common::{
    DEADLINE, cluster_configs, init_tracing, register_on_leader, registration, start_with,
};
use drover_proto::v1::RaftRequest;
use drover_proto::v1::raft_service_client::RaftServiceClient;
use drover_server::raft::{Bootstrap, CLUSTER_SECRET_HEADER};
use drover_server::{Server, ServerConfig};
use std::collections::BTreeMap;
use tonic::Code;

const SECRET: &str = "correct-horse-battery-staple";

/// A Raft call to `addr` with `secret` (if any) and a payload that is not a valid message.
async fn forged_append(addr: std::net::SocketAddr, secret: Option<&str>) -> Code {
    let mut client = RaftServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connects");
    let mut req = tonic::Request::new(RaftRequest {
        payload: vec![0xff; 36],
    });
    if let Some(s) = secret {
        req.metadata_mut()
            .insert(CLUSTER_SECRET_HEADER, s.parse().unwrap());
    }
    match client.append_entries(req).await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn raft_is_refused_on_the_api_port_and_without_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::for_tests(dir.path());
    config.cluster_secret = Some(SECRET.into());
    let (server, h) = start_with(config).await;
    let api = server.serve(Default::default()).await.unwrap();
    let raft = server.raft_addr().expect("raft listener");
    assert_ne!(raft, api.local_addr(), "separate listeners");
    let before = h.raft_metrics();

    let cases = [
        (
            "the API port",
            api.local_addr(),
            Some(SECRET),
            Code::Unimplemented,
        ),
        ("no secret", raft, None, Code::Unauthenticated),
        (
            "a wrong secret",
            raft,
            Some("correct-horse-battery-stapl3"),
            Code::Unauthenticated,
        ),
        // The gate is the secret: with it, the forged payload reaches Raft's decoder.
        ("the secret", raft, Some(SECRET), Code::InvalidArgument),
    ];
    for (case, addr, secret, expected) in cases {
        assert_eq!(forged_append(addr, secret).await, expected, "{case}");
    }

    // Who a server is (what followers forward by) is told only to holders of the secret.
    let mut client = RaftServiceClient::connect(format!("http://{raft}"))
        .await
        .expect("connects");
    let refused = client
        .info(drover_proto::v1::ServerInfoRequest {})
        .await
        .expect_err("no secret");
    assert_eq!(refused.code(), Code::Unauthenticated);
    let mut req = tonic::Request::new(drover_proto::v1::ServerInfoRequest {});
    req.metadata_mut()
        .insert(CLUSTER_SECRET_HEADER, SECRET.parse().unwrap());
    let info = client
        .info(req)
        .await
        .expect("with the secret")
        .into_inner();
    assert_eq!(info.server_id, h.server_id());
    assert_eq!(info.api_addr, api.local_addr().to_string());
    assert_eq!(info.scheme, "http");

    // Joining, forcing an election and the followers' scheduling calls are the secret's
    // holders' too: without it each is refused before the server acts.
    let join = client
        .join(drover_proto::v1::JoinRequest {
            server_id: 9,
            raft_addr: "127.0.0.1:1".into(),
        })
        .await
        .expect_err("join without the secret");
    assert_eq!(join.code(), Code::Unauthenticated, "join");
    let elect = client
        .start_election(drover_proto::v1::StartElectionRequest {})
        .await
        .expect_err("election without the secret");
    assert_eq!(elect.code(), Code::Unauthenticated, "start election");
    let schedule = client
        .scheduling(drover_proto::v1::RaftRequest {
            payload: vec![1, 2, 3],
        })
        .await
        .expect_err("scheduling without the secret");
    assert_eq!(schedule.code(), Code::Unauthenticated, "scheduling");

    let after = h.raft_metrics();
    assert_eq!(after.current_term, before.current_term, "term unchanged");
    assert_eq!(
        after.current_leader, before.current_leader,
        "leader unchanged"
    );
    assert_eq!(
        after.membership_config.membership(),
        before.membership_config.membership(),
        "membership unchanged"
    );
    h.register_node(registration(1, ""))
        .await
        .expect("writes still succeed");
    api.shutdown().await.unwrap();
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_with_peers_needs_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::for_tests(dir.path());
    config.bootstrap = Bootstrap::Cluster(BTreeMap::from([
        (1, "127.0.0.1:1".to_string()),
        (2, "127.0.0.1:2".to_string()),
    ]));
    let err = Server::start(config).await.expect_err("refused");
    assert!(
        err.to_string().contains("cluster_secret is required"),
        "{err}"
    );

    let mut config = ServerConfig::for_tests(dir.path());
    config.cluster_secret = Some("short".into());
    let err = Server::start(config).await.expect_err("refused");
    assert!(err.to_string().contains("at least 16"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn three_servers_with_the_secret_form_a_cluster() {
    init_tracing();
    let (configs, _dirs) = cluster_configs(3, SECRET);
    let mut servers = Vec::new();
    for config in configs {
        servers.push(Server::start(config).await.expect("server starts"));
    }
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let leader = loop {
        let leaders: Vec<_> = servers.iter().map(|s| s.handle().leader()).collect();
        if let Some(Some(l)) = leaders.first()
            && leaders.iter().all(|x| x == &Some(*l))
            && servers[*l as usize - 1].handle().is_leader()
        {
            break *l;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no agreed leader: {leaders:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(servers[leader as usize - 1].handle().is_leader());
    let reg = register_on_leader(&servers).await;
    for s in &servers {
        let snap = s
            .handle()
            .wait_for_index(reg.index, DEADLINE)
            .await
            .expect("replicated");
        assert!(
            snap.node(&reg.node_id).is_some(),
            "every server has the node"
        );
    }
    for s in servers {
        s.shutdown().await.unwrap();
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn the_data_dir_is_private_and_a_shared_one_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let (server, _h) = start_with(ServerConfig::for_tests(&data)).await;
    assert_eq!(mode(&data), 0o700, "data dir");
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        let want = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&path), want, "{}", path.display());
    }
    server.shutdown().await.unwrap();

    let shared = root.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = Server::start(ServerConfig::for_tests(&shared))
        .await
        .expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains(&shared.display().to_string())
            && text.contains("writable by group or others"),
        "{text}"
    );
}
