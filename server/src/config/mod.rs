//! How to start a [`crate::Server`]: where it keeps its data, how many workers it runs, and
//! every duration and limit of the leader's duties. Production defaults come from Nomad and
//! Scoot (see BEHAVIOUR.md); [`ServerConfig::for_tests`] shrinks the durations so tests run
//! in seconds. [`file`] reads the HCL config file that `drover server -config` loads.

mod file;

pub use file::{ConfigError, ConfigFile};

use crate::raft::{Bootstrap, DEFAULT_MAX_MESSAGE_BYTES, JoinPlan, RaftConfig, ServerId};
use drover_core::SchedulerType;
use drover_core::blocked::BlockedConfig;
use drover_core::broker::BrokerConfig;
use drover_core::node_health::{HealthConfig, HeartbeatConfig};
use drover_core::validate::{Limits, NodeLimits};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// The number of CPUs of this machine: the default and the maximum worker count.
pub fn cpu_count() -> u32 {
    std::thread::available_parallelism()
        .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        .unwrap_or(1)
}

/// What the API listener admits at once (see `crate::api::request_limits`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    /// Requests being served at once, over every connection. Streams count until their
    /// first response, so watches held open by thousands of nodes do not use it up.
    pub max_in_flight: usize,
    /// Bytes of request messages being received at once, over every connection. At least
    /// `max_message_bytes`, so the largest message accepted can always be received.
    pub max_bytes_in_flight: usize,
    /// How long a request waits for its share before RESOURCE_EXHAUSTED.
    pub max_wait: Duration,
}

impl Default for RequestLimits {
    /// 1,024 requests and 128 MiB: eight of the largest messages, or thousands of the
    /// usual few-kilobyte ones, with memory for them bounded whatever the clients do.
    fn default() -> Self {
        Self {
            max_in_flight: 1024,
            max_bytes_in_flight: 128 << 20,
            max_wait: Duration::from_secs(5),
        }
    }
}

/// Bounds on each listener's connections (see `crate::serving::connections`), and the
/// HTTP/2 keepalive that closes connections whose peer is gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// Connections the API listener keeps open; `None`: three quarters of the process's
    /// file descriptor limit less 64 (the rest is for the Raft log, peers and agents).
    pub max_api: Option<usize>,
    /// Connections the Raft listener keeps open (servers only: a few).
    pub max_raft: usize,
    /// How long a connection may stay open before its first request.
    pub handshake_timeout: Duration,
    /// How long a connection may stay open with nothing in flight.
    pub idle_timeout: Duration,
    /// How often a server pings an HTTP/2 connection, and how long it waits for the answer.
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        Self {
            max_api: None,
            max_raft: 256,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(20),
        }
    }
}

/// Raft timings (see [`RaftConfig`]).
#[derive(Clone, Debug)]
pub struct RaftTimings {
    pub heartbeat_interval: Duration,
    pub election_timeout_min: Duration,
    pub election_timeout_max: Duration,
    /// Build a Raft snapshot every this many applied entries.
    pub snapshot_every: u64,
    /// Also build one once the log since the last snapshot holds as many bytes as it, and
    /// at least this many.
    pub snapshot_min_log_bytes: u64,
    /// Entries already in a snapshot that stay in the log, so a follower a little behind
    /// catches up from the log; one further behind is sent the snapshot.
    pub logs_kept_after_snapshot: u64,
    /// How long adding a server may wait for it to catch up before it becomes a voter.
    pub catch_up_timeout: Duration,
}

impl Default for RaftTimings {
    /// Sized for a small machine's disk and a 3 s failover. A leader heartbeats every
    /// 100 ms; an fsync on this class of disk takes 0.14 ms (p50) to 0.9 ms (p99), so even a
    /// leader busy writing misses none. A follower stands for election after 500–1000 ms
    /// without one, and openraft first lets the old leader's lease (the longest election
    /// timeout) run out: a dead leader is replaced 1.5–2 s after it went silent, under the
    /// 3 s that Nomad operators expect, while a loaded leader that is merely 4–5 beats
    /// late (CPU starvation on 2 cores) does not lose the lead.
    fn default() -> Self {
        Self {
            heartbeat_interval: Duration::from_millis(100),
            election_timeout_min: Duration::from_millis(500),
            election_timeout_max: Duration::from_millis(1000),
            snapshot_every: 10_000,
            snapshot_min_log_bytes: crate::raft::snapshot_cadence::MIN_LOG_BYTES,
            logs_kept_after_snapshot: 1_000,
            catch_up_timeout: Duration::from_secs(300),
        }
    }
}

