//! How answers are printed: Nomad-style aligned tables and `key = value` blocks for
//! people, pretty JSON for scripts, and the small formatting rules both share (short ids,
//! times, durations).
//!
//! Formatting functions build strings and take `now` as an argument, so what they print
//! is a pure function of their input and is pinned by insta snapshots.

use crate::error::CliError;
use drover_core::Timestamp;
use serde::Serialize;
use std::io::Write;
use std::time::Duration;
use tabwriter::TabWriter;

/// The output options of every read command.
#[derive(Clone, Copy, Debug, Default, clap::Args)]
pub struct OutputArgs {
    /// Print the answer as JSON (also accepted as `-json`)
    #[arg(long)]
    pub json: bool,
    /// Show full ids instead of their first eight characters
    #[arg(long)]
    pub verbose: bool,
}

/// Rows of cells printed as columns aligned on the widest cell, two spaces apart.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<const N: usize>(header: [&str; N]) -> Table {
        Table {
            rows: vec![header.iter().map(|h| h.to_string()).collect()],
        }
    }

    pub fn row(&mut self, cells: impl IntoIterator<Item = String>) {
        self.rows.push(cells.into_iter().collect());
    }

    /// Whether only the header is there.
    pub fn is_empty(&self) -> bool {
        self.rows.len() <= 1
    }

    pub fn render(&self) -> String {
        let lines = self.rows.iter().map(|cells| {
            let cells: Vec<String> = cells.iter().map(|c| cell(c)).collect();
            cells.join("\t")
        });
        aligned(lines)
    }
}

/// `Key = value` lines with the `=` signs aligned, as Nomad prints an object's fields.
pub fn key_values(pairs: &[(&str, String)]) -> String {
    aligned(pairs.iter().map(|(k, v)| format!("{k}\t= {}", cell(v))))
}

/// A cell may not hold the characters that would break the columns.
fn cell(text: &str) -> String {
    text.replace(['\t', '\n'], " ")
}

fn aligned(lines: impl Iterator<Item = String>) -> String {
    let mut tw = TabWriter::new(Vec::new()).padding(2);
    for line in lines {
        // Writing to a Vec cannot fail.
        let _ = writeln!(tw, "{}", line.trim_end());
    }
    let bytes = tw.into_inner().unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    text.lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Prints a value as pretty JSON followed by a newline.
/// Prints `value` as JSON when `json` (the `--json` flag), else as the text `render` makes.
pub fn print_as<T: Serialize + ?Sized>(
    out: &mut dyn Write,
    json: bool,
    value: &T,
    render: impl FnOnce(&T) -> String,
) -> Result<(), CliError> {
    if json {
        return print_json(out, value);
    }
    write!(out, "{}", render(value))?;
    Ok(())
}

pub fn print_json<T: Serialize + ?Sized>(out: &mut dyn Write, value: &T) -> Result<(), CliError> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

/// An id as tables show it: its first eight characters unless `verbose`.
pub fn id(full: impl std::fmt::Display, verbose: bool) -> String {
    let full = full.to_string();
    if verbose {
        return full;
    }
    full.chars().filter(|c| *c != '-').take(8).collect()
}

/// An optional id, `<none>` when absent.
pub fn opt_id(full: Option<impl std::fmt::Display>, verbose: bool) -> String {
    full.map_or_else(|| "<none>".to_string(), |v| id(v, verbose))
}

/// A wall time as RFC 3339 in UTC; `<never>` for the zero time.
pub fn time(at: Timestamp) -> String {
    if at == Timestamp::ZERO {
        "<never>".into()
    } else {
        at.to_string()
    }
}

/// How long ago `at` was, as tables show it (`3m12s ago`).
pub fn ago(at: Timestamp, now: Timestamp) -> String {
    if at == Timestamp::ZERO {
        return "<never>".into();
    }
    format!("{} ago", duration(now.since(at)))
}

/// A duration in its two largest units (`1h5m`, `3m12s`, `850ms`).
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let days = h / 24;
    match (days, h, m) {
        (d, _, _) if d > 0 => format!("{d}d{}h", h % 24),
        (_, h, m) if h > 0 => format!("{h}h{m}m"),
        (_, _, m) if m > 0 => format!("{m}m{s}s"),
        _ => format!("{s}s"),
    }
}

/// The current wall time.
pub fn now() -> Timestamp {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    Timestamp::from_millis(ms)
}

/// A prost enum's name without its type prefix, lower-cased: `WORKER_STATUS_PAUSED` with
/// prefix `WORKER_STATUS_` gives `paused`.
pub fn wire_name(name: &str, prefix: &str) -> String {
    name.strip_prefix(prefix).unwrap_or(name).to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_use_two_units() {
        let cases = [
            (Duration::from_millis(850), "850ms"),
            (Duration::from_secs(7), "7s"),
            (Duration::from_secs(192), "3m12s"),
            (Duration::from_secs(3900), "1h5m"),
            (Duration::from_secs(90_000), "1d1h"),
        ];
        for (d, want) in cases {
            assert_eq!(duration(d), want, "{d:?}");
        }
    }

    #[test]
    fn short_ids_drop_hyphens() {
        let full = "0b4f2c1e-9a7d-4c3b-8e2f-1a2b3c4d5e6f";
        assert_eq!(id(full, false), "0b4f2c1e");
        assert_eq!(id(full, true), full);
        assert_eq!(id("web", false), "web");
    }

    #[test]
    fn tables_align_columns() {
        let mut t = Table::new(["ID", "Status"]);
        t.row(["a".to_string(), "running".to_string()]);
        t.row(["longer-id".to_string(), "dead\tx".to_string()]);
        insta::assert_snapshot!(t.render(), @r"
        ID         Status
        a          running
        longer-id  dead x
        ");
    }

    #[test]
    fn key_values_align_the_equals_signs() {
        let text = key_values(&[("ID", "web".into()), ("Priority", "50".into())]);
        insta::assert_snapshot!(text, @r"
        ID        = web
        Priority  = 50
        ");
    }
}
