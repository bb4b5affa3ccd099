//! `drover bench --scenario http-read`: what Nomad's HTTP API adds to a read. The run
//! registers the jobs (1,000 by default), then lists every job again and again, through
//! gRPC (`JobService.List`, every page) and through HTTP (`GET /v1/jobs` on a kept-alive
//! connection), alternating so both see the same machine, and compares the latencies.
//! Both clients decode what they get (protobuf, JSON), as a real client does.
//!
//! Needs the server started by the run: it serves the HTTP API on a port the run picks.

use super::error::BenchError;
use super::jobs;
use super::latency::Spread;
use super::progress::Progress;
use super::target::Target;
use super::workload::Workload;
use crate::client::Client;
use drover_proto::v1 as pb;
use serde::Serialize;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Lists of each kind timed (after as many untimed to warm up).
const ROUNDS: usize = 200;

#[derive(Clone, Debug, Serialize)]
pub struct HttpReadReport {
    pub scenario: &'static str,
    pub server_address: String,
    pub http_address: String,
    pub jobs: u64,
    pub rounds: usize,
    /// `JobService.List`, every page, decoded.
    pub grpc: Spread,
    /// `GET /v1/jobs` to the answer's last byte, before the client decodes it.
    pub http_fetch: Spread,
    /// `GET /v1/jobs`, decoded as JSON (what a client of the API waits for).
    pub http: Spread,
    /// HTTP's p50 over gRPC's, decoded on both sides: 1.2 is the bound.
    pub p50_ratio: f64,
    pub p99_ratio: f64,
    /// The same to the HTTP answer's last byte (gRPC decodes as it receives).
    pub fetch_p50_ratio: f64,
    /// The HTTP answer's size.
    pub http_body_kib: f64,
}

impl HttpReadReport {
    pub fn render(&self) -> String {
        let spread = |s: &Spread| {
            format!(
                "p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
                s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms
            )
        };
        crate::output::key_values(&[
            (
                "HTTP read",
                format!("list {} jobs, {} times each way", self.jobs, self.rounds),
            ),
            (
                "Server",
                format!("{} (HTTP {})", self.server_address, self.http_address),
            ),
            ("gRPC JobService.List", spread(&self.grpc)),
            ("HTTP GET /v1/jobs", spread(&self.http)),
            ("  to the last byte", spread(&self.http_fetch)),
            (
                "HTTP / gRPC",
                format!(
                    "p50 {:.2}x  p99 {:.2}x  (to the last byte: p50 {:.2}x)",
                    self.p50_ratio, self.p99_ratio, self.fetch_p50_ratio
                ),
            ),
            ("HTTP body", format!("{:.1} KiB", self.http_body_kib)),
        ])
    }
}

pub fn needs_own_server() -> BenchError {
    BenchError::Setting {
        flag: "--address",
        reason: "the http-read scenario starts its own server, with the HTTP API on".into(),
    }
}

/// A config line that serves the HTTP API on a free loopback port; its address.
pub fn http_config() -> Result<(String, String), BenchError> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| BenchError::Setting {
            flag: "--scenario http-read",
            reason: format!("no free port for the HTTP API: {e}"),
        })?
        .port();
    let addr = format!("127.0.0.1:{port}");
    Ok((format!("http_addr = \"{addr}\"\n"), addr))
}

