//! Random bytes to every RPC the API serves: each answers with a status that says what
//! was wrong (never a panic, never INTERNAL or UNKNOWN), and the server keeps serving.
//! Seeded, so a failure replays; bounded, so CI stays fast.

use crate::common;

use common::api::Api;
use common::raw::Raw;
use rand::{Rng, SeedableRng};
use tonic::Code;

/// Mostly valid-looking protobuf (field tags and varints) with random cuts, and some
/// plain noise.
fn body(rng: &mut rand::rngs::StdRng) -> Vec<u8> {
    let len = rng.random_range(0..256);
    let mut out: Vec<u8> = (0..len).map(|_| rng.random()).collect();
    if rng.random_bool(0.5) && !out.is_empty() {
        // A field tag for a low field number, so decoders get past the first byte.
        out[0] = (rng.random_range(1u8..16) << 3) | rng.random_range(0u8..6);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bytes_to_every_rpc_answer_a_proper_status() {
    let api = Api::start(|_| {}).await;
    let channel = Api::endpoint(&api.api).connect().await.expect("connect");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_d20e);
    let mut bad = Vec::new();
    let mut calls = 0;
    for (rpc, streaming) in common::api_rpcs() {
        // Writes that succeed on random input (a pause of every worker) are fine; what
        // matters is the answer, so each RPC gets a bounded number of tries.
        for _ in 0..24 {
            let mut grpc = tonic::client::Grpc::new(channel.clone());
            grpc.ready().await.expect("ready");
            let path: tonic::codegen::http::uri::PathAndQuery =
                format!("/{rpc}").parse().expect("path");
            let req = tonic::Request::new(body(&mut rng));
            let result = if streaming {
                grpc.server_streaming(req, path, Raw).await.map(|_| ())
            } else {
                grpc.unary(req, path, Raw).await.map(|_| ())
            };
            calls += 1;
            if let Err(s) = result
                && matches!(s.code(), Code::Internal | Code::Unknown)
            {
                bad.push(format!("{rpc}: {:?} {}", s.code(), s.message()));
            }
        }
    }
    assert!(calls > 1000, "only {calls} calls");
    assert!(bad.is_empty(), "improper answers:\n{}", bad.join("\n"));
    // Still serving.
    api.status()
        .leader(drover_proto::v1::LeaderRequest {})
        .await
        .expect("the server still answers");
    api.stop().await;
}

/// Many large invalid bodies at once over several connections, with a byte budget of one
/// message: each is received in its turn and answered INVALID_ARGUMENT, never INTERNAL,
/// and the server still serves after. None may run out its wait (RESOURCE_EXHAUSTED):
/// that is what a stream parked on the budget holding its connection's flow-control
/// window, so that the stream being received cannot finish, looks like.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_large_bodies_is_received_within_the_byte_budget() {
    const MESSAGE: usize = 1 << 20;
    let api = Api::start(|c| {
        c.max_message_bytes = MESSAGE + 64;
        c.requests.max_bytes_in_flight = MESSAGE + 64;
        c.requests.max_wait = std::time::Duration::from_secs(30);
    })
    .await;
    let mut calls = tokio::task::JoinSet::new();
    for connection in 0..4u8 {
        let channel = Api::endpoint(&api.api).connect().await.expect("connect");
        for call in 0..6u8 {
            let channel = channel.clone();
            calls.spawn(async move {
                // Field 1 (the job) as a length-delimited field claiming more than follows.
                let mut junk = vec![0x0a, 0xff, 0xff, 0xff, 0x7f];
                junk.resize(MESSAGE - 16, connection ^ call);
                let mut grpc = tonic::client::Grpc::new(channel);
                grpc.ready().await.expect("ready");
                let path = "/drover.v1.JobService/Register".parse().expect("path");
                grpc.unary(tonic::Request::new(junk), path, Raw)
                    .await
                    .map(|_| ())
                    .expect_err("junk is refused")
                    .code()
            });
        }
    }
    let mut codes = Vec::new();
    while let Some(code) = calls.join_next().await {
        codes.push(code.expect("call task"));
    }
    assert_eq!(codes.len(), 24);
    assert!(
        codes.iter().all(|c| *c == Code::InvalidArgument),
        "{codes:?}"
    );
    api.status()
        .leader(drover_proto::v1::LeaderRequest {})
        .await
        .expect("the server still answers");
    api.stop().await;
}
