//! What a token may do: capabilities within a namespace, and levels for the cluster-wide
//! areas (nodes, operator, agents).

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a rule grants within the namespaces it matches.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub enum NamespaceCapability {
    /// See jobs, their versions, allocations, evaluations and summaries.
    ReadJob,
    /// Register, plan, scale, revert and stop jobs.
    SubmitJob,
    /// Launch children of parameterized jobs and force periodic launches.
    DispatchJob,
    /// Receive the job, evaluation and allocation events of the namespace.
    ReadEvents,
    /// Read what tasks print.
    ReadLogs,
    /// Stop and restart single allocations.
    AllocLifecycle,
}

impl NamespaceCapability {
    pub const ALL: [NamespaceCapability; 6] = [
        NamespaceCapability::ReadJob,
        NamespaceCapability::SubmitJob,
        NamespaceCapability::DispatchJob,
        NamespaceCapability::ReadEvents,
        NamespaceCapability::ReadLogs,
        NamespaceCapability::AllocLifecycle,
    ];

    /// The name used in policies and in denials.
    pub fn as_str(self) -> &'static str {
        match self {
            NamespaceCapability::ReadJob => "read-job",
            NamespaceCapability::SubmitJob => "submit-job",
            NamespaceCapability::DispatchJob => "dispatch-job",
            NamespaceCapability::ReadEvents => "read-events",
            NamespaceCapability::ReadLogs => "read-logs",
            NamespaceCapability::AllocLifecycle => "alloc-lifecycle",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The capabilities a namespace `policy = "..."` shorthand stands for.
    pub fn of_level(level: Level) -> &'static [NamespaceCapability] {
        use NamespaceCapability::*;
        match level {
            Level::Deny => &[],
            Level::Read => &[ReadJob, ReadEvents],
            Level::Write => &[
                ReadJob,
                ReadEvents,
                SubmitJob,
                DispatchJob,
                ReadLogs,
                AllocLifecycle,
            ],
        }
    }
}

impl fmt::Display for NamespaceCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much a rule for a cluster-wide area grants. `Deny` wins over anything another
/// policy of the same token grants for that area.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub enum Level {
    Deny,
    Read,
    Write,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Deny => "deny",
            Level::Read => "read",
            Level::Write => "write",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "deny" => Some(Level::Deny),
            "read" => Some(Level::Read),
            "write" => Some(Level::Write),
            _ => None,
        }
    }

    /// Two policies' levels for one area, joined: deny if either denies, else the higher.
    pub fn join(a: Option<Level>, b: Option<Level>) -> Option<Level> {
        match (a, b) {
            (Some(Level::Deny), _) | (_, Some(Level::Deny)) => Some(Level::Deny),
            (a, b) => a.max(b),
        }
    }

    /// Whether holding `self` is enough for something that needs `needed`.
    pub fn covers(self, needed: Level) -> bool {
        self != Level::Deny && self >= needed
    }
}

/// The cluster-wide areas a policy has a level for.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub enum Area {
    /// Nodes: read lists them; write offlines, onlines, drains and sets eligibility.
    Node,
    /// Scheduler workers and scheduler configuration, broker and Raft status.
    Operator,
    /// Registering nodes: what a node's join credential (an introduction token) holds.
    Agent,
}

impl Area {
    pub const ALL: [Area; 3] = [Area::Node, Area::Operator, Area::Agent];

    /// The block name in policies.
    pub fn as_str(self) -> &'static str {
        match self {
            Area::Node => "node",
            Area::Operator => "operator",
            Area::Agent => "agent",
        }
    }

    /// The capability a denial names (`read-node`, `operator:write`, `agent:write`).
    pub fn capability(self, level: Level) -> String {
        match self {
            Area::Node => format!("{}-node", level.as_str()),
            Area::Operator | Area::Agent => format!("{}:{}", self.as_str(), level.as_str()),
        }
    }
}

/// What one RPC needs of the caller's token.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Need<'a> {
    /// A capability in one namespace.
    Namespace(NamespaceCapability, &'a str),
    /// A capability in at least one namespace: lists across namespaces (`*`) then show
    /// only what the token may read.
    AnyNamespace(NamespaceCapability),
    /// A level in a cluster-wide area.
    Area(Area, Level),
    /// A management token (ACL administration).
    Management,
    /// Any valid token (`acl token self`).
    AnyToken,
}

impl fmt::Display for Need<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Need::Namespace(c, ns) => write!(f, "{c} on namespace {ns:?}"),
            Need::AnyNamespace(c) => write!(f, "{c} on some namespace"),
            Need::Area(a, l) => f.write_str(&a.capability(*l)),
            Need::Management => f.write_str("a management token"),
            Need::AnyToken => f.write_str("a valid token"),
        }
    }
}
