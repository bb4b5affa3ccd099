//! The node simulator: thousands of virtual nodes in one process, each registered with a
//! real drover server over gRPC with its own id, secret, resources and attributes, its own
//! heartbeat schedule (from the TTL the server returns, with jitter), and a mock driver whose
//! tasks run for a configured time and fail at a configured, seeded rate.
//!
//! Built for 10,000 nodes in one process: node state is a few hundred bytes, one engine task
//! owns it all (one timer wheel for every heartbeat and task exit, unary calls multiplexed
//! inside it), and only the allocation watch streams have a small task each, spread over
//! several HTTP/2 connections.
//!
//! Nodes can be silenced (no heartbeat, no watch, no report; tasks keep running) and
//! restored (heartbeat first, then re-read allocations, then report everything), to drive
//! the servers' disconnect and reconnect handling; and told to fail their next tasks as
//! infrastructure failures, to drive the flaky-node logic.

mod calls;
mod config;
mod connections;
mod driver;
mod engine;
mod error;
mod layout;
mod watch;

pub use config::{DEFAULT_SIM_DRIVERS, Mix, NodeResources, SimConfig};
pub use error::SimError;

use drover_core::types::NodeId;
use engine::{Control, Engine};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Counters of a running simulation.
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct SimStats {
    pub nodes: usize,
    pub silent: usize,
    /// Nodes with an open allocation watch.
    pub watching: usize,
    /// Nodes holding an open heartbeat stream between heartbeats (one in flight holds
    /// its stream elsewhere); none while the servers have no stream.
    pub heartbeat_streams: usize,
    /// Allocations whose mock tasks are running now.
    pub running_allocs: usize,
    /// Unary calls running or waiting for a slot.
    pub in_flight: usize,
    /// Heartbeats accepted since start (each node's first one included).
    pub heartbeats: u64,
    pub heartbeat_errors: u64,
    /// Allocation update batches accepted.
    pub reports: u64,
    pub report_errors: u64,
    pub watch_messages: u64,
    /// Allocations those messages carried (a reconnecting node names what it holds, so
    /// its new watch carries only what changed meanwhile).
    pub watch_allocations: u64,
}

/// One accepted report that carried service registrations: the Raft index it committed
/// at (the catalog's index after it, when it changed the catalog) and when it was sent and
/// its acknowledgement arrived, so a reader of the catalog can time how soon it saw it.
#[derive(Clone, Copy, Debug)]
pub struct ServiceWrite {
    pub index: u64,
    pub sent: tokio::time::Instant,
    pub acknowledged: tokio::time::Instant,
}

/// A running simulation. Dropping it stops the engine too (its control channel closes);
/// [`Simulator::shutdown`] also waits for it.
#[derive(Debug)]
pub struct Simulator {
    ids: Vec<NodeId>,
    index: HashMap<NodeId, u32>,
    control: mpsc::UnboundedSender<Control>,
    engine: JoinHandle<()>,
}

impl Simulator {
    /// Registers every node and sends its first (ready) heartbeat, then opens the
    /// allocation watches. Returns once every node is ready on the servers; the engine keeps
    /// them alive from then on.
    pub async fn start(config: SimConfig) -> Result<Simulator, SimError> {
        config.validate()?;
        let conns = Arc::new(connections::Connections::open(&config).await?);
        let layout = Arc::new(layout::Layout::new(&config));
        let (reply, started) = oneshot::channel();
        let engine = Engine::new(Arc::new(config), layout, conns, reply);
        let (control, rx) = mpsc::unbounded_channel();
        let engine = tokio::spawn(engine.run(rx));
        let ids = started.await.map_err(|_| SimError::Stopped)??;
        let index = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, u32::try_from(i).unwrap_or(u32::MAX)))
            .collect();
        Ok(Simulator {
            ids,
            index,
            control,
            engine,
        })
    }

    /// The servers' ids of the virtual nodes, in node order (`sim-00000` first).
    pub fn node_ids(&self) -> &[NodeId] {
        &self.ids
    }

    fn indexes(&self, nodes: &[NodeId]) -> Result<Vec<u32>, SimError> {
        nodes
            .iter()
            .map(|id| {
                self.index
                    .get(id)
                    .copied()
                    .ok_or(SimError::UnknownNode(*id))
            })
            .collect()
    }

    async fn ask(&self, make: impl FnOnce(oneshot::Sender<()>) -> Control) -> Result<(), SimError> {
        let (tx, rx) = oneshot::channel();
        self.control.send(make(tx)).map_err(|_| SimError::Stopped)?;
        rx.await.map_err(|_| SimError::Stopped)
    }

    /// Cuts the nodes off: they stop heartbeating, watching and reporting, while their
    /// tasks keep running. Returns once no further call of theirs will start.
    pub async fn silence(&self, nodes: &[NodeId]) -> Result<(), SimError> {
        let nodes = self.indexes(nodes)?;
        self.ask(|tx| Control::Silence(nodes, tx)).await
    }

    /// Brings silenced nodes back: each heartbeats first, then re-reads its allocations
    /// (dropping those the servers hold as terminal), then reports the rest.
    pub async fn restore(&self, nodes: &[NodeId]) -> Result<(), SimError> {
        let nodes = self.indexes(nodes)?;
        self.ask(|tx| Control::Restore(nodes, tx)).await
    }

    /// The next `count` tasks started on `node` fail at once as infrastructure failures
    /// (the node's fault), which count towards the servers marking it flaky.
    pub fn fail_next_tasks_as_infra(&self, node: NodeId, count: u32) -> Result<(), SimError> {
        let n = self.indexes(&[node])?[0];
        self.control
            .send(Control::FailInfra(n, count))
            .map_err(|_| SimError::Stopped)
    }

    /// From now on, every accepted report carrying registrations (with services on) is
    /// told on the returned channel, until it is dropped.
    pub fn watch_service_writes(&self) -> Result<mpsc::UnboundedReceiver<ServiceWrite>, SimError> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.control
            .send(Control::WatchServiceWrites(tx))
            .map_err(|_| SimError::Stopped)?;
        Ok(rx)
    }

    /// The simulation's counters now.
    pub async fn stats(&self) -> Result<SimStats, SimError> {
        let (tx, rx) = oneshot::channel();
        self.control
            .send(Control::Stats(tx))
            .map_err(|_| SimError::Stopped)?;
        rx.await.map_err(|_| SimError::Stopped)
    }

    /// Stops every node (nothing more is sent) and waits for the engine to finish. The
    /// servers see the nodes go silent.
    pub async fn shutdown(self) {
        let Simulator {
            control, engine, ..
        } = self;
        drop(control);
        if let Err(e) = engine.await
            && e.is_panic()
        {
            tracing::error!(error = %e, "simulator engine panicked");
        }
    }
}
