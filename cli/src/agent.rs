//! `drover agent`: this machine as a node (running real processes), or with `-simulate N`
//! that many virtual nodes, until Ctrl-C.

use crate::client::DEFAULT_ADDRESS;
use crate::jobs::submit::parse_meta;
use crate::logging;
use anyhow::Context;
use drover_agent::sim::{SimConfig, Simulator};
use drover_agent::{Agent, AgentConfig};
use std::path::PathBuf;

/// The agent's data dir when neither a flag nor a config file names one: beside the
/// server's default (`drover-data`), in the working directory, so no root is needed.
pub const DEFAULT_DATA_DIR: &str = "drover-agent-data";

#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// An HCL config file; flags given on the command line override it
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Server addresses, comma separated; the agent fails over among them in order
    #[arg(long, value_delimiter = ',', value_name = "URL")]
    servers: Vec<String>,
    /// Where the node's identity, allocation state and task logs live
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The node's name (default: the host name)
    #[arg(long)]
    name: Option<String>,
    #[arg(long)]
    datacenter: Option<String>,
    #[arg(long)]
    node_class: Option<String>,
    /// Node meta as key=value; repeat for several
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    meta: Vec<String>,
    /// Where the agent's own endpoint (task logs, restarts) listens [default: 127.0.0.1:0]
    #[arg(long, value_name = "IP:PORT")]
    endpoint_addr: Option<String>,
    /// The address servers reach the endpoint at (default: the bound one)
    #[arg(long, value_name = "HOST:PORT")]
    endpoint_advertise: Option<String>,
    /// Run raw_exec tasks (off by default: they run as host processes; see the README)
    #[arg(long)]
    raw_exec: bool,
    /// The interface whose address tasks' ports are on (default: the default route's)
    #[arg(long, value_name = "NAME")]
    network_interface: Option<String>,
    /// Run this many simulated nodes instead of this machine (tasks are not executed)
    #[arg(long, value_name = "N")]
    simulate: Option<usize>,
    /// Drivers the simulated nodes pretend to have besides `mock` (comma-separated, e.g.
    /// raw_exec): jobs that need them are then placed on simulated nodes too
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "DRIVER",
        requires = "simulate"
    )]
    simulate_drivers: Vec<String>,
    /// The cluster CA's certificate: talk TLS to the servers
    #[arg(long = "ca-cert", env = "DROVER_CACERT", value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// This node's certificate (a client one: `drover tls cert create -client`)
    #[arg(long = "client-cert", env = "DROVER_CLIENT_CERT", value_name = "FILE")]
    client_cert: Option<PathBuf>,
    /// The key of --client-cert
    #[arg(long = "client-key", env = "DROVER_CLIENT_KEY", value_name = "FILE")]
    client_key: Option<PathBuf>,
    /// The join credential: an ACL token that may register nodes (servers with ACLs on)
    #[arg(
        long,
        env = "DROVER_TOKEN",
        value_name = "SECRET",
        hide_env_values = true
    )]
    token: Option<String>,
    #[command(flatten)]
    pub log: logging::LogArgs,
}

impl AgentArgs {
    pub fn config(&self) -> anyhow::Result<AgentConfig> {
        let mut config = match &self.config {
            Some(path) => AgentConfig::from_hcl_file(path)?,
            None => AgentConfig {
                servers: vec![DEFAULT_ADDRESS.into()],
                data_dir: PathBuf::from(DEFAULT_DATA_DIR),
                ..AgentConfig::default()
            },
        };
        if !self.servers.is_empty() {
            config.servers = self.servers.clone();
        }
        if self.token.is_some() {
            config.token = self.token.clone();
        }
        if self.ca_cert.is_some() {
            config.tls.ca_file = self.ca_cert.clone();
        }
        if self.client_cert.is_some() {
            config.tls.cert_file = self.client_cert.clone();
        }
        if self.client_key.is_some() {
            config.tls.key_file = self.client_key.clone();
        }
        if let Some(dir) = &self.data_dir {
            config.data_dir = dir.clone();
        }
        if let Some(name) = &self.name {
            config.name = Some(name.clone());
        }
        if let Some(addr) = &self.endpoint_addr {
            config.endpoint_addr = addr.clone();
        }
        if self.endpoint_advertise.is_some() {
            config.endpoint_advertise = self.endpoint_advertise.clone();
        }
        if let Some(dc) = &self.datacenter {
            config.datacenter = dc.clone();
        }
        if let Some(class) = &self.node_class {
            config.node_class = class.clone();
        }
        config.meta.extend(parse_meta(&self.meta)?);
        if self.raw_exec {
            config.raw_exec.enabled = true;
        }
        if self.network_interface.is_some() {
            config.network.interface = self.network_interface.clone();
        }
        config.validate()?;
        Ok(config)
    }
}

/// Runs the agent (or the simulator) until Ctrl-C. The real agent leaves its tasks running
/// when it stops, as Nomad's does: started again, it re-attaches to them.
pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    args.log.to_stderr("info")?;
    let config = args.config()?;
    if let Some(nodes) = args.simulate {
        let sim = Simulator::start(SimConfig {
            servers: config.servers.clone(),
            nodes,
            datacenters: drover_agent::sim::Mix::single(config.datacenter.clone()),
            // Told apart from real nodes wherever nodes are listed, unless named otherwise.
            classes: drover_agent::sim::Mix::single(if config.node_class.is_empty() {
                crate::dev::SIMULATED_CLASS.to_string()
            } else {
                config.node_class.clone()
            }),
            token: config.token.clone(),
            tls: config.tls.clone(),
            drivers: crate::dev::sim_drivers(&args.simulate_drivers),
            ..SimConfig::default()
        })
        .await
        .context("simulator does not start")?;
        println!(
            "==> simulating {nodes} nodes against {}",
            config.servers.join(",")
        );
        wait_for_ctrl_c().await?;
        sim.shutdown().await;
        return Ok(());
    }
    let agent = Agent::start(config.clone())
        .await
        .context("agent does not start")?;
    println!(
        "==> drover agent running as node {} against {}",
        agent.node_id(),
        config.servers.join(",")
    );
    wait_for_ctrl_c().await?;
    agent.shutdown().await;
    Ok(())
}

/// Waits for Ctrl-C, SIGTERM or SIGHUP ([`crate::signals`]).
pub async fn wait_for_ctrl_c() -> anyhow::Result<()> {
    crate::signals::wait_for_stop().await.map(|_| ())
}
