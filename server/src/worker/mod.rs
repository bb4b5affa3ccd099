//! Scheduler workers: every server runs a pool of them (followers too).
//!
//! One worker's loop:
//!
//! ```text
//!  paused? park ─► dequeue (timeout) ─► wait for the wait index (limit) ─► snapshot
//!      ▲                                   │ timed out: nack, then wait up to 10×
//!      │                                   ▼  the limit for that index
//!      └── ack / nack ◄── Scheduler::process(eval, snapshot, WorkerPlanner)
//! ```
//!
//! Errors back off `min(base · 2^failures, limit)`, reset by a success. The next eval
//! waits for the index of the last plan this worker committed as well. Stopping is a
//! cancellation: it is logged as such, never as an error.

mod planner;
mod pool;
mod source;

pub use pool::{WorkerConfigError, WorkerPool, WorkerPoolConfig, enabled_types};
pub use source::{BoxFuture, EvalSource, PlanApplyError, SourceError};

use crate::clock::now;
use crate::raft::StateHandle;
use crate::write::Writer;
use drover_core::broker::Dequeued;
use drover_core::scheduler::{Env, Scheduler};
use drover_core::{SchedulerType, Timestamp};
use planner::WorkerPlanner;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// The pool configuration a server starts with.
pub(crate) fn pool_config(
    config: &crate::config::ServerConfig,
) -> Result<WorkerPoolConfig, WorkerConfigError> {
    pool::normalize(WorkerPoolConfig {
        count: config.worker_count(),
        enabled: config.workers.enabled.clone(),
    })
}

/// A worker's life cycle.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum WorkerStatus {
    Starting,
    Started,
    /// Asked to pause; parks at its next dequeue.
    Pausing,
    Paused,
    Resuming,
    Stopping,
    Stopped,
}

impl WorkerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerStatus::Starting => "starting",
            WorkerStatus::Started => "started",
            WorkerStatus::Pausing => "pausing",
            WorkerStatus::Paused => "paused",
            WorkerStatus::Resuming => "resuming",
            WorkerStatus::Stopping => "stopping",
            WorkerStatus::Stopped => "stopped",
        }
    }
}

/// What a worker is doing right now.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum WorkloadStatus {
    WaitingToDequeue,
    WaitingForRaft,
    Scheduling,
    Submitting,
    Backoff,
    Paused,
    Stopped,
}

impl WorkloadStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadStatus::WaitingToDequeue => "waiting_to_dequeue",
            WorkloadStatus::WaitingForRaft => "waiting_for_raft",
            WorkloadStatus::Scheduling => "scheduling",
            WorkloadStatus::Submitting => "submitting",
            WorkloadStatus::Backoff => "backoff",
            WorkloadStatus::Paused => "paused",
            WorkloadStatus::Stopped => "stopped",
        }
    }
}

/// One worker as the info call lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    pub id: String,
    pub enabled: Vec<SchedulerType>,
    pub started_at: Timestamp,
    pub status: WorkerStatus,
    pub workload: WorkloadStatus,
}

#[derive(Clone, Copy, Debug)]
struct Statuses {
    status: WorkerStatus,
    workload: WorkloadStatus,
}

/// A worker's two statuses, shared between its loop and the pool.
#[derive(Clone, Debug)]
pub(crate) struct StatusCell(Arc<Mutex<Statuses>>);

