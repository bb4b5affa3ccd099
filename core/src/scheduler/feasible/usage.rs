//! What a node will have in use once a plan is applied: the store's incrementally kept
//! `node_usage` adjusted by the plan's entries for that node only, so the cost is independent
//! of how many allocations already run there.
//!
//! The adjustment follows the FSM exactly (`fsm::apply`'s `ApplyPlan`): node updates, then
//! preemptions, then placements, per allocation; a transition sets the desired status and,
//! when given, the client status; a placement of an allocation that already exists keeps its
//! client status unless it marks it lost or unknown. An allocation uses resources while it is
//! wanted running and not terminal on the client ([`Allocation::uses_resources`]).

use crate::state::StateSnapshot;
use crate::types::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The resources `node` will have in use once `plan` is applied to `snapshot`:
/// `node_usage - released + added`, where `released` sums the allocations the plan touches
/// that use resources on the node now, and `added` those that will afterwards (so stops,
/// evictions, preemptions and lost marks free capacity, and an in-place update counts as its
/// delta).
///
/// The plan applier computes the same quantity when it re-checks a plan; this function is
/// meant to be the one both use.
pub fn usage_after_plan(snapshot: &StateSnapshot, plan: &Plan, node: NodeId) -> Resources {
    let mut scratch = Vec::new();
    let mut released = Resources::ZERO;
    let mut added = Resources::ZERO;
    PlanOnNode::of(plan, node).for_each_touched(
        &mut scratch,
        &|id: &AllocId, _: Option<&Allocation>| snapshot.alloc(id).map(|a| &**a),
        |before, after| {
            if let Some(b) = before {
                released += b.resources;
            }
            if let Some(a) = after {
                added += a.resources;
            }
        },
    );
    snapshot.node_usage(&node).saturating_sub(&released) + added
}

/// Finds the allocation an id names in the state the plan was made against.
pub(crate) trait AllocLookup<'a> {
    /// `placing` is the plan's placement when the first thing the plan does to `id` is to
    /// place it: a lookup may use it to recognise brand-new allocations without a search.
    fn existing(&self, id: &AllocId, placing: Option<&Allocation>) -> Option<&'a Allocation>;
}

impl<'a, F> AllocLookup<'a> for F
where
    F: Fn(&AllocId, Option<&Allocation>) -> Option<&'a Allocation>,
{
    fn existing(&self, id: &AllocId, placing: Option<&Allocation>) -> Option<&'a Allocation> {
        self(id, placing)
    }
}

/// One node's entries in a plan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanOnNode<'p> {
    pub(crate) node: NodeId,
    pub(crate) updates: &'p [AllocTransition],
    pub(crate) preemptions: &'p [AllocTransition],
    pub(crate) allocs: &'p [Arc<Allocation>],
}

/// Where one touch of an allocation is: an index into updates then preemptions, or into
/// placements (after all transitions, as the FSM applies them).
#[derive(Clone, Copy)]
enum Touch {
    Transition(usize),
    Place(usize),
}

