//! The node of every allocation of a job, found in one batch.
//!
//! The reconciler needs each allocation's node, and a job's allocations usually cover a
//! large part of the cluster. One search of the node table per allocation is a chain of
//! cache misses each; when the allocations name many nodes it is cheaper to sort their node
//! ids and walk the (sorted) node table once alongside them.

use crate::state::StateSnapshot;
use crate::types::*;

/// Below this many node ids per node in the table, searching for each is cheaper than
/// walking the whole table.
const WALK_RATIO: usize = 8;

/// The node each of `allocs` is on (`None` when its node is gone), in the same order.
pub(super) fn nodes_of<'s>(
    snapshot: &'s StateSnapshot,
    allocs: &[&Allocation],
) -> Vec<Option<&'s Node>> {
    let mut out = vec![None; allocs.len()];
    if allocs.len() * WALK_RATIO < snapshot.node_count() {
        for (slot, a) in out.iter_mut().zip(allocs) {
            *slot = snapshot.node(&a.node_id).map(|n| &**n);
        }
        return out;
    }
    let mut wanted: Vec<(NodeId, u32)> =
        (0u32..).zip(allocs).map(|(i, a)| (a.node_id, i)).collect();
    wanted.sort_unstable();
    let mut table = snapshot.nodes_by_id().peekable();
    for (id, i) in wanted {
        while table.next_if(|(n, _)| **n < id).is_some() {}
        out[i as usize] = table.peek().filter(|(n, _)| **n == id).map(|(_, n)| &***n);
    }
    out
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
            let refs: Vec<&Allocation> = allocs.iter().collect();
            let got = nodes_of(&s, &refs);
            for (a, n) in allocs.iter().zip(got) {
                assert_eq!(
                    n.map(|n| n.id),
                    s.node(&a.node_id).map(|n| n.id),
                    "{registered} nodes, {on} allocs"
                );
            }
        }
    }
}
