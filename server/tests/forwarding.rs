//! A follower forwards leader calls over several connections, and heartbeats over one of
//! their own: a leader serves a bounded number of calls per connection, and a node's
//! heartbeat must not wait behind other calls holding those slots.

use crate::common;

use common::{DEADLINE, agreed_leader, cluster_configs, join, join_many};
use drover_proto::v1 as pb;
use drover_server::Server;
use drover_server::api::ApiOptions;
use drover_server::forward::{CALL_LANES, CONSISTENCY_HEADER};
use std::time::Duration;
use tonic::Code;
use tonic::transport::Channel;

const SECRET: &str = "test-cluster-secret-forwarding";

/// A connection of its own to `addr`: the follower limits calls per connection too.
async fn connect(addr: std::net::SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connects")
}

/// A job list the leader must answer (consistent), waiting up to `wait` for `min_index`,
/// so it holds one of the leader's slots until then; with `timeout` the caller gives
/// up after it.
fn held_list(
    min_index: u64,
    wait: Duration,
    timeout: Option<Duration>,
) -> tonic::Request<pb::ListJobsRequest> {
    let mut req = tonic::Request::new(pb::ListJobsRequest {
        query: Some(pb::QueryOptions {
            min_index,
            max_wait_ms: wait.as_millis() as u64,
        }),
        ..Default::default()
    });
    req.metadata_mut()
        .insert(CONSISTENCY_HEADER, "consistent".parse().unwrap());
    if let Some(t) = timeout {
        req.set_timeout(t);
    }
    req
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forwarded_heartbeat_passes_calls_that_fill_the_leaders_connections() {
    common::init_tracing();
    let (configs, _dirs) = cluster_configs(3, SECRET);
    let opts = ApiOptions {
        max_concurrent_per_connection: 1,
        max_query_wait: Duration::from_secs(60),
        ..Default::default()
    };
    let mut servers = Vec::new();
    let mut apis = Vec::new();
    for mut config in configs {
        config.bind_addr = "127.0.0.1:0".into();
        // Long enough that the node's timer never expires during the test (its expiry is a
        // write, which would answer the held calls).
        config.heartbeat.min_ttl = Duration::from_secs(30);
        let server = Server::start(config).await.expect("server starts");
        apis.push(server.serve(opts.clone()).await.expect("api serves"));
        servers.push(server);
    }
    let leader = agreed_leader(&servers).await;
    // Ready and healthy before the test: the heartbeat under test then writes nothing, and
    // neither does the leader's health tracker (a new node's move to healthy is a write of
    // its own, after its first ready heartbeat); a write would answer the held calls.
    let node = join_many(&servers[leader].handle(), 1)
        .await
        .remove(0)
        .creds;
    let follower = (leader + 1) % servers.len();
    let follower_addr = apis[follower].local_addr();
    let next = servers[leader].handle().snapshot().latest_index() + 1;

    // Two calls held per connection the follower keeps to the leader, each waiting for the
    // next write: every connection is full.
    let mut held = Vec::new();
    for _ in 0..2 * CALL_LANES {
        let mut jobs = pb::job_service_client::JobServiceClient::new(connect(follower_addr).await);
        held.push(tokio::spawn(async move {
            jobs.list(held_list(next, Duration::from_secs(60), None))
                .await
        }));
    }
    // A probe that any free slot would answer at once times out: the held calls are there.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let mut jobs = pb::job_service_client::JobServiceClient::new(connect(follower_addr).await);
        let probe = jobs
            .list(held_list(0, Duration::ZERO, Some(Duration::from_secs(1))))
            .await;
        match probe {
            Err(status) if status.code() == Code::DeadlineExceeded => break,
            other => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the held calls never filled the leader's connections: {other:?}"
                );
            }
        }
    }

    let mut nodes = pb::node_service_client::NodeServiceClient::new(connect(follower_addr).await);
    let mut beat = tonic::Request::new(pb::UpdateNodeStatusRequest {
        auth: Some(pb::NodeAuth {
            node_id: node.node_id.to_string(),
            secret_id: node.secret_id.clone(),
        }),
        readiness: pb::Readiness::Ready.into(),
        last_snapshot: None,
    });
    // Well inside the 10 s a held call may take on its way to the leader.
    beat.set_timeout(Duration::from_secs(5));
    let ack = nodes
        .update_status(beat)
        .await
        .expect("the heartbeat is answered while every other connection is full")
        .into_inner();
    assert!(ack.heartbeat_ttl_ms > 0, "a TTL: {ack:?}");
    assert!(
        held.iter().all(|h| !h.is_finished()),
        "the held calls still wait: the heartbeat did not need their slots"
    );

    for h in held {
        h.abort();
    }
    for api in apis {
        api.shutdown().await.unwrap();
    }
    for s in servers {
        s.shutdown().await.expect("stops");
    }
}

