//! The console's initial load of 100,000 nodes and 1,000,000 allocations over loopback gRPC
//! (the goal: ≤ 3 s from the first call to the first frame), through
//! [`measure_initial_load`], against a stand-in server that makes the cluster up page by
//! page (`tests/support/fake_cluster.rs`; the console may not depend on the real server),
//! run as a process of its own.
//! The stand-in answers from templates, far cheaper than a real server, which reads its
//! state and converts each allocation: so this measures the console's side of the load,
//! and `drover bench` times the same function against a real server.
//!
//! Two shapes of cluster: ten jobs of 100,000 allocations (each job's pages follow one
//! another) and 1,000 jobs of 1,000 (a round trip per job). `DROVER_BENCH_SCALE` scales
//! both counts (default 1; criterion's `--test` mode, which CI smoke runs use, defaults to
//! 0.05). Prints each phase, the CPU time the console and the stand-in server used, and
//! the console's peak resident memory.
//!
//! `cargo bench -p drover-tui --bench initial_load`

// Shared with the load's test, which uses the rest of it.
#[allow(dead_code)]
#[path = "../tests/support/fake_cluster.rs"]
mod fake_cluster;

use drover_tui::net::load::measure_initial_load;
use fake_cluster::FakeCluster;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const NODES: f64 = 100_000.0;
const ALLOCS: f64 = 1_000_000.0;
/// Run as the stand-in server: `--serve NODES ALLOCS JOBS`.
const SERVE: &str = "--serve";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == SERVE) {
        let count = |i: usize| args[at + i].parse::<u64>().expect("a count");
        return serve(FakeCluster::even(count(1), count(2), count(3)));
    }
    let test_mode = args.iter().any(|a| a == "--test");
    let scale: f64 = std::env::var("DROVER_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if test_mode { 0.05 } else { 1.0 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (nodes, allocs) = ((NODES * scale) as u64, (ALLOCS * scale) as u64);
    for jobs in [10, 1_000] {
        let (mut server, address) = start_server(nodes, allocs, jobs);
        let cpu = process_cpu_time();
        let load = runtime
            .block_on(measure_initial_load(&address, None))
            .expect("the stand-in server answers");
        let cpu = process_cpu_time().saturating_sub(cpu);
        let server_cpu = cpu_time_of(server.id());
        // Ends the server this bench started (its own child, by its handle).
        let _ = server.kill();
        let _ = server.wait();
        println!(
            "initial load, {} nodes, {} allocations in {jobs} jobs: total {:.2?} (read {:.2?}, of which decoding {:.2?} summed over concurrent reads; state and first frame {:.2?}); cpu: the console {cpu:.2?}, the stand-in server {server_cpu:.2?}",
            load.nodes,
            load.allocs,
            load.total(),
            load.read,
            load.decode,
            load.build,
        );
        print_memory();
    }
}

/// Starts this same program as the stand-in server, in a process of its own as a real
/// server would be (so the figures here are the console's alone), and reads its address.
fn start_server(nodes: u64, allocs: u64, jobs: u64) -> (Child, String) {
    let mut child = Command::new(std::env::current_exe().expect("this program's path"))
        .args([
            SERVE.to_owned(),
            nodes.to_string(),
            allocs.to_string(),
            jobs.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the stand-in server starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("its output"))
        .read_line(&mut line)
        .expect("its address");
    (child, line.trim().to_owned())
}

/// The stand-in server: says its address, then serves until it is killed.
fn serve(cluster: FakeCluster) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        println!("{}", cluster.serve().await);
        // Serve until the bench kills this process.
        std::future::pending::<()>().await
    });
}

/// CPU time this process has used so far, over all its threads.
fn process_cpu_time() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

/// CPU time process `pid` has used so far, over all its threads (from the scheduler's
/// statistics, in nanoseconds: no clock-tick size to know).
fn cpu_time_of(pid: u32) -> Duration {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    let nanos: u64 = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// The process's resident memory now and at its peak.
fn print_memory() {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let lines: Vec<&str> = status
            .lines()
            .filter(|l| l.starts_with("VmHWM") || l.starts_with("VmRSS"))
            .collect();
        println!("memory: {}", lines.join(", ").replace('\t', " "));
    }
}
