//! An allocation: one task group of one job placed on one node.
//!
//! Kept small on purpose (a million of them must fit in well under a GiB): ids are 16-byte
//! UUIDs, the job id is shared, optional parts are boxed, and the job itself is not embedded
//! (schedulers look up the version an allocation was placed with in the job versions table).

use super::{
    AllocId, AllocatedPort, Dimension, EvalId, Index, JobId, JobKey, Links, NodeId, PortShortage,
    Resources, TaskEvent, TaskStates, Timestamp,
};
use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use thin_vec::ThinVec;

/// What the servers want for an allocation.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum DesiredStatus {
    Run,
    Stop,
    /// Stopped to make room (preemption) or moved off a draining node.
    Evict,
}

impl DesiredStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DesiredStatus::Run => "run",
            DesiredStatus::Stop => "stop",
            DesiredStatus::Evict => "evict",
        }
    }
}

/// What the node reports for an allocation (or what the servers decided for a lost node).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum ClientStatus {
    Pending,
    Running,
    Complete,
    Failed,
    Lost,
    /// The node is disconnected; the allocation may still be running there.
    Unknown,
}

impl ClientStatus {
    pub const ALL: [ClientStatus; 6] = [
        ClientStatus::Pending,
        ClientStatus::Running,
        ClientStatus::Complete,
        ClientStatus::Failed,
        ClientStatus::Lost,
        ClientStatus::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClientStatus::Pending => "pending",
            ClientStatus::Running => "running",
            ClientStatus::Complete => "complete",
            ClientStatus::Failed => "failed",
            ClientStatus::Lost => "lost",
            ClientStatus::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Complete, failed and lost never change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            ClientStatus::Complete | ClientStatus::Failed | ClientStatus::Lost
        )
    }
}

/// One client-status transition with its time. The reconnect logic reads the newest entry:
/// a reconnect is handled only while the newest entry is the disconnect (`Unknown`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct AllocStateEntry {
    pub client_status: ClientStatus,
    pub time: Timestamp,
}

/// One task's state as the agent reports it.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct TaskState {
    pub state: TaskRunState,
    pub failed: bool,
    pub restarts: u32,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub events: Vec<TaskEvent>,
    /// The latest usage sample while the task runs (agents that sample cgroups).
    pub usage: Option<super::TaskUsage>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum TaskRunState {
    #[default]
    Pending,
    Running,
    Dead,
}

/// The newest task events kept per task.
pub const MAX_TASK_EVENTS: usize = 10;

/// The reschedule attempts that led to an allocation, oldest first.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct RescheduleTracker {
    pub events: Vec<RescheduleEvent>,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct RescheduleEvent {
    pub time: Timestamp,
    pub prev_alloc_id: AllocId,
    pub prev_node_id: NodeId,
    pub delay_ms: u64,
}

/// What the scheduler saw while placing (or failing to place) an allocation. On failures it
/// answers "why is this pending": how many nodes each constraint filtered, which resource ran
/// out where.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
pub struct AllocMetric {
    pub nodes_evaluated: u32,
    pub nodes_filtered: u32,
    pub nodes_available: BTreeMap<String, u32>,
    pub class_filtered: BTreeMap<String, u32>,
    pub constraint_filtered: BTreeMap<String, u32>,
    pub nodes_exhausted: u32,
    pub class_exhausted: BTreeMap<String, u32>,
    pub dimension_exhausted: BTreeMap<Dimension, u32>,
    /// Nodes that could not give the group its ports, per reason (counted in
    /// `nodes_exhausted` and `class_exhausted` too): `port 8080 taken on 3 nodes`.
    pub ports_exhausted: BTreeMap<PortShortage, u32>,
    /// Placements of this group that could not be made in this eval: all of them, the one
    /// whose metrics these are included (Nomad counts only the others). The CLI and the
    /// console print this number as it is.
    pub coalesced_failures: u32,
    /// The winning node's final score, for placements.
    pub score: f64,
}

