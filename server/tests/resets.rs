//! Cancelled calls do not take down a shared connection. A gRPC client that gives up on
//! its calls (grpcio cancels timed-out ones) resets their streams; nodes multiplexed on
//! one connection must not all lose it because some of their calls were cancelled. h2's
//! default sends GOAWAY `too_many_resets` after 20 streams reset before the server took
//! them; the server allows what a busy, honest connection produces, bounded still.

use crate::common;

use bytes::Bytes;
use common::api::Api;
use http::Request;

/// How long the call after the burst may take.
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// A health check as gRPC frames it: no compression, an empty message.
fn health_check(addr: std::net::SocketAddr) -> Request<()> {
    Request::post(format!("http://{addr}/grpc.health.v1.Health/Check"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("a request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_cancelled_calls_leaves_the_connection_serving() {
    let api = Api::start(|_| {}).await;
    let addr = api.api.local_addr();
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let (client, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    let driver = tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");

    // Open and cancel streams back to back: they reach the server in one burst, reset
    // before it could accept them, as a storm's timed-out calls do.
    for _ in 0..400 {
        let (answer, mut body) = client
            .send_request(health_check(addr), false)
            .expect("a stream opens");
        body.send_reset(h2::Reason::CANCEL);
        drop(answer);
        client = client.ready().await.expect("still ready");
    }

    // The same connection still answers a call to the end. A stream the server refuses
    // (REFUSED_STREAM: it had not yet reaped the reset ones, nothing was processed) is
    // retried, as HTTP/2 allows; a GOAWAY would fail every attempt.
    let mut attempts = 0;
    let response = loop {
        attempts += 1;
        let (answer, mut body) = client
            .send_request(health_check(addr), false)
            .expect("a stream opens after the burst");
        body.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), true)
            .expect("the request is sent");
        let answer = tokio::time::timeout(DEADLINE, answer)
            .await
            .expect("an answer within the deadline");
        match answer {
            Ok(response) => break response,
            Err(e) if e.reason() == Some(h2::Reason::REFUSED_STREAM) && attempts < 50 => {
                client = client.ready().await.expect("still ready after a refusal");
                tokio::task::yield_now().await;
            }
            Err(e) => panic!("the connection was not kept: {e:?}"),
        }
    };
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        chunk.expect("the body arrives");
    }
    let trailers = body.trailers().await.expect("trailers").expect("some");
    assert_eq!(
        trailers.get("grpc-status").map(|v| v.as_bytes()),
        Some(&b"0"[..]),
        "{trailers:?}"
    );
    assert!(!driver.is_finished(), "the connection is still open");
}
