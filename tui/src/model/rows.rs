//! What the console keeps of each object: enough to draw every view and detail, and no
//! more, so that a cluster of 100,000 nodes and 1,000,000 allocations stays small in memory.

use super::alloc_name::AllocName;
use drover_core::{
    AllocId, ClientStatus, DeploymentId, DesiredStatus, JobKey, JobStatus, JobType, Resources,
    Timestamp,
};
use drover_proto::v1 as pb;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One allocation as lists show it. Task states and history are fetched on demand (the
/// allocation detail asks the server), because keeping them for every allocation would
/// multiply the console's memory. The job key's and group's strings are shared with every
/// other row of the job once the row is in the [`AllocTable`](super::AllocTable).
#[derive(Clone, Debug, PartialEq)]
pub struct AllocRow {
    pub id: AllocId,
    /// Read it with [`AllocRow::name`]; usually only the index of the scheduler's name.
    pub(crate) name: AllocName,
    pub job: JobKey,
    pub task_group: Arc<str>,
    pub node_id: drover_core::NodeId,
    pub desired: DesiredStatus,
    pub client: ClientStatus,
    pub resources: Resources,
    pub create_time: Timestamp,
    pub modify_index: u64,
    /// The deployment that placed it, which that deployment's detail lists.
    pub deployment: Option<DeploymentPart>,
}

/// An allocation's part in the deployment that placed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeploymentPart {
    pub id: DeploymentId,
    pub canary: bool,
    /// The agent's verdict on its health; `None` until it decided.
    pub healthy: Option<bool>,
}

impl DeploymentPart {
    pub fn of(d: &drover_core::AllocDeployment) -> Self {
        Self {
            id: d.id,
            canary: d.canary,
            healthy: d.health.map(|h| h.healthy),
        }
    }
}

impl AllocRow {
    /// Whether it still holds resources on its node: what the node's allocation count and
    /// resource use are summed over.
    pub fn is_live(&self) -> bool {
        self.desired == DesiredStatus::Run && !self.client.is_terminal()
    }

    /// The allocation's name, `<job>.<group>[<index>]` as schedulers make them.
    pub fn name(&self) -> Cow<'_, str> {
        self.name.spell(self.job.id.as_str(), &self.task_group)
    }
}

/// A job's status as every view and the CLI word it: a job an operator stopped keeps its
/// status (its allocations may still be stopping) with the stop marked, `dead (stopped)`.
pub fn job_status_text(status: JobStatus, stop: bool) -> String {
    if stop {
        format!("{} (stopped)", status.as_str())
    } else {
        status.as_str().to_owned()
    }
}

/// One job as the jobs view shows it (the spec is not kept).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRow {
    pub key: JobKey,
    pub job_type: JobType,
    pub priority: u8,
    pub status: JobStatus,
    pub stop: bool,
    pub version: u64,
    pub parent_id: Option<String>,
    pub submit_time: Timestamp,
    pub modify_index: u64,
}

/// One evaluation the blocked-evaluation tracker holds.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockedRow {
    pub eval_id: String,
    pub job: JobKey,
    pub kind: BlockedKindLabel,
    pub node_id: String,
    pub class_eligibility: BTreeMap<String, bool>,
    pub escaped: bool,
    pub triggered_by: String,
    pub blocked_since: Timestamp,
    pub unblocked_by: String,
}

/// How a blocked evaluation waits, as a label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BlockedKindLabel {
    Captured,
    Escaped,
    System,
    Unknown,
}

impl BlockedKindLabel {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Captured => "captured",
            Self::Escaped => "escaped",
            Self::System => "system",
            Self::Unknown => "?",
        }
    }

    pub fn from_wire(value: i32) -> Self {
        match pb::BlockedKind::try_from(value) {
            Ok(pb::BlockedKind::Captured) => Self::Captured,
            Ok(pb::BlockedKind::Escaped) => Self::Escaped,
            Ok(pb::BlockedKind::System) => Self::System,
            _ => Self::Unknown,
        }
    }
}

/// One scheduler worker of one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerRow {
    pub id: String,
    pub server_id: String,
    pub schedulers: Vec<String>,
    pub started: Timestamp,
    pub status: WorkerStatusLabel,
    pub workload: &'static str,
}

/// A worker's life-cycle status. Kept as an enum because actions depend on it (only a
/// paused worker can be resumed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WorkerStatusLabel {
    Starting,
    Started,
    Pausing,
    Paused,
    Resuming,
    Stopping,
    Stopped,
    Unknown,
}

impl WorkerStatusLabel {
    /// The label the CLI prints too (the wire name without its prefix, lower-cased).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Started => "started",
            Self::Pausing => "pausing",
            Self::Paused => "paused",
            Self::Resuming => "resuming",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
            Self::Unknown => "?",
        }
    }

    pub fn from_wire(value: i32) -> Self {
        use pb::WorkerStatus as W;
        match W::try_from(value) {
            Ok(W::Starting) => Self::Starting,
            Ok(W::Started) => Self::Started,
            Ok(W::Pausing) => Self::Pausing,
            Ok(W::Paused) => Self::Paused,
            Ok(W::Resuming) => Self::Resuming,
            Ok(W::Stopping) => Self::Stopping,
            Ok(W::Stopped) => Self::Stopped,
            Ok(W::Unspecified) | Err(_) => Self::Unknown,
        }
    }
}

