//! The server's HCL config file. Every setting is optional and overlays the production
//! defaults of [`ServerConfig::new`]; the CLI then overlays its flags on the result.
//! Unknown keys are errors naming the key, so a typo never silently keeps a default.
//!
//! ```hcl
//! data_dir     = "/var/lib/drover"
//! bind_addr    = "0.0.0.0:4647"
//! raft_addr    = "10.0.0.5:4648"          # server-to-server; default: the next port
//! cluster_secret = "..."                  # shared by every server; required with peers
//! metrics_addr = "127.0.0.1:9464"
//! tls       { ca_file = "ca.pem"  cert_file = "server.pem"  key_file = "server-key.pem"
//!             verify_incoming = true  verify_server_hostname = true }
//! acl       { enabled = true }                 # every API call needs a token
//! raft      { heartbeat_interval = "100ms"  election_timeout_min = "500ms"
//!             election_timeout_max = "1s"  snapshot_every = 10000
//!             logs_kept_after_snapshot = 1000  catch_up_timeout = "5m"
//!             snapshot_min_log_bytes = 67108864 }  # also snapshot once the log outgrows it
//! join             = ["10.0.0.6:4648", "10.0.0.7:4648"]   # other servers' raft addresses
//! bootstrap_expect = 3                    # form a cluster once 3 servers found each other
//! workers   { count = 2  enabled = ["service", "batch"]  wait_index_limit = "5s" }
//! heartbeat { min_ttl = "5s"  cpu_share = 0.1  grace = "5s"  failover_ttl = "5m" }
//!                                    # or max_per_second = 50: Nomad's fixed cap
//! health    { lost_grace = "1m"  flaky_threshold = 3  flaky_cool_down = "15m" }
//! limits    { max_message_bytes = 16777216  max_requests_in_flight = 1024
//!             max_request_bytes_in_flight = 134217728  max_request_wait = "5s"  max_jobs = 100000  max_outstanding_evals = 100000
//!             max_node_name_bytes = 256  max_node_attributes = 512  max_node_meta = 256
//!             max_node_addresses = 64
//!             max_node_entry_bytes = 1024  max_snapshot_id_bytes = 256  max_list_page = 500
//!             max_node_cpu_mhz = 10000000  max_node_memory_mb = 67108864
//!             max_node_disk_mb = 1099511627776
//!             max_connections = 4096  connection_handshake_timeout = "10s"
//!             connection_idle_timeout = "5m"      # per listener; default from the fd limit
//!             node_register_rate = 20  node_register_burst = 100 }  # per join token
//! ```
//!
//! Durations are humantime strings ("500ms", "10s", "1m 30s", "2h").

use super::ServerConfig;
use drover_core::SchedulerType;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a config file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Bad syntax, an unknown key, or a value of the wrong type (hcl's message names it).
    #[error("invalid server config{}: {message}", in_file(.path))]
    Parse {
        path: Option<PathBuf>,
        message: String,
    },
    #[error("invalid server config: {key} = {value:?}: {reason}")]
    Value {
        key: &'static str,
        value: String,
        reason: String,
    },
}

fn in_file(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| format!(" in {}", p.display()))
        .unwrap_or_default()
}

/// The file's contents, before they are laid over a [`ServerConfig`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub server_id: Option<u64>,
    pub name: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub bind_addr: Option<String>,
    pub raft_addr: Option<String>,
    pub cluster_secret: Option<String>,
    pub metrics_addr: Option<String>,
    /// Nomad's HTTP API; `""` or `"none"` turns it off.
    pub http_addr: Option<String>,
    pub workers: Option<WorkersBlock>,
    pub heartbeat: Option<HeartbeatBlock>,
    pub health: Option<HealthBlock>,
    pub limits: Option<LimitsBlock>,
    pub gc: Option<GcBlock>,
    pub raft: Option<RaftBlock>,
    pub tls: Option<TlsBlock>,
    pub acl: Option<AclBlock>,
    /// Raft addresses of other servers to join through.
    pub join: Option<Vec<String>>,
    pub bootstrap_expect: Option<usize>,
}