impl StatusCell {
    fn new() -> Self {
        StatusCell(Arc::new(Mutex::new(Statuses {
            status: WorkerStatus::Starting,
            workload: WorkloadStatus::WaitingToDequeue,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Statuses> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn get(&self) -> (WorkerStatus, WorkloadStatus) {
        let s = self.lock();
        (s.status, s.workload)
    }

    pub(crate) fn set_workload(&self, w: WorkloadStatus) {
        self.lock().workload = w;
    }

    fn set_status(&self, s: WorkerStatus) {
        self.lock().status = s;
    }

    /// Moves the status if `from` allows it; returns the status it was in.
    fn transition(
        &self,
        allowed: impl Fn(WorkerStatus) -> bool,
        to: WorkerStatus,
    ) -> Result<(), WorkerStatus> {
        let mut s = self.lock();
        if allowed(s.status) {
            s.status = to;
            Ok(())
        } else {
            Err(s.status)
        }
    }
}

/// What the pool wants of a worker.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Desired {
    Run,
    Pause,
    Stop,
}

/// What every worker of a pool shares.
#[derive(Clone, Debug)]
pub(crate) struct WorkerDeps {
    pub source: Arc<dyn EvalSource>,
    pub writer: Writer,
    pub state: StateHandle,
    pub dequeue_timeout: Duration,
    pub wait_limit: Duration,
    pub backoff_base: Duration,
    pub backoff_limit: Duration,
}

/// One worker's loop.
struct Worker {
    id: String,
    types: Vec<SchedulerType>,
    deps: WorkerDeps,
    status: StatusCell,
    control: watch::Receiver<Desired>,
    failures: u32,
    last_plan_index: Arc<AtomicU64>,
}

/// Why a turn of the loop ended early.
enum Turn {
    Continue,
    Stop,
}

impl Worker {
    async fn run(mut self) {
        self.status.set_status(WorkerStatus::Started);
        tracing::debug!(worker_id = %self.id, types = ?self.types, "worker started");
        loop {
            if let Turn::Stop = self.obey().await {
                break;
            }
            if let Turn::Stop = self.turn().await {
                break;
            }
        }
        self.status.set_status(WorkerStatus::Stopped);
        self.status.set_workload(WorkloadStatus::Stopped);
        tracing::info!(worker_id = %self.id, "worker stopped: cancelled by shutdown");
    }

    /// Parks while paused; says whether to stop.
    async fn obey(&mut self) -> Turn {
        loop {
            let desired = *self.control.borrow_and_update();
            match desired {
                Desired::Stop => return Turn::Stop,
                Desired::Run => {
                    let _ = self.status.transition(
                        |s| matches!(s, WorkerStatus::Resuming | WorkerStatus::Starting),
                        WorkerStatus::Started,
                    );
                    return Turn::Continue;
                }
                Desired::Pause => {
                    self.status.set_status(WorkerStatus::Paused);
                    self.status.set_workload(WorkloadStatus::Paused);
                    tracing::info!(worker_id = %self.id, "worker paused");
                    if self.control.changed().await.is_err() {
                        return Turn::Stop;
                    }
                }
            }
        }
    }

    fn stopping(&self) -> bool {
        *self.control.borrow() == Desired::Stop
    }

    async fn backoff(&mut self) -> Turn {
        let d = self
            .deps
            .backoff_base
            .saturating_mul(1u32 << self.failures.min(20));
        let d = d.min(self.deps.backoff_limit);
        self.failures = self.failures.saturating_add(1);
        self.status.set_workload(WorkloadStatus::Backoff);
        tokio::select! {
            _ = tokio::time::sleep(d) => Turn::Continue,
            _ = self.control.wait_for(|d| *d == Desired::Stop) => Turn::Stop,
        }
    }

    async fn turn(&mut self) -> Turn {
        self.status.set_workload(WorkloadStatus::WaitingToDequeue);
        let source = self.deps.source.clone();
        let dequeued = tokio::select! {
            r = source.dequeue(&self.types, self.deps.dequeue_timeout) => r,
            _ = self.control.changed() => return Turn::Continue,
        };
        let d = match dequeued {
            Ok(Some(d)) => d,
            Ok(None) => return Turn::Continue,
            Err(e) => {
                tracing::debug!(worker_id = %self.id, error = %e, "dequeue failed");
                return self.backoff().await;
            }
        };
        self.process(d).await
    }

    async fn process(&mut self, d: Dequeued) -> Turn {
        let eval_id = d.eval.id;
        let job_id = d.eval.job_id.clone();
        let wait = d
            .wait_index
            .max(self.last_plan_index.load(Ordering::SeqCst));
        self.status.set_workload(WorkloadStatus::WaitingForRaft);
        let snapshot = match self
            .deps
            .state
            .wait_for_index(wait, self.deps.wait_limit)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(worker_id = %self.id, %eval_id, %job_id, error = %e, "state behind the eval's wait index: nacking");
                if let Err(e) = self.deps.source.nack(eval_id, d.token).await {
                    tracing::debug!(%eval_id, error = %e, "nack refused");
                }
                // Far behind: do not take more work until the state catches up.
                let long = self.deps.wait_limit.saturating_mul(10);
                let state = self.deps.state.clone();
                tokio::select! {
                    _ = state.wait_for_index(wait, long) => {}
                    _ = self.control.wait_for(|d| *d == Desired::Stop) => return Turn::Stop,
                }
                return Turn::Continue;
            }
        };
        self.status.set_workload(WorkloadStatus::Scheduling);
        let planner = WorkerPlanner {
            rt: tokio::runtime::Handle::current(),
            source: self.deps.source.clone(),
            writer: self.deps.writer.clone(),
            state: self.deps.state.clone(),
            eval_id,
            token: d.token,
            wait_limit: self.deps.wait_limit,
            last_plan_index: self.last_plan_index.clone(),
            status: self.status.clone(),
        };
        let env = Env {
            now: now(),
            seed: rand::random(),
        };
        let eval = d.eval.clone();
        let outcome = off_the_runtime(move || {
            let mut planner = planner;
            Scheduler::new(env).process(&eval, snapshot, &mut planner)
        })
        .await;
        let result = match outcome {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(e) => Err(format!("scheduler task failed: {e}")),
        };
        match result {
            Ok(()) => {
                self.failures = 0;
                match self.deps.source.ack(eval_id, d.token).await {
                    Ok(()) => {
                        tracing::debug!(worker_id = %self.id, %eval_id, %job_id, "eval processed")
                    }
                    Err(e) => {
                        tracing::warn!(worker_id = %self.id, %eval_id, %job_id, error = %e, "ack refused")
                    }
                }
                if self.stopping() {
                    Turn::Stop
                } else {
                    Turn::Continue
                }
            }
            Err(reason) => {
                tracing::warn!(worker_id = %self.id, %eval_id, %job_id, %reason, "scheduling failed: nacking");
                if let Err(e) = self.deps.source.nack(eval_id, d.token).await {
                    tracing::debug!(%eval_id, error = %e, "nack refused");
                }
                self.backoff().await
            }
        }
    }
}

/// Runs the scheduler, which blocks (it computes, and its planner waits on Raft through
/// `Handle::block_on`), where it keeps the runtime's other tasks running. On a
/// multi-thread runtime that is this thread, lent for the call (`block_in_place` moves the
/// worker's other tasks to another thread): an idle job's eval then starts and finishes
/// without the two thread hand-offs a blocking-pool task costs (to the pool thread and
/// back), each 30-110 µs on a small VM. A current-thread runtime cannot lend its only
/// thread, so there it runs on the blocking pool. A panic in the scheduler is returned, as
/// a blocking task's would be, so the worker nacks the eval and lives on.
async fn off_the_runtime<R: Send + 'static>(
    run: impl FnOnce() -> R + Send + 'static,
) -> Result<R, String> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if Handle::current().runtime_flavor() == RuntimeFlavor::MultiThread {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tokio::task::block_in_place(run)
        }))
        .map_err(|panic| panic_message(panic.as_ref()))
    } else {
        tokio::task::spawn_blocking(run)
            .await
            .map_err(|e| e.to_string())
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let message = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str));
    message.map_or_else(|| "panicked".to_string(), |m| format!("panicked: {m}"))
}

