//! `NodeService.Heartbeats` end to end over real gRPC: a node heartbeating on one stream
//! stays up for as long as it beats, and goes down once it stops; a heartbeat the unary
//! call would refuse ends the stream with that call's status; streamed heartbeats count
//! in `drover_heartbeats_total` as unary ones do.

use crate::common;

use common::api::Api;
use common::beats::{Beats, auth, ready};
use common::http::{http_get, metric};
use common::{join, wait_until};
use drover_core::types::NodeStatus;
use drover_proto::v1 as pb;
use std::time::Duration;
use tonic::Code;

const TTL: Duration = Duration::from_millis(500);
const GRACE: Duration = Duration::from_millis(200);

async fn short_ttl_api() -> Api {
    Api::start(|c| {
        c.heartbeat.min_ttl = TTL;
        c.heartbeat.grace = GRACE;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_beating_on_the_stream_stays_up_and_goes_down_once_it_stops() {
    let a = short_ttl_api().await;
    let node = join(&a.h, 1, "").await.creds;
    let id = node.node_id;
    let channel = Api::endpoint(&a.api).connect().await.unwrap();
    let mut beats = Beats::open(channel).await;

    // Several TTLs on one stream, each heartbeat answered in turn.
    let until = tokio::time::Instant::now() + (TTL + GRACE) * 4;
    let mut tick = tokio::time::interval(TTL / 4);
    let mut answered = 0;
    while tokio::time::Instant::now() < until {
        tick.tick().await;
        let ack = beats.beat(ready(auth(&node))).await.expect("beat accepted");
        assert_eq!(ack.status, pb::NodeStatus::Ready as i32, "{ack:?}");
        assert!(ack.heartbeat_ttl_ms > 0, "{ack:?}");
        answered += 1;
        let status = a.h.snapshot().node(&id).map(|n| n.status);
        assert_eq!(status, Some(NodeStatus::Ready), "after {answered} beats");
    }
    assert!(answered >= 8, "{answered} heartbeats answered");

    // The stream was what kept it up.
    drop(beats);
    wait_until(&a.h, "the node down once its stream stops", |s| {
        s.node(&id).is_some_and(|n| n.status == NodeStatus::Down)
    })
    .await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_the_unary_call_refuses_ends_the_stream_with_its_status() {
    let a = short_ttl_api().await;
    let node = join(&a.h, 1, "").await.creds;
    let unknown = join(&a.h, 2, "").await.creds;
    a.h.node_purge(unknown.node_id)
        .await
        .expect("the second node is purged");
    let wrong_secret = pb::NodeAuth {
        secret_id: "not-the-secret".into(),
        ..auth(&node)
    };
    let rows: [(&str, pb::UpdateNodeStatusRequest, Code); 4] = [
        ("a wrong secret", ready(wrong_secret), Code::Unauthenticated),
        ("an unknown node", ready(auth(&unknown)), Code::NotFound),
        (
            "no auth",
            pb::UpdateNodeStatusRequest {
                auth: None,
                ..ready(auth(&node))
            },
            Code::InvalidArgument,
        ),
        (
            "no readiness",
            pb::UpdateNodeStatusRequest {
                readiness: pb::Readiness::Unspecified.into(),
                ..ready(auth(&node))
            },
            Code::InvalidArgument,
        ),
    ];
    for (what, bad, code) in rows {
        let channel = Api::endpoint(&a.api).connect().await.unwrap();
        let mut beats = Beats::open(channel).await;
        beats
            .beat(ready(auth(&node)))
            .await
            .unwrap_or_else(|e| panic!("{what}: the good beat first: {e}"));
        let refused = beats.beat(bad).await.expect_err(what);
        assert_eq!(refused.code(), code, "{what}: {refused:?}");
        assert!(
            beats.ended().await,
            "{what}: the stream ends after the refusal"
        );
    }
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_heartbeats_count_as_unary_ones_do() {
    let a = Api::start(|c| c.metrics_addr = Some("127.0.0.1:0".into())).await;
    let addr = a.server.metrics_addr().expect("metrics served");
    let node = join(&a.h, 1, "").await.creds;
    let scrape = || async { http_get(addr, "/metrics").await.1 };
    let counted = |page: &str| metric(page, "drover_heartbeats_total").expect("heartbeat counter");
    let before = counted(&scrape().await);
    let channel = Api::endpoint(&a.api).connect().await.unwrap();
    let mut beats = Beats::open(channel).await;
    for _ in 0..3 {
        beats.beat(ready(auth(&node))).await.expect("beat accepted");
    }
    let page = scrape().await;
    assert_eq!(counted(&page) - before, 3.0, "{page}");
    // One stream, whatever it carried; no unary heartbeat.
    let opened = metric(
        &page,
        "drover_rpc_seconds_count{method=\"/drover.v1.NodeService/Heartbeats\"}",
    );
    assert_eq!(opened, Some(1.0), "{page}");
    assert!(!page.contains("NodeService/UpdateStatus"), "{page}");
    a.stop().await;
}
