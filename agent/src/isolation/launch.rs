//! The agent's side of the shim: spawn it with the task's log files as its stdout and
//! stderr and a socket as its stdin, hand it the spec, and wait for its word.

use super::protocol::Report;
use super::{SHIM_ARG, ShimSpec};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// How long a shim may take to set a task up before the start counts as failed.
const SETUP_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a shim did not start its task.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot run the task shim {shim}: {source}")]
    Spawn {
        shim: String,
        source: std::io::Error,
    },
    #[error("{message}")]
    Refused { message: String, infra: bool },
    #[error("the task shim did not answer within {0:?}")]
    Timeout(Duration),
}

impl LaunchError {
    pub fn is_infra(&self) -> bool {
        match self {
            LaunchError::Refused { infra, .. } => *infra,
            LaunchError::Spawn { .. } | LaunchError::Timeout(_) => true,
        }
    }
}

/// Starts `spec` through the shim at `shim`, in its own process group; returns the shim's
/// process once the task runs (for `raw_exec`, the shim has become the task).
pub async fn launch(
    shim: &Path,
    spec: &ShimSpec,
    stdout: File,
    stderr: File,
) -> Result<tokio::process::Child, LaunchError> {
    let spawn_err = |source| LaunchError::Spawn {
        shim: shim.display().to_string(),
        source,
    };
    let (agent_end, shim_end) = std::os::unix::net::UnixStream::pair().map_err(spawn_err)?;
    let mut child = {
        // The command holds the shim's end until dropped: drop it before waiting for EOF.
        let mut command = tokio::process::Command::new(shim);
        command
            .arg(SHIM_ARG)
            .env_clear()
            .stdin(Stdio::from(OwnedFd::from(shim_end)))
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0)
            .kill_on_drop(false);
        command.spawn().map_err(spawn_err)?
    };
    agent_end.set_nonblocking(true).map_err(spawn_err)?;
    let mut socket = tokio::net::UnixStream::from_std(agent_end).map_err(spawn_err)?;
    let talk = async {
        let bytes = serde_json::to_vec(spec).map_err(std::io::Error::other)?;
        socket.write_all(&bytes).await?;
        socket.shutdown().await?;
        // The first line is the answer; an `exec` shim keeps its end open while the task
        // runs, so the agent must not wait for the end of the stream. A shim that replaced
        // itself with the task sends nothing: end of stream.
        let mut answer = String::new();
        BufReader::new(&mut socket).read_line(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = match tokio::time::timeout(SETUP_TIMEOUT, talk).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => {
            // The shim died before answering; its stderr (the task log) says why.
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(LaunchError::Refused {
                message: format!("the task shim failed: {e}"),
                infra: true,
            });
        }
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(LaunchError::Timeout(SETUP_TIMEOUT));
        }
    };
    match Report::parse_all(&answer).into_iter().next() {
        Some(Report::Failed { message, infra }) => {
            let _ = child.wait().await;
            Err(LaunchError::Refused { message, infra })
        }
        // Started (exec), or nothing at all: the shim exec'd the task (raw_exec).
        _ => Ok(child),
    }
}
