//! The process driver (`raw_exec`, with `exec` accepted as an alias): runs a task's command
//! as a plain host process in its own process group, with its logs in files.
//!
//! Errors say whose fault a failure is: [`DriverError::is_infra`] marks the ones caused by
//! the node (a full disk, an alloc dir it cannot create, a fork that fails), which the
//! servers count towards marking the node flaky. The job's own mistakes never count: a
//! command that does not exist or is not executable, bad arguments, its exit code.

mod exec;
pub mod logs;
pub mod process;

pub use exec::{ExitOutcome, TaskHandle, TaskLaunch, resolve_executable, start};
pub use logs::LogPaths;
pub use process::ProcessRecord;

use std::path::PathBuf;

/// Drivers this agent runs; the node advertises them as `driver.<name>` attributes.
pub const DRIVERS: [&str; 2] = ["raw_exec", "exec"];

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("driver {driver:?} is not available on this node (it runs raw_exec and exec)")]
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
