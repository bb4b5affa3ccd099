//! Services: what a group or task tells the cluster about where it listens (`service`
//! blocks, Nomad's native `provider = "nomad"` discovery) and how to tell whether it is
//! healthy (`check` blocks, run by the agent that runs the allocation).
//!
//! A job names its services; the agent running an allocation registers each one with the
//! address and port the allocation was given ([`ServiceRegistration`]), and the checks'
//! results set the registration's [`ServiceHealth`].

use super::{AllocId, CheckState, CheckType, Index, NodeId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

/// The shortest check interval accepted: a check is work on the node and a Raft write
/// whenever its result changes.
pub const MIN_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// A `service` block of a group or a task.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Service {
    /// As written (it may hold `${NOMAD_JOB_NAME}` and the like); empty: the default
    /// name. [`Service::resolved_name`] gives the name registered.
    pub name: String,
    /// A label of the group's network ports; empty: the service has no port.
    pub port_label: String,
    pub tags: Vec<String>,
    pub meta: BTreeMap<String, String>,
    pub address_mode: AddressMode,
    pub checks: Vec<ServiceCheck>,
}

/// Which address a service registers. drover runs host networking only, so every mode
/// is the node's address on the port's host network; the modes are kept because job files
/// name them.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum AddressMode {
    #[default]
    Auto,
    Host,
    Alloc,
}

impl AddressMode {
    pub const NAMES: [&'static str; 3] = ["auto", "host", "alloc"];

    pub fn as_str(self) -> &'static str {
        match self {
            AddressMode::Auto => "auto",
            AddressMode::Host => "host",
            AddressMode::Alloc => "alloc",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(AddressMode::Auto),
            "host" => Some(AddressMode::Host),
            "alloc" => Some(AddressMode::Alloc),
            _ => None,
        }
    }
}

/// One `check` of a service.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ServiceCheck {
    /// Empty: `service: "<service>" check` as Nomad names it.
    pub name: String,
    pub kind: CheckKind,
    /// At least [`MIN_CHECK_INTERVAL`].
    pub interval: Duration,
    /// At most the interval: a check never overlaps the next.
    pub timeout: Duration,
    pub on_update: OnUpdate,
    /// `None`: a failing check never restarts the task.
    pub check_restart: Option<CheckRestart>,
    /// The task a group-level script check runs in (a task's own checks run in it).
    pub task: Option<String>,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum CheckKind {
    /// Passing on a 2xx answer (or exactly `expected_status` when set), warning on 429,
    /// critical otherwise.
    Http {
        /// Starts with `/`.
        path: String,
        method: String,
        headers: BTreeMap<String, Vec<String>>,
        expected_status: Option<u16>,
    },
    /// Passing when a connection opens.
    Tcp,
    /// Run in the task's context: exit 0 passing, 1 warning, anything else critical.
    Script { command: String, args: Vec<String> },
}

impl CheckKind {
    pub fn type_name(&self) -> &'static str {
        self.check_type().as_str()
    }

    pub fn check_type(&self) -> CheckType {
        match self {
            CheckKind::Http { .. } => CheckType::Http,
            CheckKind::Tcp => CheckType::Tcp,
            CheckKind::Script { .. } => CheckType::Script,
        }
    }

    /// Whether the check reaches the service through its port.
    pub fn needs_port(&self) -> bool {
        !matches!(self, CheckKind::Script { .. })
    }
}

/// How a check's result counts while a deployment watches the allocation.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum OnUpdate {
    #[default]
    RequireHealthy,
    IgnoreWarnings,
    Ignore,
}

impl OnUpdate {
    pub const NAMES: [&'static str; 3] = ["require_healthy", "ignore_warnings", "ignore"];

    pub fn as_str(self) -> &'static str {
        match self {
            OnUpdate::RequireHealthy => "require_healthy",
            OnUpdate::IgnoreWarnings => "ignore_warnings",
            OnUpdate::Ignore => "ignore",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "require_healthy" => Some(OnUpdate::RequireHealthy),
            "ignore_warnings" => Some(OnUpdate::IgnoreWarnings),
            "ignore" => Some(OnUpdate::Ignore),
            _ => None,
        }
    }
}

