//! Version constraints of the `version` and `semver` operators (`">= 1.2, < 2"`).
//!
//! Parsed here once for validation and for the feasibility checker, so that every constraint
//! validation accepts is one placement can evaluate, with the same meaning. The grammar and
//! semantics follow Nomad:
//!
//! * `version` (HashiCorp go-version): any number of numeric segments, an optional `v`
//!   prefix, pre-release and build suffixes, operators `=`, `!=`, `>`, `>=`, `<`, `<=` and
//!   `~>` (pessimistic). A pre-release version only satisfies an ordering clause whose own
//!   version is a pre-release of the same numbers, so `1.3.0-beta` does not satisfy `>= 1.0`.
//! * `semver`: SemVer 2.0 versions of at most three numbers (missing ones are 0), validated
//!   with the `semver` crate, operators as above without `~>`, and plain SemVer precedence:
//!   `1.3.0-beta` satisfies `>= 1.0`.
//!
//! Clauses are separated by commas and must all hold. Build metadata is ignored when
//! comparing.

use std::cmp::Ordering;

/// Which of Nomad's two version grammars a constraint uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum VersionFlavor {
    /// The `version` operator (go-version rules).
    Version,
    /// The `semver` operator (SemVer 2.0 precedence).
    Semver,
}

/// Why a version or constraint string did not parse; lowercase, for operators.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct VersionError(String);

/// A parsed version constraint: every clause must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionConstraint {
    flavor: VersionFlavor,
    clauses: Vec<Clause>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Pessimistic,
}

/// Longest spellings first so `>=` is not read as `>` followed by `=1.0`.
const OPS: [(&str, Op); 7] = [
    ("~>", Op::Pessimistic),
    (">=", Op::Ge),
    ("<=", Op::Le),
    ("!=", Op::Ne),
    ("=", Op::Eq),
    (">", Op::Gt),
    ("<", Op::Lt),
];

#[derive(Clone, Debug, PartialEq, Eq)]
struct Clause {
    op: Op,
    version: Version,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Version {
    /// Numeric segments, padded with zeros to at least three.
    segments: Vec<u64>,
    /// How many segments were written (`~> 1.2` pins one, `~> 1.2.3` pins two).
    written: usize,
    /// Pre-release identifiers without the leading `-`; empty when none.
    pre: String,
}

impl VersionConstraint {
    /// Parses `text` in the given grammar.
    pub fn parse(text: &str, flavor: VersionFlavor) -> Result<Self, VersionError> {
        if text.trim().is_empty() {
            return Err(VersionError("constraint is empty".into()));
        }
        let clauses = text
            .split(',')
            .map(|clause| parse_clause(clause.trim(), flavor))
            .collect::<Result<_, _>>()?;
        Ok(Self { flavor, clauses })
    }

