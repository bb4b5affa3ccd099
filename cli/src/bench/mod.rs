//! `drover bench`: how fast one server places allocations, end to end through the real
//! stack: a server with production settings (its Raft log on disk, every commit durable),
//! simulated nodes that register, heartbeat and run their allocations as mocks over gRPC,
//! and service jobs registered over gRPC with bounded concurrency.
//!
//! - [`workload`]: the run's nodes and jobs, and the check that they fit.
//! - [`target`]: the server under test, started here or already running (`--address`).
//! - [`nodes`]: the simulator's nodes registering until all are healthy.
//! - [`jobs`]: submitting the jobs and waiting until every allocation is placed or running.
//! - [`report`]: the figures, for people or as JSON.

pub mod cluster;
pub mod core_run;
pub mod detect;
pub mod error;
pub mod heartbeat;
pub mod http_read;
pub mod jobs;
pub mod latency;
pub mod nodes;
pub mod procfs;
pub mod progress;
pub mod report;
pub mod restart;
pub mod rolling;
pub mod scrape;
pub mod server_figures;
pub mod services;
pub mod snapshot_log;
pub mod storm;
pub mod target;
pub mod workload;

pub use error::BenchError;

use crate::client::Client;
use crate::logging;
use crate::output::print_json;
use jobs::{Goal, Tally};
use progress::Progress;
use report::{MODE_CHILD, MODE_REMOTE, Report, Settings, secs};
use server_figures::{Probe, ServerFigures};
use snapshot_log::SnapshotLines;
use std::io::Write;
use std::time::Duration;
use target::{ServerSettings, Target};
use tokio::time::Instant;
use workload::Workload;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// What to measure
    #[arg(long, value_enum, default_value_t = Scenario::C1m)]
    pub scenario: Scenario,
    /// Simulated nodes to register (in this process)
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes: u32,
    /// Service jobs to submit (default: 100; latency: 200, one at a time; rolling and
    /// services: 1,000)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
    /// Allocations per job (default: 100; latency: 10)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub count: Option<u32>,
    /// Job registrations in flight at once
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub in_flight: u32,
    /// The longest the run may take, from the first node registering to the goal
    #[arg(long, default_value = "10m", value_parser = parse_timeout)]
    pub timeout: Duration,
    /// Stop measuring once every allocation is placed, or once the nodes report it running
    #[arg(long, value_enum, default_value_t = Until::Placed)]
    pub until: Until,
    /// Bench this running server instead of starting one (`http://host:port`)
    #[arg(long, value_name = "URL")]
    pub address: Option<String>,
    /// CPU each allocation asks for, in MHz (a simulated node has 4000)
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub cpu: u64,
    /// Memory each allocation asks for, in MB (a simulated node has 8192)
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    pub memory: u64,
    /// Dynamic ports each allocation asks for (`network { port "p0" {} ... }`); 0: none
    #[arg(long, default_value_t = 0)]
    pub ports: u32,
    /// Heartbeat scenario: how long heartbeats are measured once every node is up
    #[arg(long, default_value = "30s", value_parser = parse_timeout)]
    pub window: Duration,
    /// The chance (0 to 1) that a simulated node's heartbeat is first sent as a call it
    /// cancels at once, resetting its stream on a connection other nodes share (a client
    /// that cancels timed-out calls, as grpcio does)
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub cancel_rate: f64,
    /// c1m against this many `drover server` processes forming one Raft cluster, after the
    /// same load against a single server in the same run
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=7), conflicts_with = "address")]
    pub servers: u8,
    /// Settings for the server the run starts, as a `drover server` config file (HCL)
    #[arg(long, value_name = "FILE", conflicts_with = "address")]
    pub server_config: Option<std::path::PathBuf>,
    /// Print the report as JSON (also accepted as `-json`)
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Placements per second: many jobs of many allocations at once (Nomad's C1M)
    C1m,
    /// Register → eval complete for one small job at a time, and where the time goes
    Latency,
    /// Every node registers at once while system jobs exist (10 by default)
    Storm,
    /// Heartbeats handled per second and server CPU per heartbeat, at the server's TTL
    Heartbeat,
    /// One node goes silent: time until it is marked down and its allocations replaced
    Detect,
    /// SIGKILL a filled server and restart it: time until it reads and writes again
    Restart,
    /// Listing 1,000 jobs through Nomad's HTTP API against the same list through gRPC
    HttpRead,
    /// A rolling update of every job (1,000 x 100 by default) gated on deployments
    Rolling,
    /// Placement and a rollout of 1,000 allocations without and with a service and check
    /// per allocation (on two fresh servers), and how soon a blocking service read wakes
    Services,
}

