//! [`Acl`]: a token's policies merged into one answer to "may this token do that".
//!
//! Merging rules: for one namespace pattern (or one area), a `deny` in any of the token's
//! policies wins; otherwise the grants add up. A namespace is governed by the rule whose
//! pattern names it exactly, else by the matching pattern with the fewest wildcards and the
//! most literal characters (the closest match); no matching rule grants nothing.

use super::capability::{Area, Level, NamespaceCapability, Need};
use super::policy::AclPolicy;
use super::token::{AclToken, TokenKind};
use std::collections::{BTreeMap, BTreeSet};

/// What a token may do, resolved from its policies.
#[derive(Clone, Debug)]
pub enum Acl {
    /// ACLs are off: everything is allowed, as on a dev cluster.
    Disabled,
    /// A management token.
    Management { token: String },
    /// A client token and what its policies grant.
    Client { token: String, grants: Grants },
    /// A node's own identity (its id and secret): no grant at all. The one thing a node
    /// reads, the jobs of the allocations placed on it, is checked against state where it
    /// is asked for ([`Acl::node`]), since no policy can say "jobs that run here".
    Node { node: crate::types::NodeId },
}

/// The merged grants of a client token.
#[derive(Clone, Debug, Default)]
pub struct Grants {
    /// By pattern: `None` when denied, else the capabilities.
    namespaces: BTreeMap<String, Option<BTreeSet<NamespaceCapability>>>,
    globs: Vec<(String, globset::GlobMatcher)>,
    areas: BTreeMap<Area, Level>,
}

/// A refusal: the token is valid but lacks what the call needs.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("permission denied: token {token:?} lacks {needed}")]
pub struct Denied {
    pub token: String,
    pub needed: String,
}

impl Acl {
    /// Resolves `token` against the policies `policy` looks up; unknown policy names
    /// grant nothing (a policy deleted after the token was made).
    pub fn for_token<'p>(token: &AclToken, policy: impl Fn(&str) -> Option<&'p AclPolicy>) -> Acl {
        let name = token_label(token);
        if token.kind == TokenKind::Management {
            return Acl::Management { token: name };
        }
        let policies: Vec<&AclPolicy> = token.policies.iter().filter_map(|p| policy(p)).collect();
        Acl::Client {
            token: name,
            grants: Grants::merge(&policies),
        }
    }

    pub fn is_management(&self) -> bool {
        matches!(self, Acl::Disabled | Acl::Management { .. })
    }

    /// The node this is the identity of, for the reads only a node's own allocations allow.
    pub fn node(&self) -> Option<crate::types::NodeId> {
        match self {
            Acl::Node { node } => Some(*node),
            _ => None,
        }
    }

    /// Whether the token may do what `need` says.
    pub fn allows(&self, need: &Need<'_>) -> bool {
        match self {
            Acl::Disabled | Acl::Management { .. } => true,
            Acl::Node { .. } => false,
            Acl::Client { grants, .. } => match need {
                Need::Namespace(cap, ns) => grants.namespace_has(*cap, ns),
                Need::AnyNamespace(cap) => grants.any_namespace_has(*cap),
                Need::Area(area, level) => grants.area_covers(*area, *level),
                Need::Management => false,
                Need::AnyToken => true,
            },
        }
    }

    /// [`Acl::allows`], as a result whose error names the token and what it lacks.
    pub fn check(&self, need: &Need<'_>) -> Result<(), Denied> {
        if self.allows(need) {
            return Ok(());
        }
        let token = match self {
            Acl::Client { token, .. } | Acl::Management { token } => token.clone(),
            Acl::Node { node } => format!("node {}", node.short()),
            Acl::Disabled => String::new(),
        };
        Err(Denied {
            token,
            needed: need.to_string(),
        })
    }

    /// The level the token holds in `area` (`None`: nothing), for clients that grey out
    /// what the token cannot do.
    pub fn area_level(&self, area: Area) -> Option<Level> {
        match self {
            Acl::Disabled | Acl::Management { .. } => Some(Level::Write),
            Acl::Client { grants, .. } => grants.areas.get(&area).copied(),
            Acl::Node { .. } => None,
        }
    }

    /// The capabilities the token holds in namespace `ns`.
    pub fn namespace_capabilities(&self, ns: &str) -> BTreeSet<NamespaceCapability> {
        NamespaceCapability::ALL
            .into_iter()
            .filter(|c| self.allows(&Need::Namespace(*c, ns)))
            .collect()
    }
}