/// `check_restart`: the task is restarted after `limit` consecutive unhealthy results,
/// none counted until `grace` after the task (re)started.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct CheckRestart {
    /// 0: never restart.
    pub limit: u32,
    pub grace: Duration,
    /// A warning counts as healthy.
    pub ignore_warnings: bool,
}

/// The `meta` of a service's job, group and task, the later overriding the earlier: what
/// `${NOMAD_META_<key>}` in a service name reads, as a task's environment does.
#[derive(Clone, Copy, Debug)]
pub struct MetaLayers<'a>(pub [&'a BTreeMap<String, String>; 3]);

impl MetaLayers<'_> {
    /// `key` as written, or (as Nomad's upper-cased variables are) a key that upper-cases
    /// to it; the innermost layer that has it wins.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().rev().find_map(|m| {
            m.get(key)
                .or_else(|| {
                    m.iter()
                        .find(|(k, _)| k.to_ascii_uppercase() == key)
                        .map(|(_, v)| v)
                })
                .map(String::as_str)
        })
    }
}

impl Service {
    /// The name registered: the written name with `${NOMAD_JOB_NAME}`,
    /// `${NOMAD_GROUP_NAME}`, `${NOMAD_TASK_NAME}`, `${NOMAD_META_<key>}` (and Nomad's older
    /// `${JOB}`, `${TASKGROUP}`, `${TASK}`, `${BASE}`) replaced; an empty name is
    /// `<job>-<group>[-<task>]`, as Nomad defaults it. Anything else in `${…}` (a meta key
    /// no layer has) is kept, so validation refuses it as not a DNS label.
    pub fn resolved_name(
        &self,
        job: &str,
        group: &str,
        task: Option<&str>,
        meta: MetaLayers<'_>,
    ) -> String {
        let base = match task {
            Some(t) => format!("{job}-{group}-{t}"),
            None => format!("{job}-{group}"),
        };
        if self.name.is_empty() {
            return base;
        }
        let task = task.unwrap_or("");
        let mut out = self.name.clone();
        for (var, value) in [
            ("${NOMAD_JOB_NAME}", job),
            ("${NOMAD_GROUP_NAME}", group),
            ("${NOMAD_TASK_NAME}", task),
            ("${JOB}", job),
            ("${TASKGROUP}", group),
            ("${TASK}", task),
            ("${BASE}", base.as_str()),
        ] {
            if out.contains(var) {
                out = out.replace(var, value);
            }
        }
        interpolate_meta(&out, meta)
    }
}

/// `name` with each `${NOMAD_META_<key>}` whose key `meta` has replaced by its value.
fn interpolate_meta(name: &str, meta: MetaLayers<'_>) -> String {
    const OPEN: &str = "${NOMAD_META_";
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        match after.find('}') {
            Some(end) if meta.get(&after[..end]).is_some() => {
                out.push_str(meta.get(&after[..end]).unwrap_or_default());
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str(OPEN);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether `name` is a DNS label: 1 to 63 ASCII letters, digits and `-`, neither first nor
/// last a `-`.
pub fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// What a service's checks say.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize,
)]
pub enum ServiceHealth {
    /// Every check passes (or the service has none).
    #[default]
    Passing,
    /// Some check warns, none is critical.
    Warning,
    /// Some check fails, or has not passed yet.
    Critical,
}

impl ServiceHealth {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceHealth::Passing => "passing",
            ServiceHealth::Warning => "warning",
            ServiceHealth::Critical => "critical",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "passing" => Some(ServiceHealth::Passing),
            "warning" => Some(ServiceHealth::Warning),
            "critical" => Some(ServiceHealth::Critical),
            _ => None,
        }
    }

    /// The worst of several results: what a service (or an allocation) is worth.
    pub fn worst(items: impl IntoIterator<Item = ServiceHealth>) -> ServiceHealth {
        items.into_iter().max().unwrap_or(ServiceHealth::Passing)
    }
}

