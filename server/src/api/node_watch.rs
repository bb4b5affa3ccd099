//! Wakes a node's allocation watch only when an applied entry touched that node, and says
//! which of its allocations changed.
//!
//! Waking every watch on every applied index costs each write one read per connected node;
//! with thousands of nodes that starves the server. Here one task reads the applied events
//! once and bumps a per-node `watch` channel for the nodes they name, so a write costs work
//! only for the watches it concerns. Each node also keeps its latest allocation changes
//! (index and id, at most [`RECENT`]): a woken watch looks up just those instead of
//! walking every allocation of the node, which was the largest cost of a big placement.
//! Whatever may have changed without an allocation event naming it (the node itself, an
//! allocation removed by id, missed events) raises the node's floor instead, and a watch
//! that last sent at or below the floor walks the node's whole set.

use crate::ServerHandle;
use drover_core::fsm::{Event, EventPayload};
use drover_core::types::{AllocId, NodeId};
use std::collections::{HashMap, VecDeque};
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
    by_node: HashMap<NodeId, NodeChannel>,
    since_sweep: usize,
}

/// One node's wake-up channel and its latest changes.
#[derive(Debug)]
struct NodeChannel {
    tx: watch::Sender<u64>,
    /// The latest changes, oldest first, at most [`RECENT`].
    recent: VecDeque<Change>,
    /// The sequence number of the next change.
    next_seq: u64,
    /// The newest change dropped for room: its sequence number and index.
    dropped: Option<(u64, u64)>,
}

/// One change to a node, numbered in the order the node's changes were recorded (which is
/// index order: events come in log order).
#[derive(Clone, Copy, Debug)]
struct Change {
    seq: u64,
    index: u64,
    /// The allocation that changed; `None`: anything on the node may have.
    alloc: Option<AllocId>,
}

/// What a watch learns from its node's changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Changes {
    /// Only these allocations may have changed (sorted, each once).
    Known(Vec<AllocId>),
    /// Something else may have: walk the node's whole set.
    Walk,
}

impl NodeChannel {
    fn new() -> Self {
        Self {
            tx: watch::channel(0).0,
            recent: VecDeque::new(),
            next_seq: 1,
            dropped: None,
        }
    }

    fn record(&mut self, index: u64, alloc: Option<AllocId>) {
        if self.recent.len() == RECENT
            && let Some(old) = self.recent.pop_front()
        {
            self.dropped = Some((old.seq, old.index));
        }
        self.recent.push_back(Change {
            seq: self.next_seq,
            index,
            alloc,
        });
        self.next_seq += 1;
        self.tx.send_replace(index);
    }
}

/// How many allocation changes a node remembers; a watch woken after more walks the set.
pub(crate) const RECENT: usize = 16;

/// Channels whose watches are gone are dropped once per this many subscriptions: sweeping
/// on every subscription was a pass over every node's channel for each of them, quadratic
/// when thousands of nodes reconnect at once (after a restart).
const SWEEP_EVERY: usize = 1024;

impl NodeWakeups {
    /// Starts the task that turns applied events into wake-ups; it ends with the server.
    pub(crate) fn start(handle: &ServerHandle) -> Arc<NodeWakeups> {
        let wakeups = Arc::new(NodeWakeups::default());
        let events = handle.subscribe_events();
        tokio::spawn(dispatch(events, wakeups.clone(), handle.clone()));
        wakeups
    }

    /// A receiver that changes whenever an applied entry touches `node`.
    pub(crate) fn subscribe(&self, node: NodeId) -> watch::Receiver<u64> {
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        nodes.since_sweep += 1;
        if nodes.since_sweep >= SWEEP_EVERY {
            nodes.since_sweep = 0;
            nodes.by_node.retain(|_, c| c.tx.receiver_count() > 0);
        }
        nodes
            .by_node
            .entry(node)
            .or_insert_with(NodeChannel::new)
            .tx
            .subscribe()
    }

