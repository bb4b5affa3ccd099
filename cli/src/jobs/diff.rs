//! `job plan`'s field-level diff: what the job file changes in the registered spec, as
//! Nomad's plan prints it (`+` added, `-` removed, `~` changed), one line per field.
//!
//! Both jobs are compared as serde values after the file's job is canonicalized as the
//! server will canonicalize it, so defaults the server fills in never show as changes.
//! Lists of named things (groups, tasks) are matched by name, other lists by position;
//! what the server keeps about the job rather than its spec (version, indexes, status,
//! submit time) is not compared.

use drover_core::Job;
use serde::Serialize;
use serde_json::Value;

/// Kept by the server, not written in a job file.
const NOT_SPEC: [&str; 7] = [
    "version",
    "status",
    "stop",
    "submit_time",
    "create_index",
    "modify_index",
    "job_modify_index",
];

/// One field that differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldChange {
    /// `groups[api].tasks[server].resources.cpu_mhz`
    pub path: String,
    /// `None`: the field is new.
    pub old: Option<String>,
    /// `None`: the field goes away.
    pub new: Option<String>,
}

impl FieldChange {
    /// `+`, `-` or `~` and the change, as a plan line.
    pub fn line(&self) -> String {
        match (&self.old, &self.new) {
            (None, Some(new)) => format!("+ {}: {new}", self.path),
            (Some(old), None) => format!("- {}: {old}", self.path),
            (Some(old), Some(new)) => format!("~ {}: {old} => {new}", self.path),
            (None, None) => format!("~ {}", self.path),
        }
    }
}

/// What `new` (from the file) changes in `old` (registered).
pub fn job_diff(old: &Job, new: &Job) -> Vec<FieldChange> {
    let mut new = new.clone();
    drover_core::validate::canonicalize(&mut new);
    let (mut a, mut b) = (value(old), value(&new));
    for v in [&mut a, &mut b] {
        if let Value::Object(map) = v {
            for key in NOT_SPEC {
                map.remove(key);
            }
        }
    }
    let mut out = Vec::new();
    diff("", &a, &b, &mut out);
    out
}

fn value(job: &Job) -> Value {
    serde_json::to_value(job).unwrap_or(Value::Null)
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The name a list element is known by, when every element of both lists has one.
fn names(items: &[Value]) -> Option<Vec<String>> {
    items
        .iter()
        .map(|i| i.get("name").and_then(Value::as_str).map(String::from))
        .collect()
}

fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<FieldChange>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let null = Value::Null;
                diff(
                    &join(path, k),
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) => match (names(x), names(y)) {
            (Some(nx), Some(ny)) => {
                for (i, name) in nx.iter().enumerate() {
                    let here = format!("{path}[{name}]");
                    match ny.iter().position(|n| n == name) {
                        Some(j) => diff(&here, &x[i], &y[j], out),
                        None => out.push(FieldChange {
                            path: here,
                            old: Some("(removed)".into()),
                            new: None,
                        }),
                    }
                }
                for name in ny.iter().filter(|n| !nx.contains(n)) {
                    out.push(FieldChange {
                        path: format!("{path}[{name}]"),
                        old: None,
                        new: Some("(added)".into()),
                    });
                }
            }
            _ => {
                for i in 0..x.len().max(y.len()) {
                    let null = Value::Null;
                    diff(
                        &format!("{path}[{i}]"),
                        x.get(i).unwrap_or(&null),
                        y.get(i).unwrap_or(&null),
                        out,
                    );
                }
            }
        },
        (Value::Null, b) => out.push(FieldChange {
            path: path.to_string(),
            old: None,
            new: Some(show(b)),
        }),
        (a, Value::Null) => out.push(FieldChange {
            path: path.to_string(),
            old: Some(show(a)),
            new: None,
        }),
        (a, b) => out.push(FieldChange {
            path: path.to_string(),
            old: Some(show(a)),
            new: Some(show(b)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::mock;

    fn lines(old: &Job, new: &Job) -> Vec<String> {
        job_diff(old, new).iter().map(FieldChange::line).collect()
    }

    #[test]
    fn a_diff_names_each_changed_field() {
        let base = mock::service_job("web", 2);
        let mut registered = base.clone();
        drover_core::validate::canonicalize(&mut registered);
        registered.version = 4;
        registered.modify_index = 99;

        let same = base.clone();
        let mut count = base.clone();
        count.groups[0].count = 3;
        let mut cpu_and_meta = base.clone();
        cpu_and_meta.groups[0].tasks[0].resources.cpu_mhz = 250;
        cpu_and_meta.meta.insert("team".into(), "edge".into());
        let mut new_group = base.clone();
        let mut extra = new_group.groups[0].clone();
        extra.name = "cache".into();
        new_group.groups.push(extra);
        let group = base.groups[0].name.clone();
        let task = base.groups[0].tasks[0].name.clone();

        let cases: Vec<(&Job, Vec<String>)> = vec![
            (&same, vec![]),
            (&count, vec![format!("~ groups[{group}].count: 2 => 3")]),
            (
                &cpu_and_meta,
                vec![
                    format!("~ groups[{group}].tasks[{task}].resources.cpu_mhz: 100 => 250"),
                    "+ meta.team: \"edge\"".to_string(),
                ],
            ),
            (&new_group, vec!["+ groups[cache]: (added)".to_string()]),
        ];
        for (new, want) in cases {
            assert_eq!(lines(&registered, new), want);
        }
        assert_eq!(
            lines(&new_group, &base),
            vec!["- groups[cache]: (removed)".to_string()]
        );
    }
}
