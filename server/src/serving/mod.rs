//! A listener's serving task, as the client API, the Raft listener and `/metrics` each
//! run one: stopped gracefully within a grace period, or cut when dropped. The API and Raft
//! listeners admit connections through [`connections`] (a cap, handshake and idle
//! timeouts, no spinning on EMFILE), with [`activity`] counting each one's requests.

pub mod activity;
pub mod connections;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running listener bound to `local_addr`, serving until [`Serving::shutdown`] or drop.
#[derive(Debug)]
pub struct Serving<T> {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<T>>,
}

impl<T: Send + 'static> Serving<T> {
    /// Spawns `serve`, which runs until the future it is given resolves (the stop signal).
    pub fn spawn<F>(
        addr: SocketAddr,
        serve: impl FnOnce(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> F,
    ) -> Self
    where
        F: Future<Output = T> + Send + 'static,
    {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(Box::pin(async {
            let _ = stopped.await;
        })));
        Self {
            addr,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// The address actually bound (the real port when the config asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets what is in flight finish for at most `grace`, then cuts what
    /// is still open. The task's result, if it ended within the grace.
    pub async fn shutdown(mut self, grace: Duration) -> Option<T> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let mut task = self.task.take()?;
        match tokio::time::timeout(grace, &mut task).await {
            Ok(res) => res.ok(),
            Err(_) => {
                task.abort();
                None
            }
        }
    }
}

/// Raises the process's soft limit on open files to its hard limit, as servers do (one
/// connection is one descriptor), and returns the limit now in force.
pub fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => {
                tracing::info!(from = soft, to = hard, "raised the open file limit");
                hard
            }
            Err(e) => {
                tracing::warn!(soft, hard, error = %e, "cannot raise the open file limit");
                soft
            }
        },
        Ok((soft, _)) => soft,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the open file limit");
            1024
        }
    }
}

/// The API listener's connection cap when the config sets none: three quarters of the
/// descriptors, less 64 for the Raft log, peers and agents, and at least 16.
pub fn default_max_connections(fd_limit: u64) -> usize {
    let usable = usize::try_from(fd_limit.saturating_mul(3) / 4).unwrap_or(usize::MAX);
    usable.saturating_sub(64).max(16)
}

impl<T> Drop for Serving<T> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
