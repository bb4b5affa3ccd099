//! The node of every allocation of a job, found in one batch.
//!
//! The reconciler needs each allocation's node, and a job's allocations usually cover a
//! large part of the cluster. One search of the node table per allocation is a chain of
//! cache misses each; when the allocations name many nodes it is cheaper to walk the node
//! table once and pick out the wanted ids through a hash set of them.

use crate::state::StateSnapshot;
use crate::types::*;
use rustc_hash::FxHashMap;

/// Below this many node ids per node in the table, searching for each is cheaper than
/// walking the whole table.
const WALK_RATIO: usize = 8;

/// What the reconciler reads of a node, copied out while the node is at hand: every
/// allocation's node is read once in a tight loop (where the cache misses of many nodes
/// overlap) rather than inside classification.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct NodeView {
    pub status: NodeStatus,
    pub status_updated_at: Timestamp,
    pub draining: bool,
}

impl NodeView {
    pub fn of(node: &Node) -> Self {
        Self {
            status: node.status,
            status_updated_at: node.status_updated_at,
            draining: node.drain.is_some(),
        }
    }
}

/// The node of each of `node_ids` (`None` when it is gone), in the same order.
pub(super) fn nodes_of(snapshot: &StateSnapshot, node_ids: &[NodeId]) -> Vec<Option<NodeView>> {
    if node_ids.len() * WALK_RATIO < snapshot.node_count() {
        // Find the nodes first, then read them in a loop that does nothing else, so that the
        // processor keeps many of those reads (each a likely cache miss) in flight at once.
        let found: Vec<Option<&Node>> = node_ids
            .iter()
            .map(|id| snapshot.node(id).map(|n| &**n))
            .collect();
        return found.into_iter().map(|n| n.map(NodeView::of)).collect();
    }
    // One walk of the node table fills in the wanted nodes, found through a hash table from
    // the id (as one integer: a few instructions to hash) to where its view goes. Cheaper
    // than sorting the ids to walk alongside them: a sort of 10,000 ids was a third of a
    // reconcile. Ids named again copy the first one's view afterwards.
    let mut views = vec![None; node_ids.len()];
    let mut first_at: FxHashMap<u128, u32> =
        FxHashMap::with_capacity_and_hasher(node_ids.len(), Default::default());
    let mut again: Vec<(u32, u32)> = Vec::new();
    for (at, id) in node_ids.iter().enumerate() {
        let at = at as u32;
        let first = *first_at.entry(id.0.as_u128()).or_insert(at);
        if first != at {
            again.push((at, first));
        }
    }
    for (id, node) in snapshot.nodes_by_id() {
        if let Some(&at) = first_at.get(&id.0.as_u128()) {
            views[at as usize] = Some(NodeView::of(node));
        }
    }
    for (at, first) in again {
        views[at as usize] = views[first as usize];
    }
    views
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsm::{self, Command};
    use crate::mock;
    use crate::state::StateStore;

    /// Both strategies (search per allocation, one walk) agree with a plain lookup, for
    /// allocations on present and missing nodes, shared nodes included.
    #[test]
    fn batch_lookup_matches_point_lookups() {
        let job = mock::service_job("web", 1);
        for (registered, on) in [(4u64, 40u64), (40, 4), (100, 100), (0, 3), (3, 0)] {
            let mut s = StateStore::new();
            for n in 0..registered {
                let cmd = Command::NodeRegister {
                    node: mock::node(n * 2),
                    now: Timestamp::ZERO,
                };
                fsm::apply(&mut s, n + 1, &cmd).expect("register");
            }
            let allocs: Vec<Allocation> = (0..on)
                .map(|a| mock::alloc(a, &job, mock::node_id((a * 7) % (registered * 3 + 1)), 0))
                .collect();
            let ids: Vec<NodeId> = allocs.iter().map(|a| a.node_id).collect();
            let views = nodes_of(&s, &ids);
            for (a, view) in allocs.iter().zip(views) {
                let want = s.node(&a.node_id).map(|n| NodeView::of(n));
                assert_eq!(view, want, "{registered} nodes, {on} allocs");
            }
        }
    }
}