impl Scenario {
    /// (jobs, allocations per job) unless the flags say otherwise.
    fn default_shape(self) -> (u32, u32) {
        match self {
            Scenario::C1m => (100, 100),
            Scenario::Latency => (200, 10),
            Scenario::Storm => (10, 1),
            Scenario::Heartbeat => (1, 1),
            Scenario::Detect => (1, 10),
            Scenario::Restart => (100, 100),
            Scenario::HttpRead => (1_000, 1),
            Scenario::Rolling => (1_000, 100),
            Scenario::Services => (1_000, 100),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Until {
    /// Every allocation committed by the plan applier
    Placed,
    /// Every allocation reported running by its node
    Running,
}

impl Until {
    fn name(self) -> &'static str {
        match self {
            Until::Placed => "placed",
            Until::Running => "running",
        }
    }
}

/// A chance between 0 and 1.
fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if (0.0..=1.0).contains(&rate) => Ok(rate),
        Ok(rate) => Err(format!("{rate} is not between 0 and 1")),
        Err(e) => Err(format!("{text:?} is not a number: {e}")),
    }
}

fn parse_timeout(text: &str) -> Result<Duration, String> {
    let timeout = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if timeout.is_zero() {
        return Err("must be longer than zero".into());
    }
    Ok(timeout)
}