    /// Whether `version` (a node attribute such as `1.2.3` or `v5.15.0-91`) satisfies every
    /// clause. A value that is not a version in this grammar satisfies nothing.
    pub fn matches(&self, version: &str) -> bool {
        let Ok(v) = parse_version(version.trim(), self.flavor) else {
            return false;
        };
        self.clauses.iter().all(|c| c.matches(&v, self.flavor))
    }
}

fn parse_clause(clause: &str, flavor: VersionFlavor) -> Result<Clause, VersionError> {
    if clause.is_empty() {
        return Err(VersionError("empty clause between commas".into()));
    }
    let (op, rest) = OPS
        .iter()
        .find_map(|(spelling, op)| clause.strip_prefix(spelling).map(|rest| (*op, rest)))
        .unwrap_or((Op::Eq, clause));
    if op == Op::Pessimistic && flavor == VersionFlavor::Semver {
        return Err(VersionError(
            "operator \"~>\" is only supported by version constraints".into(),
        ));
    }
    let rest = rest.trim();
    if rest.is_empty() {
        return Err(VersionError(format!("clause {clause:?} has no version")));
    }
    Ok(Clause {
        op,
        version: parse_version(rest, flavor)?,
    })
}

fn parse_version(text: &str, flavor: VersionFlavor) -> Result<Version, VersionError> {
    let bad = |why: &str| VersionError(format!("{text:?} is not a version: {why}"));
    let s = text.strip_prefix('v').unwrap_or(text);
    let core_len = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (core, tail) = s.split_at(core_len);
    if core.is_empty() {
        return Err(bad("it must start with a number"));
    }
    let mut segments = Vec::new();
    for part in core.split('.') {
        if part.is_empty() {
            return Err(bad("empty number between dots"));
        }
        segments.push(part.parse::<u64>().map_err(|_| bad("number too large"))?);
    }
    let (pre, build) = match tail.split_once('+') {
        Some((pre, build)) => (pre, Some(build)),
        None => (tail, None),
    };
    let pre = if pre.is_empty() {
        pre
    } else if let Some(p) = pre.strip_prefix('-') {
        if p.is_empty() {
            return Err(bad("empty pre-release"));
        }
        p
    } else if flavor == VersionFlavor::Version {
        // go-version also reads `1.2.3beta1`; SemVer needs the dash.
        pre
    } else {
        return Err(bad("a pre-release must follow a '-'"));
    };
    let idents_ok = |part: &str| {
        part.split('.').all(|id| {
            !id.is_empty()
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '~')
        })
    };
    if !pre.is_empty() && !idents_ok(pre) {
        return Err(bad(&format!("invalid pre-release {pre:?}")));
    }
    if let Some(build) = build.filter(|b| !idents_ok(b)) {
        return Err(bad(&format!("invalid build metadata {build:?}")));
    }
    let written = segments.len();
    if flavor == VersionFlavor::Semver {
        if written > 3 {
            return Err(bad("semver versions have at most three numbers"));
        }
        // Let the semver crate judge the suffixes by SemVer 2.0 (no leading zeros in
        // numeric identifiers, no `~`).
        let mut normal = String::new();
        for i in 0..3 {
            if i > 0 {
                normal.push('.');
            }
            normal.push_str(&segments.get(i).copied().unwrap_or(0).to_string());
        }
        if !pre.is_empty() {
            normal.push('-');
            normal.push_str(pre);
        }
        if let Some(build) = build {
            normal.push('+');
            normal.push_str(build);
        }
        semver::Version::parse(&normal).map_err(|e| bad(&e.to_string()))?;
    }
    segments.resize(written.max(3), 0);
    Ok(Version {
        segments,
        written,
        pre: pre.to_owned(),
    })
}

impl Clause {
    fn matches(&self, v: &Version, flavor: VersionFlavor) -> bool {
        let c = &self.version;
        let ord = compare(v, c);
        // go-version keeps pre-releases out of ordering clauses about other releases.
        let pre_ok = flavor == VersionFlavor::Semver || prerelease_check(v, c);
        match self.op {
            Op::Eq => ord == Ordering::Equal,
            Op::Ne => ord != Ordering::Equal,
            Op::Gt => pre_ok && ord == Ordering::Greater,
            Op::Ge => pre_ok && ord != Ordering::Less,
            Op::Lt => pre_ok && ord == Ordering::Less,
            Op::Le => pre_ok && ord != Ordering::Greater,
            Op::Pessimistic => pessimistic(v, c),
        }
    }
}

fn segment(v: &Version, i: usize) -> u64 {
    v.segments.get(i).copied().unwrap_or(0)
}

/// Numbers first (missing ones are 0), then a release above any of its pre-releases, then
/// pre-release identifiers as SemVer orders them.
fn compare(a: &Version, b: &Version) -> Ordering {
    let len = a.segments.len().max(b.segments.len());
    (0..len)
        .map(|i| segment(a, i).cmp(&segment(b, i)))
        .find(|o| o.is_ne())
        .unwrap_or_else(|| match (a.pre.is_empty(), b.pre.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => compare_pre(&a.pre, &b.pre),
        })
}

fn compare_pre(a: &str, b: &str) -> Ordering {
    let numeric = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    let mut left = a.split('.');
    let mut right = b.split('.');
    loop {
        let ord = match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => match (numeric(x), numeric(y)) {
                (true, true) => {
                    let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                    x.len().cmp(&y.len()).then_with(|| x.cmp(y))
                }
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                (false, false) => x.cmp(y),
            },
        };
        if ord.is_ne() {
            return ord;
        }
    }
}

/// go-version's rule: a pre-release satisfies an ordering clause only when the clause names
/// a pre-release of the same numbers.
fn prerelease_check(v: &Version, c: &Version) -> bool {
    match (v.pre.is_empty(), c.pre.is_empty()) {
        (false, false) => {
            (0..v.segments.len().max(c.segments.len())).all(|i| segment(v, i) == segment(c, i))
        }
        (false, true) => false,
        (true, _) => true,
    }
}