    /// The changes of `node` a watch has not taken yet (those numbered after `seen`) whose
    /// entries state at `upto` holds, and the number to pass as `seen` next time. Changes
    /// of later entries stay for the next look, as do ones recorded late: the dispatcher
    /// may record an entry after a watch already read state that holds it, so what a watch
    /// has taken is counted in changes, never in indexes.
    pub(crate) fn changes_since(&self, node: &NodeId, seen: u64, upto: u64) -> (Changes, u64) {
        let nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(channel) = nodes.by_node.get(node) else {
            return (Changes::Walk, seen);
        };
        let taken: Vec<&Change> = channel
            .recent
            .iter()
            .filter(|c| c.seq > seen)
            .take_while(|c| c.index <= upto)
            .collect();
        let next = taken.last().map_or(seen, |c| c.seq);
        match channel.dropped {
            // A change not taken was dropped; a walk of state at `upto` covers it only if
            // its entry is in that state, and otherwise the next look walks again.
            Some((seq, index)) if seq > seen => {
                let next = if index <= upto { next.max(seq) } else { seen };
                return (Changes::Walk, next);
            }
            _ => {}
        }
        let mut ids = Vec::with_capacity(taken.len());
        for change in taken {
            match change.alloc {
                Some(id) => ids.push(id),
                None => return (Changes::Walk, next),
            }
        }
        ids.sort_unstable();
        ids.dedup();
        (Changes::Known(ids), next)
    }

    /// Allocation `alloc` of `node` changed at `index`.
    fn alloc_changed(&self, node: &NodeId, alloc: AllocId, index: u64) {
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(channel) = nodes.by_node.get_mut(node) {
            channel.record(index, Some(alloc));
        }
    }

    /// `node` changed at `index` in a way that may touch any of its allocations.
    fn wake(&self, node: &NodeId, index: u64) {
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(channel) = nodes.by_node.get_mut(node) {
            channel.record(index, None);
        }
    }

    /// For events that do not say which node they concern (an allocation removed by id),
    /// and after missed events (up to `index`): every watch walks its node's set.
    /// Wakes the watches an applied event concerns. An allocation whose server modify
    /// index is older than the event changed only by its node's own report (client status,
    /// task states): the node knows that already, and its watch would send nothing.
    fn record(&self, event: &Event) {
        match &event.payload {
            EventPayload::Allocation(a) if a.alloc_modify_index < event.index => {}
            EventPayload::Allocation(a) => self.alloc_changed(&a.node_id, a.id, event.index),
            EventPayload::Node(n) => self.wake(&n.id, event.index),
            EventPayload::NodeId(id) => self.wake(id, event.index),
            EventPayload::AllocId(_) => self.wake_all(event.index),
            _ => {}
        }
    }

    fn wake_all(&self, index: u64) {
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        for channel in nodes.by_node.values_mut() {
            channel.record(index, None);
        }
    }
}