/// Runs the benchmark and prints its report to `out`; progress goes to standard error.
pub async fn run(args: BenchArgs, out: &mut dyn Write) -> Result<(), BenchError> {
    // openraft warns once per client write still waiting when the server stops (as it
    // does after a missed deadline): noise next to the error that ended the run.
    // A bench takes no logging flags: RUST_LOG only. Its filter names openraft, so the
    // directive is kept as is.
    let _ = logging::LogArgs::default().to_stderr("warn,openraft=error");
    let (jobs, count) = args.scenario.default_shape();
    // A system job has an allocation on every node: the count is the node count.
    let count = match args.scenario {
        Scenario::Storm => args.nodes,
        _ => args.count.unwrap_or(count),
    };
    let mut workload = Workload::new(
        args.nodes,
        args.jobs.unwrap_or(jobs),
        count,
        args.cpu,
        args.memory,
    )?
    .with_ports(args.ports)?;
    workload.cancel_rate = args.cancel_rate;
    if args.scenario == Scenario::Restart && args.address.is_some() {
        return Err(restart::needs_own_server());
    }
    if args.scenario == Scenario::HttpRead && args.address.is_some() {
        return Err(http_read::needs_own_server());
    }
    if args.scenario == Scenario::Services && args.address.is_some() {
        return Err(services::needs_own_server());
    }
    let http = match args.scenario {
        Scenario::HttpRead => Some(http_read::http_config()?),
        _ => None,
    };
    let mut progress = Progress::new(!args.json);
    let settings = server_settings(&args, http.as_ref().map(|(line, _)| line.as_str()))?;
    if args.servers > 1 {
        if args.scenario != Scenario::C1m {
            return Err(BenchError::Setting {
                flag: "--servers",
                reason: format!(
                    "a cluster is benched with --scenario c1m only, not {:?}",
                    args.scenario
                ),
            });
        }
        let mut report = cluster::run(&args, &workload, &settings, &mut progress).await?;
        progress.phase("the same placements through core alone, in this process");
        let core = core_run::run(&workload, crate::output::now());
        for r in [&mut report.single, &mut report.cluster] {
            r.end_to_end_vs_core = Some(r.placements_per_sec / core.placements_per_sec.max(1e-9));
            r.core = Some(core.clone());
        }
        if args.json {
            return Ok(print_json(out, &report)?);
        }
        write!(out, "{}", report.render()).map_err(crate::CliError::from)?;
        return Ok(());
    }
    let mut target = match &args.address {
        Some(url) => Target::Remote { url: url.clone() },
        None => {
            progress.phase(
                "starting drover server as a child process (on-disk raft log, production settings)",
            );
            Target::start_child(&settings).await?
        }
    };
    let http_addr = http.map(|(_, addr)| addr).unwrap_or_default();
    let measured = scenario(
        &mut target,
        &settings,
        &workload,
        &args,
        &http_addr,
        &mut progress,
    )
    .await;
    let stopped = target.stop().await;
    let report = match (measured, stopped) {
        (Ok(report), stopped) => {
            stopped?;
            report
        }
        (Err(e), stopped) => {
            if let Err(stop) = stopped {
                tracing::warn!(error = %stop, "bench server did not stop cleanly");
            }
            return Err(e);
        }
    };
    let mut report = report;
    if let Measured::C1m(r) = &mut report {
        progress.phase("the same placements through core alone, in this process");
        let core = core_run::run(&workload, crate::output::now());
        r.end_to_end_vs_core = Some(r.placements_per_sec / core.placements_per_sec.max(1e-9));
        r.core = Some(core);
    }
    let text = match (&report, args.json) {
        (Measured::C1m(r), true) => return Ok(print_json(out, r)?),
        (Measured::Latency(r), true) => return Ok(print_json(out, r)?),
        (Measured::Storm(r), true) => return Ok(print_json(out, r)?),
        (Measured::Heartbeat(r), true) => return Ok(print_json(out, r)?),
        (Measured::Detect(r), true) => return Ok(print_json(out, r)?),
        (Measured::Restart(r), true) => return Ok(print_json(out, r)?),
        (Measured::HttpRead(r), true) => return Ok(print_json(out, r)?),
        (Measured::Rolling(r), true) => return Ok(print_json(out, r)?),
        (Measured::Services(r), true) => return Ok(print_json(out, r)?),
        (Measured::Storm(r), false) => r.render(),
        (Measured::C1m(r), false) => r.render(),
        (Measured::Latency(r), false) => r.render(),
        (Measured::Heartbeat(r), false) => r.render(),
        (Measured::Detect(r), false) => r.render(),
        (Measured::Restart(r), false) => r.render(),
        (Measured::HttpRead(r), false) => r.render(),
        (Measured::Rolling(r), false) => r.render(),
        (Measured::Services(r), false) => r.render(),
    };
    write!(out, "{text}").map_err(crate::CliError::from)?;
    Ok(())
}

/// The config of the servers the run starts: `--server-config`'s file, plus the HTTP
/// listener's line when the scenario needs one.
fn server_settings(
    args: &BenchArgs,
    http_line: Option<&str>,
) -> Result<ServerSettings, BenchError> {
    let mut settings = match &args.server_config {
        Some(path) => ServerSettings {
            config_hcl: std::fs::read_to_string(path).map_err(|e| BenchError::Setting {
                flag: "--server-config",
                reason: format!("cannot read {}: {e}", path.display()),
            })?,
        },
        None => ServerSettings::default(),
    };
    if let Some(line) = http_line {
        settings.config_hcl.push_str(line);
    }
    Ok(settings)
}

/// One scenario's figures.
enum Measured {
    C1m(Box<Report>),
    Latency(latency::LatencyReport),
    Storm(storm::StormReport),
    Heartbeat(heartbeat::HeartbeatReport),
    Detect(detect::DetectReport),
    Restart(restart::RestartReport),
    HttpRead(http_read::HttpReadReport),
    Rolling(Box<rolling::RollingReport>),
    Services(Box<services::ServicesReport>),
}

