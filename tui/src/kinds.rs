//! The console's shared vocabulary: which view is on screen, how a cell reads, which
//! health group and topic are shown, and how rows are identified and ordered. A leaf
//! module: the app (state and keys) and the views (what each table shows) both use it,
//! and neither imports the other for it.

use drover_core::{AllocId, DeploymentId, EvalId, JobKey, NodeHealth, NodeId, SuspendReason};
use std::cmp::Ordering;

/// Which view is on screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViewKind {
    Nodes,
    Evals,
    Blocked,
    Workers,
    Jobs,
    /// Allocations: of the whole cluster, or of the node or job drilled into (see
    /// [`AllocScope`]).
    Allocs,
    Events,
    Servers,
    /// Service registrations: where each allocation offers its services, and their health.
    Services,
    /// Deployments: each job version's rollout, its groups' progress, and the actions on it.
    Deployments,
}

impl ViewKind {
    /// How many views there are: the length of the per-view tables the app keeps.
    pub const COUNT: usize = 10;

    /// The views `tab` cycles through, in the order of the header's tabs: every view.
    pub const TABS: [ViewKind; Self::COUNT] = [
        ViewKind::Nodes,
        ViewKind::Evals,
        ViewKind::Blocked,
        ViewKind::Workers,
        ViewKind::Jobs,
        ViewKind::Deployments,
        ViewKind::Allocs,
        ViewKind::Servers,
        ViewKind::Services,
        ViewKind::Events,
    ];

    /// The name used by `:` commands and the header.
    pub fn name(self) -> &'static str {
        match self {
            ViewKind::Nodes => "nodes",
            ViewKind::Evals => "evals",
            ViewKind::Blocked => "blocked",
            ViewKind::Workers => "workers",
            ViewKind::Jobs => "jobs",
            ViewKind::Allocs => "allocs",
            ViewKind::Events => "events",
            ViewKind::Servers => "servers",
            ViewKind::Services => "services",
            ViewKind::Deployments => "deployments",
        }
    }

    /// The header's label when the names do not fit (also a name `:` takes).
    pub fn short_name(self) -> &'static str {
        match self {
            ViewKind::Services => "svc",
            ViewKind::Deployments => "dp",
            ViewKind::Servers => "srv",
            other => other.name(),
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        let name = name.trim();
        let aliases: [(&str, ViewKind); 15] = [
            ("node", ViewKind::Nodes),
            ("eval", ViewKind::Evals),
            ("evaluations", ViewKind::Evals),
            ("worker", ViewKind::Workers),
            ("job", ViewKind::Jobs),
            ("alloc", ViewKind::Allocs),
            ("allocations", ViewKind::Allocs),
            ("server", ViewKind::Servers),
            ("members", ViewKind::Servers),
            ("service", ViewKind::Services),
            ("svc", ViewKind::Services),
            ("srv", ViewKind::Servers),
            ("deployment", ViewKind::Deployments),
            ("deploy", ViewKind::Deployments),
            ("dp", ViewKind::Deployments),
        ];
        Self::TABS
            .into_iter()
            .find(|v| v.name() == name)
            .or_else(|| {
                aliases
                    .into_iter()
                    .find(|(a, _)| *a == name)
                    .map(|(_, v)| v)
            })
    }
}

/// Which allocations the allocations view shows: every one (its tab, `:allocs`), or
/// those of the node or job an operator drilled into with `enter`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AllocScope {
    #[default]
    All,
    Job(JobKey),
    Node(NodeId),
}

/// How a cell should read: mapped to colours by the theme (or to nothing, with NO_COLOR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    Normal,
    Good,
    Warn,
    Bad,
    Dim,
}

/// Which health group the nodes view shows (`g` cycles).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HealthFilter {
    #[default]
    All,
    Only(NodeHealth),
}

impl HealthFilter {
    const CYCLE: [HealthFilter; 6] = [
        HealthFilter::All,
        HealthFilter::Only(NodeHealth::Healthy),
        HealthFilter::Only(NodeHealth::Suspended(SuspendReason::New)),
        HealthFilter::Only(NodeHealth::Suspended(SuspendReason::Lost)),
        HealthFilter::Only(NodeHealth::Suspended(SuspendReason::Flaky)),
        HealthFilter::Only(NodeHealth::Offlined),
    ];

