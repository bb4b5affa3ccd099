//! Why the broker refused a call. Messages are lowercase and name the eval they concern.

use crate::EvalId;
use thiserror::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Error, serde::Serialize, serde::Deserialize)]
pub enum BrokerError {
    /// The broker only runs on the leader; this server is not (or no longer) it.
    #[error("broker is disabled")]
    Disabled,
    /// The eval is not handed out: never dequeued, already acked or nacked, or unknown.
    #[error("eval {0} is not outstanding")]
    NotOutstanding(EvalId),
    /// The eval is handed out under another token (an older delivery's worker calling late).
    #[error("token mismatch for eval {0}")]
    TokenMismatch(EvalId),
    /// The eval's nack timer fired before this call: the broker already nacked it.
    #[error("nack timeout reached for eval {0}")]
    NackTimeoutReached(EvalId),
}
