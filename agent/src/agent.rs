//! The agent as a whole: start (fingerprint, identity, restore, register), the background
//! loops (heartbeat, allocation watch, status reports), and shutdown.

use crate::AgentError;
use crate::config::AgentConfig;
use crate::driver::ProcessRecord;
use crate::driver::health::Drivers;
use crate::fingerprint::{Fingerprint, fingerprint};
use crate::heartbeat::{self, Heartbeat, Link};
use crate::reporter::{self, Reporter};
use crate::rpc::Servers;
use crate::runner::RunnerContext;
use crate::state::{NodeIdentity, StateStore};
use crate::supervisor::{self, Supervisor};
use backon::{ExponentialBuilder, Retryable};
use drover_core::node_health::Readiness;
use drover_core::types::NodeId;
use drover_proto::v1 as pb;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// How long a report flush waits on shutdown before giving up on unreachable servers.
const FLUSH_ON_SHUTDOWN: Duration = Duration::from_secs(5);

/// A running node agent.
///
/// Dropping it (or [`Agent::shutdown`]) stops talking to the servers but leaves every task
/// process running, as Nomad's client does: the next agent start on the same data dir
/// re-attaches to them. [`Agent::shutdown_and_stop_tasks`] stops the tasks first.
#[derive(Debug)]
pub struct Agent {
    node_id: NodeId,
    data_dir: PathBuf,
    link: Arc<Link>,
    reporter: Reporter,
    supervisor: Arc<Mutex<Supervisor>>,
    loops: Vec<JoinHandle<()>>,
    /// The agent's endpoint (task logs, restarts) serves until this is dropped.
    _endpoint: tokio::sync::oneshot::Sender<()>,
    endpoint_addr: Option<std::net::SocketAddr>,
}

fn resources(r: &drover_core::types::Resources) -> pb::Resources {
    r.into()
}

/// The node's registration from the fingerprint and config, under `identity` if known.
fn registration(
    config: &AgentConfig,
    print: &Fingerprint,
    identity: Option<&NodeIdentity>,
    endpoint: &str,
) -> pb::NodeRegistration {
    let mut attributes = print.attributes.clone();
    attributes.insert(
        drover_proto::AGENT_ADDRESS_ATTRIBUTE.to_string(),
        endpoint.to_string(),
    );
    let interfaces = interface_addresses();
    if !interfaces.is_empty() {
        attributes.insert(
            drover_proto::AGENT_INTERFACES_ATTRIBUTE.to_string(),
            interfaces.join(","),
        );
    }
    pb::NodeRegistration {
        node_id: identity.map(|i| i.node_id.to_string()).unwrap_or_default(),
        secret_id: identity.map(|i| i.secret_id.clone()).unwrap_or_default(),
        name: config
            .name
            .clone()
            .unwrap_or_else(|| print.hostname.clone()),
        datacenter: config.datacenter.clone(),
        node_class: config.node_class.clone(),
        attributes,
        meta: config.meta.clone(),
        resources: Some(resources(&print.resources)),
        reserved: Some(resources(&config.reserved)),
        networks: Some((&print.networks).into()),
    }
}

/// The host's interface addresses, which servers check the advertised endpoint against.
fn interface_addresses() -> Vec<String> {
    let mut out: Vec<String> = nix::ifaddrs::getifaddrs()
        .map(|all| {
            all.filter_map(|i| {
                let a = i.address?;
                a.as_sockaddr_in()
                    .map(|v4| std::net::IpAddr::V4(v4.ip()))
                    .or_else(|| a.as_sockaddr_in6().map(|v6| std::net::IpAddr::V6(v6.ip())))
            })
            .map(|ip| ip.to_string())
            .collect()
        })
        .unwrap_or_default();
    out.sort();
    out.dedup();
    out
}

/// The readiness check behind every heartbeat: the process driver needs `/proc` (to tell
/// its processes from re-used pids) and a writable alloc dir with free space.
pub fn readiness(alloc_root: &Path) -> Readiness {
    if ProcessRecord::of(std::process::id() as i32).is_none() {
        return Readiness::NotYet;
    }
    let probe = alloc_root.join(".readiness-probe");
    let writable = std::fs::write(&probe, b"ok").is_ok() && std::fs::remove_file(&probe).is_ok();
    let has_space = nix::sys::statvfs::statvfs(alloc_root).is_ok_and(|v| v.blocks_available() > 0);
    if writable && has_space {
        Readiness::Ready
    } else {
        Readiness::NotYet
    }
}