    pub fn next(self) -> Self {
        let i = Self::CYCLE.iter().position(|h| *h == self).unwrap_or(0);
        Self::CYCLE[(i + 1) % Self::CYCLE.len()]
    }

    pub fn label(self) -> &'static str {
        match self {
            HealthFilter::All => "all",
            HealthFilter::Only(h) => h.as_str(),
        }
    }

    pub(crate) fn admits(self, health: NodeHealth) -> bool {
        match self {
            HealthFilter::All => true,
            HealthFilter::Only(h) => h == health,
        }
    }
}

/// The topics `t` cycles through; `None` shows all.
pub const TOPICS: [Option<&str>; 8] = [
    None,
    Some("node"),
    Some("allocation"),
    Some("evaluation"),
    Some("job"),
    Some("operator"),
    Some("service"),
    Some("deployment"),
];

/// The identity of a row, stable across refreshes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowKey {
    Node(NodeId),
    Alloc(AllocId),
    Eval(EvalId),
    Job(JobKey),
    /// Blocked evaluations are keyed by their eval id as the tracker sends it.
    Blocked(String),
    /// Server id, then worker id.
    Worker(String, String),
    /// A server by its Raft id.
    Server(String),
    /// The event log's sequence number.
    Event(u64),
    /// A service registration by its id (`<alloc id>-group-<n>`, `<alloc id>-task-…`).
    Service(String),
    Deployment(DeploymentId),
}

impl RowKey {
    /// The id an operator copies (OSC 52) or types into the CLI.
    pub fn copy_text(&self) -> String {
        match self {
            RowKey::Node(id) => id.to_string(),
            RowKey::Alloc(id) => id.to_string(),
            RowKey::Eval(id) => id.to_string(),
            RowKey::Job(key) => key.id.to_string(),
            RowKey::Blocked(id) => id.clone(),
            RowKey::Worker(_, id) => id.clone(),
            RowKey::Server(id) => id.clone(),
            RowKey::Event(seq) => seq.to_string(),
            RowKey::Service(id) => id.clone(),
            RowKey::Deployment(id) => id.to_string(),
        }
    }
}

/// A value rows are ordered by. Numbers compare as numbers; text compares naturally, so
/// `node-2` comes before `node-10` (build it with [`SortKey::text`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SortKey {
    Num(u64),
    /// The text's [`natural_key`].
    Text(String),
}

impl SortKey {
    pub fn text(text: impl AsRef<str>) -> Self {
        SortKey::Text(natural_key(text.as_ref()))
    }
}

/// Digit runs are padded to this width so they compare by value as plain bytes.
const DIGIT_WIDTH: usize = 20;

/// A key whose plain byte order is the natural order of `text`: every run of digits is
/// zero-padded to a fixed width (leading zeros dropped first), so `node-2` sorts before
/// `node-10`. Computed once per row, it makes sorting thousands of rows cheap.
pub fn natural_key(text: &str) -> String {
    let mut key = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        key.push_str(&rest[..start]);
        let digits = &rest[start..];
        let end = digits
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        let run = digits[..end].trim_start_matches('0');
        for _ in run.len()..DIGIT_WIDTH {
            key.push('0');
        }
        key.push_str(run);
        rest = &digits[end..];
    }
    key.push_str(rest);
    key
}

/// Compares text the way people number things (see [`natural_key`]); texts that differ
/// only in leading zeros fall back to plain order so the order stays total.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    natural_key(a).cmp(&natural_key(b)).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_reads_numbers_as_numbers() {
        let cases: [(&str, &str, Ordering); 7] = [
            ("node-2", "node-10", Ordering::Less),
            ("web[10]", "web[9]", Ordering::Greater),
            ("a", "b", Ordering::Less),
            ("node", "node-1", Ordering::Less),
            ("x07", "x7", Ordering::Less),
            ("x7", "x7", Ordering::Equal),
            ("10a", "10b", Ordering::Less),
        ];
        for (a, b, want) in cases {
            assert_eq!(natural_cmp(a, b), want, "{a} vs {b}");
            assert_eq!(natural_cmp(b, a), want.reverse(), "{b} vs {a}");
        }
    }
}
