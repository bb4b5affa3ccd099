//! Feasibility: whether a node may take an allocation of a group at all, before any ranking.
//!
//! The checks run in a fixed order and the first that fails names the reason in the placement
//! metrics: the job's datacenters ([`ready_nodes_in_dcs`]), eligibility and health
//! ([`Node::is_schedulable`]), the job's constraints, the group's drivers (a node must
//! advertise `driver.<name> = 1`, which agents set only for a driver that is detected and
//! healthy; counted as `missing driver <name>`), the group's constraints, the `distinct_*`
//! constraints, and finally resources (done by the stack, which knows the plan).
//! Within the constraints, the class-stable ones (job's, then group's) are checked before the
//! per-node ones, so that a cached verdict answers first; a node failing one of each is
//! counted under the class-stable one.
//!
//! Constraints are compiled once per eval into `Checker`s: targets parsed, regexes compiled
//! and version constraints parsed ([`VersionConstraint`], shared with validation so a
//! constraint validation accepts is one placement evaluates with the same meaning).
//!
//! A constraint that reads only *class-stable* targets (attributes and meta other than
//! `unique.*`, the datacenter, the class, literals) gives the same answer on every node with
//! the same computed class, so the stack evaluates it once per computed class, as Nomad
//! does. The computed class is derived from exactly the fields such targets can read, so the
//! cache is exact even when an operator gives differing nodes one class name. Constraints on
//! `unique.*` targets and the `distinct_*` operators cannot be captured that way: they are
//! evaluated per node and make the eval *escaped* for blocked-eval purposes.

mod usage;

#[cfg(test)]
mod tests;

pub use usage::usage_after_plan;
pub(crate) use usage::{AllocLookup, PlanOnNode};

use crate::state::StateSnapshot;
use crate::types::*;
use crate::validate::{VersionConstraint, VersionFlavor};
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The nodes a job's allocations may be placed on, and how many there are per datacenter
/// (the placement metrics' `nodes_available`).
///
/// A node qualifies when its datacenter matches one of the job's datacenter globs (`dc1`,
/// `dc*`, `*`) and it is [schedulable](Node::is_schedulable): ready, eligible, not draining
/// and healthy. Suspended and offlined nodes never receive placements. The nodes come in
/// node-id order, so the result is a deterministic function of the snapshot. They are read
/// from the store's per-datacenter set of schedulable nodes, so no node is touched here.
pub fn ready_nodes_in_dcs<'s>(
    snapshot: &'s StateSnapshot,
    job: &Job,
) -> (Vec<&'s Arc<Node>>, BTreeMap<String, u32>) {
    let globs = DatacenterGlobs::new(&job.datacenters);
    let mut nodes = Vec::new();
    let mut per_dc: BTreeMap<String, u32> = BTreeMap::new();
    let mut datacenters = 0;
    for (dc, set) in snapshot.schedulable_nodes() {
        if !globs.matches(dc) {
            continue;
        }
        datacenters += 1;
        per_dc.insert(dc.to_owned(), u32::try_from(set.len()).unwrap_or(u32::MAX));
        nodes.extend(set.values());
    }
    if datacenters > 1 {
        nodes.sort_unstable_by_key(|n| n.id);
    }
    (nodes, per_dc)
}

/// Whether a node still suits a job's group, whatever its capacity and readiness: its
/// datacenter and the job's and the group's constraints. (`distinct_hosts` and
/// `distinct_property` are about where placements go together, not about the node.) A
/// system allocation on a node that no longer suits its job is stopped; on one that only
/// takes no new work it stays.
#[derive(Debug)]
pub(crate) struct NodeMatch {
    datacenters: DatacenterGlobs,
    job: Compiled,
    groups: BTreeMap<String, Compiled>,
}

