//! Attacks on a `drover server` process from outside, measured on the process itself
//! (issue 28): what an unauthenticated client can make it allocate, and whether idle
//! connections can lock everyone else out.

mod cli_support;

#[path = "../../server/tests/common/raw.rs"]
mod raw;

use cli_support::{assert_code, drover_at, free_ports, spawn, stdout};
use drover_tests::{DEADLINE, eventually};

/// The server's peak resident memory so far, in bytes (`VmHWM`).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM")
        * 1024
}

/// `JobService.Register` of one job with `groups` empty task groups: 2 bytes each on the
/// wire, a few hundred once decoded.
fn empty_groups_request(groups: usize) -> Vec<u8> {
    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut job = vec![0x0a, 0x01, b'x'];
    for _ in 0..groups {
        job.extend_from_slice(&[0x42, 0x00]);
    }
    let mut req = vec![0x0a];
    varint(job.len() as u64, &mut req);
    req.extend_from_slice(&job);
    req
}

/// Sends `body` as `JobService.Register` with `token`; the status it is answered with.
async fn register_raw(address: &str, token: Option<&str>, body: Vec<u8>) -> tonic::Status {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .expect("connect");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("ready");
    let mut req = tonic::Request::new(body);
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let path = "/drover.v1.JobService/Register".parse().unwrap();
    grpc.unary::<_, Vec<u8>, _>(req, path, raw::Raw)
        .await
        .expect_err("refused")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_request_of_empty_groups_costs_the_server_little() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_ports(1)[0];
    let address = format!("127.0.0.1:{port}");
    let data = dir.path().join("data");
    let server = spawn(
        &address,
        &[
            "server",
            "--acl",
            "--bind",
            &address,
            "--raft-addr",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().unwrap(),
            "--no-metrics",
        ],
    );
    let boot = eventually("acl bootstrap", DEADLINE, || async {
        let out = drover_at(&address, &["acl", "bootstrap"]).await;
        out.status.success().then(|| stdout(&out))
    })
    .await;
    let management = boot
        .lines()
        .find_map(|l| l.split_once("Secret ID").map(|(_, v)| v))
        .map(|v| v.trim_start_matches([' ', '=']).trim().to_string())
        .expect("a secret id");
    assert_code(
        &drover_at(&address, &["acl", "token", "self", "--token", &management]).await,
        0,
    );
    let pid = server.child.id();
    let body = empty_groups_request(8_000_000);
    assert!(
        body.len() > 15_000_000 && body.len() < 16_777_216,
        "{}",
        body.len()
    );

    let before = peak_rss(pid);
    let status = register_raw(&address, None, body.clone()).await;
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    let status = register_raw(&address, Some("not-a-token"), body.clone()).await;
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    let unauthenticated = peak_rss(pid).saturating_sub(before);
    assert!(
        unauthenticated < 64 << 20,
        "two unauthenticated 16 MB requests raised the server's peak RSS by {} MiB",
        unauthenticated >> 20
    );

    // With a token the body is read, and refused before decoding, naming the field.
    let status = register_raw(&address, Some(&management), body).await;
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("job.groups"),
        "{}",
        status.message()
    );
    let authenticated = peak_rss(pid).saturating_sub(before);
    assert!(
        authenticated < 64 << 20,
        "a 16 MB request of empty groups raised the server's peak RSS by {} MiB",
        authenticated >> 20
    );
}
