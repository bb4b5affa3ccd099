//! How an agent is configured: in code (`AgentConfig { .. }`), from flags (the CLI fills the
//! struct), or from an HCL file in Nomad's agent-config shape:
//!
//! ```hcl
//! data_dir   = "/var/lib/drover"
//! datacenter = "dc1"
//! name       = "worker-1"
//! client {
//!   servers    = ["10.0.0.1:4647", "10.0.0.2:4647"]
//!   node_class = "batch"
//!   token      = "..."                  # join credential when the servers have ACLs on
//!   endpoint_addr      = "0.0.0.0:4648"   # the agent's own endpoint (task logs, restarts)
//!   endpoint_advertise = "10.0.0.5:4648"  # where servers reach it (default: the bound address)
//!   default_user       = "nobody"         # tasks without a `user` run as this one
//!   chroot_env         = ["/bin", "/etc", "/lib", "/lib64", "/sbin", "/usr"]  # exec's root
//!   cgroup_parent      = "drover"         # task cgroups go under this one
//!   task_pids_limit    = 2048             # processes one task may hold (pids.max)
//!   meta { rack = "r1" }
//!   reserved {
//!     cpu            = 500
//!     memory         = 512
//!     disk           = 1024
//!     reserved_ports = "22,80,8000-8100"  # never given to allocations
//!   }
//!   network_interface = "eth0"            # whose address ports are on (default: the default route's)
//!   min_dynamic_port  = 20000             # dynamic ports are picked in this range
//!   max_dynamic_port  = 32000
//!   host_network "public" {               # ports with host_network = "public" land here
//!     cidr = "0.0.0.0/0"                  # the first address inside it, or interface = "eth1"
//!   }
//! }
//! raw_exec {
//!   enabled    = true                     # off unless set (drover dev turns it on)
//!   no_cgroups = false                    # true: raw_exec tasks run without limits
//! }
//! docker {
//!   enabled  = true                       # on by default; healthy only if the engine answers
//!   endpoint = "unix:///var/run/docker.sock"
//! }
//! artifact {
//!   max_size_mb = 1024                    # an artifact (or what it unpacks to) past this fails
//!   file_roots  = ["/srv/artifacts"]      # host dirs file sources may read besides the alloc
//! }
//! log {
//!   max_file_size_mb = 10
//!   max_files        = 3
//! }
//! tls {
//!   ca_file   = "drover-agent-ca.pem"        # talk TLS, trust servers this CA signed
//!   cert_file = "global-client-drover.pem"   # for servers that verify incoming
//!   key_file  = "global-client-drover-key.pem"
//!   verify_server_hostname = true            # check for server.global.drover
//! }
//! ```
//!
//! Unknown keys are refused (naming the key) rather than ignored, so a typo never silently
//! leaves a setting at its default.

use crate::AgentError;
use drover_core::types::Resources;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything an agent needs to start.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentConfig {
    /// Server API addresses (`host:port` or `http://host:port`); the agent fails over among
    /// them in order.
    pub servers: Vec<String>,
    /// Holds the node identity, allocation state, allocation dirs and task logs.
    pub data_dir: PathBuf,
    /// The node's name; `None`: the host name.
    pub name: Option<String>,
    pub datacenter: String,
    pub node_class: String,
    pub meta: BTreeMap<String, String>,
    /// Held back from the fingerprinted capacity for the OS and the agent.
    pub reserved: Resources,
    /// A task's stdout or stderr file is rotated once it grows past this.
    pub log_max_bytes: u64,
    /// Rotated log files kept per stream, besides the live one.
    pub log_max_files: u32,
    /// Pending allocation updates are sent at most this long after they happen.
    pub report_interval: Duration,
    /// TLS towards the servers; plaintext without a CA.
    pub tls: drover_proto::tls::TlsFiles,
    /// The join credential: an ACL token that may register nodes (`agent { policy =
    /// "write" }`), needed when the servers have ACLs on (or a client-role certificate).
    pub token: Option<String>,
    /// Where the agent's own endpoint (AgentService: task logs, restarts) listens; port 0
    /// picks a free one.
    pub endpoint_addr: String,
    /// The address servers reach the endpoint at; `None`: the bound address, which must
    /// then not be unspecified (`0.0.0.0`).
    pub endpoint_advertise: Option<String>,
    /// Who tasks without a `user` of their own run as; `None`: the agent's user. Only an
    /// agent running as root can start tasks as another user.
    pub default_user: Option<String>,
    /// Whether `raw_exec` runs tasks at all (Nomad's default: no), and in cgroups.
    pub raw_exec: RawExecConfig,
    /// The Docker Engine the `docker` driver uses.
    pub docker: DockerConfig,
    /// Limits on what `artifact` blocks fetch.
    pub artifact: ArtifactConfig,
    /// Host directories bound read-only into every `exec` task's root.
    pub chroot_env: Vec<PathBuf>,
    /// The cgroup task cgroups are made under (see [`crate::cgroups::detect::choose`]).
    pub cgroup_parent: String,
    /// `pids.max` of every task: what a fork bomb runs into.
    pub task_pids_limit: u64,
    /// Where ports are offered: the interface, reserved ports, dynamic range, host networks.
    pub network: crate::network::NetworkConfig,
    /// The binary that runs the task shim; `None`: the agent's own (`/proc/self/exe`),
    /// which must call [`crate::isolation::dispatch`] first thing in `main`. Tests that
    /// run an agent inside a test binary point it at a binary that does.
    pub shim: Option<PathBuf>,
}

