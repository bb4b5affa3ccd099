//! Why a benchmark could not run or did not finish.

use crate::error::CliError;
use drover_agent::sim::SimError;
use drover_server::StartError;
use drover_server::api::ServeError;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A flag's value is well formed but the run it asks for cannot succeed.
    #[error("invalid {flag}: {reason}")]
    Setting { flag: &'static str, reason: String },
    #[error("cannot create a temporary data dir: {0}")]
    DataDir(std::io::Error),
    #[error("the benchmarked server does not start: {0}")]
    ServerStart(#[source] StartError),
    #[error("the benchmarked server's gRPC API does not start: {0}")]
    Serve(#[from] ServeError),
    #[error("the benchmarked server did not become leader within {}", humantime::format_duration(*.0))]
    NoLeader(Duration),
    #[error("the benchmarked server does not stop cleanly: {0}")]
    ServerStop(#[source] StartError),
    #[error("the benchmarked server's gRPC API does not stop cleanly: {0}")]
    ServeStop(#[source] tonic::transport::Error),
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
}
