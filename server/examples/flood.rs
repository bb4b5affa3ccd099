//! A request flood against a running server, run by hand (not a timed test):
//!
//! ```text
//! drover server -dev &   # or any server; note its pid
//! cargo run --release -p drover-server --example flood -- ADDR PID [requests] [mib] [connections]
//! ```
//!
//! Sends `requests` (default 64) invalid `JobService/Register` bodies of `mib` MiB each
//! (default 15) at once over `connections` HTTP/2 connections (default 8), and reports how
//! each was answered and the server's resident memory (from `/proc/PID/status`) before,
//! at its highest while the flood lasted, and a second after.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[path = "../tests/common/raw.rs"]
mod raw;

use raw::Raw;

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(addr), Some(pid)) = (args.get(1), args.get(2)) else {
        return Err("usage: flood ADDR PID [requests] [mib] [connections]".into());
    };
    let pid: u32 = pid.parse()?;
    let num =
        |i: usize, default: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (requests, mib, connections) = (num(3, 64), num(4, 15), num(5, 8).max(1));
    let url = if addr.starts_with("http") {
        addr.clone()
    } else {
        format!("http://{addr}")
    };
    let mut channels = Vec::new();
    for _ in 0..connections {
        let endpoint = tonic::transport::Endpoint::from_shared(url.clone())?;
        channels.push(endpoint.connect().await?);
    }
    let before = rss_mib(pid);
    let started = Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..requests {
        let channel = channels[i % connections].clone();
        calls.spawn(async move {
            let mut junk = vec![0x0a, 0xff, 0xff, 0xff, 0x7f];
            junk.resize(mib << 20, i as u8);
            let mut grpc = tonic::client::Grpc::new(channel)
                .max_encoding_message_size(usize::MAX)
                .max_decoding_message_size(usize::MAX);
            grpc.ready()
                .await
                .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
            let path = "/drover.v1.JobService/Register".parse().expect("path");
            grpc.unary(tonic::Request::new(junk), path, Raw)
                .await
                .map(|_| ())
        });
    }
    let mut peak = before;
    let mut answers: BTreeMap<String, usize> = BTreeMap::new();
    let mut sample = tokio::time::interval(Duration::from_millis(20));
    while !calls.is_empty() {
        tokio::select! {
            done = calls.join_next() => {
                let answer = match done {
                    Some(Ok(Ok(()))) => "OK".to_string(),
                    Some(Ok(Err(status))) => format!("{:?}", status.code()),
                    Some(Err(e)) => format!("task failed: {e}"),
                    None => break,
                };
                *answers.entry(answer).or_default() += 1;
            }
            _ = sample.tick() => peak = peak.max(rss_mib(pid)),
        }
    }
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss_mib(pid);
    println!(
        "{requests} requests of {mib} MiB over {connections} connections, answered in {took:.2?}"
    );
    for (answer, n) in &answers {
        println!("  {answer}: {n}");
    }
    println!("server RSS: before {before:.1} MiB, peak {peak:.1} MiB, 1 s after {after:.1} MiB");
    Ok(())
}