/// The agent's `default_user`, resolved: it must exist, and only root may run tasks as
/// another user.
fn default_user(config: &AgentConfig) -> Result<Option<crate::users::TaskUser>, AgentError> {
    let Some(name) = config.default_user.as_deref() else {
        return Ok(None);
    };
    let invalid = |problem: String| AgentError::ConfigInvalid {
        field: "default_user",
        problem,
    };
    let user = crate::users::lookup(name).map_err(|e| invalid(e.to_string()))?;
    if !crate::users::agent_is_root() && user.uid != nix::unistd::geteuid().as_raw() {
        return Err(invalid(format!(
            "is {name:?}, but only an agent running as root can start tasks as another user"
        )));
    }
    Ok(Some(user))
}

/// What a task's templates read as the node's values, named as Nomad names them.
fn node_values(
    config: &AgentConfig,
    print: &Fingerprint,
    node_id: drover_core::types::NodeId,
) -> std::collections::BTreeMap<String, String> {
    let mut values = std::collections::BTreeMap::from([
        ("node.unique.id".to_string(), node_id.to_string()),
        (
            "node.unique.name".to_string(),
            config
                .name
                .clone()
                .unwrap_or_else(|| print.hostname.clone()),
        ),
        ("node.datacenter".to_string(), config.datacenter.clone()),
        ("node.class".to_string(), config.node_class.clone()),
        ("node.region".to_string(), "global".to_string()),
    ]);
    for (k, v) in &print.attributes {
        values.insert(format!("attr.{k}"), v.clone());
    }
    for (k, v) in &config.meta {
        values.insert(format!("meta.{k}"), v.clone());
    }
    values
}

impl Agent {
    /// Starts the agent: fingerprints the host, registers (or reuses the identity in the
    /// data dir), re-attaches to tasks a previous agent left running, and starts the
    /// heartbeat, the allocation watch and the status reports.
    ///
    /// A first start must reach a server to be given its identity, and fails if none
    /// answers within about half a minute; a restart with a stored identity does not wait
    /// for the servers.
    pub async fn start(config: AgentConfig) -> Result<Agent, AgentError> {
        config.validate()?;
        let data_dir = config.data_dir.clone();
        let layout = crate::layout::Layout::new(&data_dir);
        layout.prepare()?;
        let alloc_root = layout.allocs.clone();
        let default_user = default_user(&config)?;
        let mut print = fingerprint(&data_dir).map_err(|source| AgentError::DataDir {
            path: data_dir.clone(),
            source,
        })?;
        print.networks = crate::network::fingerprint(&config.network)?;
        let drivers = Arc::new(Drivers::fingerprint(&config, &layout.state.join("probe")).await);
        print.attributes.extend(drivers.attributes());
        let store = StateStore::open(&data_dir)?;
        let servers =
            Servers::with_tls(&config.servers, &config.tls)?.with_token(config.token.clone());

        let endpoint = crate::endpoint::Bound::bind(&config).await?;
        let (identity, registered) = match store.load_identity()? {
            Some(identity) => (identity, false),
            None => {
                let reg = registration(&config, &print, None, endpoint.advertise());
                let resp = (|| heartbeat::register(&servers, &reg))
                    .retry(
                        ExponentialBuilder::default()
                            .with_min_delay(Duration::from_millis(200))
                            .with_max_delay(Duration::from_secs(5))
                            .with_max_times(10)
                            .with_jitter(),
                    )
                    .when(crate::rpc::is_unreachable)
                    .await
                    .map_err(AgentError::Register)?;
                let node_id = resp.node_id.parse().map_err(|_| {
                    AgentError::Register(tonic::Status::internal(format!(
                        "servers answered with an invalid node id {:?}",
                        resp.node_id
                    )))
                })?;
                let identity = NodeIdentity {
                    node_id,
                    secret_id: resp.secret_id,
                };
                store.save_identity(&identity)?;
                (identity, true)
            }
        };
        servers.set_identity(&identity.node_id.to_string(), &identity.secret_id);
        let secret_id = identity.secret_id.clone();
        let servers = Arc::new(servers);
        let node_id = identity.node_id;
        tracing::info!(%node_id, registered, servers = ?config.servers, "agent starting");

        let link = Arc::new(Link::default());
        let reporter = Reporter::default();
        let ctx = Arc::new(RunnerContext {
            alloc_root: alloc_root.clone(),
            store: store.clone(),
            reporter: reporter.clone(),
            link: link.clone(),
            log_max_bytes: config.log_max_bytes,
            log_max_files: config.log_max_files,
            default_user,
            mhz_per_core: print
                .attributes
                .get("cpu.frequency")
                .and_then(|f| f.parse().ok())
                .unwrap_or(1000),
            drivers,
            artifacts: crate::runner::artifact::Fetcher::new(config.artifact.clone()),
            node_values: Arc::new(node_values(&config, &print, node_id)),
            checks_http: reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
            catalog: crate::checks::catalog::ServiceCatalog::new(servers.clone()),
        });
        let mut sup = Supervisor::new(ctx, servers.clone(), config.datacenter.clone());
        sup.restore(store.load_allocs());
        let supervisor = Arc::new(Mutex::new(sup));
        let endpoint_addr = endpoint.local_addr();
        let endpoint_tls = endpoint.serves_tls();
        tracing::info!(endpoint = endpoint.advertise(), "agent endpoint serving");

        let beat = Heartbeat {
            servers: servers.clone(),
            identity: identity.clone(),
            registration: registration(&config, &print, Some(&identity), endpoint.advertise()),
            registered,
            readiness: Box::new(move || readiness(&alloc_root)),
            link: link.clone(),
        };
        let loops = vec![
            tokio::spawn(beat.run()),
            tokio::spawn(reporter::run(
                reporter.clone(),
                servers.clone(),
                identity.clone(),
                link.clone(),
                config.report_interval,
            )),
            tokio::spawn(supervisor::watch(
                supervisor.clone(),
                servers.clone(),
                identity,
            )),
        ];
        let endpoint = endpoint.serve(crate::endpoint::Parts {
            gate: crate::endpoint::access::Gate {
                node_id,
                secret: secret_id,
                require_server_certificate: endpoint_tls,
            },
            supervisor: supervisor.clone(),
            alloc_root: data_dir.join("allocs"),
        });
        Ok(Agent {
            node_id,
            data_dir,
            link,
            reporter,
            supervisor,
            loops,
            _endpoint: endpoint,
            endpoint_addr,
        })
    }

