//! The drivers: `raw_exec` runs a task's command as a host process in its own process group
//! (in a cgroup with its limits unless the agent's config says otherwise); `exec` runs it
//! isolated through the task shim ([`crate::isolation`]); `docker` runs it as a container
//! of a Docker Engine ([`docker`]). Logs go to files. [`health`] fingerprints which of
//! them this node can run.
//!
//! Errors say whose fault a failure is: [`DriverError::is_infra`] marks the ones caused by
//! the node (a full disk, an alloc dir it cannot create, a fork that fails), which the
//! servers count towards marking the node flaky. The job's own mistakes never count: a
//! command that does not exist or is not executable, bad arguments, its exit code.

pub mod docker;
mod exec;
pub mod health;
pub mod logs;
pub mod process;

pub use exec::{ExitOutcome, ShimLaunch, TaskHandle, TaskLaunch, resolve_executable, start};
pub use logs::LogPaths;
pub use process::ProcessRecord;

use std::path::PathBuf;

/// Drivers this agent knows; [`health::Drivers`] says which of them run here.
pub const DRIVERS: [&str; 3] = ["raw_exec", "exec", "docker"];

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("driver {driver:?} is not available on this node (it runs raw_exec, exec and docker)")]
    UnknownDriver { driver: String },
    #[error("task has no command to run")]
    NoCommand,
    #[error("executable {command:?} not found on this node")]
    ExecutableNotFound { command: String },
    #[error("{path} is not an executable file")]
    NotExecutable { path: PathBuf },
    #[error("cannot create task directory {path}: {source}")]
    TaskDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open task log {path}: {source}")]
    Logs {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start {command:?}: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Shim(crate::isolation::launch::LaunchError),
    #[error("driver {driver:?} cannot run tasks on this node: {reason}")]
    Unavailable { driver: String, reason: String },
    #[error("cannot prepare the task's cgroup: {0}")]
    Cgroup(std::io::Error),
    #[error(transparent)]
    User(#[from] crate::users::UserError),
    #[error(transparent)]
    Docker(#[from] docker::DockerError),
}

impl DriverError {
    /// Whether the failure is the node's fault rather than the job's.
    pub fn is_infra(&self) -> bool {
        match self {
            // What the job asked for: a driver, a command, an executable that is not there.
            DriverError::UnknownDriver { .. }
            | DriverError::NoCommand
            | DriverError::ExecutableNotFound { .. }
            | DriverError::NotExecutable { .. } => false,
            // The node could not give the task its directory or logs (disk full, ...).
            DriverError::TaskDir { .. } | DriverError::Logs { .. } => true,
            DriverError::Shim(e) => e.is_infra(),
            // A driver the node advertised and cannot run, or cgroups that fail, are the
            // node's; a user the job names that this node lacks is the job's.
            DriverError::Unavailable { .. } | DriverError::Cgroup(_) => true,
            DriverError::User(_) => false,
            // An engine that refuses the image or the container: the job's; one that does
            // not answer: the node's.
            DriverError::Docker(e) => e.is_infra(),
            // exec of the job's own file failing (an interpreter it names is missing, its
            // arguments are refused) is the job's; fork failing (no memory, too many
            // processes) is the node's.
            DriverError::Spawn { source, .. } => !matches!(
                source.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::PermissionDenied
                    | std::io::ErrorKind::InvalidInput
                    | std::io::ErrorKind::ExecutableFileBusy
            ),
        }
    }
}

/// Whether this agent runs tasks of `driver`.
pub fn supports(driver: &str) -> bool {
    DRIVERS.contains(&driver)
}