/// Runs the scenario the flags name against the server; on a shared (remote) server the
/// run's jobs are purged afterwards, whatever the outcome.
async fn scenario(
    target: &mut Target,
    settings: &ServerSettings,
    workload: &Workload,
    args: &BenchArgs,
    http_addr: &str,
    progress: &mut Progress,
) -> Result<Measured, BenchError> {
    let client = Client::connect(target.url()).await?;
    let deadline = Instant::now() + args.timeout;
    let timeout = args.timeout;
    let measured = match args.scenario {
        Scenario::C1m => measure(target, &client, workload, args, progress)
            .await
            .map(|r| Measured::C1m(Box::new(r))),
        Scenario::Latency => measure_latency(target, &client, workload, args, progress)
            .await
            .map(Measured::Latency),
        Scenario::Storm => storm::measure(target, &client, workload, deadline, timeout, progress)
            .await
            .map(Measured::Storm),
        Scenario::Heartbeat => heartbeat::measure(
            target,
            &client,
            workload,
            args.window,
            deadline,
            timeout,
            progress,
        )
        .await
        .map(Measured::Heartbeat),
        Scenario::Detect => detect::measure(target, &client, workload, deadline, timeout, progress)
            .await
            .map(Measured::Detect),
        Scenario::Restart => restart::measure(
            target,
            workload,
            args.in_flight as usize,
            deadline,
            timeout,
            progress,
        )
        .await
        .map(Measured::Restart),
        Scenario::HttpRead => http_read::measure(
            target,
            &client,
            http_addr,
            workload,
            args.in_flight as usize,
            timeout,
            progress,
        )
        .await
        .map(Measured::HttpRead),
        Scenario::Rolling => rolling::measure(
            target,
            &client,
            workload,
            args.in_flight as usize,
            deadline,
            timeout,
            progress,
        )
        .await
        .map(|r| Measured::Rolling(Box::new(r))),
        Scenario::Services => services::measure(
            target,
            settings,
            workload,
            args.in_flight as usize,
            deadline,
            timeout,
            progress,
        )
        .await
        .map(|r| Measured::Services(Box::new(r))),
    };
    if !target.is_child() && args.scenario != Scenario::Heartbeat {
        jobs::purge(&client, workload, args.in_flight as usize).await;
    }
    measured
}

/// The latency scenario: nodes up, then one job at a time.
async fn measure_latency(
    target: &Target,
    client: &Client,
    workload: &Workload,
    args: &BenchArgs,
    progress: &mut Progress,
) -> Result<latency::LatencyReport, BenchError> {
    let deadline = Instant::now() + args.timeout;
    let sim = nodes::start(client, workload, deadline, args.timeout, progress).await?;
    progress.phase(&format!(
        "timing {} jobs of {} allocations, one at a time",
        workload.jobs, workload.count
    ));
    let before = Probe::take(target).await;
    let measured = latency::measure(client, workload, deadline, args.timeout, progress).await;
    let after = Probe::take(target).await;
    let measured = measured.map(|mut report| {
        report.server = ServerFigures::between(&before, &after);
        report
    });
    sim.shutdown().await;
    measured
}

/// Everything between a reachable server and the report: nodes, jobs, the wait, and the
/// figures. Stops the simulator on every path.
async fn measure(
    target: &Target,
    client: &Client,
    workload: &Workload,
    args: &BenchArgs,
    progress: &mut Progress,
) -> Result<Report, BenchError> {
    let deadline = Instant::now() + args.timeout;
    let started = Instant::now();
    let sim = nodes::start(client, workload, deadline, args.timeout, progress).await?;
    let node_registration = started.elapsed();
    let before = Probe::take(target).await;
    let timed = time_jobs(client, workload, args, deadline, progress).await;
    let after = Probe::take(target).await;
    let console_load = match &timed {
        Ok(_) => {
            progress.phase("loading the placed state the way the console does");
            console_load(target).await
        }
        Err(_) => None,
    };
    let data_dir_mib = target
        .child()
        .map(|c| c.data_dir_bytes() as f64 / 1_048_576.0);
    sim.shutdown().await;
    let timed = timed?;
    let server = ServerFigures::between(&before, &after);
    let disk_bytes_per_placement = server
        .disk_written_bytes
        .map(|b| b as f64 / timed.placed_tally.placed.max(1) as f64);
    Ok(Report {
        server_mode: if target.is_child() {
            MODE_CHILD
        } else {
            MODE_REMOTE
        },
        server_address: client.address().to_string(),
        scheduler_workers: timed.workers,
        nodes: u64::from(workload.nodes),
        jobs: u64::from(workload.jobs),
        count_per_job: u64::from(workload.count),
        allocations: workload.allocations(),
        placed: timed.placed_tally.placed,
        running: timed.running.map(|(_, tally)| tally.running),
        node_registration_secs: secs(node_registration),
        submit_secs: secs(timed.submit),
        placement_secs: secs(timed.placed),
        running_secs: timed.running.map(|(d, _)| secs(d)),
        placements_per_sec: timed.placed_tally.placed as f64 / secs(timed.placed).max(1e-9),
        core: None,
        end_to_end_vs_core: None,
        raft_entries_applied: timed.raft_entries,
        server,
        disk_bytes_per_placement,
        data_dir_mib,
        bench_peak_rss_mib: procfs::peak_rss_kib().map(|kib| kib as f64 / 1024.0),
        console_load,
        settings: Settings {
            run_id: workload.run_id.clone(),
            in_flight: u64::from(args.in_flight),
            timeout_secs: secs(args.timeout),
            until: args.until.name(),
            alloc_cpu_mhz: workload.cpu_mhz,
            alloc_memory_mb: workload.memory_mb,
            alloc_ports: u64::from(workload.ports),
            node_cpu_mhz: workload.node.cpu_mhz,
            node_memory_mb: workload.node.memory_mb,
        },
    })
}