    /// Where the agent's own endpoint (task logs, restarts) listens.
    pub fn endpoint_addr(&self) -> Option<std::net::SocketAddr> {
        self.endpoint_addr
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Whether the servers accepted the last heartbeat and consider the node ready.
    pub fn is_ready(&self) -> bool {
        *self.link.ready.borrow()
    }

    /// Heartbeats the servers accepted since start.
    pub fn heartbeats(&self) -> u64 {
        *self.link.beats.borrow()
    }

    /// Allocations whose tasks are still supervised here.
    pub async fn running_allocs(&self) -> usize {
        self.supervisor.lock().await.running()
    }

    /// Stops heartbeats, the watch and the reports; task processes keep running and are
    /// re-attached by the next start on the same data dir.
    pub async fn shutdown(self) {
        for l in &self.loops {
            l.abort();
        }
        self.supervisor.lock().await.detach_all();
        tracing::info!(node_id = %self.node_id, "agent stopped; tasks left running");
    }

    /// Stops every task (signal, then SIGKILL after its kill timeout), tries for a few
    /// seconds to report their final status, then shuts down.
    pub async fn shutdown_and_stop_tasks(self) {
        // No new allocations from the watch while stopping.
        if let Some(watch) = self.loops.last() {
            watch.abort();
        }
        self.supervisor.lock().await.stop_all().await;
        let until = tokio::time::Instant::now() + FLUSH_ON_SHUTDOWN;
        while self.reporter.pending() > 0 && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.shutdown().await;
    }
}

impl Drop for Agent {
    /// Like [`Agent::shutdown`], as far as possible without awaiting: if the supervisor is
    /// busy its runners end with the runtime instead; the processes survive either way.
    fn drop(&mut self) {
        for l in &self.loops {
            l.abort();
        }
        if let Ok(mut sup) = self.supervisor.try_lock() {
            sup.detach_all();
        }
    }
}
