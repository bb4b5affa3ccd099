//! Operator reads and settings: the scheduler configuration, the leader's broker and
//! blocked-eval counters.

use crate::error::ServerError;
use crate::handle::ServerHandle;
use crate::leader::LeaderStats;
use drover_core::blocked::BlockedEvalInfo;
use drover_core::fsm::Command;
use drover_core::types::*;
use drover_proto::convert::SchedulerConfigUpdate;
use std::sync::Arc;

impl ServerHandle {
    pub fn scheduler_config(&self) -> Arc<SchedulerConfig> {
        self.snapshot().scheduler_config().clone()
    }

    pub async fn set_scheduler_config(
        &self,
        req: SchedulerConfigUpdate,
    ) -> Result<Index, ServerError> {
        self.inner
            .writer
            .write(Command::SchedulerConfig {
                config: req.config,
                cas_index: req.cas_index,
            })
            .await
    }

    /// Broker, blocked-eval and plan-queue counters (leader only).
    pub async fn broker_stats(&self) -> Result<LeaderStats, ServerError> {
        self.inner.leadership.stats().await
    }

    /// Every blocked eval the leader tracks.
    pub async fn blocked_evals(&self) -> Result<Vec<BlockedEvalInfo>, ServerError> {
        let core = self.inner.leadership.lock_enabled().await?;
        Ok(core.blocked.blocked_list())
    }
}