impl NodeMatch {
    pub(crate) fn new(job: &Job) -> NodeMatch {
        NodeMatch {
            datacenters: DatacenterGlobs::new(&job.datacenters),
            job: Compiled::new(&job.constraints),
            groups: job
                .groups
                .iter()
                .map(|g| (g.name.clone(), Compiled::new(&g.constraints)))
                .collect(),
        }
    }

    /// Whether `node` still takes `group`'s tasks as they are: it matches (below) and
    /// advertises every driver they use. An in-place update needs this; otherwise the
    /// allocation is replaced, as Nomad's `inplaceUpdate` re-runs feasibility on the node.
    pub(crate) fn runs(&self, node: &Node, group: &TaskGroup) -> bool {
        self.matches(node, &group.name)
            && group_drivers(group)
                .iter()
                .all(|d| Checker::driver(d).holds(node))
    }

    pub(crate) fn matches(&self, node: &Node, group: &str) -> bool {
        let holds = |c: &Compiled| {
            c.first_stable_failure(node).is_none() && c.first_per_node_failure(node).is_none()
        };
        self.datacenters.matches(&node.datacenter)
            && holds(&self.job)
            && self.groups.get(group).is_none_or(holds)
    }
}

/// A job's datacenter patterns. A pattern that is not a valid glob matches only itself
/// literally (validation refuses such patterns; this keeps a bad one from matching more).
#[derive(Debug)]
struct DatacenterGlobs {
    set: globset::GlobSet,
    literals: Vec<String>,
}

impl DatacenterGlobs {
    fn new(patterns: &[String]) -> Self {
        let mut builder = globset::GlobSetBuilder::new();
        let mut literals = Vec::new();
        for p in patterns {
            match globset::Glob::new(p) {
                Ok(g) => {
                    builder.add(g);
                }
                Err(_) => literals.push(p.clone()),
            }
        }
        let set = builder
            .build()
            .unwrap_or_else(|_| globset::GlobSet::empty());
        Self { set, literals }
    }

    fn matches(&self, dc: &str) -> bool {
        self.set.is_match(dc) || self.literals.iter().any(|l| l == dc)
    }
}

/// One side of a constraint: a node field, an attribute, a meta value, or a literal.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum Target {
    /// Text without interpolation; always "set".
    Literal(String),
    /// `${attr.<name>}`: `node.attributes[name]`.
    Attr(String),
    /// `${meta.<name>}`: `node.meta[name]`.
    Meta(String),
    /// `${node.datacenter}`.
    Datacenter,
    /// `${node.class}`: the class as the operator set it (possibly empty).
    Class,
    /// `${node.unique.name}`.
    UniqueName,
    /// `${node.unique.id}`.
    UniqueId,
    /// An interpolation validation would have refused (unknown name, unterminated); it
    /// resolves on no node.
    Unknown,
    /// Text mixing literals and interpolations (`${node.class}-gpu`); set only when every
    /// interpolation in it is.
    Template(Vec<Target>),
}

