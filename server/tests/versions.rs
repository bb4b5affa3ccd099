//! A feature that changes the log's format waits for every server: three servers on
//! loopback with ACLs on, one advertising an older version. `acl bootstrap` (the first
//! ACL entry) is refused naming that server while it runs the old version, and while it
//! is down; once it is back upgraded, the bootstrap goes through. `Members` on a follower
//! shows each server's own name and version, learnt from the server itself.

use crate::common;

use common::{cluster_configs, eventually};
use drover_proto::bearer::BearerChannel;
use drover_proto::v1 as pb;
use drover_proto::v1::acl_service_client::AclServiceClient;
use drover_proto::v1::status_service_client::StatusServiceClient;
use drover_server::api::{ApiOptions, ApiServer};
use drover_server::{Server, ServerConfig};
use tonic::Code;

const SECRET: &str = "test-cluster-secret-0123";
const OLD: &str = "0.0.9";

struct Running {
    server: Server,
    api: ApiServer,
}

async fn start(config: ServerConfig) -> Running {
    let server = Server::start(config).await.expect("server starts");
    let api = server
        .serve(ApiOptions::default())
        .await
        .expect("api serves");
    Running { server, api }
}

async fn channel_with(r: &Running, token: Option<&str>) -> BearerChannel {
    let endpoint =
        tonic::transport::Endpoint::from_shared(format!("http://{}", r.api.local_addr())).unwrap();
    BearerChannel::new(endpoint.connect().await.unwrap(), token).unwrap()
}

async fn channel(r: &Running) -> BearerChannel {
    channel_with(r, None).await
}

async fn bootstrap(r: &Running) -> Result<pb::AclBootstrapResponse, tonic::Status> {
    AclServiceClient::new(channel(r).await)
        .bootstrap(pb::AclBootstrapRequest {})
        .await
        .map(tonic::Response::into_inner)
}

async fn stop(r: Running) {
    r.api.shutdown().await.unwrap();
    r.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_acl_tables_wait_until_every_server_runs_a_version_that_has_them() {
    common::init_tracing();
    let (mut configs, _dirs) = cluster_configs(3, SECRET);
    for c in &mut configs {
        c.acl_enabled = true;
        c.bind_addr = "127.0.0.1:0".into();
    }
    configs[2].advertised_version = OLD.into();
    let mut servers = Vec::new();
    for c in &configs {
        servers.push(Some(start(c.clone()).await));
    }
    let first = servers[0].as_ref().unwrap().server.handle();
    eventually(&first, "a leader", || async {
        first.raft_metrics().current_leader.is_some()
    })
    .await;
    let leader_at = first.raft_metrics().current_leader.unwrap() as usize - 1;
    if leader_at == 2 {
        // The old server leads: the test stops it below, so hand the lead to server 1.
        let h = servers[2].as_ref().unwrap().server.handle();
        h.transfer_leadership(Some(1)).await.expect("transfer");
    }
    let leader_at = first.raft_metrics().current_leader.unwrap() as usize - 1;

    // Members on a follower: every server's own name and version.
    let follower = (0..2).find(|i| *i != leader_at).unwrap();
    let members = StatusServiceClient::new(channel(servers[follower].as_ref().unwrap()).await)
        .members(pb::MembersRequest {})
        .await;
    // ACLs are on and nobody has a token yet: the read is refused, as it should be.
    assert_eq!(members.unwrap_err().code(), Code::Unauthenticated);

    let refused = bootstrap(servers[leader_at].as_ref().unwrap())
        .await
        .expect_err("an old server holds the acl tables back");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert!(
        refused.message().contains("server 3 runs \"0.0.9\""),
        "{}",
        refused.message()
    );

    // Down for its upgrade: still refused, naming it.
    stop(servers[2].take().unwrap()).await;
    let refused = bootstrap(servers[leader_at].as_ref().unwrap())
        .await
        .expect_err("a server that does not answer holds the acl tables back");
    assert!(
        refused.message().contains("server 3 does not answer"),
        "{}",
        refused.message()
    );

    // Back, upgraded: the gate opens.
    configs[2].advertised_version = env!("CARGO_PKG_VERSION").into();
    servers[2] = Some(start(configs[2].clone()).await);
    let leader_now = servers
        .iter()
        .flatten()
        .find(|r| r.server.handle().is_leader())
        .or_else(|| servers[leader_at].as_ref())
        .unwrap();
    let answer = bootstrap(leader_now)
        .await
        .expect("bootstrap once all are new");
    let secret = answer.token.expect("a token").secret_id;
    // The follower reads its own state: wait until it holds the token.
    let fh = servers[follower].as_ref().unwrap().server.handle();
    eventually(&fh, "the token on the follower", || async {
        fh.applied_index() >= answer.index
    })
    .await;

    let mut status = StatusServiceClient::new(
        channel_with(servers[follower].as_ref().unwrap(), Some(&secret)).await,
    );
    let members = status
        .members(pb::MembersRequest {})
        .await
        .expect("members")
        .into_inner()
        .members;
    let seen: Vec<(String, String, String)> = members
        .iter()
        .map(|m| (m.id.clone(), m.name.clone(), m.version.clone()))
        .collect();
    let want: Vec<(String, String, String)> = (1..=3)
        .map(|i| {
            (
                i.to_string(),
                format!("drover-{i}"),
                env!("CARGO_PKG_VERSION").to_string(),
            )
        })
        .collect();
    assert_eq!(seen, want);
    for r in servers.into_iter().flatten() {
        stop(r).await;
    }
}
