//! Logs of the long-running commands (`server`, `agent`, `dev`): `tracing` events with
//! their structured fields, filtered by `RUST_LOG` (or the command's default level).

use std::path::Path;
use tracing_subscriber::EnvFilter;

fn filter(default: &str) -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default))
}

/// Logs to standard error.
pub fn to_stderr(default: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(default))
        .with_writer(std::io::stderr)
        .try_init();
}

/// Logs to `path` (appending), for when the terminal belongs to the console.
pub fn to_file(path: &Path, default: &str) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(default))
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
    Ok(())
}