/// The bootstrap of a server that joins through `addrs` (other servers' Raft addresses)
/// or, with `expect`, forms a cluster once that many servers found each other. One
/// expected server is a cluster of its own.
/// A listener address as flags and files give it: empty or `none` turns the listener off.
pub fn listen_addr(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty() && !text.eq_ignore_ascii_case("none")).then(|| text.to_string())
}

pub fn join_bootstrap(addrs: Vec<String>, expect: Option<usize>) -> Result<Bootstrap, ConfigError> {
    for addr in &addrs {
        let valid = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !valid {
            return Err(ConfigError::Value {
                key: "join",
                value: addr.clone(),
                reason: "not a raft address of the form host:port".into(),
            });
        }
    }
    match expect {
        Some(0) => Err(ConfigError::Value {
            key: "bootstrap_expect",
            value: "0".into(),
            reason: "must be at least 1".into(),
        }),
        Some(1) if addrs.is_empty() => Ok(Bootstrap::SingleNode),
        Some(n) if addrs.is_empty() => Err(ConfigError::Value {
            key: "bootstrap_expect",
            value: n.to_string(),
            reason: "needs join addresses to find the other servers".into(),
        }),
        expect => Ok(Bootstrap::Join(JoinPlan { addrs, expect })),
    }
}

/// The scheduler workers of this server.
#[derive(Clone, Debug)]
pub struct WorkerSettings {
    /// How many workers; `None`: one per CPU.
    pub count: Option<u32>,
    /// Scheduler types the workers dequeue (`_core` is always added).
    pub enabled: BTreeSet<SchedulerType>,
    /// How long one dequeue waits for an eval before the worker looks around again.
    pub dequeue_timeout: Duration,
    /// How long a worker waits for its local state to reach an eval's wait index before it
    /// nacks (it then waits up to ten times this for that index before dequeuing again).
    pub wait_index_limit: Duration,
    /// First back-off after an error; doubles per consecutive error.
    pub backoff_base: Duration,
    /// The longest back-off.
    pub backoff_limit: Duration,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            count: None,
            enabled: SchedulerType::ALL.into_iter().collect(),
            dequeue_timeout: Duration::from_millis(500),
            wait_index_limit: Duration::from_secs(5),
            backoff_base: Duration::from_millis(20),
            backoff_limit: Duration::from_secs(10),
        }
    }
}

pub use drover_core::leader::GcConfig;