/// What a worker is doing right now, as a label: the one the CLI prints (the wire name
/// without its prefix, lower-cased), so an operator reads one word in both.
pub fn workload_label(value: i32) -> &'static str {
    use pb::WorkloadStatus as W;
    match W::try_from(value) {
        Ok(W::WaitingToDequeue) => "waiting_to_dequeue",
        Ok(W::WaitingForRaft) => "waiting_for_raft",
        Ok(W::Scheduling) => "scheduling",
        Ok(W::Submitting) => "submitting",
        Ok(W::Backoff) => "backoff",
        Ok(W::Paused) => "paused",
        Ok(W::Stopped) => "stopped",
        Ok(W::Unspecified) | Err(_) => "?",
    }
}

/// The leader-only counters shown beside the workers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchedulingStats {
    pub ready: u64,
    pub unacked: u64,
    pub pending: u64,
    pub waiting: u64,
    pub blocked: u64,
    pub failed: u64,
    pub broker_enabled: bool,
    /// The operator paused the broker (`pause_eval_broker`): nothing is scheduled.
    pub broker_paused: bool,
    pub plan_depth: u64,
    pub plan_peak: u64,
    pub plans_enqueued: u64,
    pub plans_dequeued: u64,
}

/// One line of the live event stream.
#[derive(Clone, Debug, PartialEq)]
pub struct EventRow {
    /// Position in the console's event log, unique across the session (several events
    /// share one Raft index).
    pub seq: u64,
    pub index: u64,
    pub topic: &'static str,
    pub event_type: &'static str,
    pub key: String,
    pub summary: String,
    /// When the console received it: events carry no time of their own, and this is what
    /// an operator lines up with what they did.
    pub received: Timestamp,
    /// The object as the server sent it, for the event's detail. Shared, so the log's
    /// copies cost a pointer each.
    pub payload: Option<Arc<pb::event::Payload>>,
}

/// Resource use summed over the live allocations of one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub live_allocs: u32,
    pub used: Resources,
}

impl Usage {
    pub(crate) fn add(&mut self, r: &Resources) {
        self.live_allocs += 1;
        self.used.cpu_mhz += r.cpu_mhz;
        self.used.memory_mb += r.memory_mb;
        self.used.disk_mb += r.disk_mb;
    }

    pub(crate) fn remove(&mut self, r: &Resources) {
        self.live_allocs = self.live_allocs.saturating_sub(1);
        self.used.cpu_mhz = self.used.cpu_mhz.saturating_sub(r.cpu_mhz);
        self.used.memory_mb = self.used.memory_mb.saturating_sub(r.memory_mb);
        self.used.disk_mb = self.used.disk_mb.saturating_sub(r.disk_mb);
    }
}

/// Allocation counts of one job by client status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobCounts {
    pub running: u32,
    pub pending: u32,
    pub failed: u32,
    pub total: u32,
}

impl JobCounts {
    pub(crate) fn add(&mut self, other: &JobCounts) {
        self.running += other.running;
        self.pending += other.pending;
        self.failed += other.failed;
        self.total += other.total;
    }

    pub(crate) fn apply(&mut self, status: ClientStatus, added: bool) {
        let delta = |n: &mut u32| {
            if added {
                *n += 1
            } else {
                *n = n.saturating_sub(1)
            }
        };
        delta(&mut self.total);
        match status {
            ClientStatus::Running => delta(&mut self.running),
            ClientStatus::Pending => delta(&mut self.pending),
            ClientStatus::Failed | ClientStatus::Lost => delta(&mut self.failed),
            ClientStatus::Complete | ClientStatus::Unknown => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CLI's form of a wire enum's value (`output::wire_name`): its name without the
    /// prefix, lower-cased.
    fn cli_label(name: &str, prefix: &str) -> String {
        name.trim_start_matches(prefix).to_lowercase()
    }

    /// Workers read in the console as `operator workers list` prints them.
    #[test]
    fn worker_labels_are_the_clis() {
        for value in 1..=7 {
            let workload = pb::WorkloadStatus::try_from(value).expect("a workload status");
            assert_eq!(
                workload_label(value),
                cli_label(workload.as_str_name(), "WORKLOAD_STATUS_"),
            );
            let status = pb::WorkerStatus::try_from(value).expect("a worker status");
            assert_eq!(
                WorkerStatusLabel::from_wire(value).as_str(),
                cli_label(status.as_str_name(), "WORKER_STATUS_"),
            );
        }
    }

    #[test]
    fn a_stopped_job_keeps_its_status_with_the_stop_marked() {
        let cases = [
            (JobStatus::Running, false, "running"),
            (JobStatus::Dead, true, "dead (stopped)"),
            (JobStatus::Running, true, "running (stopped)"),
        ];
        for (status, stop, want) in cases {
            assert_eq!(job_status_text(status, stop), want);
        }
    }
}