/// Times the console's start-up load against the server; a failure is logged, not fatal
/// (the placements were measured).
async fn console_load(target: &Target) -> Option<report::ConsoleLoad> {
    let snapshots = || target.child().map(|c| SnapshotLines::count(&c.log_text()));
    let before = snapshots();
    let loaded = drover_tui::net::load::measure_initial_load(target.url(), None).await;
    let server_snapshots_during = before.zip(snapshots()).map(|(b, a)| b.overlapping(a));
    match loaded {
        Ok(l) => Some(report::ConsoleLoad {
            total_secs: secs(l.total()),
            read_secs: secs(l.read),
            build_secs: secs(l.build),
            nodes: l.nodes as u64,
            allocations: l.allocs as u64,
            // Read after the load: the server's peak over the whole run.
            server_peak_rss_mib: target
                .child()
                .and_then(|c| c.usage())
                .map(|u| u.peak_rss_kib as f64 / 1024.0),
            console_resident_mib: l.resident_growth_kib.map(|kib| kib as f64 / 1024.0),
            server_snapshots_during,
        }),
        Err(error) => {
            tracing::warn!(%error, "the console's load could not be measured");
            None
        }
    }
}

/// The measured phase's figures.
#[derive(Debug)]
struct Timed {
    submit: Duration,
    placed: Duration,
    placed_tally: Tally,
    running: Option<(Duration, Tally)>,
    raft_entries: u64,
    workers: u64,
}

async fn time_jobs(
    client: &Client,
    workload: &Workload,
    args: &BenchArgs,
    deadline: Instant,
    progress: &mut Progress,
) -> Result<Timed, BenchError> {
    let workers = jobs::worker_count(client).await?;
    let first_index = jobs::applied_index(client).await?;
    progress.phase(&format!(
        "submitting {} jobs of {} allocations ({} in flight)",
        workload.jobs, workload.count, args.in_flight
    ));
    let started = Instant::now();
    jobs::submit(
        client,
        workload,
        args.in_flight as usize,
        deadline,
        args.timeout,
    )
    .await?;
    let submit = started.elapsed();
    progress.phase(&format!(
        "all jobs accepted in {:.2}s; waiting for {} placements",
        secs(submit),
        workload.allocations()
    ));
    let placed_tally = jobs::wait_for(
        client,
        workload,
        Goal::Placed,
        deadline,
        args.timeout,
        progress,
    )
    .await?;
    let placed = started.elapsed();
    let running = match args.until {
        Until::Placed => None,
        Until::Running => {
            progress.phase(&format!(
                "all placed in {:.2}s; waiting for the nodes to run them",
                secs(placed)
            ));
            let tally = jobs::wait_for(
                client,
                workload,
                Goal::Running,
                deadline,
                args.timeout,
                progress,
            )
            .await?;
            Some((started.elapsed(), tally))
        }
    };
    let raft_entries = jobs::applied_index(client)
        .await?
        .saturating_sub(first_index);
    Ok(Timed {
        submit,
        placed,
        placed_tally,
        running,
        raft_entries,
        workers,
    })
}
