//! The one error type of the client commands, and the process exit codes.

use drover_proto::ConvertError;
use std::fmt::Display;

/// What a command ends with when it did not fail. `main` turns it into the exit code.
///
/// The codes follow Nomad's so scripts written for it keep working: `job plan` exits 1
/// when registering would change something, `job run` exits 2 when the evaluation could
/// not place every allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit(pub u8);

impl Exit {
    pub const OK: Exit = Exit(0);
    /// `job plan`: the job would change allocations or its spec.
    pub const CHANGES: Exit = Exit(1);
    /// `job run` and friends: the evaluation left placements undone.
    pub const PLACEMENT_FAILURES: Exit = Exit(2);
    /// `job run`: the deployment it followed failed or was cancelled (Nomad exits 1).
    pub const DEPLOYMENT_FAILED: Exit = Exit(1);
}

/// Why a command failed, as one line for the operator.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// No connection could be made to the server at all.
    #[error("cannot reach drover at {address}: {reason}")]
    Connect { address: String, reason: String },
    /// The server answered the call with an error; `message` is its reason.
    #[error("{action}: {message}")]
    Rpc {
        action: String,
        code: tonic::Code,
        message: String,
    },
    /// The server's answer could not be decoded (a server of another version, or a bug).
    #[error("the server sent an invalid answer: {0}")]
    InvalidAnswer(#[from] ConvertError),
    /// The server answered without a part every answer of that call carries.
    #[error("the server's answer has no {0}")]
    IncompleteAnswer(String),
    /// The command line was well formed but asks for something impossible.
    #[error("{0}")]
    Usage(String),
    /// A job file could not be read or is not a valid job; the jobspec parser's message
    /// names the file, and the line and column of the mistake.
    #[error("{0}")]
    Jobspec(String),
    /// A file named on the command line could not be read.
    #[error("cannot read {path}: {source}")]
    ReadFile {
        path: String,
        source: std::io::Error,
    },
    /// Writing the output failed (a closed pipe, a full disk).
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
    #[error("cannot encode json output: {0}")]
    Json(#[from] serde_json::Error),
}

impl CliError {
    /// Whether the command failed only because its reader went away (`drover ... | head`):
    /// that ends a command quietly and successfully, as it does for `cat` or `ls`.
    pub fn is_broken_pipe(&self) -> bool {
        let io = match self {
            CliError::Output(e) => Some(e.kind()),
            CliError::Json(e) => e.io_error_kind(),
            _ => None,
        };
        io == Some(std::io::ErrorKind::BrokenPipe)
    }
}

/// Builds the mapper for a failed call: the action the operator asked for, plus the
/// server's reason. The address is kept to word transport failures (the server went away
/// mid-call) as what they are.
pub fn rpc_failed(action: impl Display) -> impl FnOnce(tonic::Status) -> CliError {
    move |status| {
        // The channel's deadline (`--timeout`) ends a call as cancelled, "Timeout expired".
        let timed_out = status.code() == tonic::Code::DeadlineExceeded
            || (status.code() == tonic::Code::Cancelled && status.message().contains("Timeout"));
        let message = if timed_out {
            "the server did not answer within the deadline (--timeout)".to_string()
        } else if std::error::Error::source(&status).is_some() {
            // The call never reached the server (or the connection broke): the status's
            // own message is tonic's generic "transport error".
            drover_proto::tls::describe_connect_error(&status)
        } else if status.message().is_empty() {
            status.code().description().to_string()
        } else {
            status.message().to_string()
        };
        CliError::Rpc {
            action: action.to_string(),
            code: status.code(),
            message,
        }
    }
}

/// Why a connection made with `tls` failed, in the words the console uses too: what is
/// wrong with TLS when that is it, else the innermost cause (transport errors wrap the
/// useful part, "Connection refused", several layers down), lower-cased.
pub fn connect_failure(
    error: &(dyn std::error::Error + 'static),
    tls: &drover_proto::tls::TlsFiles,
) -> String {
    drover_proto::tls::explain_connect_error_given(error, tls).unwrap_or_else(|| {
        drover_proto::tls::describe_connect_error_given(error, tls).to_lowercase()
    })
}
