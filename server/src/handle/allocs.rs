//! Operator actions on single allocations that change state: `alloc stop`.

use super::ServerHandle;
use crate::ServerError;
use crate::clock::now;
use drover_core::fsm::Command;
use drover_core::types::{AllocId, EvalId, Evaluation, TriggeredBy};

/// What [`ServerHandle::stop_alloc`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocStopped {
    /// The evaluation that places the replacement.
    pub eval_id: EvalId,
    pub index: u64,
}

impl ServerHandle {
    /// Stops one allocation and writes an eval of its job in the same entry, so the
    /// scheduler places a replacement if the job still wants the slot.
    pub async fn stop_alloc(&self, alloc_id: AllocId) -> Result<AllocStopped, ServerError> {
        let snap = self.snapshot();
        let alloc = snap
            .alloc(&alloc_id)
            .ok_or_else(|| ServerError::not_found("allocation", alloc_id))?;
        let key = drover_core::types::JobKey {
            namespace: alloc.namespace.clone(),
            id: alloc.job_id.clone(),
        };
        let job = snap.job(&key).ok_or_else(|| {
            ServerError::precondition(format!(
                "allocation {alloc_id} belongs to job {key}, which is gone"
            ))
        })?;
        let now = now();
        let mut eval = Evaluation::new(EvalId::random(), job, TriggeredBy::AllocStop, now);
        eval.related_alloc = Some(alloc_id);
        let eval_id = eval.id;
        let index = self
            .inner
            .writer
            .write(Command::AllocStop {
                alloc_id,
                eval,
                now,
            })
            .await?;
        tracing::info!(%alloc_id, %eval_id, index, "allocation stopped by operator");
        Ok(AllocStopped { eval_id, index })
    }
}