/// The `raw_exec { }` block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawExecConfig {
    pub enabled: bool,
    /// Run `raw_exec` tasks outside cgroups (no limits, no usage).
    pub no_cgroups: bool,
}

/// The `docker { }` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DockerConfig {
    pub enabled: bool,
    /// `unix:///path/to/docker.sock`.
    pub endpoint: String,
}

impl Default for DockerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            endpoint: crate::driver::docker::DEFAULT_ENDPOINT.into(),
        }
    }
}

/// The `artifact { }` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactConfig {
    /// The most bytes one artifact may download, and unpack to.
    pub max_bytes: u64,
    /// Host directories `file://` and path sources may read, besides the allocation's own
    /// directory. Empty by default: a job must not read the agent's files.
    pub file_roots: Vec<PathBuf>,
}

/// The default of `artifact { max_size_mb }`: 1 GiB.
pub const DEFAULT_ARTIFACT_MAX_MB: u64 = 1024;

impl Default for ArtifactConfig {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_ARTIFACT_MAX_MB * 1024 * 1024,
            file_roots: Vec::new(),
        }
    }
}

/// The default of `task_pids_limit`.
pub const DEFAULT_TASK_PIDS_LIMIT: u64 = 2048;

/// The endpoint's default: on loopback, where a server on the same host (`drover dev`, a
/// single-machine cluster) reaches it; other clusters set `endpoint_addr`.
pub const DEFAULT_ENDPOINT_ADDR: &str = "127.0.0.1:0";

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            servers: vec!["127.0.0.1:4647".into()],
            data_dir: PathBuf::from("/var/lib/drover/agent"),
            name: None,
            datacenter: "dc1".into(),
            node_class: String::new(),
            meta: BTreeMap::new(),
            reserved: Resources::ZERO,
            log_max_bytes: 10 * 1024 * 1024,
            log_max_files: 3,
            report_interval: Duration::from_millis(200),
            tls: drover_proto::tls::TlsFiles::default(),
            token: None,
            endpoint_addr: DEFAULT_ENDPOINT_ADDR.into(),
            endpoint_advertise: None,
            default_user: None,
            raw_exec: RawExecConfig::default(),
            docker: DockerConfig::default(),
            artifact: ArtifactConfig::default(),
            chroot_env: crate::isolation::mounts::DEFAULT_CHROOT_ENV
                .iter()
                .map(PathBuf::from)
                .collect(),
            cgroup_parent: "drover".into(),
            task_pids_limit: DEFAULT_TASK_PIDS_LIMIT,
            network: crate::network::NetworkConfig::default(),
            shim: None,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    data_dir: Option<PathBuf>,
    datacenter: Option<String>,
    name: Option<String>,
    client: Option<ClientBlock>,
    log: Option<LogBlock>,
    tls: Option<TlsBlock>,
    raw_exec: Option<RawExecBlock>,
    docker: Option<DockerBlock>,
    artifact: Option<ArtifactBlock>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct DockerBlock {
    enabled: Option<bool>,
    endpoint: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ArtifactBlock {
    max_size_mb: Option<u64>,
    file_roots: Option<Vec<PathBuf>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawExecBlock {
    enabled: Option<bool>,
    no_cgroups: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TlsBlock {
    ca_file: Option<PathBuf>,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    verify_server_hostname: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ClientBlock {
    servers: Option<Vec<String>>,
    token: Option<String>,
    node_class: Option<String>,
    meta: Option<BTreeMap<String, String>>,
    reserved: Option<ReservedBlock>,
    endpoint_addr: Option<String>,
    endpoint_advertise: Option<String>,
    default_user: Option<String>,
    chroot_env: Option<Vec<PathBuf>>,
    cgroup_parent: Option<String>,
    task_pids_limit: Option<u64>,
    network_interface: Option<String>,
    min_dynamic_port: Option<u64>,
    max_dynamic_port: Option<u64>,
    host_network: Option<BTreeMap<String, HostNetworkBlock>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ReservedBlock {
    cpu: Option<u64>,
    memory: Option<u64>,
    disk: Option<u64>,
    reserved_ports: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct HostNetworkBlock {
    interface: Option<String>,
    cidr: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct LogBlock {
    max_file_size_mb: Option<u64>,
    max_files: Option<u32>,
}

impl AgentConfig {
    /// Reads an HCL config file; settings it leaves out keep their defaults.
    pub fn from_hcl_file(path: impl AsRef<Path>) -> Result<Self, AgentError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| AgentError::ConfigRead {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_hcl_str(&text).map_err(|e| match e {
            AgentError::ConfigParse { source, .. } => AgentError::ConfigParse {
                path: path.to_path_buf(),
                source,
            },
            other => other,
        })
    }

    /// Parses HCL text (see the module docs for the shape).
    pub fn from_hcl_str(text: &str) -> Result<Self, AgentError> {
        let file: FileConfig = hcl::from_str(text).map_err(|source| AgentError::ConfigParse {
            path: PathBuf::from("<text>"),
            source,
        })?;
        let mut config = Self::default();
        if let Some(d) = file.data_dir {
            config.data_dir = d;
        }
        if let Some(dc) = file.datacenter {
            config.datacenter = dc;
        }
        config.name = file.name;
        let client = file.client.unwrap_or_default();
        if let Some(s) = client.servers {
            config.servers = s;
        }
        if let Some(t) = client.token {
            config.token = Some(t);
        }
        if let Some(a) = client.endpoint_addr {
            config.endpoint_addr = a;
        }
        config.endpoint_advertise = client.endpoint_advertise;
        config.default_user = client.default_user;
        if let Some(env) = client.chroot_env {
            config.chroot_env = env;
        }
        if let Some(parent) = client.cgroup_parent {
            config.cgroup_parent = parent;
        }
        if let Some(n) = client.task_pids_limit {
            config.task_pids_limit = n;
        }
        if let Some(raw) = file.raw_exec {
            config.raw_exec = RawExecConfig {
                enabled: raw.enabled.unwrap_or(false),
                no_cgroups: raw.no_cgroups.unwrap_or(false),
            };
        }
        if let Some(d) = file.docker {
            config.docker.enabled = d.enabled.unwrap_or(true);
            if let Some(e) = d.endpoint {
                config.docker.endpoint = e;
            }
        }
        if let Some(a) = file.artifact {
            if let Some(mb) = a.max_size_mb {
                config.artifact.max_bytes = mb.saturating_mul(1024 * 1024);
            }
            if let Some(roots) = a.file_roots {
                config.artifact.file_roots = roots;
            }
        }
        if let Some(c) = client.node_class {
            config.node_class = c;
        }
        if let Some(m) = client.meta {
            config.meta = m;
        }
        if let Some(r) = client.reserved {
            config.reserved = Resources::new(
                r.cpu.unwrap_or(0),
                r.memory.unwrap_or(0),
                r.disk.unwrap_or(0),
            );
            if let Some(ports) = r.reserved_ports {
                config.network.reserved_ports = drover_core::types::PortRanges::parse(&ports)
                    .map_err(|e| AgentError::ConfigInvalid {
                        field: "reserved_ports",
                        problem: e.to_string(),
                    })?;
            }
        }
        let port = |field, value: u64| {
            u16::try_from(value)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| AgentError::ConfigInvalid {
                    field,
                    problem: format!("{value} is not a port (1-65535)"),
                })
        };
        let net = &mut config.network;
        net.interface = client.network_interface;
        if let Some(p) = client.min_dynamic_port {
            net.min_dynamic_port = port("min_dynamic_port", p)?;
        }
        if let Some(p) = client.max_dynamic_port {
            net.max_dynamic_port = port("max_dynamic_port", p)?;
        }
        net.host_networks = client
            .host_network
            .unwrap_or_default()
            .into_iter()
            .map(|(name, b)| crate::network::HostNetworkConfig {
                name,
                interface: b.interface,
                cidr: b.cidr,
            })
            .collect();
        let log = file.log.unwrap_or_default();
        if let Some(mb) = log.max_file_size_mb {
            config.log_max_bytes = mb.saturating_mul(1024 * 1024);
        }
        if let Some(n) = log.max_files {
            config.log_max_files = n;
        }
        if let Some(t) = file.tls {
            config.tls = drover_proto::tls::TlsFiles {
                ca_file: t.ca_file,
                cert_file: t.cert_file,
                key_file: t.key_file,
                verify_server_hostname: t.verify_server_hostname.unwrap_or(true),
            };
        }
        config.validate()?;
        Ok(config)
    }

    /// Refuses settings an agent cannot run with.
    pub fn validate(&self) -> Result<(), AgentError> {
        let invalid = |field, problem: &str| {
            Err(AgentError::ConfigInvalid {
                field,
                problem: problem.into(),
            })
        };
        if self.servers.is_empty() {
            return invalid("servers", "must name at least one server");
        }
        if self.datacenter.is_empty() {
            return invalid("datacenter", "must not be empty");
        }
        if self.data_dir.as_os_str().is_empty() {
            return invalid("data_dir", "must not be empty");
        }
        if self.log_max_bytes < 1024 {
            return invalid("log_max_bytes", "must be at least 1024");
        }
        if self.endpoint_addr.parse::<std::net::SocketAddr>().is_err() {
            return invalid("endpoint_addr", "must be an ip:port to listen on");
        }
        if self
            .chroot_env
            .iter()
            .any(|p| !p.is_absolute() || p == Path::new("/"))
        {
            return invalid(
                "chroot_env",
                "must list absolute host directories other than /",
            );
        }
        if self.cgroup_parent.is_empty()
            || self.cgroup_parent.starts_with('/')
            || self.cgroup_parent.split('/').any(|p| p == "..")
        {
            return invalid("cgroup_parent", "must be a relative cgroup name without ..");
        }
        if !self.docker.endpoint.starts_with("unix:///") {
            return invalid("docker.endpoint", "must be a unix socket: unix:///path");
        }
        if self.artifact.max_bytes == 0 {
            return invalid("artifact.max_size_mb", "must be at least 1");
        }
        if self.artifact.file_roots.iter().any(|p| !p.is_absolute()) {
            return invalid("artifact.file_roots", "must list absolute host directories");
        }
        if self.task_pids_limit < 8 {
            return invalid("task_pids_limit", "must be at least 8");
        }
        if self.report_interval.is_zero() || self.report_interval > Duration::from_millis(200) {
            return invalid("report_interval", "must be within 1..=200 ms");
        }
        let net = &self.network;
        if net.min_dynamic_port == 0 || net.min_dynamic_port > net.max_dynamic_port {
            return invalid(
                "min_dynamic_port",
                &format!(
                    "the dynamic range {}-{} must be a non-empty range of ports (1-65535)",
                    net.min_dynamic_port, net.max_dynamic_port
                ),
            );
        }
        if net
            .host_networks
            .iter()
            .any(|h| h.name == drover_core::types::DEFAULT_HOST_NETWORK)
        {
            return invalid(
                "host_network",
                "\"default\" is the network_interface's host network: name yours otherwise",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<AgentConfig, String> {
        AgentConfig::from_hcl_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn hcl_files_fill_the_config() {
        let full = r#"
            data_dir = "/tmp/d"
            datacenter = "east"
            name = "w1"
            client {
              servers = ["a:1", "http://b:2"]
              node_class = "gpu"
              meta { rack = "r1" }
              reserved {
                cpu = 500
                memory = 256
              }
            }
            log {
              max_file_size_mb = 2
              max_files = 5
            }
        "#;
        let config = parse(full).expect("valid");
        assert_eq!(config.servers, vec!["a:1", "http://b:2"]);
        assert_eq!(config.data_dir, PathBuf::from("/tmp/d"));
        assert_eq!(config.datacenter, "east");
        assert_eq!(config.name.as_deref(), Some("w1"));
        assert_eq!(config.node_class, "gpu");
        assert_eq!(config.meta.get("rack").map(String::as_str), Some("r1"));
        assert_eq!(config.reserved, Resources::new(500, 256, 0));
        assert_eq!(config.log_max_bytes, 2 * 1024 * 1024);
        assert_eq!(config.log_max_files, 5);

        assert_eq!(parse("").expect("empty is valid"), AgentConfig::default());
    }

    #[test]
    fn the_documented_example_parses() {
        let doc: String = include_str!("config.rs")
            .lines()
            .skip_while(|l| !l.starts_with("//! ```hcl"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| format!("{}\n", l.trim_start_matches("//!")))
            .collect();
        let config = parse(&doc).expect("the module docs show a valid file");
        assert_eq!(config.servers.len(), 2);
        assert_eq!(config.reserved, Resources::new(500, 512, 1024));
        assert_eq!(config.log_max_files, 3);
        assert!(config.raw_exec.enabled && !config.raw_exec.no_cgroups);
        assert_eq!(config.chroot_env.len(), 6);
        assert_eq!(config.task_pids_limit, 2048);
        assert_eq!(config.default_user.as_deref(), Some("nobody"));
        let net = &config.network;
        assert_eq!(net.reserved_ports.to_string(), "22,80,8000-8100");
        assert_eq!(net.interface.as_deref(), Some("eth0"));
        assert_eq!((net.min_dynamic_port, net.max_dynamic_port), (20000, 32000));
        assert_eq!(net.host_networks.len(), 1);
        assert_eq!(net.host_networks[0].name, "public");
        assert_eq!(net.host_networks[0].cidr.as_deref(), Some("0.0.0.0/0"));
        assert!(config.docker.enabled);
        assert_eq!(config.docker.endpoint, "unix:///var/run/docker.sock");
        assert_eq!(config.artifact.max_bytes, 1 << 30);
        assert_eq!(
            config.artifact.file_roots,
            [PathBuf::from("/srv/artifacts")]
        );
    }

    #[test]
    fn bad_files_are_refused_naming_the_problem() {
        let cases = [
            ("datacentre = \"x\"", "datacentre"),
            ("client { servers = [] }", "servers"),
            ("client { reserved { gpu = 1 } }", "gpu"),
            ("datacenter = \"\"", "datacenter"),
            ("log { max_file_size_mb = 0 }", "log_max_bytes"),
            ("client { endpoint_addr = \"nowhere\" }", "endpoint_addr"),
            ("client { chroot_env = [\"usr\"] }", "chroot_env"),
            ("client { cgroup_parent = \"../x\" }", "cgroup_parent"),
            ("client { task_pids_limit = 1 }", "task_pids_limit"),
            ("raw_exec { enable = true }", "enable"),
            (
                "client { reserved { reserved_ports = \"22,9-3\" } }",
                "reserved_ports",
            ),
            (
                "client {\n min_dynamic_port = 30000\n max_dynamic_port = 20000\n}",
                "min_dynamic_port",
            ),
            ("client { min_dynamic_port = 70000 }", "min_dynamic_port"),
            (
                "client {\n host_network \"default\" {\n interface = \"lo\"\n }\n}",
                "host_network",
            ),
            ("docker { endpoint = \"tcp://h:2375\" }", "docker.endpoint"),
            ("artifact { max_size_mb = 0 }", "artifact.max_size_mb"),
            ("artifact { file_roots = [\"rel\"] }", "artifact.file_roots"),
        ];
        for (text, needle) in cases {
            let err = parse(text).expect_err(text);
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn a_missing_file_names_its_path() {
        let err = AgentConfig::from_hcl_file("/nonexistent/agent.hcl").expect_err("missing");
        assert!(err.to_string().contains("/nonexistent/agent.hcl"), "{err}");
    }
}
