//! The write path: every change goes through Raft as a [`Command`], acknowledged once it is
//! committed and applied. A follower's write surfaces as [`ServerError::NotLeader`] naming
//! the leader, so a caller (the gRPC layer, later) can forward it; an FSM refusal surfaces
//! as [`ServerError::Refused`] with the entry's index.

use crate::error::ServerError;
use crate::metrics::Metrics;
use crate::raft::RaftNode;
use drover_core::Index;
use drover_core::fsm::Command;
use std::sync::Arc;

/// Cheap to clone; shared by the handle, the leader's duties and the workers.
#[derive(Clone, Debug)]
pub struct Writer {
    raft: Arc<RaftNode>,
    metrics: Arc<Metrics>,
}

impl Writer {
    /// Writes through `raft`, recording each commit's latency in `metrics`.
    pub fn new(raft: Arc<RaftNode>, metrics: Arc<Metrics>) -> Self {
        Self { raft, metrics }
    }

    /// Appends `cmd` and waits for its commit and apply; returns the entry's index.
    pub async fn write(&self, cmd: Command) -> Result<Index, ServerError> {
        let kind = cmd.kind();
        let started = std::time::Instant::now();
        let written = self.raft.client_write(cmd).await;
        if written.is_ok() {
            self.metrics.committed(kind, started.elapsed());
        }
        match written {
            Ok((index, Ok(()))) => Ok(index),
            Ok((index, Err(error))) => {
                tracing::debug!(index, kind, %error, "write refused by the fsm");
                Err(ServerError::Refused { index, error })
            }
            Err(e) => {
                tracing::debug!(kind, error = %e, "write not accepted");
                Err(e.into())
            }
        }
    }

    /// Writes `cmd` and logs (rather than returns) a failure: for the leader's background
    /// writes, which the next sweep or election repairs.
    pub async fn write_logged(&self, cmd: Command, what: &'static str) -> Option<Index> {
        match self.write(cmd).await {
            Ok(index) => Some(index),
            Err(e) => {
                tracing::warn!(what, error = %e, "leader write failed");
                None
            }
        }
    }
}
