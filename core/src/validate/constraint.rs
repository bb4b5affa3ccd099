//! Checks of placement constraints, operator by operator, following Nomad's
//! `Constraint.Validate` plus the interpolation checks its feasibility checker relies on.

use super::{Report, VersionConstraint, VersionFlavor, show, tidy_message};
use crate::types::{Constraint, Operator};

/// The node fields a `${node.…}` target may name; these are the ones drover's nodes have.
const NODE_TARGETS: [&str; 4] = ["unique.id", "unique.name", "datacenter", "class"];

/// Checks the first `max_constraints` constraints of a job (`prefix` empty) or group.
pub(super) fn check_list(r: &mut Report<'_>, prefix: &str, constraints: &[Constraint]) {
    let max = r.limits.max_constraints;
    if constraints.len() > max {
        r.err(
            prefix,
            "constraints",
            format!(
                "{} constraints are above the limit of {max}",
                constraints.len()
            ),
        );
    }
    for (i, c) in constraints.iter().take(max).enumerate() {
        let path = if prefix.is_empty() {
            format!("constraints[{i}]")
        } else {
            format!("{prefix}.constraints[{i}]")
        };
        check(r, &path, c);
    }
}

fn check(r: &mut Report<'_>, p: &str, c: &Constraint) {
    let max = r.limits.max_string_len;
    let op = c.operator;
    if r.text(p, "l_target", "l_target", &c.l_target, max) {
        if c.l_target.is_empty() {
            // distinct_hosts is about the node itself and needs no attribute.
            if op != Operator::DistinctHosts {
                r.err(
                    p,
                    "l_target",
                    format!("l_target is required by the {op} operator"),
                );
            }
        } else if let Err(why) = check_interpolation(&c.l_target) {
            r.err(p, "l_target", why);
        }
    }
    if !r.text(p, "r_target", "r_target", &c.r_target, max) {
        return;
    }
    let rt = c.r_target.as_str();
    match op {
        Operator::IsSet | Operator::IsNotSet => {
            if !rt.is_empty() {
                r.err(
                    p,
                    "r_target",
                    format!("the {op} operator takes no r_target (got {})", show(rt)),
                );
            }
        }
        Operator::DistinctHosts => {
            if !matches!(rt, "" | "true" | "false") {
                r.err(
                    p,
                    "r_target",
                    format!(
                        "r_target of distinct_hosts must be empty, true or false (got {})",
                        show(rt)
                    ),
                );
            }
        }
        Operator::DistinctProperty => {
            // An optional count of allocations allowed per distinct value.
            if !rt.is_empty() && !rt.parse::<u64>().is_ok_and(|n| n >= 1) {
                r.err(
                    p,
                    "r_target",
                    format!(
                        "r_target of distinct_property must be a count of at least 1 (got {})",
                        show(rt)
                    ),
                );
            }
        }
        _ if rt.is_empty() => {
            r.err(
                p,
                "r_target",
                format!("r_target is required by the {op} operator"),
            );
        }
        Operator::Regexp => {
            if let Err(e) = regex::Regex::new(rt) {
                r.err(
                    p,
                    "r_target",
                    format!(
                        "regexp {} does not compile: {}",
                        show(rt),
                        tidy_message(&e.to_string())
                    ),
                );
            }
        }
        Operator::Version | Operator::Semver => {
            let flavor = if op == Operator::Version {
                VersionFlavor::Version
            } else {
                VersionFlavor::Semver
            };
            if let Err(e) = VersionConstraint::parse(rt, flavor) {
                r.err(
                    p,
                    "r_target",
                    format!("{op} constraint {} is invalid: {e}", show(rt)),
                );
            }
        }
        Operator::Equal
        | Operator::NotEqual
        | Operator::Less
        | Operator::LessEqual
        | Operator::Greater
        | Operator::GreaterEqual
        | Operator::SetContains
        | Operator::SetContainsAny => {
            // Nomad resolves interpolation on both sides of these operators.
            if let Err(why) = check_interpolation(rt) {
                r.err(p, "r_target", why);
            }
        }
    }
}

/// Every `${` must be closed and name `attr.<name>`, `meta.<name>` or one of
/// [`NODE_TARGETS`] under `node.`; anything else would silently never match on any node.
fn check_interpolation(s: &str) -> Result<(), String> {
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let inner = match after.find('}') {
            Some(end) if !after[..end].contains("${") => &after[..end],
            _ => return Err(format!("unterminated \"${{\" in {}", show(s))),
        };
        let known = match inner.split_once('.') {
            Some(("attr" | "meta", name)) => !name.is_empty(),
            Some(("node", field)) => NODE_TARGETS.contains(&field),
            _ => false,
        };
        if !known {
            return Err(format!(
                "unknown target {} (known: ${{attr.<name>}}, ${{meta.<name>}}, ${{node.{}}})",
                show(&format!("${{{inner}}}")),
                NODE_TARGETS.join("|")
            ));
        }
        rest = &after[inner.len() + 1..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_interpolation;

    #[test]
    fn interpolation_accepts_known_targets_and_literals() {
        for ok in [
            "${attr.kernel.name}",
            "${meta.rack}",
            "${node.unique.id}",
            "${node.class}-suffix",
            "prefix ${attr.a} and ${meta.b}",
            "linux",
            "$ {not.interpolation}",
            "",
        ] {
            assert_eq!(check_interpolation(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn interpolation_rejects_unterminated_empty_and_unknown() {
        for (bad, why) in [
            ("${attr.kernel.name", "unterminated"),
            ("${attr.a${meta.b}", "unterminated"),
            ("${attr.a} ${", "unterminated"),
            ("${}", "unknown target \"${}\""),
            ("${attr.}", "unknown target"),
            ("${env.HOME}", "unknown target \"${env.HOME}\""),
            ("${node.pool}", "unknown target"),
            ("${kernel}", "unknown target"),
        ] {
            let err = check_interpolation(bad).expect_err(bad);
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
