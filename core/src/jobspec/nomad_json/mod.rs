//! Nomad's JSON job format (`{"Job": {…}}`, PascalCase, durations in nanoseconds), as
//! `nomad job run -output` and the HTTP API write it.
//!
//! Held to the same rule as HCL: every key is known or refused. Because Nomad's own output
//! spells out every field, including features drover lacks, a key drover does not support
//! is accepted only while it carries nothing (null, false, zero, empty); with content it is
//! an error naming it. Problems are located by their path in the document, since JSON
//! values carry no positions once parsed.

mod group;
mod job;
mod keys;
mod network;
mod service;

use super::error::Problem;
use super::reader::closest_of;
use crate::types::Job;
use keys::Key;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// Decodes the `Job` object of a Nomad JSON document, collecting problems by path.
pub(super) fn decode(job: &Value, problems: &mut Vec<Problem>) -> Job {
    let mut r = Reader { problems };
    r.job(job)
}

struct Reader<'p> {
    problems: &'p mut Vec<Problem>,
}

/// The fields of one JSON object that hold something, in key order.
type Fields<'v> = Vec<(&'static str, &'v Value)>;

impl Reader<'_> {
    fn err(&mut self, path: &str, message: impl std::fmt::Display) {
        self.problems.push(Problem {
            position: None,
            message: format!("{path}: {message}"),
        });
    }

    /// The keys of `value` (an object at `path`) that hold something; unknown keys and
    /// refused keys with content are reported.
    fn fields<'v>(
        &mut self,
        path: &str,
        value: &'v Value,
        keys: &[(&'static str, Key)],
    ) -> Fields<'v> {
        let Some(map) = value.as_object() else {
            self.err(path, format!("expected an object, got {}", kind(value)));
            return Vec::new();
        };
        let mut out = Vec::new();
        for (name, v) in map {
            match keys.iter().find(|(k, _)| k == name) {
                None => {
                    let hint = closest_of(
                        name,
                        keys.iter()
                            .filter(|(_, k)| *k == Key::Read)
                            .map(|(n, _)| *n),
                    )
                    .map(|c| format!("; did you mean {c:?}?"))
                    .unwrap_or_default();
                    self.err(path, format!("unknown key {name:?}{hint}"));
                }
                // Null is Nomad's "unset" for every field.
                Some(_) if v.is_null() => {}
                Some((_, Key::Ignored)) => {}
                Some((_, Key::Refused)) if is_empty(v) => {}
                Some((_, Key::Refused)) => {
                    self.err(
                        &format!("{path}.{name}"),
                        "a Nomad feature drover does not support",
                    );
                }
                Some((known, Key::Read)) => out.push((*known, v)),
            }
        }
        out
    }

    fn string(&mut self, path: &str, v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => {
                self.err(path, format!("expected a string, got {}", kind(v)));
                String::new()
            }
        }
    }

    fn whole<T: TryFrom<u64> + Default>(&mut self, path: &str, v: &Value) -> T {
        match v.as_u64().map(T::try_from) {
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                self.err(path, format!("{v} is too large"));
                T::default()
            }
            None => {
                self.err(path, format!("expected a whole number, got {}", kind(v)));
                T::default()
            }
        }
    }

    fn bool(&mut self, path: &str, v: &Value) -> bool {
        v.as_bool().unwrap_or_else(|| {
            self.err(path, format!("expected a bool, got {}", kind(v)));
            false
        })
    }

    /// Nomad writes durations as integer nanoseconds.
    fn duration(&mut self, path: &str, v: &Value) -> Duration {
        Duration::from_nanos(self.whole(path, v))
    }

    /// An optional window, where Nomad writes 0 for "not set".
    fn window(&mut self, path: &str, v: &Value) -> Option<Duration> {
        Some(self.duration(path, v)).filter(|d| !d.is_zero())
    }

    fn strings(&mut self, path: &str, v: &Value) -> Vec<String> {
        match v {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| self.string(&format!("{path}[{i}]"), item))
                .collect(),
            _ => {
                self.err(path, format!("expected a list of strings, got {}", kind(v)));
                Vec::new()
            }
        }
    }

    fn string_map(&mut self, path: &str, v: &Value) -> BTreeMap<String, String> {
        let Some(map) = v.as_object() else {
            self.err(
                path,
                format!("expected an object of strings, got {}", kind(v)),
            );
            return BTreeMap::new();
        };
        map.iter()
            .map(|(k, item)| (k.clone(), self.string(&format!("{path}[{k}]"), item)))
            .collect()
    }

    /// A string that must be one of `names`, mapped by `parse`.
    fn choice<T>(
        &mut self,
        path: &str,
        v: &Value,
        names: &[&str],
        parse: impl Fn(&str) -> Option<T>,
    ) -> Option<T> {
        let text = self.string(path, v);
        let parsed = parse(&text);
        if parsed.is_none() {
            self.err(
                path,
                format!("unknown value {text:?} (one of {})", names.join(", ")),
            );
        }
        parsed
    }
}

/// Null, false, zero, "" and empty lists and objects: what Nomad writes for an unused
/// feature.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// The `Job` object when `doc` is Nomad's wrapper (`{"Job": {…}}`) and nothing else.
pub(super) fn unwrap(doc: &Map<String, Value>) -> Option<&Value> {
    (doc.len() == 1).then(|| doc.get("Job")).flatten()
}
