//! `drover dev`: a whole cluster in one process for trying drover out: a server (with its
//! `/metrics`), one real agent running processes on this machine, simulated nodes (of
//! class `simulated`, so they are told apart everywhere nodes are listed; their batch
//! tasks end after a simulated run time), and a sample job that runs on the real agent
//! (so `ps` shows it), optionally with the console on top. Ctrl-C (or quitting the console) stops everything in reverse
//! order of start: console, simulator, agent, server.

use crate::client::Client;
use crate::dev_servers::DevServers;
use crate::error::rpc_failed;
use crate::logging;
use anyhow::Context;
use drover_agent::sim::{Mix, SimConfig, Simulator};
use drover_agent::{Agent, AgentConfig};
use drover_proto::v1 as pb;
use drover_server::api::ApiServer;
use drover_server::{Server, ServerConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The job registered on start, so the console has something to show.
const SAMPLE_JOB: &str = include_str!("../../examples/web.nomad.hcl");
const SAMPLE_JOB_FILE: &str = "examples/web.nomad.hcl";

/// The node class of simulated nodes (`drover dev`'s, and `drover agent -simulate`'s
/// unless given another): `node status` and the console show it.
pub const SIMULATED_CLASS: &str = "simulated";

/// How long the single dev server may take to elect itself.
const LEADERSHIP_DEADLINE: Duration = Duration::from_secs(10);

#[derive(Debug, clap::Args)]
pub struct DevArgs {
    /// Simulated nodes to run besides the real agent
    #[arg(long, default_value_t = 5)]
    nodes: usize,
    /// Open the console on the cluster (quit it to stop the cluster)
    #[arg(long)]
    console: bool,
    /// Keep the cluster's state here instead of in a temporary directory
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The gRPC address to serve on (port 0 picks a free port)
    #[arg(long, default_value = "127.0.0.1:4647", value_name = "HOST:PORT")]
    bind: String,
    /// Do not register the sample job
    #[arg(long)]
    no_sample_job: bool,
    /// Servers to run: more than one forms a Raft cluster of `drover server` processes
    /// (ports from --bind's up: API, Raft, API, Raft, ...) for trying failover by hand
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=7))]
    servers: u8,
    /// Drivers the simulated nodes pretend to have besides `mock` (comma-separated, e.g.
    /// raw_exec); without it only the real agent takes raw_exec and exec jobs
    #[arg(long, value_delimiter = ',', value_name = "DRIVER")]
    simulate_drivers: Vec<String>,
    /// How long tasks of batch and sysbatch jobs run on the simulated nodes before they
    /// complete
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    sim_batch_duration: Duration,
    /// Where to serve Prometheus metrics over HTTP
    #[arg(long, value_name = "HOST:PORT", default_value = crate::serve::DEFAULT_METRICS_ADDR)]
    metrics_addr: String,
    /// Serve no metrics
    #[arg(long)]
    no_metrics: bool,
    /// Where to serve Nomad's HTTP API (`none`: not at all); by default beside the
    /// metrics on Nomad's port
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:4646")]
    http_addr: String,
    #[command(flatten)]
    log: logging::LogArgs,
}

/// The dev cluster's servers: one in this process, or several processes.
enum Servers {
    InProcess { server: Server, api: ApiServer },
    Processes(DevServers),
}

impl Servers {
    async fn start(args: &DevArgs, data_dir: &Path) -> anyhow::Result<(Servers, String)> {
        if args.servers > 1 {
            let cluster = DevServers::start(data_dir, &args.bind, usize::from(args.servers))
                .await
                .context("dev servers do not start")?;
            let urls = cluster.addresses();
            return Ok((Servers::Processes(cluster), urls));
        }
        let mut config = ServerConfig::new(data_dir.join("server"));
        config.bind_addr = args.bind.clone();
        // A dev cluster of one server: its Raft listener (unused, locked by a random
        // secret) takes any free loopback port rather than one next to the API.
        config.raft_addr = Some("127.0.0.1:0".into());
        config.metrics_addr = (!args.no_metrics).then(|| args.metrics_addr.clone());
        config.http_addr = drover_server::config::listen_addr(&args.http_addr);
        let (server, api) = crate::serve::start_serving(config).await?;
        let url = format!("http://{}", api.local_addr());
        anyhow::ensure!(
            server
                .handle()
                .wait_for_leadership(LEADERSHIP_DEADLINE)
                .await,
            "the dev server did not become leader within {LEADERSHIP_DEADLINE:?}"
        );
        Ok((Servers::InProcess { server, api }, url))
    }

    async fn shutdown(self) -> anyhow::Result<()> {
        match self {
            Servers::InProcess { server, api } => {
                api.shutdown().await.context("gRPC API does not stop")?;
                server.shutdown().await.context("server does not stop")?;
            }
            Servers::Processes(cluster) => {
                tokio::task::spawn_blocking(move || cluster.shutdown())
                    .await
                    .context("dev servers do not stop")?;
            }
        }
        Ok(())
    }
}

pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let temp;
    let data_dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("drover-dev-")
                .tempdir()
                .context("cannot create a temporary data dir")?;
            temp.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create data dir {}", data_dir.display()))?;
    if args.console {
        args.log.to_file(&data_dir.join("dev.log"), "warn")?;
    } else {
        args.log.to_stderr("warn")?;
    }

    let (servers, url) = Servers::start(&args, &data_dir).await?;
    let server_urls: Vec<String> = url.split(',').map(String::from).collect();

    let agent = Agent::start(AgentConfig {
        servers: server_urls.clone(),
        data_dir: data_dir.join("agent"),
        name: Some("dev-agent".into()),
        // A development cluster runs its jobs' raw_exec tasks, as `nomad agent -dev` does,
        // and offers their ports on loopback, as it does too.
        raw_exec: drover_agent::config::RawExecConfig {
            enabled: true,
            no_cgroups: false,
        },
        network: drover_agent::network::NetworkConfig {
            interface: drover_agent::network::loopback_interface(),
            ..Default::default()
        },
        ..AgentConfig::default()
    })
    .await
    .context("agent does not start")?;
    let sim = if args.nodes > 0 {
        Some(
            Simulator::start(SimConfig {
                servers: server_urls.clone(),
                nodes: args.nodes,
                classes: Mix::single(SIMULATED_CLASS),
                batch_duration: Some(args.sim_batch_duration),
                drivers: sim_drivers(&args.simulate_drivers),
                ..SimConfig::default()
            })
            .await
            .context("simulator does not start")?,
        )
    } else {
        None
    };

    let sample = if args.no_sample_job {
        None
    } else {
        Some(register_sample(&url).await?)
    };
    print_banner(&Banner {
        url: &url,
        servers: &servers,
        data_dir: &data_dir,
        agent: &agent,
        nodes: args.nodes,
        batch_duration: args.sim_batch_duration,
        sample: sample.as_deref(),
        console: args.console,
    });

    let waited = if args.console {
        let console = drover_tui::run(drover_tui::ConsoleOptions {
            address: url.clone(),
            read_only: false,
            tls: Default::default(),
            mouse: false,
            token: None,
        });
        // A signal ends the console (which restores the terminal as it is dropped) and
        // the cluster alike.
        tokio::select! {
            quit = console => quit.map_err(anyhow::Error::from),
            stopped = crate::signals::wait_for_stop() => stopped.map(|_| ()),
        }
    } else {
        crate::agent::wait_for_ctrl_c().await
    };
    if let Some(sim) = sim {
        sim.shutdown().await;
    }
    agent.shutdown_and_stop_tasks().await;
    servers.shutdown().await?;
    println!("==> drover dev stopped");
    waited
}

/// The drivers simulated nodes advertise: `mock`, and those named to pretend.
pub fn sim_drivers(pretend: &[String]) -> Vec<String> {
    let mut drivers: Vec<String> = drover_agent::sim::DEFAULT_SIM_DRIVERS
        .iter()
        .map(|d| d.to_string())
        .collect();
    for d in pretend {
        let d = d.trim();
        if !d.is_empty() && !drivers.iter().any(|have| have == d) {
            drivers.push(d.to_string());
        }
    }
    drivers
}

/// Registers the sample job as its file says; returns its id. It is a raw_exec job, and
/// the simulated nodes advertise only `mock`, so it runs on the real agent, where `ps` and
/// `alloc logs` show its processes.
async fn register_sample(url: &str) -> anyhow::Result<String> {
    let job = drover_core::jobspec::parse_hcl(SAMPLE_JOB, SAMPLE_JOB_FILE)
        .context("the built-in sample job does not parse")?;
    let id = job.id.to_string();
    let client = Client::connect(url).await?;
    client
        .jobs()
        .register(pb::RegisterJobRequest {
            job: Some((&job).into()),
            enforce_index: None,
        })
        .await
        .map_err(rpc_failed(format_args!("registering sample job {id:?}")))?;
    Ok(id)
}

/// What the banner names.
struct Banner<'a> {
    url: &'a str,
    servers: &'a Servers,
    data_dir: &'a Path,
    agent: &'a Agent,
    nodes: usize,
    batch_duration: Duration,
    sample: Option<&'a str>,
    console: bool,
}

fn print_banner(b: &Banner<'_>) {
    println!("==> drover dev cluster is up");
    match b.servers {
        Servers::InProcess { server, api } => {
            println!("    gRPC API:        {}", b.url);
            if let Some(http) = api.http_addr() {
                println!("    HTTP API:        http://{http} (Nomad's /v1)");
            }
            if let Some(metrics) = server.metrics_addr().or(api.metrics_addr()) {
                println!("    Metrics:         http://{metrics}/metrics");
            }
        }
        Servers::Processes(cluster) => {
            for s in &cluster.servers {
                println!(
                    "    Server {}:        {} (raft {}, pid {}, log {})",
                    s.id,
                    s.url,
                    s.raft_addr,
                    s.pid(),
                    s.log.display()
                );
            }
            println!("    Try failover:    kill -9 the leader's pid (drover server members)");
        }
    }
    println!("    Data dir:        {}", b.data_dir.display());
    println!(
        "    Agent node:      {} (runs real processes)",
        b.agent.node_id()
    );
    println!(
        "    Simulated nodes: {} (class {SIMULATED_CLASS:?}; tasks are not run, batch tasks \
         end after {:?})",
        b.nodes, b.batch_duration
    );
    if let Some(job) = b.sample {
        println!("    Sample job:      {job} ({SAMPLE_JOB_FILE}, on the agent node)");
    }
    println!();
    println!("    export DROVER_ADDR={}", b.url);
    if let Servers::InProcess { api, .. } = b.servers
        && let Some(http) = api.http_addr()
    {
        println!("    export NOMAD_ADDR=http://{http}");
    }
    if b.console {
        println!("==> Opening the console; quit it to stop the cluster");
    } else {
        println!("    drover console    # the operator console");
        println!("    drover node status");
        println!("==> Press Ctrl-C to stop");
    }
}
