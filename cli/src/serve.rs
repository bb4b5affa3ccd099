//! `drover server`: one server of a cluster, serving the gRPC API until Ctrl-C.

use crate::logging;
use anyhow::Context;
use drover_server::ServerConfig;
use drover_server::api::ApiOptions;
use drover_server::raft::Bootstrap;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where `drover server` serves Prometheus metrics unless told otherwise (Nomad's HTTP
/// port).
pub const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:4646";

#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// An HCL config file; flags given on the command line override it
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Where the Raft log and snapshots live
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The client API's gRPC address
    #[arg(long, value_name = "HOST:PORT")]
    bind: Option<String>,
    /// The server-to-server (Raft) address, reached by the other servers (default: the
    /// API's host, the next port)
    #[arg(long, value_name = "HOST:PORT")]
    raft_addr: Option<String>,
    /// The key every server of the cluster shares (at least 16 characters); required with
    /// --peer or --join
    #[arg(long, env = "DROVER_CLUSTER_SECRET", hide_env_values = true)]
    cluster_secret: Option<String>,
    /// This server's Raft id (unique in the cluster)
    #[arg(long)]
    server_id: Option<u64>,
    /// The name other servers and operators see
    #[arg(long)]
    name: Option<String>,
    /// Scheduler workers to run (default: one per CPU)
    #[arg(long)]
    workers: Option<u32>,
    /// Where to serve Prometheus metrics over HTTP
    #[arg(long, value_name = "HOST:PORT")]
    metrics_addr: Option<String>,
    /// Serve no metrics
    #[arg(long, conflicts_with = "metrics_addr")]
    no_metrics: bool,
    /// Where to serve Nomad's HTTP API (`/v1`, for NOMAD_ADDR); off unless given here or
    /// as `http_addr` in the config file (`none` turns it off). The same address as
    /// --metrics-addr serves both
    #[arg(long, value_name = "HOST:PORT")]
    http_addr: Option<String>,
    /// A voter of the initial cluster as ID=HOST:PORT, where HOST:PORT is its Raft
    /// address; repeat for each, this server included. Without any, the server forms a
    /// cluster of its own
    #[arg(long = "peer", value_name = "ID=HOST:PORT", conflicts_with_all = ["join", "bootstrap_expect"])]
    peers: Vec<String>,
    /// Join a cluster through another server's Raft address (repeat for several); with
    /// no address, wait for `drover operator raft add-peer` on the leader
    #[arg(long, value_name = "HOST:PORT", num_args = 0..=1, action = clap::ArgAction::Append)]
    join: Option<Vec<String>>,
    /// Form a new cluster once this many servers, found through --join, are up (none of
    /// them in a cluster yet); the lowest server id forms it
    #[arg(long, value_name = "N")]
    bootstrap_expect: Option<usize>,
    /// Require an ACL token on every API call (as `acl { enabled = true }`); bootstrap
    /// the first one with `drover acl bootstrap`
    #[arg(long)]
    acl: bool,
    #[command(flatten)]
    pub log: logging::LogArgs,
}

impl ServerArgs {
    /// The config file (or the defaults) with the flags laid over it.
    pub fn config(&self) -> anyhow::Result<ServerConfig> {
        let mut config = match &self.config {
            Some(path) => ServerConfig::from_file(path)?,
            // An empty file: the production defaults and the server's default data dir.
            None => ServerConfig::from_hcl_str("")?,
        };
        if let Some(dir) = &self.data_dir {
            config.data_dir = dir.clone();
        }
        if let Some(bind) = &self.bind {
            config.bind_addr = bind.clone();
        }
        if let Some(addr) = &self.raft_addr {
            config.raft_addr = Some(addr.clone());
        }
        if let Some(secret) = &self.cluster_secret {
            config.cluster_secret = Some(secret.clone());
        }
        if let Some(id) = self.server_id {
            anyhow::ensure!(id > 0, "--server-id 0: a server id is at least 1");
            config.server_id = id;
        }
        if let Some(name) = &self.name {
            config.name = name.clone();
        }
        if let Some(count) = self.workers {
            config.workers.count = Some(count);
        }
        if self.no_metrics {
            config.metrics_addr = None;
        } else if let Some(addr) = &self.metrics_addr {
            config.metrics_addr = Some(addr.clone());
        } else if config.metrics_addr.is_none() {
            config.metrics_addr = Some(DEFAULT_METRICS_ADDR.into());
        }
        if let Some(addr) = &self.http_addr {
            config.http_addr = drover_server::config::listen_addr(addr);
        }
        if self.acl {
            config.acl_enabled = true;
        }
        if self.join.is_some() || self.bootstrap_expect.is_some() {
            config.bootstrap = drover_server::config::join_bootstrap(
                self.join.clone().unwrap_or_default(),
                self.bootstrap_expect,
            )?;
        } else if !self.peers.is_empty() {
            config.bootstrap = Bootstrap::Cluster(parse_peers(&self.peers)?);
        }
        Ok(config)
    }
}