impl<'p> PlanOnNode<'p> {
    pub(crate) fn of(plan: &'p Plan, node: NodeId) -> Self {
        // Selects call this for every node they visit; most plans leave one or two of the
        // maps empty, and those need no search.
        fn entries<'m, T>(map: &'m BTreeMap<NodeId, Vec<T>>, node: &NodeId) -> &'m [T] {
            if map.is_empty() {
                return &[];
            }
            map.get(node).map_or(&[], Vec::as_slice)
        }
        Self {
            node,
            updates: entries(&plan.node_update, &node),
            preemptions: entries(&plan.node_preemptions, &node),
            allocs: entries(&plan.node_allocation, &node),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.updates.is_empty() && self.preemptions.is_empty() && self.allocs.is_empty()
    }

    /// Whether the plan touches `id` on this node at all.
    pub(crate) fn touches(&self, id: &AllocId) -> bool {
        self.updates
            .iter()
            .chain(self.preemptions)
            .any(|t| t.alloc_id == *id)
            || self.allocs.iter().any(|a| a.id == *id)
    }

    fn transitions(&self) -> usize {
        self.updates.len() + self.preemptions.len()
    }

    fn len(&self) -> usize {
        self.transitions() + self.allocs.len()
    }

    fn touch(&self, seq: usize) -> Touch {
        if seq < self.transitions() {
            Touch::Transition(seq)
        } else {
            Touch::Place(seq - self.transitions())
        }
    }

    fn transition(&self, i: usize) -> &'p AllocTransition {
        match self.updates.get(i) {
            Some(t) => t,
            None => &self.preemptions[i - self.updates.len()],
        }
    }

    fn id_at(&self, seq: usize) -> AllocId {
        match self.touch(seq) {
            Touch::Transition(i) => self.transition(i).alloc_id,
            Touch::Place(i) => self.allocs[i].id,
        }
    }

    /// Calls `f(before, after)` once per allocation the plan touches on this node, where
    /// `before` is the allocation if it uses resources on this node now and `after` is the
    /// allocation as it will be (the plan's copy when placed) if it uses resources on this
    /// node afterwards. `scratch` is reused between calls, so after warm-up this allocates
    /// nothing; a node the plan touches once costs one lookup.
    pub(crate) fn for_each_touched<'a>(
        &self,
        scratch: &mut Vec<(AllocId, u32)>,
        lookup: &impl AllocLookup<'a>,
        mut f: impl FnMut(Option<&Allocation>, Option<&Allocation>),
    ) {
        match self.len() {
            0 => {}
            1 => self.settle(lookup, &[0], &mut f),
            n => {
                // Group the touches by allocation, keeping FSM order within each.
                scratch.clear();
                scratch.extend((0..n).map(|seq| (self.id_at(seq), seq as u32)));
                scratch.sort_unstable();
                for group in scratch.chunk_by(|a, b| a.0 == b.0) {
                    let mut seqs = [0u32; 8];
                    if group.len() <= seqs.len() {
                        for (slot, (_, seq)) in seqs.iter_mut().zip(group) {
                            *slot = *seq;
                        }
                        self.settle(lookup, &seqs[..group.len()], &mut f);
                    } else {
                        let seqs: Vec<u32> = group.iter().map(|(_, s)| *s).collect();
                        self.settle(lookup, &seqs, &mut f);
                    }
                }
            }
        }
    }

    /// Plays the touches `seqs` (all of one allocation, in FSM order) and reports the
    /// allocation's use of this node before and after.
    fn settle<'a>(
        &self,
        lookup: &impl AllocLookup<'a>,
        seqs: &[u32],
        f: &mut impl FnMut(Option<&Allocation>, Option<&Allocation>),
    ) {
        let first = seqs[0] as usize;
        let id = self.id_at(first);
        let placing = match self.touch(first) {
            Touch::Place(i) => Some(&*self.allocs[i]),
            Touch::Transition(_) => None,
        };
        // An allocation recorded on another node is not this node's to free (the applier
        // refuses such plans).
        let existing = lookup
            .existing(&id, placing)
            .filter(|a| a.node_id == self.node);
        let before = existing.filter(|a| a.uses_resources());
        let mut status = existing.map(|a| (a.desired_status, a.client_status));
        let mut fields: Option<&Allocation> = existing;
        for &seq in seqs {
            match self.touch(seq as usize) {
                Touch::Transition(i) => {
                    // The FSM ignores transitions of allocations it does not have.
                    let t = self.transition(i);
                    if let Some((desired, client)) = &mut status {
                        *desired = t.desired_status;
                        if let Some(c) = t.client_status {
                            *client = c;
                        }
                    }
                }
                Touch::Place(i) => {
                    let a = &*self.allocs[i];
                    let client = match status {
                        Some((_, c))
                            if !matches!(
                                a.client_status,
                                ClientStatus::Lost | ClientStatus::Unknown
                            ) =>
                        {
                            c
                        }
                        _ => a.client_status,
                    };
                    status = Some((a.desired_status, client));
                    fields = Some(a);
                }
            }
        }
        let after = match (status, fields) {
            (Some((DesiredStatus::Run, client)), Some(a))
                if !client.is_terminal() && a.node_id == self.node =>
            {
                Some(a)
            }
            _ => None,
        };
        f(before, after);
    }
}