async fn dispatch(
    mut events: broadcast::Receiver<Arc<Vec<Event>>>,
    wakeups: Arc<NodeWakeups>,
    handle: ServerHandle,
) {
    loop {
        match events.recv().await {
            Ok(batch) => {
                for event in batch.iter() {
                    wakeups.record(event);
                }
            }
            // The missed events were applied, so none is above the applied index now.
            Err(broadcast::error::RecvError::Lagged(_)) => wakeups.wake_all(handle.applied_index()),
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

    /// What happens to a node in a case.
    enum Step {
        /// Allocation `n` changed at `index`.
        Alloc(u64, u64),
        /// The node itself changed at `index`.
        Node(u64),
    }

    /// Each case: what happened to the node, the `(seen, upto)` asked, what the watch
    /// learns (allocation numbers, or `None` for a walk) and the `seen` it gets back.
    #[test]
    fn a_watch_learns_which_allocations_changed_or_that_it_must_walk() {
        use Step::*;
        type Case = (
            &'static str,
            &'static [Step],
            (u64, u64),
            Option<&'static [u64]>,
            u64,
        );
        let cases: [Case; 7] = [
            (
                "two changes",
                &[Alloc(5, 1), Alloc(6, 2)],
                (0, 10),
                Some(&[1, 2]),
                2,
            ),
            (
                "only those not taken",
                &[Alloc(5, 1), Alloc(6, 2)],
                (1, 10),
                Some(&[2]),
                2,
            ),
            (
                "later entries wait",
                &[Alloc(5, 1), Alloc(7, 2)],
                (0, 6),
                Some(&[1]),
                1,
            ),
            (
                "one allocation twice",
                &[Alloc(5, 1), Alloc(6, 1)],
                (0, 10),
                Some(&[1]),
                2,
            ),
            (
                "the node changed",
                &[Alloc(5, 1), Node(6)],
                (1, 10),
                None,
                2,
            ),
            (
                "after the node changed",
                &[Alloc(5, 1), Node(6), Alloc(7, 2)],
                (2, 10),
                Some(&[2]),
                3,
            ),
            ("nothing new", &[Alloc(5, 1)], (1, 10), Some(&[]), 1),
        ];
        for (what, steps, (seen, upto), want, want_seen) in cases {
            let wakeups = NodeWakeups::default();
            let node = mock::node_id(1);
            let _rx = wakeups.subscribe(node);
            for step in steps {
                match *step {
                    Alloc(index, n) => wakeups.alloc_changed(&node, mock::alloc_id(n), index),
                    Node(index) => wakeups.wake(&node, index),
                }
            }
            let want = match want {
                Some(w) => {
                    let mut ids: Vec<AllocId> = w.iter().map(|n| mock::alloc_id(*n)).collect();
                    ids.sort_unstable();
                    Changes::Known(ids)
                }
                None => Changes::Walk,
            };
            assert_eq!(
                wakeups.changes_since(&node, seen, upto),
                (want, want_seen),
                "{what}"
            );
        }
    }

    /// A server change to an allocation wakes its node's watch and names it; the node's
    /// own report (only `modify_index` moved) wakes nothing.
    #[test]
    fn only_server_changes_to_an_allocation_wake_its_node() {
        use drover_core::fsm::EventType;
        let wakeups = NodeWakeups::default();
        let node = mock::node_id(0);
        let rx = wakeups.subscribe(node);
        let job = mock::service_job("web", 1);
        let mut a = mock::alloc(1, &job, node, 0);
        a.alloc_modify_index = 7;
        a.modify_index = 9;
        wakeups.record(&Event::alloc(
            9,
            EventType::AllocationClientUpdated,
            &Arc::new(a.clone()),
        ));
        assert!(!rx.has_changed().unwrap(), "the node's own report");
        a.alloc_modify_index = 10;
        a.modify_index = 10;
        wakeups.record(&Event::alloc(10, EventType::PlanResult, &Arc::new(a)));
        assert!(rx.has_changed().unwrap(), "a server change");
        assert_eq!(
            wakeups.changes_since(&node, 0, 10),
            (Changes::Known(vec![mock::alloc_id(1)]), 1)
        );
    }

    /// A node keeps [`RECENT`] changes; a watch that missed the dropped ones walks, and
    /// walks again while a dropped change's entry is beyond the state it reads.
    #[test]
    fn a_watch_behind_the_kept_changes_walks() {
        let wakeups = NodeWakeups::default();
        let node = mock::node_id(1);
        let _rx = wakeups.subscribe(node);
        let n = RECENT as u64 + 4;
        for i in 1..=n {
            wakeups.alloc_changed(&node, mock::alloc_id(i), 10 + i);
        }
        // The fourth change (entry 14) was dropped; state at 13 does not hold it.
        assert_eq!(wakeups.changes_since(&node, 0, 13), (Changes::Walk, 0));
        assert_eq!(wakeups.changes_since(&node, 0, 10 + n), (Changes::Walk, n));
        let (known, seen) = wakeups.changes_since(&node, 4, 10 + n);
        assert_eq!(seen, n);
        assert!(matches!(known, Changes::Known(ids) if ids.len() == RECENT));
    }
}
