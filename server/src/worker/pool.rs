//! A server's pool of workers: start, stop, pause, resume, resize and list.

use super::{Desired, StatusCell, Worker, WorkerDeps, WorkerInfo, WorkerStatus};
use crate::clock::now;
use crate::config::cpu_count;
use drover_core::{SchedulerType, Timestamp};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use drover_proto::convert::WorkerPoolConfig;

/// Why a pool or worker request was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WorkerConfigError {
    #[error("worker count {count} is above this server's cpu count {max}")]
    CountTooHigh { count: u32, max: u32 },
    #[error("worker {0} not found")]
    NotFound(String),
    #[error("worker {id} is {}: {action} refused", status.as_str())]
    BadStatus {
        id: String,
        status: WorkerStatus,
        action: &'static str,
    },
}

struct WorkerHandle {
    id: String,
    types: Vec<SchedulerType>,
    started_at: Timestamp,
    status: StatusCell,
    control: watch::Sender<Desired>,
    task: JoinHandle<()>,
}

impl WorkerHandle {
    fn info(&self) -> WorkerInfo {
        let (status, workload) = self.status.get();
        WorkerInfo {
            id: self.id.clone(),
            enabled: self.types.clone(),
            started_at: self.started_at,
            status,
            workload,
        }
    }
}

/// The workers of one server. Changes to the pool go through `&mut self`; the server keeps
/// it behind a mutex.
pub struct WorkerPool {
    server_id: u64,
    deps: WorkerDeps,
    config: WorkerPoolConfig,
    workers: Vec<WorkerHandle>,
    generation: u64,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("config", &self.config)
            .field("workers", &self.workers.len())
            .finish()
    }
}

/// Adds `_core` and checks the count against the CPU count.
pub(crate) fn normalize(
    mut config: WorkerPoolConfig,
) -> Result<WorkerPoolConfig, WorkerConfigError> {
    let max = cpu_count();
    if config.count > max {
        return Err(WorkerConfigError::CountTooHigh {
            count: config.count,
            max,
        });
    }
    config.enabled.insert(SchedulerType::Core);
    Ok(config)
}

impl WorkerPool {
    /// Starts `config.count` workers.
    pub(crate) fn start(
        server_id: u64,
        deps: WorkerDeps,
        config: WorkerPoolConfig,
    ) -> Result<Self, WorkerConfigError> {
        let config = normalize(config)?;
        let mut pool = Self {
            server_id,
            deps,
            config,
            workers: Vec::new(),
            generation: 0,
        };
        pool.spawn_all();
        Ok(pool)
    }

    fn spawn_all(&mut self) {
        self.generation += 1;
        let types: Vec<SchedulerType> = self.config.enabled.iter().copied().collect();
        for n in 0..self.config.count {
            let id = format!("s{}-g{}-w{n}", self.server_id, self.generation);
            let status = StatusCell::new();
            let (control, rx) = watch::channel(Desired::Run);
            let worker = Worker {
                id: id.clone(),
                types: types.clone(),
                deps: self.deps.clone(),
                status: status.clone(),
                control: rx,
                failures: 0,
                last_plan_index: Arc::new(AtomicU64::new(0)),
            };
            let task = tokio::spawn(worker.run());
            self.workers.push(WorkerHandle {
                id,
                types: types.clone(),
                started_at: now(),
                status,
                control,
                task,
            });
        }
        tracing::info!(count = self.config.count, types = ?types, "worker pool started");
    }

    pub fn config(&self) -> &WorkerPoolConfig {
        &self.config
    }

    /// Every worker, in start order.
    pub fn info(&self) -> Vec<WorkerInfo> {
        self.workers.iter().map(WorkerHandle::info).collect()
    }

    fn find(&self, id: &str) -> Result<&WorkerHandle, WorkerConfigError> {
        self.workers
            .iter()
            .find(|w| w.id == id)
            .ok_or_else(|| WorkerConfigError::NotFound(id.to_string()))
    }

    fn pause_one(w: &WorkerHandle) -> Result<(), WorkerStatus> {
        w.status.transition(
            |s| {
                matches!(
                    s,
                    WorkerStatus::Starting | WorkerStatus::Started | WorkerStatus::Resuming
                )
            },
            WorkerStatus::Pausing,
        )?;
        w.control.send_replace(Desired::Pause);
        Ok(())
    }

    fn resume_one(w: &WorkerHandle) -> Result<(), WorkerStatus> {
        w.status
            .transition(|s| s == WorkerStatus::Paused, WorkerStatus::Resuming)?;
        w.control.send_replace(Desired::Run);
        Ok(())
    }

    /// Pauses one worker: refused unless it is starting, started or resuming.
    pub fn pause(&self, id: &str) -> Result<WorkerInfo, WorkerConfigError> {
        let w = self.find(id)?;
        Self::pause_one(w).map_err(|status| WorkerConfigError::BadStatus {
            id: id.to_string(),
            status,
            action: "pause",
        })?;
        Ok(w.info())
    }

    /// Resumes one worker: refused unless it is paused.
    pub fn resume(&self, id: &str) -> Result<WorkerInfo, WorkerConfigError> {
        let w = self.find(id)?;
        Self::resume_one(w).map_err(|status| WorkerConfigError::BadStatus {
            id: id.to_string(),
            status,
            action: "resume",
        })?;
        Ok(w.info())
    }

    /// Pauses every worker that may be paused; the others are skipped.
    pub fn pause_all(&self) -> Vec<WorkerInfo> {
        for w in &self.workers {
            let _ = Self::pause_one(w);
        }
        self.info()
    }

    /// Resumes every paused worker; the others are skipped.
    pub fn resume_all(&self) -> Vec<WorkerInfo> {
        for w in &self.workers {
            let _ = Self::resume_one(w);
        }
        self.info()
    }

    /// Stops every worker and waits (bounded) for them to exit.
    pub async fn stop(&mut self) {
        for w in &self.workers {
            w.status.set_status(WorkerStatus::Stopping);
            w.control.send_replace(Desired::Stop);
        }
        for w in self.workers.drain(..) {
            let abort = w.task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(10), w.task)
                .await
                .is_err()
            {
                tracing::warn!(worker_id = %w.id, "worker did not stop in time; aborting it");
                abort.abort();
            }
        }
    }

    /// Replaces the configuration and rebuilds the pool; an invalid one changes nothing.
    pub async fn reconfigure(
        &mut self,
        config: WorkerPoolConfig,
    ) -> Result<Vec<WorkerInfo>, WorkerConfigError> {
        let config = normalize(config)?;
        self.stop().await;
        self.config = config;
        self.spawn_all();
        Ok(self.info())
    }
}

/// The enabled set a config names, `_core` included.
pub fn enabled_types(types: impl IntoIterator<Item = SchedulerType>) -> BTreeSet<SchedulerType> {
    let mut s: BTreeSet<SchedulerType> = types.into_iter().collect();
    s.insert(SchedulerType::Core);
    s
}