/// `acl { enabled = true }`: every API call needs a token.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclBlock {
    pub enabled: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkersBlock {
    pub count: Option<u32>,
    /// Scheduler type names (`service`, `batch`, `system`, `sysbatch`).
    pub enabled: Option<Vec<String>>,
    #[serde(default, with = "humantime_serde")]
    pub wait_index_limit: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub dequeue_timeout: Option<Duration>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBlock {
    #[serde(default, with = "humantime_serde")]
    pub min_ttl: Option<Duration>,
    pub max_per_second: Option<f64>,
    pub cpu_share: Option<f64>,
    #[serde(default, with = "humantime_serde")]
    pub grace: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub failover_ttl: Option<Duration>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthBlock {
    #[serde(default, with = "humantime_serde")]
    pub readiness_backoff: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub lost_grace: Option<Duration>,
    pub flaky_threshold: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    pub flaky_window: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub flaky_cool_down: Option<Duration>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsBlock {
    pub max_message_bytes: Option<usize>,
    pub max_requests_in_flight: Option<usize>,
    pub max_request_bytes_in_flight: Option<usize>,
    #[serde(default, with = "humantime_serde")]
    pub max_request_wait: Option<Duration>,
    pub max_jobs: Option<usize>,
    pub max_groups_per_job: Option<usize>,
    pub max_count: Option<u32>,
    pub max_outstanding_evals: Option<usize>,
    pub event_buffer: Option<usize>,
    pub max_node_name_bytes: Option<usize>,
    pub max_node_attributes: Option<usize>,
    pub max_node_meta: Option<usize>,
    pub max_node_addresses: Option<usize>,
    pub max_node_entry_bytes: Option<usize>,
    pub max_snapshot_id_bytes: Option<usize>,
    pub max_node_cpu_mhz: Option<u64>,
    pub max_node_memory_mb: Option<u64>,
    pub max_node_disk_mb: Option<u64>,
    pub max_list_page: Option<usize>,
    pub max_connections: Option<usize>,
    pub node_register_rate: Option<f64>,
    pub node_register_burst: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    pub connection_handshake_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub connection_idle_timeout: Option<Duration>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GcBlock {
    #[serde(default, with = "humantime_serde")]
    pub interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub threshold: Option<Duration>,
}

/// `tls { ca_file cert_file key_file verify_incoming verify_server_hostname }`: all three
/// files are required; both checks default to on.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsBlock {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub verify_incoming: Option<bool>,
    pub verify_server_hostname: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RaftBlock {
    pub snapshot_every: Option<u64>,
    pub snapshot_min_log_bytes: Option<u64>,
    #[serde(default, with = "humantime_serde")]
    pub heartbeat_interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub election_timeout_min: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub election_timeout_max: Option<Duration>,
    pub logs_kept_after_snapshot: Option<u64>,
    #[serde(default, with = "humantime_serde")]
    pub catch_up_timeout: Option<Duration>,
}

fn positive(key: &'static str, value: usize) -> Result<usize, ConfigError> {
    if value == 0 {
        return Err(ConfigError::Value {
            key,
            value: value.to_string(),
            reason: "must be at least 1".into(),
        });
    }
    Ok(value)
}

impl ConfigFile {
    /// Parses HCL text; `path` only names the file in errors.
    pub fn parse(text: &str, path: Option<&Path>) -> Result<Self, ConfigError> {
        hcl::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.map(Path::to_path_buf),
            message: e.to_string(),
        })
    }

    /// Lays every setting the file gives over `config`.
    pub fn apply_to(&self, config: &mut ServerConfig) -> Result<(), ConfigError> {
        fn set<T: Clone>(target: &mut T, value: &Option<T>) {
            if let Some(v) = value {
                *target = v.clone();
            }
        }
        set(&mut config.server_id, &self.server_id);
        if config.server_id == 0 {
            return Err(ConfigError::Value {
                key: "server_id",
                value: "0".into(),
                reason: "must be at least 1".into(),
            });
        }
        if self.join.is_some() || self.bootstrap_expect.is_some() {
            config.bootstrap = super::join_bootstrap(
                self.join.clone().unwrap_or_default(),
                self.bootstrap_expect,
            )?;
        }
        set(&mut config.name, &self.name);
        set(&mut config.data_dir, &self.data_dir);
        set(&mut config.bind_addr, &self.bind_addr);
        if let Some(addr) = &self.raft_addr {
            config.raft_addr = Some(addr.clone());
        }
        if let Some(secret) = &self.cluster_secret {
            config.cluster_secret = Some(secret.clone());
        }
        if let Some(addr) = &self.metrics_addr {
            config.metrics_addr = Some(addr.clone());
        }
        if let Some(addr) = &self.http_addr {
            config.http_addr = super::listen_addr(addr);
        }
        if let Some(w) = &self.workers {
            if w.count.is_some() {
                config.workers.count = w.count;
            }
            if let Some(names) = &w.enabled {
                let mut enabled = std::collections::BTreeSet::new();
                for name in names {
                    let t = SchedulerType::parse(name).ok_or_else(|| ConfigError::Value {
                        key: "workers.enabled",
                        value: name.clone(),
                        reason: "not a scheduler type (service, batch, system, sysbatch)".into(),
                    })?;
                    enabled.insert(t);
                }
                config.workers.enabled = enabled;
            }
            set(&mut config.workers.wait_index_limit, &w.wait_index_limit);
            set(&mut config.workers.dequeue_timeout, &w.dequeue_timeout);
        }
        if let Some(h) = &self.heartbeat {
            set(&mut config.heartbeat.min_ttl, &h.min_ttl);
            if h.max_per_second.is_some() {
                config.heartbeat.max_heartbeats_per_second = h.max_per_second;
            }
            set(&mut config.heartbeat.cpu_share, &h.cpu_share);
            set(&mut config.heartbeat.grace, &h.grace);
            set(&mut config.heartbeat.failover_ttl, &h.failover_ttl);
        }
        if let Some(h) = &self.health {
            set(&mut config.health.readiness_backoff, &h.readiness_backoff);
            set(&mut config.health.lost_grace, &h.lost_grace);
            set(&mut config.health.flaky_threshold, &h.flaky_threshold);
            set(&mut config.health.flaky_window, &h.flaky_window);
            set(&mut config.health.flaky_cool_down, &h.flaky_cool_down);
        }
        if let Some(l) = &self.limits {
            if let Some(v) = l.max_message_bytes {
                config.max_message_bytes = positive("limits.max_message_bytes", v)?;
            }
            if let Some(v) = l.max_requests_in_flight {
                config.requests.max_in_flight = positive("limits.max_requests_in_flight", v)?;
            }
            if let Some(v) = l.max_request_bytes_in_flight {
                config.requests.max_bytes_in_flight =
                    positive("limits.max_request_bytes_in_flight", v)?;
            }
            set(&mut config.requests.max_wait, &l.max_request_wait);
            if let Some(v) = l.node_register_rate {
                if !(v.is_finite() && v > 0.0) {
                    return Err(ConfigError::Value {
                        key: "limits.node_register_rate",
                        value: v.to_string(),
                        reason: "must be a positive number of registrations per second".into(),
                    });
                }
                config.node_register_rate.per_second = v;
            }
            if let Some(v) = l.node_register_burst {
                config.node_register_rate.burst =
                    u32::try_from(positive("limits.node_register_burst", v as usize)?)
                        .unwrap_or(u32::MAX);
            }
            if let Some(v) = l.max_connections {
                config.connections.max_api = Some(positive("limits.max_connections", v)?);
            }
            set(
                &mut config.connections.handshake_timeout,
                &l.connection_handshake_timeout,
            );
            set(
                &mut config.connections.idle_timeout,
                &l.connection_idle_timeout,
            );
            if let Some(v) = l.max_jobs {
                config.max_jobs = positive("limits.max_jobs", v)?;
            }
            if let Some(v) = l.max_groups_per_job {
                config.limits.max_groups = positive("limits.max_groups_per_job", v)?;
            }
            set(&mut config.limits.max_count, &l.max_count);
            if let Some(v) = l.max_outstanding_evals {
                config.max_outstanding_evals = positive("limits.max_outstanding_evals", v)?;
            }
            if let Some(v) = l.event_buffer {
                config.event_buffer = positive("limits.event_buffer", v)?;
            }
            let n = &mut config.node_limits;
            set(&mut n.max_name_bytes, &l.max_node_name_bytes);
            set(&mut n.max_attributes, &l.max_node_attributes);
            set(&mut n.max_meta, &l.max_node_meta);
            set(&mut n.max_addresses, &l.max_node_addresses);
            set(&mut n.max_entry_bytes, &l.max_node_entry_bytes);
            set(&mut n.max_snapshot_id_bytes, &l.max_snapshot_id_bytes);
            set(&mut n.max_cpu_mhz, &l.max_node_cpu_mhz);
            set(&mut n.max_memory_mb, &l.max_node_memory_mb);
            set(&mut n.max_disk_mb, &l.max_node_disk_mb);
            if let Some(v) = l.max_list_page {
                config.max_list_page = positive("limits.max_list_page", v)?;
            }
        }
        if let Some(g) = &self.gc {
            set(&mut config.gc.interval, &g.interval);
            set(&mut config.gc.threshold, &g.threshold);
        }
        if let Some(r) = &self.raft
            && let Some(v) = r.snapshot_every
        {
            if v == 0 {
                return Err(ConfigError::Value {
                    key: "raft.snapshot_every",
                    value: v.to_string(),
                    reason: "must be at least 1".into(),
                });
            }
            config.raft.snapshot_every = v;
        }
        if let Some(r) = &self.raft {
            set(
                &mut config.raft.logs_kept_after_snapshot,
                &r.logs_kept_after_snapshot,
            );
            set(&mut config.raft.catch_up_timeout, &r.catch_up_timeout);
            set(
                &mut config.raft.snapshot_min_log_bytes,
                &r.snapshot_min_log_bytes,
            );
            set(&mut config.raft.heartbeat_interval, &r.heartbeat_interval);
            set(
                &mut config.raft.election_timeout_min,
                &r.election_timeout_min,
            );
            set(
                &mut config.raft.election_timeout_max,
                &r.election_timeout_max,
            );
            let t = &config.raft;
            if t.election_timeout_min >= t.election_timeout_max {
                return Err(ConfigError::Value {
                    key: "raft.election_timeout_min",
                    value: format!("{:?}", t.election_timeout_min),
                    reason: format!(
                        "must be shorter than raft.election_timeout_max ({:?})",
                        t.election_timeout_max
                    ),
                });
            }
            if t.heartbeat_interval.is_zero() || t.heartbeat_interval * 3 > t.election_timeout_min {
                return Err(ConfigError::Value {
                    key: "raft.heartbeat_interval",
                    value: format!("{:?}", t.heartbeat_interval),
                    reason: format!(
                        "must be above zero and at most a third of raft.election_timeout_min ({:?}), or followers start elections against a live leader",
                        t.election_timeout_min
                    ),
                });
            }
        }
        if let Some(enabled) = self.acl.as_ref().and_then(|a| a.enabled) {
            config.acl_enabled = enabled;
        }
        if let Some(t) = &self.tls {
            let file = |key: &'static str, v: &Option<PathBuf>| {
                v.clone().ok_or(ConfigError::Value {
                    key,
                    value: String::new(),
                    reason: "is required in a tls block".into(),
                })
            };
            config.tls = Some(crate::tls::ServerTls {
                ca_file: file("tls.ca_file", &t.ca_file)?,
                cert_file: file("tls.cert_file", &t.cert_file)?,
                key_file: file("tls.key_file", &t.key_file)?,
                verify_incoming: t.verify_incoming.unwrap_or(true),
                verify_server_hostname: t.verify_server_hostname.unwrap_or(true),
            });
        }
        if config.requests.max_bytes_in_flight < config.max_message_bytes {
            return Err(ConfigError::Value {
                key: "limits.max_request_bytes_in_flight",
                value: config.requests.max_bytes_in_flight.to_string(),
                reason: format!(
                    "must be at least limits.max_message_bytes ({}), or the largest message could never be received",
                    config.max_message_bytes
                ),
            });
        }
        Ok(())
    }
}

/// Where a server keeps its data when neither the file nor a flag says.
pub const DEFAULT_DATA_DIR: &str = "drover-data";

impl ServerConfig {
    /// Production defaults overlaid with the HCL text `text` (data dir
    /// [`DEFAULT_DATA_DIR`] unless it names one).
    pub fn from_hcl_str(text: &str) -> Result<ServerConfig, ConfigError> {
        let mut config = ServerConfig::new(DEFAULT_DATA_DIR);
        ConfigFile::parse(text, None)?.apply_to(&mut config)?;
        Ok(config)
    }

    /// [`ServerConfig::from_hcl_str`] on the contents of the file at `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<ServerConfig, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = ServerConfig::new(DEFAULT_DATA_DIR);
        ConfigFile::parse(&text, Some(path))?.apply_to(&mut config)?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_block_overlays_the_defaults() {
        let text = r#"
            server_id    = 3
            name         = "east-3"
            data_dir     = "/var/lib/drover"
            bind_addr    = "0.0.0.0:4647"
            metrics_addr = "127.0.0.1:9464"
            workers {
              count            = 1
              enabled          = ["service", "batch"]
              wait_index_limit = "2s"
            }
            heartbeat {
              min_ttl        = "20s"
              max_per_second = 100
              cpu_share      = 0.2
              grace          = "15s"
              failover_ttl   = "1m"
            }
            health {
              lost_grace      = "2m"
              flaky_threshold = 5
              flaky_cool_down = "30m"
            }
            limits {
              max_message_bytes     = 1048576
              max_jobs              = 10
              max_groups_per_job    = 4
              max_outstanding_evals = 50
              event_buffer          = 1000
              max_node_name_bytes   = 64
              max_node_attributes   = 32
              max_snapshot_id_bytes = 80
              max_node_cpu_mhz      = 500000
              max_list_page         = 100
            }
            gc {
              threshold = "4h"
            }
            raft {
              snapshot_every         = 500
              snapshot_min_log_bytes = 1048576
            }
        "#;
        let c = ServerConfig::from_hcl_str(text).expect("config parses");
        assert_eq!(c.raft.snapshot_min_log_bytes, 1 << 20);
        assert_eq!(c.server_id, 3);
        assert_eq!(c.name, "east-3");
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/drover"));
        assert_eq!(c.bind_addr, "0.0.0.0:4647");
        assert_eq!(c.metrics_addr.as_deref(), Some("127.0.0.1:9464"));
        assert_eq!(c.workers.count, Some(1));
        assert_eq!(
            c.workers.enabled,
            [SchedulerType::Service, SchedulerType::Batch]
                .into_iter()
                .collect()
        );
        assert_eq!(c.workers.wait_index_limit, Duration::from_secs(2));
        assert_eq!(c.heartbeat.min_ttl, Duration::from_secs(20));
        assert_eq!(c.heartbeat.max_heartbeats_per_second, Some(100.0));
        assert_eq!(c.heartbeat.cpu_share, 0.2);
        assert_eq!(c.heartbeat.grace, Duration::from_secs(15));
        assert_eq!(c.heartbeat.failover_ttl, Duration::from_secs(60));
        assert_eq!(c.health.lost_grace, Duration::from_secs(120));
        assert_eq!(c.health.flaky_threshold, 5);
        assert_eq!(c.health.flaky_cool_down, Duration::from_secs(1800));
        assert_eq!(c.max_message_bytes, 1 << 20);
        assert_eq!(c.max_jobs, 10);
        assert_eq!(c.limits.max_groups, 4);
        assert_eq!(c.max_outstanding_evals, 50);
        assert_eq!(c.event_buffer, 1000);
        assert_eq!(c.node_limits.max_name_bytes, 64);
        assert_eq!(c.node_limits.max_attributes, 32);
        assert_eq!(c.node_limits.max_snapshot_id_bytes, 80);
        assert_eq!(c.node_limits.max_cpu_mhz, 500_000);
        assert_eq!(c.max_list_page, 100);
        assert_eq!(c.gc.threshold, Duration::from_secs(4 * 3600));
        assert_eq!(c.raft.snapshot_every, 500);
        // Untouched settings keep their defaults.
        let d = ServerConfig::new(DEFAULT_DATA_DIR);
        assert_eq!(c.gc.interval, d.gc.interval);
        assert_eq!(c.health.readiness_backoff, d.health.readiness_backoff);
    }

    #[test]
    fn an_empty_file_is_the_defaults() {
        let c = ServerConfig::from_hcl_str("").expect("empty config parses");
        let d = ServerConfig::new(DEFAULT_DATA_DIR);
        assert_eq!(c.data_dir, d.data_dir);
        assert_eq!(c.bind_addr, d.bind_addr);
        assert_eq!(c.metrics_addr, None);
    }

    #[test]
    fn bad_files_are_refused_naming_the_key_or_value() {
        // (file, text the error must contain)
        let cases: Vec<(&str, &str)> = vec![
            ("bind_adr = \"x\"", "bind_adr"),
            ("workers {\n  cuont = 2\n}", "cuont"),
            ("limits {\n  max_job = 2\n}", "max_job"),
            ("heartbeat {\n  grace = \"ten seconds\"\n}", "ten seconds"),
            ("workers {\n  enabled = [\"servce\"]\n}", "servce"),
            ("limits {\n  max_jobs = 0\n}", "limits.max_jobs"),
            ("server_id = \"one\"", "one"),
            ("data_dir = ", "invalid server config"),
            (
                "raft {\n  election_timeout_min = \"2s\"\n}",
                "raft.election_timeout_min",
            ),
            (
                "raft {\n  heartbeat_interval = \"400ms\"\n}",
                "raft.heartbeat_interval",
            ),
            (
                "limits {\n  max_request_bytes_in_flight = 1024\n}",
                "limits.max_request_bytes_in_flight",
            ),
        ];
        for (text, needle) in cases {
            let err = ServerConfig::from_hcl_str(text)
                .expect_err(&format!("config {text:?} should be refused"))
                .to_string();
            assert!(
                err.contains(needle),
                "error for {text:?} should mention {needle:?}: {err}"
            );
        }
    }

    #[test]
    fn from_file_reads_and_names_a_missing_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("server.hcl");
        std::fs::write(&path, "bind_addr = \"127.0.0.1:0\"\n").expect("write config");
        let c = ServerConfig::from_file(&path).expect("file parses");
        assert_eq!(c.bind_addr, "127.0.0.1:0");
        let missing = dir.path().join("nope.hcl");
        let err = ServerConfig::from_file(&missing)
            .expect_err("missing file refused")
            .to_string();
        assert!(err.contains("nope.hcl"), "{err}");
    }
}
