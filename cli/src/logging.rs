//! Logs of the long-running commands (`server`, `agent`, `dev`): `tracing` events with
//! their structured fields, as text (coloured only on a terminal) or JSON lines.
//!
//! The filter is `--log-level` (a level or `RUST_LOG`-style directives), else `RUST_LOG`,
//! else the command's default level. Some libraries are too talkative at `info` for an
//! operator's log: openraft logs its whole state on every election and membership change,
//! and the Raft log's `raft_log` and `chunked_wal` a line on every fsync. Their targets are
//! held at `warn` unless the filter names them (`--log-level info,openraft=info`).

use std::io::IsTerminal;
use std::path::Path;
use tracing_subscriber::EnvFilter;

/// The logging flags every long-running command takes.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct LogArgs {
    /// What to log: a level (error, warn, info, debug, trace) or directives as in
    /// RUST_LOG (`info,drover_server=debug`) [default: the command's, or RUST_LOG]
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// Log JSON lines (one object per event, fields included) instead of text
    #[arg(long)]
    pub log_json: bool,
}

/// Why the logging flags cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("invalid {origin} {value:?}: {reason}")]
    Level {
        origin: &'static str,
        value: String,
        reason: String,
    },
    #[error("cannot open log file {path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
}

/// Library targets held at `warn` unless the directives name them.
const QUIET_TARGETS: [&str; 3] = ["openraft", "raft_log", "chunked_wal"];

/// The directives in force: the flag's, else `RUST_LOG`'s, else `default`; with
/// `TARGET=warn` added for each of [`QUIET_TARGETS`] they do not name.
fn directives(flag: Option<&str>, env: Option<&str>, default: &str) -> String {
    let chosen = flag
        .or(env.filter(|v| !v.trim().is_empty()))
        .unwrap_or(default)
        .trim();
    let quiet = QUIET_TARGETS
        .iter()
        .filter(|t| !chosen.contains(*t))
        .map(|t| format!("{t}=warn"));
    std::iter::once(chosen.to_string())
        .filter(|c| !c.is_empty())
        .chain(quiet)
        .collect::<Vec<_>>()
        .join(",")
}

impl LogArgs {
    fn filter(&self, default: &str) -> Result<EnvFilter, LoggingError> {
        let env = std::env::var(EnvFilter::DEFAULT_ENV).ok();
        let chosen = directives(self.log_level.as_deref(), env.as_deref(), default);
        EnvFilter::builder().parse(&chosen).map_err(|e| {
            let (origin, value) = match (&self.log_level, env) {
                (Some(flag), _) => ("--log-level", flag.clone()),
                (None, Some(env)) => ("RUST_LOG", env),
                (None, None) => ("default log level", chosen.clone()),
            };
            LoggingError::Level {
                origin,
                value,
                reason: e.to_string(),
            }
        })
    }

    /// Logs to standard error, with colours only when it is a terminal.
    pub fn to_stderr(&self, default: &str) -> Result<(), LoggingError> {
        let filter = self.filter(default)?;
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        let _ = if self.log_json {
            builder.json().try_init()
        } else {
            builder
                .with_ansi(std::io::stderr().is_terminal())
                .try_init()
        };
        Ok(())
    }

    /// Logs to `path` (appending, never coloured), for when the terminal belongs to the
    /// console.
    pub fn to_file(&self, path: &Path, default: &str) -> Result<(), LoggingError> {
        let filter = self.filter(default)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| LoggingError::File {
                path: path.display().to_string(),
                source,
            })?;
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::sync::Mutex::new(file));
        let _ = if self.log_json {
            builder.json().try_init()
        } else {
            builder.with_ansi(false).try_init()
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn talkative_libraries_are_held_at_warn_unless_named() {
        const Q: &str = "openraft=warn,raft_log=warn,chunked_wal=warn";
        let cases: &[(Option<&str>, Option<&str>, &str, String)] = &[
            (None, None, "info", format!("info,{Q}")),
            (Some("debug"), None, "info", format!("debug,{Q}")),
            (None, Some("trace"), "info", format!("trace,{Q}")),
            (Some("warn"), Some("trace"), "info", format!("warn,{Q}")),
            (None, Some("  "), "warn", format!("warn,{Q}")),
            (
                Some("info,openraft=info"),
                None,
                "warn",
                "info,openraft=info,raft_log=warn,chunked_wal=warn".into(),
            ),
            (
                Some("info,raft_log=debug"),
                None,
                "warn",
                "info,raft_log=debug,openraft=warn,chunked_wal=warn".into(),
            ),
            (Some(""), None, "info", Q.into()),
        ];
        for (flag, env, default, want) in cases {
            assert_eq!(
                directives(*flag, *env, default),
                *want,
                "flag {flag:?} env {env:?} default {default:?}"
            );
        }
    }

    #[test]
    fn a_bad_level_names_the_value() {
        let args = LogArgs {
            log_level: Some("info,=[".into()),
            log_json: false,
        };
        let err = args.filter("info").expect_err("bad directive");
        assert!(err.to_string().contains("info,=["), "{err}");
    }
}
