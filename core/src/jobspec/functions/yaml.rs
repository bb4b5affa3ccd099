//! `yamlencode` and `yamldecode`, as Nomad's HCL2 (and Terraform) answer them: block style,
//! every string double-quoted, object keys sorted, lists under a key not indented; a
//! document decodes to the value it holds (the empty document to null, a mapping to an
//! object with its keys sorted), and more than one document is refused.

use super::{Result, kind, s};
use hcl::eval::FuncArgs;
use hcl::{Map, Number, Value};
use std::fmt::Write as _;

pub(super) fn yamlencode(a: FuncArgs) -> Result {
    let mut out = String::new();
    match &a[0] {
        Value::Array(items) if !items.is_empty() => list(&mut out, items, 0),
        Value::Object(map) if !map.is_empty() => object(&mut out, map, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    Ok(out.into())
}

/// A value that fits on its line: a scalar, or an empty collection in flow style.
fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(t) => quoted(t),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

fn is_block(v: &Value) -> bool {
    match v {
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
        _ => false,
    }
}

/// A YAML double-quoted string; its escapes are JSON's plus YAML's own for the rest of
/// the control characters.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A non-empty object's entries, each at `indent` spaces (the first line's indent is the
/// caller's when it follows a list dash).
fn object(out: &mut String, map: &Map<String, Value>, indent: usize) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for (i, key) in keys.into_iter().enumerate() {
        if i > 0 || !out.ends_with("- ") {
            out.push_str(&" ".repeat(indent));
        }
        let value = &map[key];
        out.push_str(&quoted(key));
        out.push(':');
        match value {
            Value::Array(items) if is_block(value) => {
                out.push('\n');
                list(out, items, indent);
            }
            Value::Object(inner) if is_block(value) => {
                out.push('\n');
                object(out, inner, indent + 2);
            }
            other => {
                out.push(' ');
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

/// A non-empty list's items, each a `- ` at `indent` spaces.
fn list(out: &mut String, items: &[Value], indent: usize) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 || !out.ends_with("- ") {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str("- ");
        match item {
            Value::Array(inner) if is_block(item) => list(out, inner, indent + 2),
            Value::Object(inner) if is_block(item) => object(out, inner, indent + 2),
            other => {
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

pub(super) fn yamldecode(a: FuncArgs) -> Result {
    let doc: serde_yaml::Value =
        serde_yaml::from_str(s(&a[0])).map_err(|e| format!("yamldecode: {e}"))?;
    from_yaml(doc)
}

fn from_yaml(v: serde_yaml::Value) -> Result {
    Ok(match v {
        serde_yaml::Value::Null => Value::Null,
        serde_yaml::Value::Bool(b) => Value::Bool(b),
        serde_yaml::Value::Number(n) => Value::Number(number(&n)?),
        serde_yaml::Value::String(t) => Value::String(t),
        serde_yaml::Value::Sequence(items) => Value::Array(
            items
                .into_iter()
                .map(from_yaml)
                .collect::<std::result::Result<_, _>>()?,
        ),
        // Keys sorted, as HCL's objects are.
        serde_yaml::Value::Mapping(map) => {
            let mut entries = std::collections::BTreeMap::new();
            for (k, v) in map {
                entries.insert(key(k)?, from_yaml(v)?);
            }
            Value::Object(entries.into_iter().collect())
        }
        serde_yaml::Value::Tagged(tagged) => from_yaml(tagged.value)?,
    })
}

fn number(n: &serde_yaml::Number) -> std::result::Result<Number, String> {
    if let Some(i) = n.as_i64() {
        return Ok(Number::from(i));
    }
    if let Some(u) = n.as_u64() {
        return Ok(Number::from(u));
    }
    n.as_f64()
        .and_then(Number::from_f64)
        .ok_or_else(|| format!("yamldecode: {n} is not a number HCL can hold"))
}

/// A mapping key as an object key: scalars as their text; a list or map cannot be one.
fn key(k: serde_yaml::Value) -> std::result::Result<String, String> {
    match k {
        serde_yaml::Value::String(t) => Ok(t),
        serde_yaml::Value::Number(n) => Ok(n.to_string()),
        serde_yaml::Value::Bool(b) => Ok(b.to_string()),
        serde_yaml::Value::Null => Ok("null".into()),
        serde_yaml::Value::Tagged(tagged) => key(tagged.value),
        other => {
            let found = from_yaml(other).map(|v| kind(&v)).unwrap_or("value");
            Err(format!("yamldecode: a {found} cannot be an object key"))
        }
    }
}
