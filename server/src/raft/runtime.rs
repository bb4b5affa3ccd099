//! Raft's own tokio runtime: openraft's core, its state machine worker, the replication
//! streams and the Raft listener run on threads of their own, so a heartbeat or a vote
//! never waits behind the scheduler workers, the API or the allocation watches. The FSM's
//! index helper (`drover_core::state::run_on_index_helper`), which runs half of each large
//! batch's apply beside openraft's state machine worker, is raised with them, whichever
//! thread first used it. The log's flush worker is not: see `RaftNode::start`.
//!
//! openraft 0.9 gives every AppendEntries one heartbeat interval to be answered; on a busy
//! machine a follower whose Raft shared the runtime with its scheduler answered later than
//! that, the leader timed out, the follower's election timer ran out, and the cluster
//! elected again and again under load instead of slowing down. Apart from their own
//! worker threads, the Raft threads ask the kernel for a higher priority (a lower nice
//! value), as etcd does for its Raft loop: that needs `CAP_SYS_NICE`, and without it they
//! run at the process's priority, which is logged once.
//!
//! Dropping the last handle shuts the runtime down in the background: a runtime may not be
//! dropped from inside another one's task, and the node's tasks end with the shutdown.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Worker threads of the Raft runtime: one can apply a batch of plans to the FSM while the
/// other answers heartbeats and votes.
const WORKER_THREADS: usize = 2;

/// The nice value Raft's threads ask for (0 is the default; lower runs first).
const RAFT_NICE: i32 = -10;

/// Where Raft's tasks run; cloned handles share one runtime.
#[derive(Clone)]
pub struct RaftRuntime {
    inner: Arc<Owned>,
}

struct Owned(Option<tokio::runtime::Runtime>);

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl fmt::Debug for RaftRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RaftRuntime").finish_non_exhaustive()
    }
}

impl RaftRuntime {
    /// Starts the runtime's threads, named after the node.
    pub fn start(node_id: u64) -> std::io::Result<RaftRuntime> {
        static PRIORITY_LOGGED: AtomicBool = AtomicBool::new(false);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .thread_name(format!("raft-{node_id}"))
            .enable_all()
            .on_thread_start(move || {
                if let Err(reason) = raise_priority()
                    && !PRIORITY_LOGGED.swap(true, Ordering::Relaxed)
                {
                    tracing::info!(
                        node_id,
                        %reason,
                        "raft threads run at the process's priority"
                    );
                }
            })
            .build()?;
        raise_index_helper();
        Ok(RaftRuntime {
            inner: Arc::new(Owned(Some(rt))),
        })
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.inner
            .0
            .as_ref()
            .expect("the runtime is taken only on drop")
    }

    /// Runs `fut` on the Raft runtime and waits for it from wherever the caller runs:
    /// whatever `fut` spawns (openraft's core and workers) stays on the Raft runtime.
    pub async fn run<F>(&self, fut: F) -> Result<F::Output, tokio::task::JoinError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime().spawn(fut).await
    }

    /// Runs blocking `f` on one of the Raft runtime's blocking threads, which start at Raft's
    /// priority (a restart's snapshot load).
    pub async fn blocking<F, R>(&self, f: F) -> Result<R, tokio::task::JoinError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.runtime().spawn_blocking(f).await
    }

    /// Starts `fut` on the Raft runtime without waiting for it; it ends with the runtime
    /// at the latest.
    pub fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.runtime().spawn(fut));
    }

    /// Enters the runtime for synchronous setup that spawns (a listener's accept loop).
    pub fn enter(&self) -> tokio::runtime::EnterGuard<'_> {
        self.runtime().enter()
    }
}

/// Raises the FSM's index helper to Raft's priority, once per process. A thread inherits
/// the priority of the thread that started it, and the helper starts on first use: a restart
/// that loaded its snapshot elsewhere left it at the process's, preempted by Raft's threads
/// while the replay waited for it.
fn raise_index_helper() {
    static RAISED: std::sync::Once = std::sync::Once::new();
    RAISED.call_once(|| {
        if let Some(Err(reason)) = drover_core::state::run_on_index_helper(raise_priority) {
            tracing::info!(%reason, "the index helper runs at the process's priority");
        }
    });
}

/// Lowers the calling thread's nice value to [`RAFT_NICE`]. On Linux a nice value belongs to
/// the thread, so only Raft's threads are raised.
fn raise_priority() -> Result<(), String> {
    let tid = nix::unistd::gettid().as_raw();
    let who = nix::libc::id_t::try_from(tid).map_err(|e| e.to_string())?;
    // SAFETY: setpriority reads only its integer arguments and sets errno on failure.
    #[allow(unsafe_code)]
    let rc = unsafe { nix::libc::setpriority(nix::libc::PRIO_PROCESS, who, RAFT_NICE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn what_runs_on_the_raft_runtime_spawns_there() {
        let rt = RaftRuntime::start(7).expect("runtime");
        let name = rt
            .run(async {
                tokio::spawn(async { std::thread::current().name().map(str::to_owned) })
                    .await
                    .expect("spawned task")
            })
            .await
            .expect("ran");
        assert_eq!(name.as_deref(), Some("raft-7"));
        drop(rt);
    }
}
