//! Wakes a node's allocation watch only when an applied entry touched that node.
//!
//! Waking every watch on every applied index costs each write one read per connected node;
//! with thousands of nodes that starves the server. Here one task reads the applied events
//! once and bumps a per-node `watch` channel for the nodes they name, so a write costs work
//! only for the watches it concerns.

use crate::ServerHandle;
use drover_core::fsm::{Event, EventPayload};
use drover_core::types::NodeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{broadcast, watch};

/// Per-node wake-up channels, each carrying the last index that touched the node.
#[derive(Debug, Default)]
pub(crate) struct NodeWakeups {
    nodes: Mutex<Channels>,
}

/// The channels, and how many subscriptions since channels no one holds were dropped.
#[derive(Debug, Default)]
struct Channels {
    by_node: HashMap<NodeId, watch::Sender<u64>>,
    since_sweep: usize,
}

/// Channels whose watches are gone are dropped once per this many subscriptions: sweeping
/// on every subscription was a pass over every node's channel for each of them, quadratic
/// when thousands of nodes reconnect at once (after a restart).
const SWEEP_EVERY: usize = 1024;

impl NodeWakeups {
    /// Starts the task that turns applied events into wake-ups; it ends with the server.
    pub(crate) fn start(handle: &ServerHandle) -> Arc<NodeWakeups> {
        let wakeups = Arc::new(NodeWakeups::default());
        let events = handle.subscribe_events();
        tokio::spawn(dispatch(events, wakeups.clone()));
        wakeups
    }

    /// A receiver that changes whenever an applied entry touches `node`.
    pub(crate) fn subscribe(&self, node: NodeId) -> watch::Receiver<u64> {
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        nodes.since_sweep += 1;
        if nodes.since_sweep >= SWEEP_EVERY {
            nodes.since_sweep = 0;
            nodes.by_node.retain(|_, tx| tx.receiver_count() > 0);
        }
        nodes
            .by_node
            .entry(node)
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    fn wake(&self, node: &NodeId, index: u64) {
        let nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tx) = nodes.by_node.get(node) {
            tx.send_replace(index);
        }
    }

    /// For events that do not say which node they concern (an allocation removed by id),
    /// and after missed events: every watch looks again.
    fn wake_all(&self, index: u64) {
        let nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        for tx in nodes.by_node.values() {
            tx.send_replace(index);
        }
    }
}

async fn dispatch(mut events: broadcast::Receiver<Arc<Vec<Event>>>, wakeups: Arc<NodeWakeups>) {
    loop {
        match events.recv().await {
            Ok(batch) => {
                for event in batch.iter() {
                    match &event.payload {
                        EventPayload::Allocation(a) => wakeups.wake(&a.node_id, event.index),
                        EventPayload::Node(n) => wakeups.wake(&n.id, event.index),
                        EventPayload::NodeId(id) => wakeups.wake(id, event.index),
                        EventPayload::AllocId(_) => wakeups.wake_all(event.index),
                        _ => {}
                    }
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => wakeups.wake_all(u64::MAX),
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::mock;

    #[test]
    fn channels_of_gone_watches_are_swept_and_live_ones_woken() {
        let wakeups = NodeWakeups::default();
        let gone = mock::node_id(1);
        let live = mock::node_id(2);
        drop(wakeups.subscribe(gone));
        let mut rx = wakeups.subscribe(live);
        let held = |n: &NodeId| wakeups.nodes.lock().unwrap().by_node.contains_key(n);
        assert!(held(&gone), "no sweep before {SWEEP_EVERY} subscriptions");
        let extra: Vec<_> = (0..SWEEP_EVERY).map(|_| wakeups.subscribe(live)).collect();
        assert!(!held(&gone), "swept");
        assert!(held(&live));
        wakeups.wake(&live, 7);
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), 7);
        drop(extra);
    }
}