/// A heartbeat stream to a follower is served there, each heartbeat sent on to the leader:
/// the node stays up on the leader for as long as it beats on the follower, and the same
/// stream keeps it up on the next leader once the first one is gone (a stream the follower
/// forwarded whole would have ended with the server at its other end).
#[tokio::test(flavor = "multi_thread")]
async fn a_heartbeat_stream_to_a_follower_keeps_the_node_up_across_leaders() {
    use common::beats::{Beats, auth, ready};
    use drover_core::types::NodeStatus;
    common::init_tracing();
    let ttl = Duration::from_millis(500);
    let grace = Duration::from_millis(300);
    let (configs, _dirs) = cluster_configs(3, SECRET);
    let mut servers = Vec::new();
    let mut apis = Vec::new();
    for mut config in configs {
        config.bind_addr = "127.0.0.1:0".into();
        config.heartbeat.min_ttl = ttl;
        config.heartbeat.grace = grace;
        // A new leader's timers are as short: only heartbeats keep the node up on it.
        config.heartbeat.failover_ttl = ttl;
        let server = Server::start(config).await.expect("server starts");
        apis.push(Some(
            server
                .serve(ApiOptions::default())
                .await
                .expect("api serves"),
        ));
        servers.push(Some(server));
    }
    let all: Vec<Server> = servers.iter_mut().map(|s| s.take().unwrap()).collect();
    let first = agreed_leader(&all).await;
    let mut servers: Vec<Option<Server>> = all.into_iter().map(Some).collect();
    let handle = |servers: &[Option<Server>], i: usize| servers[i].as_ref().unwrap().handle();
    let node = join(&handle(&servers, first), 1, "").await.creds;
    let follower = (first + 1) % servers.len();
    let follower_addr = apis[follower].as_ref().unwrap().local_addr();
    let mut beats = Beats::open(connect(follower_addr).await).await;

    let mut leading = first;
    for round in 0..2 {
        if round == 1 {
            apis[first].take().unwrap().shutdown().await.unwrap();
            servers[first]
                .take()
                .unwrap()
                .shutdown()
                .await
                .expect("stops");
            let deadline = tokio::time::Instant::now() + DEADLINE;
            leading = loop {
                let now_leading = (0..servers.len())
                    .find(|i| servers[*i].as_ref().is_some_and(|s| s.handle().is_leader()));
                if let Some(i) = now_leading {
                    break i;
                }
                assert!(tokio::time::Instant::now() < deadline, "no new leader");
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
        }
        let until = tokio::time::Instant::now() + (ttl + grace) * 4;
        let mut tick = tokio::time::interval(ttl / 4);
        let mut answered = 0;
        while tokio::time::Instant::now() < until {
            tick.tick().await;
            let ack = beats
                .beat(ready(auth(&node)))
                .await
                .unwrap_or_else(|e| panic!("round {round}: the follower relays the beat: {e}"));
            assert_eq!(ack.status, pb::NodeStatus::Ready as i32, "{ack:?}");
            answered += 1;
            let on_leader = handle(&servers, leading)
                .snapshot()
                .node(&node.node_id)
                .map(|n| n.status);
            assert_eq!(
                on_leader,
                Some(NodeStatus::Ready),
                "round {round}: after {answered} beats"
            );
        }
        assert!(
            answered >= 8,
            "round {round}: {answered} heartbeats answered"
        );
    }
    // A refusal on the leader ends the follower's stream with the leader's status.
    let refused = beats
        .beat(ready(pb::NodeAuth {
            secret_id: "not-the-secret".into(),
            ..auth(&node)
        }))
        .await
        .expect_err("a wrong secret is refused");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(beats.ended().await, "the stream ends after the refusal");

    for api in apis.into_iter().flatten() {
        api.shutdown().await.unwrap();
    }
    for s in servers.into_iter().flatten() {
        s.shutdown().await.expect("stops");
    }
}