/// What one successful placement saw, kept inline on the allocation (16 bytes, so a million
/// allocations stay small); the full breakdown of failures lives on the evaluation.
#[derive(Clone, Copy, PartialEq, Debug, Default, Serialize, Deserialize)]
pub struct PlacementMetric {
    pub nodes_evaluated: u32,
    pub nodes_filtered: u32,
    pub nodes_exhausted: u32,
    pub score: f32,
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct Allocation {
    pub id: AllocId,
    pub eval_id: EvalId,
    /// `job.group[i]`; replacements keep the name of what they replace.
    pub name: CompactString,
    pub namespace: Arc<str>,
    pub job_id: JobId,
    /// The job version this allocation was placed (or last updated in place) with.
    pub job_version: u64,
    pub task_group: CompactString,
    pub node_id: NodeId,
    pub desired_status: DesiredStatus,
    pub desired_description: CompactString,
    pub client_status: ClientStatus,
    pub client_description: CompactString,
    /// A thin vector (one pointer, its length beside the entries), as `task_states` and
    /// `ports` are: they keep the record at 304 bytes, so with its `Arc` counts it fits the
    /// allocator's 320-byte size class instead of the 384-byte one (64 bytes less per
    /// allocation held).
    pub state_history: ThinVec<AllocStateEntry>,
    pub task_states: TaskStates,
    /// What links this allocation to others; read with [`Links::get`], set with
    /// [`Links::update`].
    pub links: Links,
    pub resources: Resources,
    /// The ports it holds on its node, in the order of its group's `port` blocks; empty
    /// when the group asks for none. A thin vector, so an allocation without ports pays
    /// one null pointer.
    pub ports: ThinVec<AllocatedPort>,
    pub metrics: PlacementMetric,
    pub create_index: Index,
    pub modify_index: Index,
    /// Index of the last change the servers made (not client updates).
    pub alloc_modify_index: Index,
    pub create_time: Timestamp,
    pub modify_time: Timestamp,
}

impl Allocation {
    /// The key of the job this allocation belongs to (as
    /// [`Evaluation::job_key`](super::Evaluation::job_key)).
    pub fn job_key(&self) -> JobKey {
        JobKey {
            namespace: self.namespace.clone(),
            id: self.job_id.clone(),
        }
    }

    /// `job.group[index]`, the name every allocation of a group slot carries.
    pub fn name_for(job: &str, group: &str, index: u32) -> CompactString {
        // Schedulers name every placement: built by hand, as `format!` costs several times
        // more than the copies.
        let mut digits = [0u8; 10];
        let mut at = digits.len();
        let mut n = index;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let digits = std::str::from_utf8(&digits[at..]).unwrap_or("0");
        let mut name = CompactString::with_capacity(job.len() + group.len() + digits.len() + 3);
        name.push_str(job);
        name.push('.');
        name.push_str(group);
        name.push('[');
        name.push_str(digits);
        name.push(']');
        name
    }

    /// The next version after its node reports `status`, `description` and (when not empty)
    /// `task_states`; everything else is this version's, its key strings shared. Built field
    /// by field: a node reports every allocation it runs, and copying the old task states
    /// and description only to drop them was a fifth of applying a report.
    pub fn with_client_report(
        &self,
        status: ClientStatus,
        description: CompactString,
        task_states: TaskStates,
    ) -> Allocation {
        Allocation {
            id: self.id,
            eval_id: self.eval_id,
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            job_id: self.job_id.clone(),
            job_version: self.job_version,
            task_group: self.task_group.clone(),
            node_id: self.node_id,
            desired_status: self.desired_status,
            desired_description: self.desired_description.clone(),
            client_status: status,
            client_description: description,
            state_history: self.state_history.clone(),
            task_states: if task_states.is_empty() {
                self.task_states.clone()
            } else {
                task_states
            },
            links: self.links.clone(),
            resources: self.resources,
            ports: self.ports.clone(),
            metrics: self.metrics,
            create_index: self.create_index,
            modify_index: self.modify_index,
            alloc_modify_index: self.alloc_modify_index,
            create_time: self.create_time,
            modify_time: self.modify_time,
        }
    }

