//! A listener's serving task, as the client API, the Raft listener and `/metrics` each
//! run one: stopped gracefully within a grace period, or cut when dropped.

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

impl<T> Drop for Serving<T> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
