//! Per-job serialization: which eval of a job is outstanding and which wait behind it.
//!
//! Jobs are interned into slots so that dequeue and ack reach a job's state by index. The
//! index is probed with the eval's own borrowed namespace and job id, so finding a job
//! costs one hash and no reference-count traffic; only a job's first eval clones its key.
//!
//! Hashing a job's name (keyed SipHash, since users choose names) is the largest single
//! cost of an enqueue -> dequeue -> ack cycle, so a job whose last eval leaves keeps its
//! slot, idle, and its next eval finds it with that one lookup instead of an insert and a
//! remove. Idle slots are reclaimed in bulk once they outnumber the busy ones, which
//! bounds the table by twice the jobs with work in flight (plus [`IDLE_SLACK`]).

use crate::{EvalId, Evaluation, Index, JobKey};
use std::borrow::Borrow;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{Hash, Hasher};

/// The index of a job's state in the [`JobTable`]. Valid while the job has a tracked eval.
pub(super) type JobSlot = u32;

/// Where a pending eval stands among its job's pending evals. The greatest is the one
/// that survives the collapse on ack: higher priority, then the newer (higher modify
/// index), then the higher id as a deterministic last resort.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct PendingKey {
    pub(super) priority: u8,
    pub(super) modify_index: Index,
    pub(super) id: EvalId,
}

impl PendingKey {
    pub(super) fn of(eval: &Evaluation) -> Self {
        Self {
            priority: eval.priority,
            modify_index: eval.modify_index,
            id: eval.id,
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct JobState {
    /// The one eval of the job that is ready, unacked, failed, or backing off after a nack.
    /// Invariant: no other eval of the job is in any of those states.
    pub(super) outstanding: Option<EvalId>,
    /// Evals of the job that became ready while another was outstanding.
    pub(super) pending: BinaryHeap<PendingKey>,
    /// The highest modify index of the job's evals seen since the job last had no eval in
    /// the broker, raised further by [`super::EvalBroker::raise_waiting`] (a node change
    /// the job's waiting eval must see). The state store is the authority on older ones.
    pub(super) wait_index: Index,
    /// How many tracked evals (any state but cancelable) belong to the job; the slot is
    /// idle at zero.
    pub(super) tracked: u32,
}

/// A job's namespace and id, borrowed or owned; hashed and compared by those two strings.
trait JobName {
    fn parts(&self) -> (&str, &str);
}

impl JobName for (&str, &str) {
    fn parts(&self) -> (&str, &str) {
        *self
    }
}

impl Hash for dyn JobName + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Prefix-free (the length fixes where the namespace ends) in three writes.
        let (namespace, id) = self.parts();
        state.write_usize(namespace.len());
        state.write(namespace.as_bytes());
        state.write(id.as_bytes());
    }
}

impl PartialEq for dyn JobName + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn JobName + '_ {}

/// The owned key of the index. Hashes exactly like its borrowed form (`dyn JobName`), as
/// `Borrow` requires.
#[derive(Debug)]
struct OwnedName(JobKey);

impl JobName for OwnedName {
    fn parts(&self) -> (&str, &str) {
        (&self.0.namespace, self.0.id.as_str())
    }
}

impl<'a> Borrow<dyn JobName + 'a> for OwnedName {
    fn borrow(&self) -> &(dyn JobName + 'a) {
        self
    }
}

impl Hash for OwnedName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self as &dyn JobName).hash(state);
    }
}

impl PartialEq for OwnedName {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for OwnedName {}

fn name(eval: &Evaluation) -> (&str, &str) {
    (&eval.namespace, eval.job_id.as_str())
}

/// Idle slots tolerated beyond the busy ones before a reclaim pass. Tiny under test, so
/// the property tests' handful of jobs reclaim all the time.
pub(super) const IDLE_SLACK: usize = if cfg!(test) { 2 } else { 1024 };

#[derive(Debug, Default)]
pub(super) struct JobTable {
    index: HashMap<OwnedName, JobSlot>,
    slots: Vec<JobState>,
    free: Vec<JobSlot>,
    /// Slots in the index with no tracked eval.
    idle: usize,
}

impl JobTable {
    /// The slot of `eval`'s job, created if needed, counting `eval` as one of its evals.
    pub(super) fn acquire(&mut self, eval: &Evaluation) -> JobSlot {
        let slot = match self.index.get(&name(eval) as &dyn JobName) {
            Some(&slot) => slot,
            None => {
                let slot = match self.free.pop() {
                    Some(slot) => slot,
                    None => {
                        self.slots.push(JobState::default());
                        (self.slots.len() - 1) as JobSlot
                    }
                };
                self.index.insert(OwnedName(eval.job_key()), slot);
                self.idle += 1;
                slot
            }
        };
        let job = &mut self.slots[slot as usize];
        if job.tracked == 0 {
            self.idle -= 1;
        }
        job.tracked += 1;
        job.wait_index = job.wait_index.max(eval.modify_index);
        slot
    }

    /// Forgets one eval of the job in `slot`. When it was the last, the job goes idle: its
    /// state is reset as if new, and the slot stays interned until the next reclaim.
    pub(super) fn release(&mut self, slot: JobSlot) {
        let job = &mut self.slots[slot as usize];
        job.tracked -= 1;
        if job.tracked == 0 {
            debug_assert!(job.outstanding.is_none() && job.pending.is_empty());
            job.wait_index = 0;
            self.idle += 1;
            if self.idle > IDLE_SLACK && self.idle * 2 > self.index.len() {
                self.reclaim();
            }
        }
    }

    /// Frees every idle slot. One pass over the index, paid for by the at least
    /// `index.len() / 2` releases since the last pass.
    fn reclaim(&mut self) {
        let (slots, free) = (&self.slots, &mut self.free);
        self.index.retain(|_, &mut slot| {
            let busy = slots[slot as usize].tracked > 0;
            if !busy {
                free.push(slot);
            }
            busy
        });
        self.idle = 0;
    }

    /// The slot of the job `namespace`/`id`, if it is interned (busy or idle).
    pub(super) fn find(&self, namespace: &str, id: &str) -> Option<JobSlot> {
        self.index.get(&(namespace, id) as &dyn JobName).copied()
    }

    pub(super) fn get(&self, slot: JobSlot) -> &JobState {
        &self.slots[slot as usize]
    }

    pub(super) fn get_mut(&mut self, slot: JobSlot) -> &mut JobState {
        &mut self.slots[slot as usize]
    }

    pub(super) fn clear(&mut self) {
        self.index.clear();
        self.slots.clear();
        self.free.clear();
        self.idle = 0;
    }

    /// Interned jobs (busy and idle) with their slots.
    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = (JobSlot, &JobKey, &JobState)> {
        self.index
            .iter()
            .map(|(key, &slot)| (slot, &key.0, &self.slots[slot as usize]))
    }

    #[cfg(test)]
    pub(super) fn idle(&self) -> usize {
        self.idle
    }
}
