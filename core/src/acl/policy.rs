//! ACL policies: named sets of rules, written in HCL.
//!
//! ```hcl
//! namespace "default" {
//!   policy       = "write"            # deny | read | write
//!   capabilities = ["read-logs"]      # added to what the policy level grants
//! }
//! namespace "team-*" { policy = "read" }
//! node     { policy = "read" }        # read-node / write-node
//! operator { policy = "read" }        # operator:read / operator:write
//! agent    { policy = "write" }       # may register nodes (an introduction token)
//! ```
//!
//! A policy is parsed once, when it is applied, and stored with its parsed rules, so the
//! meaning of a stored policy never depends on the parser of the server that reads it.

use super::capability::{Area, Level, NamespaceCapability};
use crate::types::Index;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The longest policy name, and the most rules of one kind a policy may hold.
pub const MAX_POLICY_NAME: usize = 128;
const MAX_RULES: usize = 256;

/// A stored policy.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct AclPolicy {
    pub name: String,
    pub description: String,
    /// The HCL the operator applied, shown back by `acl policy info`.
    pub rules_source: String,
    pub rules: PolicyRules,
    pub create_index: Index,
    pub modify_index: Index,
}

/// What a policy grants, parsed.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct PolicyRules {
    pub namespaces: Vec<NamespaceRule>,
    pub areas: BTreeMap<Area, Level>,
}

/// The rule of one `namespace "PATTERN" { ... }` block.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct NamespaceRule {
    /// A namespace name, or a pattern where `*` matches any run of characters.
    pub pattern: String,
    pub level: Option<Level>,
    pub capabilities: BTreeSet<NamespaceCapability>,
}

/// Why a policy was refused; `field` names where, as `namespace "prod".policy`.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("rules: not valid HCL: {0}")]
    Syntax(String),
    #[error("{field}: {reason}")]
    Field { field: String, reason: String },
    #[error("name: {0}")]
    Name(String),
}

fn field(field: impl Into<String>, reason: impl Into<String>) -> PolicyError {
    PolicyError::Field {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Checks a policy name: 1 to 128 letters, digits, `-` and `_`.
pub fn validate_policy_name(name: &str) -> Result<(), PolicyError> {
    if name.is_empty() || name.len() > MAX_POLICY_NAME {
        return Err(PolicyError::Name(format!(
            "{name:?} must be 1 to {MAX_POLICY_NAME} characters"
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(PolicyError::Name(format!(
            "{name:?} may hold only letters, digits, '-' and '_', not {c:?}"
        )));
    }
    Ok(())
}

/// Parses policy rules from HCL.
pub fn parse_rules(source: &str) -> Result<PolicyRules, PolicyError> {
    let body = hcl::parse(source).map_err(|e| PolicyError::Syntax(e.to_string()))?;
    let mut rules = PolicyRules::default();
    let mut seen_patterns = BTreeSet::new();
    for structure in body.into_inner() {
        let block = match structure {
            hcl::Structure::Block(b) => b,
            hcl::Structure::Attribute(a) => {
                return Err(field(
                    a.key.as_str(),
                    "is not a rule (expected a namespace, node, operator or agent block)",
                ));
            }
        };
        let kind = block.identifier.as_str().to_string();
        match kind.as_str() {
            "namespace" => {
                let [label] = block.labels.as_slice() else {
                    return Err(field(
                        "namespace",
                        "needs exactly one label: the namespace or a pattern",
                    ));
                };
                let pattern = label.as_str().to_string();
                let at = format!("namespace {pattern:?}");
                check_pattern(&at, &pattern)?;
                if !seen_patterns.insert(pattern.clone()) {
                    return Err(field(at, "appears twice"));
                }
                let (level, capabilities) = namespace_body(&at, block.body)?;
                rules.namespaces.push(NamespaceRule {
                    pattern,
                    level,
                    capabilities,
                });
                if rules.namespaces.len() > MAX_RULES {
                    return Err(field("namespace", format!("more than {MAX_RULES} rules")));
                }
            }
            other => {
                let Some(area) = Area::ALL.into_iter().find(|a| a.as_str() == other) else {
                    return Err(field(
                        other,
                        "is not a rule (expected a namespace, node, operator or agent block)",
                    ));
                };
                if !block.labels.is_empty() {
                    return Err(field(other, "takes no label"));
                }
                if rules.areas.contains_key(&area) {
                    return Err(field(other, "appears twice"));
                }
                let level = area_body(other, block.body)?;
                rules.areas.insert(area, level);
            }
        }
    }
    Ok(rules)
}

fn check_pattern(at: &str, pattern: &str) -> Result<(), PolicyError> {
    if pattern.is_empty() || pattern.len() > 128 {
        return Err(field(at, "the namespace must be 1 to 128 characters"));
    }
    if let Some(c) = pattern
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '*')))
    {
        return Err(field(
            at,
            format!("{c:?} is not allowed in a namespace pattern (letters, digits, '-', '_', '*')"),
        ));
    }
    Ok(())
}

fn string_of(at: &str, expr: hcl::Expression) -> Result<String, PolicyError> {
    match expr {
        hcl::Expression::String(s) => Ok(s),
        hcl::Expression::TemplateExpr(t) => Ok(t.to_string()),
        other => Err(field(at, format!("must be a string, not {other}"))),
    }
}

fn level_of(at: &str, expr: hcl::Expression) -> Result<Level, PolicyError> {
    let s = string_of(at, expr)?;
    Level::parse(&s).ok_or_else(|| {
        field(
            at,
            format!("{s:?} is not a policy (expected deny, read or write)"),
        )
    })
}

type NamespaceGrant = (Option<Level>, BTreeSet<NamespaceCapability>);

fn namespace_body(at: &str, body: hcl::Body) -> Result<NamespaceGrant, PolicyError> {
    let mut level = None;
    let mut caps = BTreeSet::new();
    for s in body.into_inner() {
        let hcl::Structure::Attribute(a) = s else {
            return Err(field(at, "holds only policy and capabilities"));
        };
        let here = format!("{at}.{}", a.key.as_str());
        match a.key.as_str() {
            "policy" => level = Some(level_of(&here, a.expr)?),
            "capabilities" => {
                let hcl::Expression::Array(items) = a.expr else {
                    return Err(field(here, "must be a list of capability names"));
                };
                for item in items {
                    let name = string_of(&here, item)?;
                    let cap = NamespaceCapability::parse(&name).ok_or_else(|| {
                        let known: Vec<_> = NamespaceCapability::ALL
                            .iter()
                            .map(|c| c.as_str())
                            .collect();
                        field(
                            &here,
                            format!("unknown capability {name:?} (known: {})", known.join(", ")),
                        )
                    })?;
                    caps.insert(cap);
                }
            }
            other => {
                return Err(field(
                    here,
                    format!("unknown attribute {other:?} (expected policy or capabilities)"),
                ));
            }
        }
    }
    if level.is_none() && caps.is_empty() {
        return Err(field(at, "grants nothing: set policy or capabilities"));
    }
    Ok((level, caps))
}

fn area_body(at: &str, body: hcl::Body) -> Result<Level, PolicyError> {
    let mut level = None;
    for s in body.into_inner() {
        let hcl::Structure::Attribute(a) = s else {
            return Err(field(at, "holds only policy"));
        };
        let here = format!("{at}.{}", a.key.as_str());
        if a.key.as_str() != "policy" {
            return Err(field(here, "unknown attribute (expected policy)"));
        }
        level = Some(level_of(&here, a.expr)?);
    }
    level.ok_or_else(|| field(format!("{at}.policy"), "is required"))
}