/// Everything a server needs to start.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// This server's Raft id.
    pub server_id: ServerId,
    /// The name `StatusService/Members` shows for it; empty: `drover-<server_id>` (see
    /// [`ServerConfig::display_name`]), so servers started without names tell apart.
    pub name: String,
    /// The version this server tells its peers it runs: this build's. Upgrade tests set
    /// an older one to stand in for a server not yet upgraded (see [`crate::versions`]).
    pub advertised_version: String,
    /// Holds the Raft log and snapshots; created if missing.
    pub data_dir: PathBuf,
    /// Where the client API (every drover gRPC service) listens.
    pub bind_addr: String,
    /// Where the server-to-server listener (Raft) binds, and the address peers reach it
    /// at (recorded in the Raft membership); `None`: the API's host, the next port (port
    /// 0 stays 0). See [`ServerConfig::raft_bind_addr`].
    pub raft_addr: Option<String>,
    /// The key servers present to each other on the Raft listener. Required when the
    /// cluster has peers; a single server without one gets a random key nobody knows.
    pub cluster_secret: Option<String>,
    /// TLS on both listeners and on calls to the other servers; `None`: plaintext.
    pub tls: Option<crate::tls::ServerTls>,
    /// With ACLs on, every API call needs a token (see `crate::auth`); off by default, as
    /// in Nomad, so a dev cluster works with nothing configured.
    pub acl_enabled: bool,
    pub bootstrap: Bootstrap,
    pub raft: RaftTimings,
    pub workers: WorkerSettings,
    pub broker: BrokerConfig,
    pub blocked: BlockedConfig,
    pub heartbeat: HeartbeatConfig,
    pub health: HealthConfig,
    pub gc: GcConfig,
    /// Bounds on submitted jobs.
    pub limits: Limits,
    /// Bounds on what a node sends at registration and in heartbeats.
    pub node_limits: NodeLimits,
    /// Most entries one page of a list RPC holds (and what a request without `page_size`
    /// gets). With the node and job field limits, a page stays well below
    /// `max_message_bytes`, so no list outgrows the message limit however large the cluster.
    pub max_list_page: usize,
    /// Most jobs the cluster holds; a register of a new job beyond it is refused.
    pub max_jobs: usize,
    /// Most evals the broker may hold before job registration answers "resource exhausted".
    pub max_outstanding_evals: usize,
    /// How long the plan applier waits for state to reach a plan's snapshot index.
    pub plan_wait_limit: Duration,
    /// The largest gRPC message, in bytes, either way (the Raft transport included); a
    /// larger request is refused before it reaches a handler.
    pub max_message_bytes: usize,
    /// Bounds on what the API listener takes in at once, across all connections.
    pub requests: RequestLimits,
    /// Bounds on each listener's open connections.
    pub connections: ConnectionSettings,
    /// How fast one join token may register new nodes.
    pub node_register_rate: crate::api::RegisterRate,
    /// Events retained for `EventService/Subscribe` to replay; a subscriber asking for an
    /// older index, or falling further behind, is told to resubscribe.
    pub event_buffer: usize,
    /// Where to serve Prometheus `/metrics` over HTTP; `None`: not served. The same
    /// address as `http_addr` serves both on one listener.
    pub metrics_addr: Option<String>,
    /// Where to serve Nomad's HTTP API (`/v1`, see `drover-http`); `None`: not served.
    pub http_addr: Option<String>,
}

impl ServerConfig {
    /// The name this server goes by: the configured one, else `drover-<server_id>`.
    pub fn display_name(&self) -> String {
        if self.name.is_empty() {
            format!("drover-{}", self.server_id)
        } else {
            self.name.clone()
        }
    }

