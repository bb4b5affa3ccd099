//! Placement constraints, in Nomad's shape: a left target (usually `${attr.*}`,
//! `${meta.*}` or `${node.*}`), an operator, and a right target.

use serde::{Deserialize, Serialize};

/// The operators drover supports, with Nomad's spellings.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Operator {
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    Regexp,
    Version,
    Semver,
    SetContains,
    SetContainsAny,
    IsSet,
    IsNotSet,
    /// No two allocations of the job (or group) on one node.
    DistinctHosts,
    /// At most `r_target` (default 1) allocations per distinct value of `l_target`.
    DistinctProperty,
}

impl Operator {
    /// Every operator with the spelling a jobspec uses.
    pub const ALL: [(Operator, &'static str); 15] = [
        (Operator::Equal, "="),
        (Operator::NotEqual, "!="),
        (Operator::Less, "<"),
        (Operator::LessEqual, "<="),
        (Operator::Greater, ">"),
        (Operator::GreaterEqual, ">="),
        (Operator::Regexp, "regexp"),
        (Operator::Version, "version"),
        (Operator::Semver, "semver"),
        (Operator::SetContains, "set_contains"),
        (Operator::SetContainsAny, "set_contains_any"),
        (Operator::IsSet, "is_set"),
        (Operator::IsNotSet, "is_not_set"),
        (Operator::DistinctHosts, "distinct_hosts"),
        (Operator::DistinctProperty, "distinct_property"),
    ];

    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(op, _)| *op == self)
            .map(|(_, s)| *s)
            .unwrap_or("?")
    }

    /// Parses a jobspec spelling; `==`, `is`, `not` and `set_contains_all` are accepted as
    /// Nomad accepts them.
    pub fn parse(s: &str) -> Option<Operator> {
        match s {
            "==" | "is" => Some(Operator::Equal),
            "not" => Some(Operator::NotEqual),
            "set_contains_all" => Some(Operator::SetContains),
            _ => Self::ALL
                .iter()
                .find(|(_, name)| *name == s)
                .map(|(op, _)| *op),
        }
    }
}

impl std::fmt::Display for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One constraint. Its `Display` form is the key placement metrics count filtered nodes by.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Constraint {
    pub l_target: String,
    pub operator: Operator,
    pub r_target: String,
}

impl Constraint {
    pub fn new(l: impl Into<String>, op: Operator, r: impl Into<String>) -> Self {
        Self {
            l_target: l.into(),
            operator: op,
            r_target: r.into(),
        }
    }
}

impl std::fmt::Display for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.l_target, self.operator, self.r_target)
    }
}
