//! What a simulation looks like: which servers, how many virtual nodes, how they are spread
//! over datacenters, classes and operating systems, what each offers, and how the mock
//! driver's tasks behave. Also the connection budget, because 10,000 nodes must share a few
//! HTTP/2 connections without exceeding a server's concurrent-stream limit.

use super::SimError;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A weighted mix of values, written `dc1:3,dc2:1` (a missing weight is 1).
///
/// Nodes get the values in exact proportion (largest remainder), so 4 nodes of `dc1:3,dc2:1`
/// are always 3 and 1; which node gets which is shuffled by the seed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Mix(Vec<(String, u32)>);

impl Mix {
    /// Every node gets `value`.
    pub fn single(value: impl Into<String>) -> Mix {
        Mix(vec![(value.into(), 1)])
    }

    /// The values with their weights, in the order written.
    pub fn entries(&self) -> &[(String, u32)] {
        &self.0
    }

    /// Refuses an empty mix or a zero weight, naming the mix by `field`.
    pub(crate) fn validate(&self, field: &'static str) -> Result<(), SimError> {
        if self.0.is_empty() {
            return Err(SimError::Config {
                field,
                reason: "needs at least one value".into(),
            });
        }
        if let Some((value, _)) = self.0.iter().find(|(_, w)| *w == 0) {
            return Err(SimError::Config {
                field,
                reason: format!("value {value:?} has weight 0"),
            });
        }
        Ok(())
    }
}

impl FromStr for Mix {
    type Err = SimError;

    fn from_str(s: &str) -> Result<Mix, SimError> {
        let bad = |reason: String| SimError::Config {
            field: "mix",
            reason,
        };
        let mut entries = Vec::new();
        for part in s.split(',').map(str::trim) {
            let (value, weight) = match part.rsplit_once(':') {
                Some((v, w)) => {
                    let w = w
                        .trim()
                        .parse::<u32>()
                        .map_err(|_| bad(format!("weight {w:?} of {v:?} is not a whole number")))?;
                    (v.trim(), w)
                }
                None => (part, 1),
            };
            entries.push((value.to_string(), weight));
        }
        let mix = Mix(entries);
        mix.validate("mix")
            .map_err(|_| bad(format!("{s:?} has an empty value list or a zero weight")))?;
        Ok(mix)
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (value, weight)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{value}:{weight}")?;
        }
        Ok(())
    }
}

/// One node's capacity (or its reserved part) in the server's three dimensions.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NodeResources {
    pub cpu_mhz: u64,
    pub memory_mb: u64,
    pub disk_mb: u64,
}

impl NodeResources {
    pub const ZERO: NodeResources = NodeResources {
        cpu_mhz: 0,
        memory_mb: 0,
        disk_mb: 0,
    };
}

/// How long a simulated batch or sysbatch task runs unless told otherwise: long enough to
/// be seen running in the console, short enough that a dev cluster's batch jobs finish.
pub const DEFAULT_BATCH_DURATION: Duration = Duration::from_secs(10);

/// Everything [`super::Simulator::start`] needs.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Server gRPC URLs (`http://host:port`); calls are balanced over them, so one that is
    /// down is skipped.
    pub servers: Vec<String>,
    /// How many virtual nodes to run.
    pub nodes: usize,
    /// Node names are `<prefix>-<index>`.
    pub name_prefix: String,
    pub datacenters: Mix,
    /// Node classes; the empty string means "no class".
    pub classes: Mix,
    /// The `kernel.name` / `os.name` attribute of each node.
    pub operating_systems: Mix,
    /// Total capacity each node registers.
    pub resources: NodeResources,
    /// Held back on each node.
    pub reserved: NodeResources,
    /// How long a mock task runs before it exits, whatever its job; `None`: as
    /// `batch_duration` says.
    pub task_duration: Option<Duration>,
    /// How long tasks of batch and sysbatch jobs run before they exit 0 (or fail, per
    /// `failure_rate`) when `task_duration` is `None`; service and system tasks run until
    /// the servers stop them. `None`: batch tasks run until stopped too.
    pub batch_duration: Option<Duration>,
    /// The chance (0..=1) that a task exits 1 instead of 0 (drawn per allocation from the
    /// seed).
    pub failure_rate: f64,
    /// The chance (0..=1) that a heartbeat is first sent as a call the node gives up on at
    /// once (its stream reset), then sent again: a client that cancels timed-out calls, as
    /// grpcio's do, on connections other nodes share. Drawn per call, unseeded: when a
    /// cancellation lands is the network's choice anyway.
    pub cancel_rate: f64,
    /// Seeds every random choice: node layout, task outcomes, heartbeat jitter.
    pub seed: u64,
    /// Allocation watch streams per HTTP/2 connection; keep it under the servers'
    /// `max_concurrent_streams` (often 100 or more).
    pub streams_per_connection: usize,
    /// Connections shared by the unary calls (register, heartbeat, report).
    pub rpc_connections: usize,
    /// The most unary calls in flight at once, so a burst (start-up, a mass reconnect)
    /// queues here rather than flooding the servers.
    pub max_in_flight: usize,
    /// How long a node's first pending allocation update waits for others to join its
    /// batch; each node counts from its own first update, as the real agent does.
    pub report_interval: Duration,
    /// The join credential (an ACL token that may register nodes) for servers with ACLs
    /// on; once registered, each node speaks with its own secret.
    pub token: Option<String>,
    /// TLS to the servers (a CA turns it on; a client certificate is also a join
    /// credential).
    pub tls: drover_proto::tls::TlsFiles,
    /// The drivers each node advertises (as `driver.<name> = 1`). Simulated nodes run
    /// nothing, so by default they advertise only `mock`: a `raw_exec` job goes to a real
    /// agent. A bench or a test that wants raw_exec jobs on them names it here
    /// (`--simulate-drivers raw_exec`): they then pretend to run it.
    pub drivers: Vec<String>,
    /// Allocations register their jobs' `service` blocks in the servers' catalog with
    /// their updates, as the real agent does (each node reads the jobs of its allocations
    /// for it); every simulated check passes. Off: no job is read and nothing registered.
    pub register_services: bool,
}

