//! Why a benchmark could not run or did not finish.

use crate::error::CliError;
use drover_agent::sim::SimError;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A flag's value is well formed but the run it asks for cannot succeed.
    #[error("invalid {flag}: {reason}")]
    Setting { flag: &'static str, reason: String },
    #[error("cannot create a temporary data dir: {0}")]
    DataDir(std::io::Error),
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("cannot start the benchmarked server ({exe}): {source}")]
    Spawn { exe: String, source: std::io::Error },
    #[error("the benchmarked server exited ({status}); its log ends:\n{log}")]
    ServerExit { status: String, log: String },
    #[error("the benchmarked server was still running {} after SIGINT, so it was killed; its last lines:\n{log}", humantime::format_duration(*.waited))]
    ServerHung { waited: Duration, log: String },
    #[error("the benchmarked server did not become leader within {}", humantime::format_duration(*.0))]
    NoLeader(Duration),
    #[error(transparent)]
    Client(#[from] CliError),
    #[error("the node simulator failed: {0}")]
    Simulator(#[from] SimError),
    /// The run's deadline passed; `done` of `wanted` had reached the phase's goal.
    #[error(
        "deadline of {} passed with {done} of {wanted} {what}",
        humantime::format_duration(*timeout)
    )]
    Deadline {
        what: &'static str,
        done: u64,
        wanted: u64,
        timeout: Duration,
    },
    /// A job was refused for a reason retrying cannot fix.
    #[error("job {job} was not registered: {message}")]
    Register { job: String, message: String },
    /// A deployment the run waited for failed or was cancelled; the counts are the run's
    /// deployments of that version when it was seen.
    #[error(
        "the deployment of job {job} at job version {version} ended {status}: {description} \
         ({successful} of {wanted} deployments successful, {failed} failed or cancelled, \
         after {elapsed_secs:.1}s)"
    )]
    Deployment {
        job: String,
        version: u64,
        status: &'static str,
        description: String,
        successful: u64,
        failed: u64,
        wanted: u64,
        elapsed_secs: f64,
    },
    /// The run's deadline passed during a rollout; the counts are where it stood.
    #[error(
        "deadline of {} passed with {rolled_out} of {wanted} jobs rolled out after \
         {elapsed_secs:.1}s ({successful} deployments successful, {running} still running, \
         {allocations_running} allocations of the new version running on rolled-out jobs)",
        humantime::format_duration(*timeout)
    )]
    Rollout {
        rolled_out: u64,
        wanted: u64,
        successful: u64,
        running: u64,
        allocations_running: u64,
        elapsed_secs: f64,
        timeout: Duration,
    },
}
