//! The write path: every change goes through Raft as a [`Command`], acknowledged once it is
//! committed and applied. A follower's own writes (its workers' evals) go to the leader
//! over the [`LeaderLink`]; without one they surface as [`ServerError::NotLeader`] naming
//! the leader. An FSM refusal surfaces as [`ServerError::Refused`] with the entry's index.

use crate::error::ServerError;
use crate::leader_link::LeaderLink;
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
    /// The leader's lease (`leader::lease`): a write still waiting when it lapses is
    /// answered UNAVAILABLE rather than left waiting for a quorum this server cannot reach.
    lease: std::time::Duration,
    /// Where a follower's own writes (its workers' evals) go.
    link: Option<LeaderLink>,
}

impl Writer {
    /// Writes through `raft`, recording each commit's latency in `metrics`.
    pub fn new(raft: Arc<RaftNode>, metrics: Arc<Metrics>, lease: std::time::Duration) -> Self {
        Self {
            raft,
            metrics,
            lease,
            link: None,
        }
    }

    /// The registry commits are recorded in, for the leader's other figures.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Sends the writes made while another server leads to it over `link`.
    pub fn with_link(mut self, link: LeaderLink) -> Self {
        self.link = Some(link);
        self
    }

    /// Appends `cmd` and waits for its commit and apply; returns the entry's index. On a
    /// follower with a link, the entry is written through the leader.
    pub async fn write(&self, cmd: Command) -> Result<Index, ServerError> {
        if let Some(link) = &self.link
            && self
                .raft
                .current_leader()
                .is_some_and(|l| l != self.raft.node_id())
        {
            return link.write(cmd).await;
        }
        self.write_here(cmd).await
    }

    /// Appends `cmd` on this server's Raft only (a follower refuses with the leader's
    /// address): what the leader does with the writes followers send it.
    pub async fn write_here(&self, cmd: Command) -> Result<Index, ServerError> {
        let kind = cmd.kind();
        let started = std::time::Instant::now();
        // A leader cut off from the others would hold the write until the partition heals
        // (openraft fails it only once it learns of a newer leader): the caller is told
        // once the lease lapses, and may retry on another server.
        let written = tokio::select! {
            written = self.raft.client_write(cmd) => written,
            () = crate::leader::lease_lapsed(&self.raft, self.lease) => {
                tracing::info!(kind, "a write was in flight when the leader's lease lapsed");
                return Err(ServerError::Unavailable {
                    reason: "this server lost contact with a quorum while the write waited for it: it may or may not be committed; retry".into(),
                });
            }
        };
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
