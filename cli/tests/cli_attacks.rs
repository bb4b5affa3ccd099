//! Attacks on a `drover server` process from outside, measured on the process itself
//! (issue 28): what an unauthenticated client can make it allocate, and whether idle
//! connections can lock everyone else out.

use crate::cli_support;

#[path = "../../server/tests/common/raw.rs"]
mod raw;

use cli_support::{assert_code, drover_at, listening_address, running, spawn, stdout};
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
    let data = dir.path().join("data");
    let server = spawn(
        "127.0.0.1:0",
        &[
            "server",
            "--acl",
            "--bind",
            "127.0.0.1:0",
            "--raft-addr",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().unwrap(),
            "--no-metrics",
        ],
    );
    let address = listening_address(&server);
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

/// CPU seconds the process has used so far (user + system).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    let after_name = stat.rsplit_once(')').expect("stat has a name").1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

async fn leader_answers(address: &str, within: std::time::Duration) -> Result<(), String> {
    use drover_proto::v1::status_service_client::StatusServiceClient;
    let call = async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .map_err(|e| e.to_string())?
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        StatusServiceClient::new(channel)
            .leader(drover_proto::v1::LeaderRequest::default())
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    tokio::time::timeout(within, call)
        .await
        .map_err(|_| format!("no answer within {within:?}"))?
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_connections_do_not_lock_out_a_new_client() {
    // This process holds the attacker's connections: it needs more than 1,024 descriptors.
    drover_server::serving::raise_fd_limit();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let script = format!(
        "ulimit -n 1024 && exec {} server --bind 127.0.0.1:0 --raft-addr 127.0.0.1:0 --data-dir {} --no-metrics",
        env!("CARGO_BIN_EXE_drover"),
        data.display()
    );
    let server = running(
        std::process::Command::new("sh")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("sh runs"),
    );
    let address = listening_address(&server);
    let pid = server.child.id();
    eventually("the server answering", DEADLINE, || async {
        leader_answers(&address, std::time::Duration::from_secs(2))
            .await
            .ok()
    })
    .await;

    // 1,100 connections that never send a request: half send nothing at all, half only
    // the HTTP/2 preface.
    let mut idle = Vec::new();
    for i in 0..1100 {
        let mut c = tokio::net::TcpStream::connect(&address)
            .await
            .expect("the kernel accepts the connection");
        if i % 2 == 0 {
            use tokio::io::AsyncWriteExt;
            c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                .await
                .expect("preface");
        }
        idle.push(c);
    }
    let cpu_before = cpu_seconds(pid);
    let started = std::time::Instant::now();
    let served = leader_answers(&address, std::time::Duration::from_secs(1)).await;
    assert!(
        served.is_ok(),
        "a new client was not served within 1 s behind 1,100 idle connections: {served:?}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    let fds = open_fds(pid);
    assert!(fds < 1024, "the server holds {fds} descriptors");
    // Idle connections cost no CPU: nothing spins on EMFILE.
    let busy = eventually("a second of holding them", DEADLINE, || async {
        (started.elapsed() >= std::time::Duration::from_secs(2))
            .then(|| cpu_seconds(pid) - cpu_before)
    })
    .await;
    assert!(
        busy < 0.5,
        "the server used {busy:.2} s of CPU holding idle connections"
    );
    drop(idle);
}
