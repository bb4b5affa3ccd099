//! The leader loop: one task that hands applied entries to the engine and runs it at its
//! due times.
//!
//! Each turn waits for the first of: a batch of applied-entry events, the engine's earliest
//! due time, a wake-up, or cancellation. It then runs everything due
//! ([`LeaderCore::run_due`]). The engine's writes come back as [`Action`]s and run after the
//! lock is released, each in its own task, so a slow write never stalls the loop.

use super::{LeaderCore, Leadership};
use crate::clock::now;
use drover_core::Index;
use drover_core::fsm::{Command, Event};
use drover_core::leader::{Action, Step};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// How long the loop sleeps when nothing in the engine is due.
const IDLE: Duration = Duration::from_secs(60);

pub(super) async fn run(
    shared: Arc<Leadership>,
    mut events: broadcast::Receiver<Arc<Vec<Event>>>,
    after: Index,
    mut cancel: watch::Receiver<bool>,
) {
    loop {
        if *cancel.borrow() {
            break;
        }
        let due = shared.core.lock().await.next_deadline();
        let sleep = due.map_or(IDLE, |d| d.since(now()).max(Duration::from_millis(1)));
        tokio::select! {
            _ = cancel.changed() => {}
            batch = events.recv() => match batch {
                Ok(batch) => shared.step(|core, snap| core.on_events(&batch, after, snap, now())).await,
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "leader fell behind the event stream; resyncing");
                    shared.step(|core, snap| core.resync(snap, now())).await;
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = tokio::time::sleep(sleep) => {}
            _ = shared.wake.notified() => {}
        }
        shared.step(|core, snap| core.run_due(snap, now())).await;
    }
    tracing::debug!("leader loop stopped");
}

impl Leadership {
    /// Runs one engine call under the lock against the latest state, then wakes waiting
    /// workers if evals became ready and runs the writes it decided.
    async fn step(
        &self,
        decide: impl FnOnce(&mut LeaderCore, &drover_core::state::StateSnapshot) -> Step,
    ) {
        let snap = self.state.snapshot();
        let step = decide(&mut *self.core.lock().await, &snap);
        if step.evals_ready {
            self.evals_ready.notify_waiters();
        }
        self.run_actions(step.actions);
    }

    /// Runs the writes decided under the lock, each in its own task.
    pub(crate) fn run_actions(self: &Leadership, actions: Vec<Action>) {
        for action in actions {
            let writer = self.writer.clone();
            match action {
                Action::Write(cmd, what) => {
                    tokio::spawn(async move {
                        writer.write_logged(cmd, what).await;
                    });
                }
                Action::Sequence(cmds, what) => {
                    tokio::spawn(async move {
                        for cmd in cmds {
                            writer.write_logged(cmd, what).await;
                        }
                    });
                }
                Action::FailEval {
                    command,
                    eval_id,
                    token,
                } => {
                    if let Some(me) = self.me.upgrade() {
                        super::reaper::spawn_fail_eval(me, command, eval_id, token);
                    }
                }
                Action::CoalescedEvals(command) => {
                    if let Some(me) = self.me.upgrade() {
                        spawn_coalesced_evals(me, command);
                    }
                }
            }
        }
    }
}

/// Writes the node-update evals the engine coalesced for system and sysbatch jobs. A failed
/// write goes back to the engine, which makes them again shortly: the jobs would otherwise
/// never see the node changes those evals stood for.
fn spawn_coalesced_evals(shared: Arc<Leadership>, command: Command) {
    tokio::spawn(async move {
        if let Command::EvalUpsert { evals } = &command {
            for e in evals {
                tracing::debug!(eval_id = %e.id, job_id = %e.job_id, "writing coalesced node-update eval");
            }
        }
        let written = shared
            .writer
            .write_logged(command.clone(), "coalesced node-update evals")
            .await;
        if written.is_none() {
            shared
                .core
                .lock()
                .await
                .coalesced_evals_lost(&command, now());
            shared.wake.notify_one();
        }
    });
}