fn parse_peers(peers: &[String]) -> anyhow::Result<BTreeMap<u64, String>> {
    peers
        .iter()
        .map(|peer| {
            let (id, addr) = peer
                .split_once('=')
                .with_context(|| format!("peer {peer:?} is not of the form ID=HOST:PORT"))?;
            let id = id
                .parse()
                .with_context(|| format!("peer {peer:?}: id {id:?} is not a number"))?;
            Ok((id, addr.to_string()))
        })
        .collect()
}

/// Starts a server and its API. If the API cannot start (its address is taken), the
/// server is stopped cleanly before the error is returned, so Raft does not die with the
/// runtime and log its own death.
pub async fn start_serving(
    config: ServerConfig,
) -> anyhow::Result<(drover_server::Server, drover_server::api::ApiServer)> {
    let server = drover_server::Server::start(config)
        .await
        .context("server does not start")?;
    match server.serve(ApiOptions::default()).await {
        Ok(api) => Ok((server, api)),
        Err(e) => {
            if let Err(stop) = server.shutdown().await {
                tracing::warn!(error = %stop, "server did not stop cleanly after the API failed");
            }
            Err(anyhow::Error::from(e).context("gRPC API does not start"))
        }
    }
}

/// Runs the server until Ctrl-C, then stops the API and the server cleanly.
pub async fn run(args: ServerArgs) -> anyhow::Result<()> {
    // Everything a server writes (its log, snapshots, certificates' copies) is its own:
    // files owner-only whatever the shell's umask, even those libraries create.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    args.log.to_stderr("info")?;
    let config = args.config()?;
    let (server, api) = start_serving(config.clone()).await?;
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    println!(
        "==> drover server {} listening on {scheme}://{} (raft on {}, data dir {})",
        config.server_id,
        api.local_addr(),
        server
            .raft_addr()
            .map_or_else(|| "-".to_string(), |a| a.to_string()),
        config.data_dir.display()
    );
    if let Some(http) = api.http_addr() {
        println!("    Nomad's HTTP API on {scheme}://{http} (export NOMAD_ADDR={scheme}://{http})");
    }
    if let Some(metrics) = &config.metrics_addr {
        println!("    metrics on http://{metrics}/metrics");
    }
    crate::signals::wait_for_stop().await?;
    api.shutdown().await.context("gRPC API does not stop")?;
    server.shutdown().await.context("server does not stop")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrap {
        #[command(flatten)]
        args: ServerArgs,
    }

    fn config(args: &[&str]) -> anyhow::Result<ServerConfig> {
        let mut argv = vec!["server"];
        argv.extend_from_slice(args);
        Wrap::try_parse_from(argv)?.args.config()
    }

    #[test]
    fn flags_override_defaults() {
        let c = config(&[
            "--bind",
            "0.0.0.0:5000",
            "--workers",
            "1",
            "--server-id",
            "3",
        ])
        .expect("valid");
        assert_eq!(c.bind_addr, "0.0.0.0:5000");
        assert_eq!(c.workers.count, Some(1));
        assert_eq!(c.server_id, 3);
        assert_eq!(c.metrics_addr.as_deref(), Some(DEFAULT_METRICS_ADDR));
        assert_eq!(config(&["--no-metrics"]).expect("valid").metrics_addr, None);
    }

    #[test]
    fn peers_form_the_initial_cluster() {
        let c = config(&["--peer", "1=a:1", "--peer", "2=b:2"]).expect("valid");
        let Bootstrap::Cluster(peers) = c.bootstrap else {
            panic!("not a cluster bootstrap: {:?}", c.bootstrap);
        };
        assert_eq!(peers.get(&2).map(String::as_str), Some("b:2"));
        let err = config(&["--peer", "x=a:1"]).expect_err("bad id");
        assert!(err.to_string().contains("\"x\""), "{err}");
    }

    #[test]
    fn join_and_bootstrap_expect_make_a_join_plan() {
        let plan = |args: &[&str]| match config(args).expect("valid").bootstrap {
            Bootstrap::Join(plan) => (plan.addrs, plan.expect),
            other => panic!("not a join bootstrap: {other:?}"),
        };
        assert_eq!(plan(&["--join"]), (vec![], None));
        assert_eq!(
            plan(&["--join", "a:1", "--join", "b:2", "--bootstrap-expect", "3"]),
            (vec!["a:1".to_string(), "b:2".to_string()], Some(3))
        );
        let single = config(&["--bootstrap-expect", "1"]).expect("valid");
        assert_eq!(single.bootstrap, Bootstrap::SingleNode);
        let refused = [
            (&["--bootstrap-expect", "3"][..], "needs join addresses"),
            (
                &["--bootstrap-expect", "0", "--join", "a:1"][..],
                "at least 1",
            ),
            (&["--join", "nohost"][..], "host:port"),
            (&["--server-id", "0"][..], "--server-id 0"),
        ];
        for (args, want) in refused {
            let err = config(args).expect_err("refused");
            assert!(err.to_string().contains(want), "{args:?}: {err}");
        }
        assert!(config(&["--peer", "1=a:1", "--join", "b:2"]).is_err());
    }
}
