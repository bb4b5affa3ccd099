//! Reading text as data and paths as strings: `csvdecode(text)` (the first line names the
//! columns, every later line is one object of strings), `basename(path)` and
//! `dirname(path)` (the last element of a slash-separated path and what is before it, as
//! Go's `filepath.Base` and `filepath.Dir` answer on Linux; no file is read).

use super::{Result, s};
use hcl::Value;
use hcl::eval::FuncArgs;

pub(super) fn csvdecode(a: FuncArgs) -> Result {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(s(&a[0]).as_bytes());
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| format!("csvdecode: {e}"))?
        .iter()
        .map(str::to_string)
        .collect();
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| format!("csvdecode: {e}"))?;
        let row = headers
            .iter()
            .zip(record.iter())
            .map(|(h, v)| (h.clone(), Value::from(v)))
            .collect();
        rows.push(Value::Object(row));
    }
    Ok(Value::Array(rows))
}

pub(super) fn basename(a: FuncArgs) -> Result {
    let path = s(&a[0]);
    if path.is_empty() {
        return Ok(".".into());
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok("/".into());
    }
    Ok(trimmed.rsplit('/').next().unwrap_or(trimmed).into())
}

pub(super) fn dirname(a: FuncArgs) -> Result {
    let path = s(&a[0]);
    let Some(cut) = path.rfind('/') else {
        return Ok(".".into());
    };
    let dir = path[..cut].trim_end_matches('/');
    if dir.is_empty() {
        return Ok("/".into());
    }
    Ok(dir.into())
}