pub async fn measure(
    target: &Target,
    client: &Client,
    http_addr: &str,
    workload: &Workload,
    in_flight: usize,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<HttpReadReport, BenchError> {
    let deadline = Instant::now() + timeout;
    progress.phase(&format!("registering {} jobs", workload.jobs));
    jobs::submit(client, workload, in_flight, deadline, timeout).await?;
    let mut http = HttpClient::connect(http_addr).await?;
    let want = workload.jobs as usize;
    progress.phase(&format!(
        "listing the jobs {ROUNDS} times through gRPC and through HTTP, alternating"
    ));
    let (mut grpc_times, mut http_times, mut fetch_times) = (Vec::new(), Vec::new(), Vec::new());
    let mut body_len = 0;
    for round in 0..ROUNDS * 2 {
        let started = Instant::now();
        let listed = grpc_list(client).await?;
        let grpc = started.elapsed();
        let started = Instant::now();
        let body = http.get("/v1/jobs").await?;
        let fetched = started.elapsed();
        let decoded: Vec<JobStub> =
            serde_json::from_slice(&body).map_err(|e| bad(e.to_string()))?;
        let took = started.elapsed();
        let http_listed = decoded.len();
        if listed != want || http_listed != want {
            return Err(bad(format!(
                "listed {listed} jobs by gRPC and {http_listed} by HTTP, registered {want}"
            )));
        }
        body_len = body.len();
        // The first half warms both paths up.
        if round >= ROUNDS {
            grpc_times.push(grpc);
            http_times.push(took);
            fetch_times.push(fetched);
        }
    }
    let (grpc, http) = (Spread::of(&grpc_times), Spread::of(&http_times));
    let http_fetch = Spread::of(&fetch_times);
    Ok(HttpReadReport {
        scenario: "http-read",
        server_address: target.url().to_string(),
        http_address: http_addr.to_string(),
        jobs: u64::from(workload.jobs),
        rounds: ROUNDS,
        p50_ratio: round2(http.p50_ms / grpc.p50_ms.max(1e-9)),
        p99_ratio: round2(http.p99_ms / grpc.p99_ms.max(1e-9)),
        fetch_p50_ratio: round2(http_fetch.p50_ms / grpc.p50_ms.max(1e-9)),
        grpc,
        http,
        http_fetch,
        http_body_kib: round2(body_len as f64 / 1024.0),
    })
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn bad(reason: String) -> BenchError {
    BenchError::Setting {
        flag: "--scenario http-read",
        reason,
    }
}

/// What a Nomad client reads of each listed job (as the Go `api` module decodes into its
/// `JobListStub`): typed, the rest of each object skipped.
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
// The fields are read by the decoder only: decoding them is the work measured.
#[allow(dead_code)]
struct JobStub {
    #[serde(rename = "ID")]
    id: String,
    name: String,
    namespace: String,
    #[serde(rename = "Type")]
    job_type: String,
    status: String,
    priority: u32,
    modify_index: u64,
}

/// Every job, every page, as the CLI lists them.
async fn grpc_list(client: &Client) -> Result<usize, BenchError> {
    let mut next_token = String::new();
    let mut count = 0;
    loop {
        let r = client
            .jobs()
            .list(pb::ListJobsRequest {
                next_token,
                ..Default::default()
            })
            .await
            .map_err(|s| bad(format!("JobService.List: {}", s.message())))?
            .into_inner();
        count += r.jobs.len();
        if r.next_token.is_empty() {
            return Ok(count);
        }
        next_token = r.next_token;
    }
}

/// A kept-alive HTTP/1.1 connection that GETs and reads whole answers.
struct HttpClient {
    addr: String,
    conn: BufReader<TcpStream>,
}

impl HttpClient {
    async fn connect(addr: &str) -> Result<Self, BenchError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| bad(format!("cannot reach the HTTP API at {addr}: {e}")))?;
        let _ = stream.set_nodelay(true);
        Ok(Self {
            addr: addr.to_string(),
            conn: BufReader::new(stream),
        })
    }

    async fn get(&mut self, path: &str) -> Result<Vec<u8>, BenchError> {
        let io = |e: std::io::Error| bad(format!("GET {path}: {e}"));
        let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", self.addr);
        self.conn
            .get_mut()
            .write_all(request.as_bytes())
            .await
            .map_err(io)?;
        let mut line = String::new();
        self.conn.read_line(&mut line).await.map_err(io)?;
        if !line.starts_with("HTTP/1.1 200") {
            return Err(bad(format!("GET {path}: {}", line.trim())));
        }
        let mut length = None;
        loop {
            line.clear();
            self.conn.read_line(&mut line).await.map_err(io)?;
            let header = line.trim();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse::<usize>().ok();
            }
        }
        let length = length.ok_or_else(|| bad(format!("GET {path}: no content-length")))?;
        let mut body = vec![0; length];
        self.conn.read_exact(&mut body).await.map_err(io)?;
        Ok(body)
    }
}