    /// A single server on `data_dir` with production defaults (metrics off: `drover server`
    /// turns them on).
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            server_id: 1,
            name: String::new(),
            advertised_version: env!("CARGO_PKG_VERSION").into(),
            data_dir: data_dir.into(),
            bind_addr: "127.0.0.1:4647".into(),
            raft_addr: None,
            cluster_secret: None,
            tls: None,
            acl_enabled: false,
            bootstrap: Bootstrap::SingleNode,
            raft: RaftTimings::default(),
            workers: WorkerSettings::default(),
            broker: BrokerConfig::default(),
            blocked: BlockedConfig::default(),
            heartbeat: HeartbeatConfig::default(),
            health: HealthConfig::default(),
            gc: GcConfig::default(),
            limits: Limits::default(),
            node_limits: NodeLimits::default(),
            max_list_page: 500,
            max_jobs: 100_000,
            max_outstanding_evals: 100_000,
            plan_wait_limit: Duration::from_secs(5),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            requests: RequestLimits::default(),
            connections: ConnectionSettings::default(),
            node_register_rate: crate::api::RegisterRate::default(),
            event_buffer: crate::events::DEFAULT_EVENT_BUFFER,
            metrics_addr: None,
            http_addr: None,
        }
    }

    /// Like [`ServerConfig::new`] with every duration shrunk so tests finish in seconds
    /// and the Raft listener on a free loopback port: fast elections, sub-second heartbeat TTLs and readiness checks, short nack delays.
    pub fn for_tests(data_dir: impl Into<PathBuf>) -> Self {
        let mut c = Self::new(data_dir);
        // Many test servers run at once: their Raft listeners take free ports.
        c.raft_addr = Some("127.0.0.1:0".into());
        c.raft.heartbeat_interval = Duration::from_millis(50);
        c.raft.election_timeout_min = Duration::from_millis(200);
        c.raft.election_timeout_max = Duration::from_millis(400);
        c.workers.count = Some(2.min(cpu_count()));
        c.workers.dequeue_timeout = Duration::from_millis(200);
        c.workers.wait_index_limit = Duration::from_millis(500);
        c.broker.nack_timeout = Duration::from_secs(5);
        c.broker.initial_nack_delay = Duration::from_millis(50);
        c.broker.subsequent_nack_delay = Duration::from_millis(100);
        c.broker.cancel_sweep_interval = Duration::from_millis(200);
        c.broker.follow_up_base_wait = Duration::from_millis(500);
        c.broker.follow_up_max_jitter = Duration::from_millis(100);
        c.blocked.failed_sweep_interval = Duration::from_secs(1);
        c.blocked.prune_interval = Duration::from_secs(5);
        c.heartbeat.min_ttl = Duration::from_secs(2);
        c.heartbeat.grace = Duration::from_millis(500);
        c.heartbeat.failover_ttl = Duration::from_secs(5);
        c.health.readiness_backoff = Duration::from_millis(100);
        c.limits.min_reschedule_delay = Duration::from_millis(100);
        c.gc.interval = Duration::from_secs(1);
        c
    }

    /// The worker count in force: the configured one, or one per CPU.
    pub fn worker_count(&self) -> u32 {
        self.workers.count.unwrap_or_else(cpu_count)
    }

    /// Whether `/metrics` is served on the HTTP API's listener: both name the same fixed
    /// address (port 0 picks two different ports, so it never counts as the same).
    pub fn metrics_on_http(&self) -> bool {
        matches!((&self.metrics_addr, &self.http_addr),
            (Some(m), Some(h)) if m == h && !m.ends_with(":0"))
    }

    /// Where the Raft listener binds: `raft_addr`, or the API's host with the next port
    /// (`127.0.0.1:4647` gives `127.0.0.1:4648`; port 0 stays 0, a free port).
    pub fn raft_bind_addr(&self) -> String {
        if let Some(addr) = &self.raft_addr {
            return addr.clone();
        }
        match self.bind_addr.rsplit_once(':') {
            Some((host, port)) => match port.parse::<u16>() {
                Ok(0) => format!("{host}:0"),
                Ok(p) => format!("{host}:{}", p.saturating_add(1)),
                Err(_) => self.bind_addr.clone(),
            },
            None => self.bind_addr.clone(),
        }
    }

    /// The cluster secret in force: the configured one (checked), or for a server
    /// without peers a random one. A cluster with peers and no secret is refused.
    pub fn cluster_secret(&self) -> Result<crate::raft::ClusterSecret, String> {
        match (&self.cluster_secret, &self.bootstrap) {
            (Some(s), _) => crate::raft::ClusterSecret::new(s).map_err(|e| e.to_string()),
            (None, Bootstrap::Cluster(peers)) if peers.len() > 1 => Err(
                "cluster_secret is required when the cluster has peers: every server must present it to the others"
                    .to_string(),
            ),
            (None, Bootstrap::Join(_)) => Err(
                "cluster_secret is required to join a cluster: the other servers refuse calls without it"
                    .to_string(),
            ),
            (None, _) => Ok(crate::raft::ClusterSecret::random()),
        }
    }

    /// Raft's settings; `advertise` is the address peers reach this server's Raft at.
    pub(crate) fn raft_config(&self, advertise: &str) -> RaftConfig {
        let mut c = RaftConfig::new(self.server_id, &self.data_dir, advertise);
        c.heartbeat_interval = self.raft.heartbeat_interval;
        c.election_timeout_min = self.raft.election_timeout_min;
        c.election_timeout_max = self.raft.election_timeout_max;
        c.snapshot_every = self.raft.snapshot_every;
        c.snapshot_min_log_bytes = self.raft.snapshot_min_log_bytes;
        c.logs_kept_after_snapshot = self.raft.logs_kept_after_snapshot;
        c.bootstrap = self.bootstrap.clone();
        c
    }
}
