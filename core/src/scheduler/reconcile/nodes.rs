//! What the reconciler reads of each allocation's node.
//!
//! Every allocation of a job is classified per eval, and a job's allocations usually cover a
//! large part of the cluster. Reading each one's node from the node table was half of a
//! reconcile. The store keeps the few nodes that matter to a reconcile apart (the tainted
//! ones, see [`StateSnapshot::node_taint`]), so an allocation on a settled node costs a
//! lookup in a small (on a healthy cluster, empty) map.

use crate::state::{NodeTaint, StateSnapshot};
use crate::types::*;

/// A node as far as classifying its allocations goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum NodeView {
    /// Ready or initializing, not draining: its allocations stay as they are.
    Settled,
    /// Ready or initializing and draining: its allocations migrate.
    Draining,
    /// Down since the given time.
    Down(Timestamp),
    /// Disconnected since the given time.
    Disconnected(Timestamp),
    /// Not in the node table any more.
    Gone,
}

impl NodeView {
    pub fn of(node: Option<&Node>) -> Self {
        let Some(node) = node else {
            return NodeView::Gone;
        };
        match node.status {
            NodeStatus::Down => NodeView::Down(node.status_updated_at),
            NodeStatus::Disconnected => NodeView::Disconnected(node.status_updated_at),
            NodeStatus::Ready | NodeStatus::Initializing if node.drain.is_some() => {
                NodeView::Draining
            }
            NodeStatus::Ready | NodeStatus::Initializing => NodeView::Settled,
        }
    }

    /// The view of the node `id`, which allocations name.
    pub fn lookup(snapshot: &StateSnapshot, id: &NodeId) -> Self {
        match snapshot.node_taint(id) {
            NodeTaint::Settled => NodeView::Settled,
            NodeTaint::Tainted(node) => NodeView::of(Some(node)),
            NodeTaint::Gone => NodeView::Gone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock;
    use crate::state::StateStore;
    use std::collections::HashSet;

    /// The view from the tainted-node index equals the view from the node table, for nodes of
    /// every status, draining or not, and for allocations on nodes never registered or gone.
    #[test]
    fn lookup_matches_the_node_table() {
        let job = mock::service_job("web", 1);
        let mut s = StateStore::new();
        let statuses = [
            NodeStatus::Ready,
            NodeStatus::Initializing,
            NodeStatus::Down,
            NodeStatus::Disconnected,
        ];
        for (n, status) in (0u64..).zip(statuses) {
            for draining in [false, true] {
                let mut node = mock::node(n * 2 + u64::from(draining));
                node.status = status;
                node.status_updated_at = Timestamp::from_millis(1_000 + n);
                if draining {
                    node.drain = Some(DrainStrategy {
                        deadline: None,
                        force: false,
                        ignore_system_jobs: false,
                        started_at: Timestamp::ZERO,
                    });
                }
                s.put_node(1, node);
            }
        }
        // Nodes 0..8 are registered; 8 is registered and then removed; 9 never was.
        s.put_node(2, mock::node(8));
        let allocs: Vec<Allocation> = (0..10)
            .map(|a| mock::alloc(a, &job, mock::node_id(a), 0))
            .collect();
        for a in &allocs {
            s.put_alloc(3, a.clone());
        }
        s.remove_node(4, &mock::node_id(8));
        s.check_consistency().expect("consistent");
        let mut kinds = HashSet::new();
        for a in &allocs {
            let want = NodeView::of(s.node(&a.node_id).map(|n| &**n));
            assert_eq!(NodeView::lookup(&s, &a.node_id), want, "node {}", a.node_id);
            kinds.insert(std::mem::discriminant(&want));
        }
        assert_eq!(kinds.len(), 5, "every kind of view is exercised");
    }
}