#[cfg(test)]
mod tests {
    use super::off_the_runtime;

    /// The scheduler's shape: it computes, then waits on an async call through the handle.
    fn schedule_like(rt: tokio::runtime::Handle) -> u32 {
        rt.block_on(async { tokio::task::yield_now().await });
        42
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_scheduler_runs_on_a_lent_thread_and_may_wait_through_the_handle() {
        let rt = tokio::runtime::Handle::current();
        assert_eq!(off_the_runtime(move || schedule_like(rt)).await, Ok(42));
        let caller = std::thread::current().id();
        let ran_on = off_the_runtime(|| std::thread::current().id()).await;
        assert_eq!(ran_on, Ok(caller), "no hand-off to another thread");
        let panicked = off_the_runtime(|| -> u32 { panic!("boom") }).await;
        assert_eq!(panicked, Err("panicked: boom".to_string()));
        // The worker's thread serves tasks afterwards.
        assert_eq!(tokio::spawn(async { 7 }).await.unwrap(), 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_current_thread_runtime_runs_the_scheduler_on_the_blocking_pool() {
        let rt = tokio::runtime::Handle::current();
        assert_eq!(off_the_runtime(move || schedule_like(rt)).await, Ok(42));
        let caller = std::thread::current().id();
        let ran_on = off_the_runtime(|| std::thread::current().id()).await;
        assert!(
            ran_on.is_ok_and(|t| t != caller),
            "the runtime's only thread is not lent"
        );
        let panicked = off_the_runtime(|| -> u32 { panic!("boom") }).await;
        assert!(panicked.is_err_and(|e| e.contains("panicked")));
    }
}