impl Target {
    pub(crate) fn parse(text: &str) -> Target {
        if !text.contains("${") {
            return Target::Literal(text.to_owned());
        }
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            if start > 0 {
                pieces.push(Target::Literal(rest[..start].to_owned()));
            }
            let after = &rest[start + 2..];
            match after.find('}') {
                Some(end) => {
                    pieces.push(Target::variable(&after[..end]));
                    rest = &after[end + 1..];
                }
                None => {
                    pieces.push(Target::Unknown);
                    rest = "";
                }
            }
        }
        if !rest.is_empty() {
            pieces.push(Target::Literal(rest.to_owned()));
        }
        if pieces.len() == 1 {
            pieces.swap_remove(0)
        } else {
            Target::Template(pieces)
        }
    }

    fn variable(name: &str) -> Target {
        match name {
            "node.datacenter" => Target::Datacenter,
            "node.class" => Target::Class,
            "node.unique.name" => Target::UniqueName,
            "node.unique.id" => Target::UniqueId,
            _ => match name.split_once('.') {
                Some(("attr", key)) if !key.is_empty() => Target::Attr(key.to_owned()),
                Some(("meta", key)) if !key.is_empty() => Target::Meta(key.to_owned()),
                _ => Target::Unknown,
            },
        }
    }

    /// Whether every node of one [`ComputedClass`] resolves this target to the same value.
    pub(crate) fn class_stable(&self) -> bool {
        match self {
            Target::Literal(_) | Target::Datacenter | Target::Class | Target::Unknown => true,
            Target::Attr(key) | Target::Meta(key) => !is_unique_key(key),
            Target::UniqueName | Target::UniqueId => false,
            Target::Template(pieces) => pieces.iter().all(Target::class_stable),
        }
    }

    /// The target's value on `node`, or `None` when the node does not have it. Borrows from
    /// the node or the target except for `unique.id` and templates, which are rare.
    pub(crate) fn resolve<'a>(&'a self, node: &'a Node) -> Option<Cow<'a, str>> {
        match self {
            Target::Literal(s) => Some(Cow::Borrowed(s)),
            Target::Attr(key) => node.attributes.get(key).map(|v| Cow::Borrowed(v.as_str())),
            Target::Meta(key) => node.meta.get(key).map(|v| Cow::Borrowed(v.as_str())),
            Target::Datacenter => Some(Cow::Borrowed(&node.datacenter)),
            Target::Class => Some(Cow::Borrowed(&node.node_class)),
            Target::UniqueName => Some(Cow::Borrowed(&node.name)),
            Target::UniqueId => Some(Cow::Owned(node.id.to_string())),
            Target::Unknown => None,
            Target::Template(pieces) => {
                let mut out = String::new();
                for p in pieces {
                    out.push_str(&p.resolve(node)?);
                }
                Some(Cow::Owned(out))
            }
        }
    }
}

/// What a compiled constraint tests once both targets are resolved.
#[derive(Debug)]
enum Test {
    Equal,
    NotEqual,
    Order(Operator),
    /// `None` when the pattern does not compile (validation refuses it): matches nothing.
    Regexp(Option<regex::Regex>),
    /// `None` when the constraint does not parse: matches nothing.
    Version(Option<VersionConstraint>),
    SetContains,
    SetContainsAny,
    IsSet,
    IsNotSet,
    Always,
}

/// A per-node constraint compiled for evaluation against many nodes.
#[derive(Debug)]
pub(crate) struct Checker {
    /// The constraint's `Display` form: the key of `constraint_filtered` in the metrics.
    pub(crate) key: String,
    l: Target,
    r: Target,
    test: Test,
}

impl Checker {
    /// The check that a node runs tasks of `driver`: its `driver.<name>` attribute is `1`.
    /// Class-stable, so it is evaluated once per computed class like a constraint.
    pub(crate) fn driver(driver: &str) -> Checker {
        Checker {
            key: missing_driver_key(driver),
            l: Target::Attr(format!("driver.{driver}")),
            r: Target::Literal("1".into()),
            test: Test::Equal,
        }
    }

    /// Compiles a constraint whose operator is not one of the `distinct_*` ones (those are
    /// about allocations, not about the node; see [`Compiled`]).
    pub(crate) fn new(c: &Constraint) -> Checker {
        let test = match c.operator {
            Operator::Equal => Test::Equal,
            Operator::NotEqual => Test::NotEqual,
            op @ (Operator::Less
            | Operator::LessEqual
            | Operator::Greater
            | Operator::GreaterEqual) => Test::Order(op),
            Operator::Regexp => Test::Regexp(regex::Regex::new(&c.r_target).ok()),
            Operator::Version => {
                Test::Version(VersionConstraint::parse(&c.r_target, VersionFlavor::Version).ok())
            }
            Operator::Semver => {
                Test::Version(VersionConstraint::parse(&c.r_target, VersionFlavor::Semver).ok())
            }
            Operator::SetContains => Test::SetContains,
            Operator::SetContainsAny => Test::SetContainsAny,
            Operator::IsSet => Test::IsSet,
            Operator::IsNotSet => Test::IsNotSet,
            // About allocations, not the node: [`Compiled`] handles them. Holding on every
            // node keeps a checker built from one harmless.
            Operator::DistinctHosts | Operator::DistinctProperty => Test::Always,
        };
        let (l, r) = (Target::parse(&c.l_target), Target::parse(&c.r_target));
        Checker {
            key: constraint_key(c),
            l,
            r,
            test,
        }
    }