/// `~> 1.2` means `>= 1.2, < 2`; `~> 1.2.3` means `>= 1.2.3, < 1.3`.
fn pessimistic(v: &Version, c: &Version) -> bool {
    if !prerelease_check(v, c) || (!c.pre.is_empty() && v.pre.is_empty()) {
        return false;
    }
    if compare(v, c) == Ordering::Less || c.segments.len() > v.segments.len() {
        return false;
    }
    let pinned = c.written.saturating_sub(1);
    (0..pinned).all(|i| segment(v, i) == segment(c, i)) && segment(v, pinned) >= segment(c, pinned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(c: &str) -> VersionConstraint {
        VersionConstraint::parse(c, VersionFlavor::Version).unwrap()
    }

    fn semver(c: &str) -> VersionConstraint {
        VersionConstraint::parse(c, VersionFlavor::Semver).unwrap()
    }

    #[test]
    fn parses_nomad_style_constraints() {
        for c in [
            ">= 1.2, < 2",
            "~> 1.2",
            "= 1.2.3.4",
            "!= v1.0",
            "1.2.3-beta.1+build.5",
            "1.2.3beta",
        ] {
            assert!(
                VersionConstraint::parse(c, VersionFlavor::Version).is_ok(),
                "{c}"
            );
        }
        for c in [">= 1.0.0, < 2.0.0", "!= 1.2", "= v1.2.3-rc.1+abc", "<1"] {
            assert!(
                VersionConstraint::parse(c, VersionFlavor::Semver).is_ok(),
                "{c}"
            );
        }
    }

    #[test]
    fn rejects_malformed_constraints_with_a_reason() {
        for (c, flavor, why) in [
            ("", VersionFlavor::Version, "constraint is empty"),
            (">= 1.0,", VersionFlavor::Version, "empty clause"),
            (">=", VersionFlavor::Version, "has no version"),
            (">= abc", VersionFlavor::Version, "must start with a number"),
            ("1..2", VersionFlavor::Version, "empty number"),
            ("1.2-", VersionFlavor::Version, "empty pre-release"),
            ("1.2-be$ta", VersionFlavor::Version, "invalid pre-release"),
            ("=> 1.0", VersionFlavor::Version, "is not a version"),
            ("99999999999999999999", VersionFlavor::Version, "too large"),
            ("~> 1.2", VersionFlavor::Semver, "only supported by version"),
            ("1.2.3.4", VersionFlavor::Semver, "at most three numbers"),
            ("1.0.0-beta.01", VersionFlavor::Semver, "leading zero"),
            ("1.0.0beta", VersionFlavor::Semver, "must follow a '-'"),
        ] {
            let err = VersionConstraint::parse(c, flavor)
                .expect_err(c)
                .to_string();
            assert!(err.contains(why), "{c}: {err}");
        }
    }

    #[test]
    fn version_ranges_compare_numerically() {
        let c = version(">= 1.2, < 2");
        assert!(c.matches("1.2"));
        assert!(c.matches("1.10.0"));
        assert!(c.matches("v1.9.9.9"));
        assert!(!c.matches("1.1.99"));
        assert!(!c.matches("2.0.0"));
        assert!(!c.matches("not-a-version"));
        assert!(version("!= 1.0").matches("1.0.1"));
        assert!(!version("!= 1.0").matches("1.0.0+build"));
    }

    #[test]
    fn version_keeps_prereleases_out_of_other_releases_ranges_but_semver_does_not() {
        assert!(!version(">= 1.0").matches("1.3.0-beta"));
        assert!(semver(">= 1.0").matches("1.3.0-beta"));
        assert!(version(">= 1.3.0-alpha").matches("1.3.0-beta"));
        assert!(!version(">= 1.3.0-alpha").matches("1.4.0-beta"));
        assert!(semver("< 1.3.0").matches("1.3.0-rc.1"));
        assert!(semver("> 1.0.0-alpha.2").matches("1.0.0-alpha.10"));
        assert!(semver("> 1.0.0-alpha").matches("1.0.0-alpha.1"));
        assert!(semver("> 1.0.0-1").matches("1.0.0-alpha"));
    }

    #[test]
    fn pessimistic_pins_all_but_the_last_written_number() {
        let minor = version("~> 1.2");
        assert!(minor.matches("1.2"));
        assert!(minor.matches("1.9.3"));
        assert!(!minor.matches("2.0"));
        assert!(!minor.matches("1.1"));
        let patch = version("~> 1.2.3");
        assert!(patch.matches("1.2.3"));
        assert!(patch.matches("1.2.10"));
        assert!(!patch.matches("1.3.0"));
        assert!(!patch.matches("1.2.2"));
    }
}