fn token_label(token: &AclToken) -> String {
    if token.name.is_empty() {
        token.accessor_id.short()
    } else {
        token.name.clone()
    }
}

impl Grants {
    fn merge(policies: &[&AclPolicy]) -> Grants {
        let mut namespaces: BTreeMap<String, Option<BTreeSet<NamespaceCapability>>> =
            BTreeMap::new();
        let mut areas: BTreeMap<Area, Level> = BTreeMap::new();
        for p in policies {
            for rule in &p.rules.namespaces {
                let mut caps: BTreeSet<_> = rule
                    .level
                    .map(|l| NamespaceCapability::of_level(l).iter().copied().collect())
                    .unwrap_or_default();
                caps.extend(rule.capabilities.iter().copied());
                let denied = rule.level == Some(Level::Deny);
                let slot = namespaces
                    .entry(rule.pattern.clone())
                    .or_insert_with(|| Some(BTreeSet::new()));
                match (denied, slot.as_mut()) {
                    (true, _) => *slot = None,
                    (false, Some(have)) => have.extend(caps),
                    (false, None) => {}
                }
            }
            for (area, level) in &p.rules.areas {
                let joined = Level::join(areas.get(area).copied(), Some(*level));
                if let Some(l) = joined {
                    areas.insert(*area, l);
                }
            }
        }
        let globs = namespaces
            .keys()
            .filter(|p| p.contains('*'))
            .filter_map(|p| {
                globset::Glob::new(p)
                    .ok()
                    .map(|g| (p.clone(), g.compile_matcher()))
            })
            .collect();
        Grants {
            namespaces,
            globs,
            areas,
        }
    }

    /// The capabilities of the rule that governs `ns`, `None` when no rule does or it denies.
    fn rule_for(&self, ns: &str) -> Option<&BTreeSet<NamespaceCapability>> {
        if let Some(exact) = self.namespaces.get(ns) {
            return exact.as_ref();
        }
        let closest = self
            .globs
            .iter()
            .filter(|(_, m)| m.is_match(ns))
            .min_by_key(|(p, _)| {
                let wildcards = p.matches('*').count();
                (wildcards, usize::MAX - (p.len() - wildcards))
            })?;
        self.namespaces.get(&closest.0)?.as_ref()
    }

    fn namespace_has(&self, cap: NamespaceCapability, ns: &str) -> bool {
        self.rule_for(ns).is_some_and(|caps| caps.contains(&cap))
    }

    fn any_namespace_has(&self, cap: NamespaceCapability) -> bool {
        self.namespaces
            .values()
            .any(|caps| caps.as_ref().is_some_and(|c| c.contains(&cap)))
    }

    fn area_covers(&self, area: Area, needed: Level) -> bool {
        self.areas.get(&area).is_some_and(|l| l.covers(needed))
    }
}

impl Acl {
    /// What an agent may do with its node's credentials instead of a token: read the jobs
    /// of the allocations placed on its node (checked by the RPC against state), nothing
    /// else.
    pub fn node_identity(node: crate::types::NodeId) -> Acl {
        Acl::Node { node }
    }

    /// Whether the token may receive `event`: node events need `read-node`, operator ones
    /// `operator:read`, the others `read-events` in their namespace. Events that name only a
    /// deleted object's id carry no namespace; any `read-events` grant sees them.
    pub fn may_see(&self, event: &crate::fsm::Event) -> bool {
        use crate::fsm::Topic;
        let need = match event.topic {
            Topic::Node => Need::Area(Area::Node, Level::Read),
            Topic::Operator => Need::Area(Area::Operator, Level::Read),
            Topic::Job
            | Topic::Evaluation
            | Topic::Allocation
            | Topic::Service
            | Topic::Deployment => match event.namespace() {
                Some(ns) => Need::Namespace(NamespaceCapability::ReadEvents, ns),
                None => Need::AnyNamespace(NamespaceCapability::ReadEvents),
            },
        };
        self.allows(&need)
    }

    /// Whether the token may subscribe to events at all (it may see some).
    pub fn may_subscribe(&self) -> bool {
        self.allows(&Need::AnyNamespace(NamespaceCapability::ReadEvents))
            || self.allows(&Need::Area(Area::Node, Level::Read))
            || self.allows(&Need::Area(Area::Operator, Level::Read))
    }
}