    /// Whether the answer is the same on every node of one computed class.
    pub(crate) fn class_stable(&self) -> bool {
        let r_matters = !matches!(
            self.test,
            Test::Regexp(_) | Test::Version(_) | Test::IsSet | Test::IsNotSet | Test::Always
        );
        let l_matters = !matches!(self.test, Test::Always);
        (!l_matters || self.l.class_stable()) && (!r_matters || self.r.class_stable())
    }

    /// Whether `node` satisfies the constraint. A target the node does not have fails every
    /// operator except `is_not_set` and `!=`, where, as in Nomad, a missing value differs
    /// from any present one (a node without `${meta.rack}` satisfies `${meta.rack} != r1`;
    /// two missing values are equal).
    pub(crate) fn holds(&self, node: &Node) -> bool {
        let l = || self.l.resolve(node);
        let both = || Some((self.l.resolve(node)?, self.r.resolve(node)?));
        match &self.test {
            Test::Always => true,
            Test::IsSet => l().is_some(),
            Test::IsNotSet => l().is_none(),
            Test::Regexp(re) => l().is_some_and(|l| re.as_ref().is_some_and(|re| re.is_match(&l))),
            Test::Version(vc) => l().is_some_and(|l| vc.as_ref().is_some_and(|vc| vc.matches(&l))),
            Test::Equal => both().is_some_and(|(l, r)| l == r),
            Test::NotEqual => match (self.l.resolve(node), self.r.resolve(node)) {
                (Some(l), Some(r)) => l != r,
                (None, None) => false,
                _ => true,
            },
            Test::Order(op) => both().is_some_and(|(l, r)| {
                compare(&l, &r).is_some_and(|ord| match op {
                    Operator::Less => ord == Ordering::Less,
                    Operator::LessEqual => ord != Ordering::Greater,
                    Operator::Greater => ord == Ordering::Greater,
                    _ => ord != Ordering::Less,
                })
            }),
            Test::SetContains => both()
                .is_some_and(|(l, r)| items(&r).all(|want| items(&l).any(|have| have == want))),
            Test::SetContainsAny => both()
                .is_some_and(|(l, r)| items(&r).any(|want| items(&l).any(|have| have == want))),
        }
    }
}

/// The key a constraint is counted under in `constraint_filtered`: its `Display` form, trimmed
/// so that `distinct_hosts` (which has no targets) reads `distinct_hosts`.
pub(crate) fn constraint_key(c: &Constraint) -> String {
    c.to_string().trim().to_owned()
}

/// The key a node without `driver` is counted under in `constraint_filtered`.
pub fn missing_driver_key(driver: &str) -> String {
    format!("missing driver {driver}")
}

/// The driver a `constraint_filtered` key names, when it is a missing-driver count.
pub fn missing_driver(key: &str) -> Option<&str> {
    key.strip_prefix("missing driver ")
}

/// The distinct drivers of `group`'s tasks, in order of first use.
pub(crate) fn group_drivers(group: &TaskGroup) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in &group.tasks {
        if !out.contains(&t.driver) {
            out.push(t.driver.clone());
        }
    }
    out
}

/// The items of a comma-separated set, trimmed.
fn items(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim)
}

