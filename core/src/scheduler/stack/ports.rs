//! The ports part of a select: a node's ports as the plan so far leaves them, whether the
//! group's ask fits there (evicting lower-priority holders of its static ports when the
//! select may preempt), and the dynamic ports of the node that wins.
//!
//! Only groups that ask for ports pay any of this; for a node the plan has not touched the
//! view is the state's index as it is, so a check is a few binary searches.

use super::footprint::is_of_job;
use super::{Candidate, Entry, Eval, Selection, Stack};
use crate::ports::{self, NO_PORTS, PortDemand, PortsView};
use crate::scheduler::feasible::PlanOnNode;
use crate::scheduler::preempt::may_preempt;
use crate::types::*;
use rand::SeedableRng;
use std::sync::Arc;
use thin_vec::ThinVec;

impl<'s> Eval<'s> {
    /// The priority of the job an allocation was placed with (the current version when
    /// that one is no longer kept); `None` when the job is gone.
    pub(super) fn priority_of(&self, a: &Allocation) -> Option<u8> {
        let key = JobKey {
            namespace: a.namespace.clone(),
            id: a.job_id.clone(),
        };
        self.snapshot
            .job_version(&key, a.job_version)
            .or_else(|| self.snapshot.job(&key))
            .map(|j| j.priority)
    }

    /// Brings the entry's record of the plan's changes to its ports up to date: replayed
    /// only when the plan's revision for the node moved since the last replay.
    fn follow_plan_ports(&self, entry: &mut Entry, plan: &Plan, scratch: &mut Vec<(AllocId, u32)>) {
        let revision = match entry.plan_rev {
            Revision::Untouched => return,
            Revision::At(r) if entry.port_rev == Some(r) => return,
            Revision::At(r) => Some(r),
            Revision::Unknown => None,
        };
        let changes = &mut entry.port_changes;
        changes.clear();
        PlanOnNode::of(plan, entry.id).for_each_touched(
            scratch,
            &self.lookup(),
            |before, after| {
                if let Some(b) = before {
                    ports::release(changes, &b.ports);
                }
                if let Some(a) = after {
                    ports::take(changes, &a.ports);
                }
            },
        );
        entry.port_rev = revision;
    }

    /// The node's ports once the plan so far and the eviction of `evicted` are applied.
    pub(super) fn ports_view<'e>(
        &self,
        entry: &'e mut Entry<'s>,
        plan: &Plan,
        scratch: &mut Vec<(AllocId, u32)>,
        evicted: &[&'s Arc<Allocation>],
    ) -> PortsView<'e>
    where
        's: 'e,
    {
        self.follow_plan_ports(entry, plan, scratch);
        let entry = &*entry;
        // The entry caches the snapshot's ports with its usage on the first visit.
        let (held, holds) = match (&entry.usage, entry.ports) {
            (Some(_), Some(held)) => (held, entry.port_holds),
            (Some(_), None) => (&NO_PORTS, 0),
            (None, _) => {
                let held = self.snapshot.node_ports(&entry.id);
                (held, held.len())
            }
        };
        let changes = match entry.plan_rev {
            Revision::Untouched => &[][..],
            _ => &entry.port_changes[..],
        };
        let mut view = PortsView::with_plan(&entry.node.networks, held, changes).with_holds(holds);
        for v in evicted {
            view.release(&v.ports);
        }
        view
    }

    /// Whether the group's ports fit the node: `Ok` with the allocations to evict for it
    /// (none when they fit as they are), else the shortage. Only static ports held by
    /// allocations of other jobs at least [`PRIORITY_DELTA`] below this one, and not
    /// touched by the plan, are freed by eviction; a full dynamic range is not.
    ///
    /// [`PRIORITY_DELTA`]: crate::scheduler::preempt::PRIORITY_DELTA
    pub(super) fn port_evictions(
        &self,
        entry: &mut Entry<'s>,
        sel: &Selection<'_>,
        ask: &PortDemand,
        scratch: &mut Vec<(AllocId, u32)>,
    ) -> Result<Vec<&'s Arc<Allocation>>, PortShortage> {
        let id = entry.id;
        let resolved = match &entry.resolved {
            Some((group, found)) if *group == sel.group_idx => found.clone(),
            _ => {
                let found = PortsView::new(&entry.node.networks, &NO_PORTS).resolve(ask);
                entry.resolved = Some((sel.group_idx, found.clone()));
                found
            }
        }?;
        let view = self.ports_view(entry, sel.plan, scratch, &[]);
        let why = match view.check_resolved(ask, &resolved) {
            Ok(()) => return Ok(Vec::new()),
            Err(why) => why,
        };
        if !sel.preempt || !matches!(why, PortShortage::Taken(_)) {
            return Err(why);
        }
        let part = PlanOnNode::of(sel.plan, id);
        let mut victims: Vec<&'s Arc<Allocation>> = Vec::new();
        for p in ask.ports() {
            let networks = view.networks();
            let (Some(port), Some(ip)) = (p.static_port, networks.address_of(&p.host_network))
            else {
                continue;
            };
            let holders = view.holders(ip, port);
            if holders <= 0 {
                continue;
            }
            let evictable: Vec<&'s Arc<Allocation>> = self
                .snapshot
                .allocs_by_node(&id)
                .filter(|a| a.uses_resources() && !part.touches(&a.id))
                .filter(|a| a.ports.iter().any(|h| h.host_ip == ip && h.value == port))
                .collect();
            // A holder the plan placed or kept cannot be evicted by this select.
            if evictable.len() as i64 != holders {
                return Err(why);
            }
            for a in evictable {
                let lower = self
                    .priority_of(a)
                    .is_some_and(|victim| may_preempt(self.job.priority, victim));
                if is_of_job(a, self.job) || !lower {
                    return Err(why);
                }
                if !victims.iter().any(|v| v.id == a.id) {
                    victims.push(a);
                }
            }
        }
        let mut freed = view;
        for v in &victims {
            freed.release(&v.ports);
        }
        freed.check_resolved(ask, &resolved).map(|()| victims)
    }
}

impl<'s> Stack<'s> {
    /// The ports the winner of a select gives the group, drawn with the stack's seeded
    /// generator; `None` only if the winner cannot (its check said it could).
    pub(super) fn assign_ports(
        &mut self,
        best: &Candidate<'s>,
        sel: &Selection<'_>,
        ask: &PortDemand,
    ) -> Option<ThinVec<AllocatedPort>> {
        let Stack {
            eval,
            tally,
            nodes,
            port_rng,
            ..
        } = self;
        let entry = nodes.visited(best.idx);
        // The winner was checked, so what its checks read of it is kept.
        let resolved = match &entry.resolved {
            Some((group, Ok(found))) if *group == sel.group_idx => Some(found.clone()),
            _ => None,
        };
        let view = eval.ports_view(entry, sel.plan, &mut tally.scratch, &best.preempted);
        // `set_nodes` seeds the generator for every job that asks for ports.
        let rng = port_rng.get_or_insert_with(|| rand_chacha::ChaCha8Rng::seed_from_u64(0));
        match resolved {
            Some(found) => view.assign_resolved(ask, &found, rng).ok(),
            None => view.assign(ask, rng).ok(),
        }
    }
}
