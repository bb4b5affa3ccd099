//! The links of an allocation to others, kept out of line: most allocations have none.

use super::{AllocDeployment, AllocId, EvalId, RescheduleTracker};
use serde::{Deserialize, Serialize};

/// How an allocation is linked to others and to evals due later.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct AllocLinks {
    pub reschedule_tracker: Option<Box<RescheduleTracker>>,
    pub previous_allocation: Option<AllocId>,
    pub next_allocation: Option<AllocId>,
    /// Eval that will act on this allocation later (delayed reschedule, disconnect timeout).
    pub follow_up_eval_id: Option<EvalId>,
    /// Set when this allocation was evicted to make room.
    pub preempted_by: Option<AllocId>,
    /// Allocations this one evicted when it was placed.
    pub preempted_allocations: Vec<AllocId>,
    /// A node drain asked for it to move (Nomad's `DesiredTransition.Migrate`): the
    /// scheduler stops it and places a replacement elsewhere.
    pub migrate: bool,
    /// The deployment that placed it, whether as a canary, and its health for it.
    pub deployment: Option<AllocDeployment>,
}

const NO_LINKS: AllocLinks = AllocLinks {
    reschedule_tracker: None,
    previous_allocation: None,
    next_allocation: None,
    follow_up_eval_id: None,
    preempted_by: None,
    preempted_allocations: Vec::new(),
    migrate: false,
    deployment: None,
};
static NONE_LINKED: AllocLinks = NO_LINKS;

/// An allocation's [`AllocLinks`], held behind one pointer that is absent when there are
/// none.
///
/// Most allocations are never replaced, preempted or followed up, and the links take about
/// a hundred bytes inline: at a million allocations, a hundred megabytes of `None`s.
/// Invariant: the pointer is absent exactly when the links are all empty, so equality,
/// encoding and memory do not depend on how they got there. Encoded as the fields inline
/// (postcard has no framing for a nested struct), so the log and snapshot formats are
/// those of the flat fields this replaced.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Links(Option<Box<AllocLinks>>);

impl Links {
    pub fn new(links: AllocLinks) -> Self {
        if links == NO_LINKS {
            Links(None)
        } else {
            Links(Some(Box::new(links)))
        }
    }

    pub fn get(&self) -> &AllocLinks {
        self.0.as_deref().unwrap_or(&NONE_LINKED)
    }

    /// Changes the links; the pointer is dropped again if they end up empty.
    pub fn update<T>(&mut self, change: impl FnOnce(&mut AllocLinks) -> T) -> T {
        let mut links = self.0.take().unwrap_or_default();
        let out = change(&mut links);
        if *links != NO_LINKS {
            self.0 = Some(links);
        }
        out
    }
}

impl From<AllocLinks> for Links {
    fn from(links: AllocLinks) -> Self {
        Links::new(links)
    }
}

impl Serialize for Links {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Links {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        AllocLinks::deserialize(d).map(Links::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock;
    use crate::types::*;
    use compact_str::CompactString;
    use std::sync::Arc;

    #[test]
    fn the_pointer_is_absent_exactly_when_there_are_no_links() {
        let mut links = Links::default();
        assert!(links.0.is_none());
        links.update(|l| l.preempted_by = Some(mock::alloc_id(1)));
        assert!(links.0.is_some());
        assert_eq!(links.get().preempted_by, Some(mock::alloc_id(1)));
        links.update(|l| l.preempted_by = None);
        assert!(links.0.is_none(), "emptied links keep no box");
        assert_eq!(links, Links::new(AllocLinks::default()));
        assert_eq!(*links.get(), AllocLinks::default());
    }

    /// The layout of `Allocation` with its links inline: the out-of-line links must encode
    /// exactly as these flat fields do (postcard has no framing for a nested struct).
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct FlatAllocation {
        id: AllocId,
        eval_id: EvalId,
        name: CompactString,
        namespace: Arc<str>,
        job_id: JobId,
        job_version: u64,
        task_group: CompactString,
        node_id: NodeId,
        desired_status: DesiredStatus,
        desired_description: CompactString,
        client_status: ClientStatus,
        client_description: CompactString,
        state_history: Vec<AllocStateEntry>,
        task_states: TaskStates,
        reschedule_tracker: Option<Box<RescheduleTracker>>,
        previous_allocation: Option<AllocId>,
        next_allocation: Option<AllocId>,
        follow_up_eval_id: Option<EvalId>,
        preempted_by: Option<AllocId>,
        preempted_allocations: Vec<AllocId>,
        migrate: bool,
        deployment: Option<AllocDeployment>,
        resources: Resources,
        ports: Vec<AllocatedPort>,
        metrics: PlacementMetric,
        create_index: Index,
        modify_index: Index,
        alloc_modify_index: Index,
        create_time: Timestamp,
        modify_time: Timestamp,
    }

    fn flat(a: &Allocation) -> FlatAllocation {
        let l = a.links.get().clone();
        FlatAllocation {
            id: a.id,
            eval_id: a.eval_id,
            name: a.name.clone(),
            namespace: a.namespace.clone(),
            job_id: a.job_id.clone(),
            job_version: a.job_version,
            task_group: a.task_group.clone(),
            node_id: a.node_id,
            desired_status: a.desired_status,
            desired_description: a.desired_description.clone(),
            client_status: a.client_status,
            client_description: a.client_description.clone(),
            state_history: a.state_history.to_vec(),
            task_states: a.task_states.clone(),
            reschedule_tracker: l.reschedule_tracker,
            previous_allocation: l.previous_allocation,
            next_allocation: l.next_allocation,
            follow_up_eval_id: l.follow_up_eval_id,
            preempted_by: l.preempted_by,
            preempted_allocations: l.preempted_allocations,
            migrate: l.migrate,
            deployment: l.deployment,
            resources: a.resources,
            ports: a.ports.to_vec(),
            metrics: a.metrics,
            create_index: a.create_index,
            modify_index: a.modify_index,
            alloc_modify_index: a.alloc_modify_index,
            create_time: a.create_time,
            modify_time: a.modify_time,
        }
    }

    #[test]
    fn encodes_exactly_as_the_flat_fields_did() {
        let job = mock::service_job("web", 2);
        let plain = mock::alloc(1, &job, mock::node_id(1), 0);
        let mut linked = mock::alloc(2, &job, mock::node_id(1), 1);
        linked.links = mock::full_links().into();
        for a in [plain, linked] {
            let now = postcard::to_allocvec(&a).unwrap();
            let before = postcard::to_allocvec(&flat(&a)).unwrap();
            assert_eq!(now, before, "{}", a.name);
            let back: Allocation = postcard::from_bytes(&before).unwrap();
            assert_eq!(back, a, "{}", a.name);
            assert_eq!(
                back.links.0.is_some(),
                *a.links.get() != AllocLinks::default()
            );
        }
    }
}
