//! Measures the node simulator at rest: N virtual nodes registered with a real server,
//! then the simulator process's CPU time (utime + stime from /proc/self/stat) over a window
//! and its memory (VmRSS, VmHWM from /proc/self/status).
//!
//! The server runs in a child process (this same binary, `serve`), so the figures are the
//! simulator's alone:
//!
//! ```text
//! cargo run -p drover-tests --example sim_idle -- 10000 [window-seconds]
//! ```

use drover_agent::sim::{SimConfig, Simulator};
use drover_core::node_health::HeartbeatConfig;
use drover_tests::TestServer;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Clock ticks per second of /proc times (USER_HZ, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("reads /proc/self/stat");
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').expect("stat has a command name") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the full line, 12 and 13 of `rest`.
    let parse = |i: usize| fields[i].parse::<u64>().expect("a tick count");
    parse(11) + parse(12)
}

fn status_kb(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reads /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn serve() {
    let server = TestServer::start_with(|c| c.heartbeat = HeartbeatConfig::default()).await;
    println!("{}", server.url());
    // Serve until the parent closes our stdin.
    tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    })
    .await
    .expect("stdin reader ends");
    server.stop().await;
}

async fn measure(nodes: usize, window: Duration) {
    let mut child = Command::new(std::env::current_exe().expect("own path"))
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("server child starts");
    let mut url = String::new();
    BufReader::new(child.stdout.take().expect("child stdout"))
        .read_line(&mut url)
        .expect("reads the server url");
    let started = Instant::now();
    let sim = Simulator::start(SimConfig {
        servers: vec![url.trim().to_string()],
        nodes,
        datacenters: "dc1:3,dc2:1".parse().expect("mix"),
        classes: "a:1,b:1".parse().expect("mix"),
        ..SimConfig::default()
    })
    .await
    .expect("simulator starts");
    let up = started.elapsed();
    // Let the start-up burst settle (watch streams open, first messages arrive).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = cpu_ticks();
    let t0 = Instant::now();
    tokio::time::sleep(window).await;
    let ticks = cpu_ticks() - before;
    let elapsed = t0.elapsed().as_secs_f64();
    let stats = sim.stats().await.expect("stats");
    let cpu = ticks as f64 / TICKS_PER_SECOND / elapsed * 100.0;
    println!(
        "nodes={nodes} up_in={:.1}s idle_cpu={cpu:.2}% of one core over {elapsed:.0}s \
         vm_rss={} MB vm_hwm={} MB heartbeats={} watching={}",
        up.as_secs_f64(),
        status_kb("VmRSS:") / 1024,
        status_kb("VmHWM:") / 1024,
        stats.heartbeats,
        stats.watching,
    );
    sim.shutdown().await;
    drop(child.stdin.take());
    let _ = child.wait();
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("serve") {
        return serve().await;
    }
    let nodes = args.first().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let window = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(30);
    measure(nodes, Duration::from_secs(window)).await;
}