/// What simulated nodes advertise unless told to pretend more.
pub const DEFAULT_SIM_DRIVERS: [&str; 1] = ["mock"];

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            servers: vec!["http://127.0.0.1:4647".into()],
            nodes: 5,
            name_prefix: "sim".into(),
            datacenters: Mix::single("dc1"),
            classes: Mix::single(""),
            operating_systems: Mix::single("linux"),
            resources: NodeResources {
                cpu_mhz: 4000,
                memory_mb: 8192,
                disk_mb: 100_000,
            },
            reserved: NodeResources::ZERO,
            task_duration: None,
            batch_duration: Some(DEFAULT_BATCH_DURATION),
            failure_rate: 0.0,
            cancel_rate: 0.0,
            seed: 0,
            streams_per_connection: 100,
            rpc_connections: 4,
            max_in_flight: 64,
            report_interval: Duration::from_millis(200),
            token: None,
            tls: drover_proto::tls::TlsFiles::default(),
            drivers: DEFAULT_SIM_DRIVERS.iter().map(|d| d.to_string()).collect(),
            register_services: false,
        }
    }
}

impl SimConfig {
    /// Refuses settings the simulator cannot run with, naming the field.
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |field, reason: &str| {
            Err(SimError::Config {
                field,
                reason: reason.into(),
            })
        };
        if self.servers.is_empty() {
            return bad("servers", "needs at least one server URL");
        }
        if self.nodes == 0 || self.nodes > u32::MAX as usize {
            return bad("nodes", "must be between 1 and 4294967295");
        }
        self.datacenters.validate("datacenters")?;
        self.classes.validate("classes")?;
        self.operating_systems.validate("operating_systems")?;
        if !(0.0..=1.0).contains(&self.failure_rate) {
            return bad("failure_rate", "must be between 0 and 1");
        }
        if !(0.0..=1.0).contains(&self.cancel_rate) {
            return bad("cancel_rate", "must be between 0 and 1");
        }
        if self.streams_per_connection == 0 {
            return bad("streams_per_connection", "must be at least 1");
        }
        if self.rpc_connections == 0 {
            return bad("rpc_connections", "must be at least 1");
        }
        if self.max_in_flight == 0 {
            return bad("max_in_flight", "must be at least 1");
        }
        if self.report_interval.is_zero() {
            return bad("report_interval", "must be longer than zero");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_parse_and_print() {
        let cases: &[(&str, Option<&str>)] = &[
            ("dc1:3,dc2:1", Some("dc1:3,dc2:1")),
            ("dc1", Some("dc1:1")),
            (" a : 2 , b ", Some("a:2,b:1")),
            (":1", Some(":1")),
            ("dc1:0", None),
            ("dc1:x", None),
            ("dc1:-1", None),
        ];
        for (input, want) in cases {
            let got = input.parse::<Mix>().ok().map(|m| m.to_string());
            assert_eq!(got.as_deref(), *want, "parsing {input:?}");
        }
    }

    #[test]
    fn validation_names_the_field() {
        let cases: &[(fn(&mut SimConfig), &str)] = &[
            (|c| c.servers.clear(), "servers"),
            (|c| c.nodes = 0, "nodes"),
            (|c| c.failure_rate = 1.5, "failure_rate"),
            (|c| c.streams_per_connection = 0, "streams_per_connection"),
            (|c| c.classes = Mix(vec![]), "classes"),
            (|c| c.report_interval = Duration::ZERO, "report_interval"),
        ];
        assert!(SimConfig::default().validate().is_ok());
        for (tweak, field) in cases {
            let mut c = SimConfig::default();
            tweak(&mut c);
            match c.validate() {
                Err(SimError::Config { field: f, .. }) => assert_eq!(f, *field),
                other => panic!("expected a config error on {field}, got {other:?}"),
            }
        }
    }
}
