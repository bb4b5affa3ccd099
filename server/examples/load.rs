//! A load measurement, run by hand (not a timed test):
//!
//! ```text
//! cargo run --release -p drover-server --example load -- [nodes] [jobs] [count]
//! ```
//!
//! Starts one server on a temp data dir with production settings, then through gRPC on
//! loopback registers `nodes` nodes (default 1,000) and heartbeats them ready, registers
//! `jobs` service jobs (default 1,000) of `count` allocations each (default 10), and reports
//! how long it took until every placement was committed, and the process's peak RSS
//! (VmHWM; the clients run in the same process and add little to it).

use drover_core::mock;
use drover_proto::v1 as pb;
use drover_proto::v1::job_service_client::JobServiceClient;
use drover_proto::v1::node_service_client::NodeServiceClient;
use drover_server::api::ApiOptions;
use drover_server::{Server, ServerConfig};
use futures::StreamExt;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Requests in flight at once from the load generator.
const IN_FLIGHT: usize = 64;

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn registration(n: u64) -> pb::NodeRegistration {
    pb::NodeRegistration::from(&mock::node(n))
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

async fn heartbeat(nodes: &mut NodeServiceClient<Channel>, auth: &pb::NodeAuth) {
    if let Err(e) = nodes
        .update_status(pb::UpdateNodeStatusRequest {
            auth: Some(auth.clone()),
            readiness: pb::Readiness::Ready.into(),
            last_snapshot: None,
        })
        .await
    {
        eprintln!("heartbeat of {} failed: {}", auth.node_id, e.message());
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (node_count, job_count, per_job) = (arg(1, 1_000), arg(2, 1_000), arg(3, 10));
    let dir = tempfile::tempdir()?;
    let mut config = ServerConfig::new(dir.path());
    config.bind_addr = "127.0.0.1:0".into();
    let server = Server::start(config).await?;
    let handle = server.handle();
    if !handle.wait_for_leadership(Duration::from_secs(30)).await {
        return Err("the server did not become leader".into());
    }
    let api = server.serve(ApiOptions::default()).await?;
    let channel = Channel::from_shared(format!("http://{}", api.local_addr()))?
        .connect()
        .await?;

    let started = Instant::now();
    let nodes = NodeServiceClient::new(channel.clone());
    let auths: Vec<pb::NodeAuth> = futures::stream::iter(1..=node_count)
        .map(|n| {
            let mut nodes = nodes.clone();
            async move {
                let reg = nodes
                    .register(pb::RegisterNodeRequest {
                        node: Some(registration(n)),
                    })
                    .await
                    .map(|r| r.into_inner());
                let reg = match reg {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("node {n} did not register: {}", e.message());
                        return None;
                    }
                };
                let auth = pb::NodeAuth {
                    node_id: reg.node_id,
                    secret_id: reg.secret_id,
                };
                heartbeat(&mut nodes, &auth).await;
                Some(auth)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .filter_map(|a| async move { a })
        .collect()
        .await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while handle
        .snapshot()
        .nodes()
        .filter(|n| n.is_schedulable())
        .count()
        < auths.len()
    {
        if Instant::now() > deadline {
            return Err("nodes did not become schedulable in time".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let nodes_ready = started.elapsed();
    println!(
        "{} nodes registered and schedulable in {:.2}s",
        auths.len(),
        nodes_ready.as_secs_f64()
    );

    // The agents' heartbeats, spread over the TTL, for the rest of the run.
    let beating = {
        let nodes = nodes.clone();
        let auths = auths.clone();
        tokio::spawn(async move {
            loop {
                for chunk in auths.chunks(100) {
                    for auth in chunk {
                        heartbeat(&mut nodes.clone(), auth).await;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        })
    };

    let jobs = JobServiceClient::new(channel.clone());
    let want = usize::try_from(job_count * per_job)?;
    let first_index = handle.applied_index();
    let started = Instant::now();
    let registered: usize = futures::stream::iter(0..job_count)
        .map(|n| {
            let mut jobs = jobs.clone();
            async move {
                let job = mock::service_job(&format!("load-{n}"), per_job as u32);
                let mut backoff = Duration::from_millis(50);
                loop {
                    let r = jobs
                        .register(pb::RegisterJobRequest {
                            job: Some((&job).into()),
                            enforce_index: None,
                        })
                        .await;
                    match r {
                        Ok(_) => return 1,
                        Err(e) if e.code() == tonic::Code::ResourceExhausted => {
                            tokio::time::sleep(backoff).await;
                            backoff = (backoff * 2).min(Duration::from_secs(2));
                        }
                        Err(e) => {
                            eprintln!("job {n} not registered: {}", e.message());
                            return 0;
                        }
                    }
                }
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .fold(0, |acc, n| async move { acc + n })
        .await;
    let registering = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(600);
    let placed = loop {
        let snap = handle.snapshot();
        let placed = snap.allocs().filter(|a| !a.is_terminal()).count();
        if placed >= want || Instant::now() > deadline {
            break placed;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let all_placed = started.elapsed();
    let entries = handle.applied_index() - first_index;
    println!(
        "{registered} jobs registered in {:.2}s; {placed}/{want} allocations committed \
         {:.2}s after the first registration ({entries} Raft entries, {:.0} allocations/s)",
        registering.as_secs_f64(),
        all_placed.as_secs_f64(),
        placed as f64 / all_placed.as_secs_f64()
    );
    if let Some(kib) = peak_rss_kib() {
        println!("peak RSS (VmHWM): {:.1} MiB", kib as f64 / 1024.0);
    }
    beating.abort();
    drop(channel);
    api.shutdown().await?;
    server.shutdown().await?;
    Ok(())
}
