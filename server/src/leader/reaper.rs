//! The reapers: evals past the delivery limit (written failed with their follow-up, then
//! acked) and cancelable evals (one `EvalCancel` batch per ack, besides the leader loop's
//! periodic sweep).

use super::Leadership;
use crate::clock::now;
use drover_core::EvalId;
use drover_core::broker::Token;
use drover_core::fsm::Command;
use std::sync::Arc;

/// Writes a failed eval with its follow-up, then acks the failed delivery so the job's next
/// eval may run. Should the write fail, the nack timer returns the eval to the failed queue.
pub(super) fn spawn_fail_eval(
    shared: Arc<Leadership>,
    command: Command,
    eval_id: EvalId,
    token: Token,
) {
    tokio::spawn(async move {
        if shared
            .writer
            .write_logged(command, "failed eval and follow-up")
            .await
            .is_none()
        {
            return;
        }
        let mut core = shared.core.lock().await;
        if let Err(e) = core.broker.ack(eval_id, token, now()) {
            tracing::warn!(%eval_id, error = %e, "ack of a failed eval refused");
        }
        let cancel = core.cancel_superseded_after_ack(now());
        drop(core);
        shared.evals_ready.notify_waiters();
        shared.run_actions(cancel.into_iter().collect());
    });
}