    /// The slot number parsed from the name, if it has one.
    pub fn name_index(&self) -> Option<u32> {
        // The reconciler parses every allocation's name per eval: the usual `...[digits]`
        // is read straight off the end of the name (nine digits cannot overflow a `u32`).
        if let [head @ .., b']'] = self.name.as_bytes() {
            let n = head.iter().rev().take_while(|c| c.is_ascii_digit()).count();
            if (1..=9).contains(&n) && head.len() > n && head[head.len() - n - 1] == b'[' {
                let digits = &head[head.len() - n..];
                return Some(digits.iter().fold(0, |v, c| v * 10 + u32::from(c - b'0')));
            }
        }
        name_index_slow(&self.name)
    }

    /// Terminal on the servers' side (stop or evict) or the client's (complete/failed/lost).
    pub fn is_terminal(&self) -> bool {
        self.desired_status != DesiredStatus::Run || self.client_status.is_terminal()
    }

    /// Whether the client has stopped running it (what frees capacity on the node).
    pub fn client_terminal(&self) -> bool {
        self.client_status.is_terminal()
    }

    /// Whether it still holds node resources: not terminal on the client, and either wanted
    /// running or not yet confirmed stopped. Stop decisions free capacity for planning at once
    /// (Nomad does the same), so this is `!is_terminal()`.
    pub fn uses_resources(&self) -> bool {
        !self.is_terminal()
    }

    /// The client status of the newest state-history entry.
    pub fn last_state(&self) -> Option<ClientStatus> {
        self.state_history.last().map(|e| e.client_status)
    }

    /// Records a client-status transition in the state history (only real transitions).
    /// The history grows by exactly one entry: most allocations see one or two transitions,
    /// and a doubling `Vec` would hold room for four in every one of a million records.
    pub fn record_client_status(&mut self, status: ClientStatus, time: Timestamp) {
        if self.last_state() != Some(status) {
            self.state_history.reserve_exact(1);
            self.state_history.push(AllocStateEntry {
                client_status: status,
                time,
            });
        }
        self.client_status = status;
    }
}

/// [`Allocation::name_index`] for any name: what follows the last `[`, less the last
/// character, as a number.
fn name_index_slow(name: &str) -> Option<u32> {
    let open = name.rfind('[')?;
    name.get(open + 1..name.len().checked_sub(1)?)?.parse().ok()
}

#[cfg(test)]
mod name_index_tests {
    use super::*;

    #[test]
    fn fast_path_agrees_with_the_general_parse() {
        let names = [
            "web.api[0]",
            "web.api[7]",
            "web.api[123456789]",
            "web.api[4294967295]",
            "web.api[4294967296]",
            "web.api[+5]",
            "web.api[]",
            "web.api[5",
            "web.api5]",
            "a[b[3]",
            "a[3]]",
            "[9]",
            "]",
            "",
            "web.api[0012]",
            "web.api[12x]",
            "web.api[\u{e9}]",
        ];
        let job = crate::mock::service_job("web", 1);
        for name in names {
            let mut a = crate::mock::alloc(1, &job, NodeId::MIN, 0);
            a.name = name.into();
            assert_eq!(a.name_index(), name_index_slow(name), "{name:?}");
        }
    }
}

#[cfg(test)]
mod name_for_tests {
    use super::*;

    #[test]
    fn builds_the_slot_name_and_parses_back() {
        for index in [0, 7, 10, 99, 100, 123_456_789, u32::MAX] {
            let name = Allocation::name_for("web", "api", index);
            assert_eq!(name, format!("web.api[{index}]"));
            assert_eq!(name_index_slow(&name), Some(index));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Allocation;

    /// The store holds each allocation in an `Arc` (16 bytes of counts before it). At 304
    /// bytes or less the two fit the allocator's 320-byte size class; one field more and
    /// every allocation held costs the 384-byte class, 64 MB more at a million.
    #[test]
    fn an_allocation_and_its_arc_counts_fit_320_bytes() {
        let size = std::mem::size_of::<Allocation>();
        assert!(size + 16 <= 320, "Allocation is {size} bytes");
    }
}