/// Nomad's ordering: as integers when both sides are integers, else as floats when both are
/// numbers, else lexically. `None` when a number is NaN (nothing is ordered against it).
fn compare(l: &str, r: &str) -> Option<Ordering> {
    if let (Ok(a), Ok(b)) = (l.parse::<i64>(), r.parse::<i64>()) {
        return Some(a.cmp(&b));
    }
    if let (Ok(a), Ok(b)) = (l.parse::<f64>(), r.parse::<f64>()) {
        return a.partial_cmp(&b);
    }
    Some(l.cmp(r))
}

/// `distinct_property`: at most `limit` allocations per distinct value of `target`.
#[derive(Debug)]
pub(crate) struct PropertyLimit {
    pub(crate) key: String,
    pub(crate) target: Target,
    pub(crate) limit: u32,
}

/// One list of constraints (a job's or a group's), sorted by how they are evaluated.
#[derive(Debug, Default)]
pub(crate) struct Compiled {
    /// Evaluated once per computed class; in the order written.
    pub(crate) stable: Vec<Checker>,
    /// Evaluated on every node (they read `unique.*` targets); in the order written.
    pub(crate) per_node: Vec<Checker>,
    /// `distinct_hosts` is set (and not `"false"`): its metrics key.
    pub(crate) distinct_hosts: Option<String>,
    pub(crate) distinct_property: Vec<PropertyLimit>,
}

impl Compiled {
    pub(crate) fn new(constraints: &[Constraint]) -> Compiled {
        let mut out = Compiled::default();
        for c in constraints {
            match c.operator {
                Operator::DistinctHosts => {
                    if c.r_target.trim() != "false" && out.distinct_hosts.is_none() {
                        out.distinct_hosts = Some(constraint_key(c));
                    }
                }
                Operator::DistinctProperty => out.distinct_property.push(PropertyLimit {
                    key: constraint_key(c),
                    target: Target::parse(&c.l_target),
                    limit: c.r_target.trim().parse::<u32>().unwrap_or(1).max(1),
                }),
                _ => {
                    let checker = Checker::new(c);
                    if checker.class_stable() {
                        out.stable.push(checker);
                    } else {
                        out.per_node.push(checker);
                    }
                }
            }
        }
        out
    }

    /// A group's checks: its drivers first (a node without one is filtered as `missing
    /// driver <name>`), then its constraints.
    pub(crate) fn for_group(group: &TaskGroup) -> Compiled {
        let mut out = Compiled::new(&group.constraints);
        let drivers = group_drivers(group)
            .iter()
            .map(|d| Checker::driver(d))
            .collect::<Vec<_>>();
        out.stable.splice(0..0, drivers);
        out
    }

    /// Whether some constraint cannot be captured by node class (blocked evals must then be
    /// released by capacity changes on any class).
    pub(crate) fn escapes(&self) -> bool {
        !self.per_node.is_empty()
            || self.distinct_hosts.is_some()
            || !self.distinct_property.is_empty()
    }

    /// The first class-stable constraint `node` fails, by position in `stable`.
    pub(crate) fn first_stable_failure(&self, node: &Node) -> Option<usize> {
        self.stable.iter().position(|c| !c.holds(node))
    }

    /// The first per-node constraint `node` fails.
    pub(crate) fn first_per_node_failure(&self, node: &Node) -> Option<&Checker> {
        self.per_node.iter().find(|c| !c.holds(node))
    }
}

/// Identifies nodes that every class-stable constraint treats alike: same class, datacenter,
/// and attributes and meta apart from `unique.*` keys (Nomad's computed node class).
pub(crate) type ComputedClass = u32;

/// Interns computed class keys ([`Node::computed_class_key`]) as small dense ids, so a
/// class's verdicts live in a `Vec` slot.
#[derive(Debug, Default)]
pub(crate) struct ComputedClasses {
    by_key: HashMap<ComputedClassKey, ComputedClass>,
}

impl ComputedClasses {
    pub(crate) fn id_of(&mut self, key: ComputedClassKey) -> ComputedClass {
        let next = self.by_key.len() as ComputedClass;
        *self.by_key.entry(key).or_insert(next)
    }
}
