//! The signals that stop a long-running command (`dev`, `server`, `agent`): Ctrl-C
//! (SIGINT), SIGTERM (what service managers and `kill` send) and SIGHUP (a closed
//! terminal) all stop it the same way, cleaning up what it started.

use anyhow::Context;
use tokio::signal::unix::{SignalKind, signal};

/// Resolves with the name of the first of SIGINT, SIGTERM or SIGHUP to arrive.
pub async fn wait_for_stop() -> anyhow::Result<&'static str> {
    let mut int = signal(SignalKind::interrupt()).context("cannot wait for SIGINT")?;
    let mut term = signal(SignalKind::terminate()).context("cannot wait for SIGTERM")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot wait for SIGHUP")?;
    let name = tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
        _ = hup.recv() => "SIGHUP",
    };
    tracing::info!(signal = name, "stopping");
    Ok(name)
}