/// One instance of a service: where one allocation offers it. The id is the allocation's
/// and the service's position in its job (`<alloc>-<group|task>-<index>`), so an agent's
/// repeated report replaces the same registration.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ServiceRegistration {
    pub id: String,
    /// The resolved name.
    pub service_name: String,
    pub namespace: String,
    pub job_id: String,
    pub alloc_id: AllocId,
    pub node_id: NodeId,
    /// The task it belongs to; `None`: a group service.
    pub task: Option<String>,
    pub address: Option<IpAddr>,
    /// 0: the service names no port.
    pub port: u16,
    pub tags: Vec<String>,
    /// What its checks say: [`CheckState::health_of`] its `checks` as the agent found them.
    pub health: ServiceHealth,
    /// Each check's latest result, in the service's check order.
    pub checks: Vec<CheckState>,
    pub create_index: Index,
    pub modify_index: Index,
}

impl ServiceRegistration {
    /// The id of the `index`th service of a group (`task: None`) or task in an allocation.
    pub fn make_id(alloc: AllocId, task: Option<&str>, index: usize) -> String {
        match task {
            Some(t) => format!("{alloc}-task-{t}-{index}"),
            None => format!("{alloc}-group-{index}"),
        }
    }

    /// The position of the `service` block this registration was made from among its
    /// group's or task's services: the `index` of [`make_id`](Self::make_id).
    pub fn block_index(&self) -> Option<usize> {
        self.id.rsplit('-').next()?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> Service {
        Service {
            name: name.into(),
            port_label: String::new(),
            tags: Vec::new(),
            meta: BTreeMap::new(),
            address_mode: AddressMode::Auto,
            checks: Vec::new(),
        }
    }

    #[test]
    fn names_resolve_and_default() {
        for (written, task, want) in [
            ("", None, "shop-web"),
            ("", Some("app"), "shop-web-app"),
            ("${NOMAD_JOB_NAME}-api", None, "shop-api"),
            (
                "${NOMAD_GROUP_NAME}-${NOMAD_TASK_NAME}",
                Some("app"),
                "web-app",
            ),
            ("${BASE}", Some("app"), "shop-web-app"),
            ("x-${NOMAD_META_x}", None, "x-${NOMAD_META_x}"),
        ] {
            let none = BTreeMap::new();
            assert_eq!(
                named(written).resolved_name("shop", "web", task, MetaLayers([&none; 3])),
                want,
                "{written}"
            );
        }
    }

    #[test]
    fn meta_in_names_reads_the_innermost_layer_that_has_the_key() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let job = map(&[("tier", "gold"), ("region", "eu")]);
        let group = map(&[("tier", "silver")]);
        let task = map(&[("Shard", "7")]);
        let layers = MetaLayers([&job, &group, &task]);
        for (written, want) in [
            ("db-${NOMAD_META_tier}", "db-silver"),
            ("db-${NOMAD_META_region}-${NOMAD_META_tier}", "db-eu-silver"),
            ("db-${NOMAD_META_SHARD}", "db-7"),
            ("db-${NOMAD_META_Shard}", "db-7"),
            ("db-${NOMAD_META_nope}", "db-${NOMAD_META_nope}"),
            ("db-${NOMAD_META_tier", "db-${NOMAD_META_tier"),
        ] {
            assert_eq!(
                named(written).resolved_name("shop", "web", Some("app"), layers),
                want,
                "{written}"
            );
        }
    }

    #[test]
    fn dns_labels() {
        for (name, ok) in [
            ("db", true),
            ("web-1", true),
            ("Web", true),
            ("-web", false),
            ("web-", false),
            ("", false),
            ("a.b", false),
            ("a_b", false),
            (&"a".repeat(63), true),
            (&"a".repeat(64), false),
        ] {
            assert_eq!(is_dns_label(name), ok, "{name}");
        }
    }

    #[test]
    fn the_worst_result_wins() {
        use ServiceHealth::*;
        assert_eq!(ServiceHealth::worst([]), Passing);
        assert_eq!(ServiceHealth::worst([Passing, Warning]), Warning);
        assert_eq!(ServiceHealth::worst([Critical, Warning, Passing]), Critical);
    }
}
