//! The errors the agent's public API returns. Failures inside a running agent (a server
//! that does not answer, a task that cannot start) are not errors of the API: they are
//! retried, or reported to the servers as task events.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot read agent config {path}: {source}")]
    ConfigRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid agent config {path}: {source}")]
    ConfigParse { path: PathBuf, source: hcl::Error },
    #[error("invalid agent config: {field} {problem}")]
    ConfigInvalid {
        field: &'static str,
        problem: String,
    },
    #[error("cannot use data dir {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("agent state file {path} is unreadable: {problem}")]
    State { path: PathBuf, problem: String },
    #[error("invalid server address {address:?}: {problem}")]
    ServerAddress { address: String, problem: String },
    #[error("registration refused by the servers ({}): {}", .0.code(), .0.message())]
    Register(tonic::Status),
}
