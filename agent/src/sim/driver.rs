//! The mock driver of one virtual node: which allocations it runs, how each task ends, and
//! what it reports. Pure (time is passed in), so every rule is unit-tested without a server.
//!
//! The watch stream carries allocations without their job, so the mock runs one task per
//! allocation, named after its group, that behaves as the simulator's [`Behaviour`] says.
//! Its fate is decided when it starts and depends only on the seed and the allocation, so a
//! rerun with the same seed fails the same allocations whatever order messages arrive in.
//!
//! With services on, an allocation also registers its group's and task's services, as the
//! real agent does: the engine reads its job (once per job version, for every node), and
//! until then the allocation is not reported, as the real agent cannot start it before.
//! Its registrations go with its updates while it runs (every simulated check passes at
//! once), and an empty set once it stopped, which takes them out of the catalog.

use crate::state::AllocInfo;
use drover_core::types::{AllocId, AllocatedPort, CheckState, CheckStatus, Job, NodeId};
use drover_proto::convert::known_allocation;
use drover_proto::v1 as pb;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// How the mock's tasks behave (from [`super::SimConfig`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Behaviour {
    pub seed: u64,
    pub task_duration: Option<Duration>,
    /// How long tasks of batch and sysbatch jobs run when `task_duration` is `None`.
    pub batch_duration: Option<Duration>,
    pub failure_rate: f64,
    /// Allocations register their jobs' services (see the module's doc).
    pub register_services: bool,
}

impl Behaviour {
    /// How long a task of an allocation runs before it exits (`None`: until stopped).
    /// `runs_to_completion` is whether its job is batch or sysbatch, when known.
    fn run_time(&self, runs_to_completion: bool) -> Option<Duration> {
        self.task_duration
            .or(self.batch_duration.filter(|_| runs_to_completion))
    }
}

/// Whether the servers said this allocation's job runs to completion (batch, sysbatch).
fn runs_to_completion(change: &pb::WatchAllocationsResponse, alloc: &pb::Allocation) -> bool {
    let batch = [pb::JobType::Batch as i32, pb::JobType::Sysbatch as i32];
    change
        .job_types
        .get(&alloc.id)
        .is_some_and(|t| batch.contains(t))
}

/// How a task came to an end.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum End {
    Exited(i32),
    /// Stopped by the servers.
    Killed,
    /// The node's fault, reported as an infrastructure failure.
    DriverFailure,
}

#[derive(Debug)]
struct SimTask {
    name: Box<str>,
    started_ms: u64,
    /// What the task will exit with when its run time is over.
    exit_code: i32,
    end: Option<(End, u64)>,
}

impl SimTask {
    fn failed(&self) -> bool {
        match self.end {
            Some((End::DriverFailure, _)) => true,
            Some((End::Exited(code), _)) => code != 0,
            _ => false,
        }
    }

    fn state(&self) -> pb::TaskState {
        let mut events = vec![event(
            self.started_ms,
            "Received",
            "task received by the simulator",
        )];
        if self.end != Some((End::DriverFailure, self.started_ms)) {
            events.push(event(self.started_ms, "Started", "mock task started"));
        }
        let finished_at_unix_ms = self.end.map(|(_, at)| at);
        match self.end {
            None => {}
            Some((End::Exited(code), at)) => events.push(pb::TaskEvent {
                exit_code: Some(code),
                ..event(
                    at,
                    "Terminated",
                    &format!("mock task exited with code {code}"),
                )
            }),
            Some((End::Killed, at)) => events.push(event(at, "Killed", "stopped by the servers")),
            Some((End::DriverFailure, at)) => events.push(pb::TaskEvent {
                infra_failure: true,
                ..event(at, "Driver Failure", "simulated infrastructure failure")
            }),
        }
        let state = if self.end.is_some() {
            pb::TaskRunState::Dead
        } else {
            pb::TaskRunState::Running
        };
        pb::TaskState {
            state: state.into(),
            failed: self.failed(),
            restarts: 0,
            started_at_unix_ms: Some(self.started_ms),
            finished_at_unix_ms,
            events,
            // Simulated tasks use nothing.
            usage: None,
        }
    }
}

fn event(time_unix_ms: u64, kind: &str, message: &str) -> pb::TaskEvent {
    pb::TaskEvent {
        time_unix_ms,
        kind: kind.into(),
        message: message.into(),
        exit_code: None,
        infra_failure: false,
    }
}

/// A job version allocations were placed with: what the engine reads once for them all.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) struct JobKey {
    pub namespace: String,
    pub job_id: String,
    pub version: u64,
}

/// What an allocation needs to build its registrations once its job is known; kept with
/// services on.
#[derive(Debug)]
struct Origin {
    job: JobKey,
    name: String,
    ports: Vec<AllocatedPort>,
}

/// What an allocation registers in the service catalog.
#[derive(Debug)]
enum Services {
    /// Services are off, or its job's group has none: its updates carry no set.
    Off,
    /// Its job (version) is being read: it is not reported until it is known.
    Unresolved,
    /// Its job's group offers services.
    Registered(Arc<Job>),
}

/// One allocation the node runs (or ran and has not yet seen acknowledged as terminal).
#[derive(Debug)]
struct SimAlloc {
    id: AllocId,
    /// The `alloc_modify_index` the servers last sent it at: what a new watch is told the
    /// node holds.
    server_index: u64,
    tasks: Vec<SimTask>,
    /// Changed since the last report that the servers accepted.
    dirty: bool,
    /// A deployment placed it: its health is reported, healthy while it runs (simulated
    /// tasks need no `min_healthy_time`), unhealthy once failed.
    in_deployment: bool,
    /// With services on: where it came from (`None` otherwise).
    origin: Option<Box<Origin>>,
    services: Services,
}

impl SimAlloc {
    fn live(&self) -> bool {
        self.tasks.iter().any(|t| t.end.is_none())
    }

    fn client_status(&self) -> pb::ClientStatus {
        if self.live() {
            pb::ClientStatus::Running
        } else if self.tasks.iter().any(SimTask::failed) {
            pb::ClientStatus::Failed
        } else {
            pb::ClientStatus::Complete
        }
    }

    /// Whether its update can be sent: not while its job is being read.
    fn reportable(&self) -> bool {
        !matches!(self.services, Services::Unresolved)
    }

    /// Its registrations as the real agent builds them, every check passing, while it runs;
    /// none once it stopped. `None`: it offers no services.
    fn registrations(&self, node: &NodeContext<'_>) -> Option<pb::ServiceSet> {
        let (Services::Registered(job), Some(origin)) = (&self.services, &self.origin) else {
            return None;
        };
        if !self.live() {
            return Some(pb::ServiceSet::default());
        }
        let group = job
            .groups
            .iter()
            .find(|g| self.tasks.first().is_some_and(|t| *t.name == g.name))?;
        let info = AllocInfo {
            id: self.id,
            name: origin.name.clone(),
            namespace: origin.job.namespace.clone(),
            job_id: origin.job.job_id.clone(),
            job_name: job.name.clone(),
            job_type: job.job_type,
            job_version: origin.job.version,
            datacenter: node.datacenter.to_owned(),
            ports: origin.ports.clone(),
            job_meta: job.meta.clone(),
            payload: Vec::new(),
        };
        let now = crate::runner::task::now();
        let registrations = crate::checks::registrations(&info, group, node.id, now)
            .into_iter()
            .map(|mut r| {
                for check in &mut r.checks {
                    check.status = CheckStatus::Passing;
                }
                r.health = CheckState::health_of(&r.checks);
                pb::ServiceRegistration::from(&r)
            })
            .collect();
        Some(pb::ServiceSet { registrations })
    }

    fn update(&self, node: &NodeContext<'_>) -> pb::AllocClientUpdate {
        let status = self.client_status();
        let infra = self
            .tasks
            .iter()
            .any(|t| matches!(t.end, Some((End::DriverFailure, _))));
        let description = match status {
            pb::ClientStatus::Running => "tasks are running",
            pb::ClientStatus::Failed if infra => "a task failed to start on this node",
            pb::ClientStatus::Failed => "a task failed",
            _ => "all tasks have finished",
        };
        let deployment_health = match status {
            pb::ClientStatus::Running if self.in_deployment => Some(true),
            pb::ClientStatus::Failed if self.in_deployment => Some(false),
            _ => None,
        };
        pb::AllocClientUpdate {
            deployment_health,
            alloc_id: self.id.to_string(),
            client_status: status.into(),
            client_description: description.into(),
            task_states: self
                .tasks
                .iter()
                .map(|t| (t.name.to_string(), t.state()))
                .collect(),
            infra_failure: infra,
            services: self.registrations(node),
        }
    }
}

/// Who reports: the node's id on the servers and its datacenter.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeContext<'a> {
    pub id: NodeId,
    pub datacenter: &'a str,
}

/// A task that started and will exit by itself after `after`: the caller arms a timer and
/// calls [`NodeAllocs::task_exited`] when it fires.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct ExitTimer {
    pub alloc: AllocId,
    pub task: u16,
    pub after: Duration,
}

/// The allocations of one virtual node. Empty (24 bytes plus a counter) on an idle node.
#[derive(Debug, Default)]
pub(crate) struct NodeAllocs {
    allocs: Vec<SimAlloc>,
    /// Tasks still to fail as infrastructure failures when they start.
    infra_pending: u32,
    /// Allocations started whose job the engine is yet to look up (services on).
    awaiting_jobs: Vec<(AllocId, JobKey)>,
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The random source of one task: a function of the seed, the allocation and the task only.
fn task_rng(seed: u64, alloc: AllocId, task: &str) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..24].copy_from_slice(alloc.0.as_bytes());
    key[24..].copy_from_slice(&fnv1a(task.as_bytes()).to_le_bytes());
    ChaCha8Rng::from_seed(key)
}

/// Brings a held allocation in line with the servers' copy; `false` when the servers hold
/// it as terminal and it is to be forgotten.
/// An allocation updated in place (a new job version, the same tasks) registers what the
/// new version's group offers: its job version is read again, as the real agent does.
fn follow_server(
    local: &mut SimAlloc,
    a: &pb::Allocation,
    now_ms: u64,
    awaiting_jobs: &mut Vec<(AllocId, JobKey)>,
) -> bool {
    if server_terminal(a) {
        return false;
    }
    local.server_index = a.alloc_modify_index;
    if let Some(origin) = local
        .origin
        .as_mut()
        .filter(|o| o.job.version != a.job_version)
    {
        **origin = origin_of(a);
        local.services = Services::Unresolved;
        local.dirty = true;
        awaiting_jobs.push((local.id, origin.job.clone()));
    }
    if !desired_run(a) && local.live() {
        for t in local.tasks.iter_mut().filter(|t| t.end.is_none()) {
            t.end = Some((End::Killed, now_ms));
        }
        local.dirty = true;
    }
    true
}

/// Where a new allocation came from, for its registrations. A port the servers sent
/// malformed is left out (a registration on it then has no address).
fn origin_of(a: &pb::Allocation) -> Origin {
    Origin {
        job: JobKey {
            namespace: a.namespace.clone(),
            job_id: a.job_id.clone(),
            version: a.job_version,
        },
        name: a.name.clone(),
        ports: a
            .ports
            .iter()
            .filter_map(|p| drover_proto::convert::allocated_port(p.clone()).ok())
            .collect(),
    }
}

fn server_terminal(a: &pb::Allocation) -> bool {
    matches!(
        pb::ClientStatus::try_from(a.client_status),
        Ok(pb::ClientStatus::Complete | pb::ClientStatus::Failed | pb::ClientStatus::Lost)
    )
}

fn desired_run(a: &pb::Allocation) -> bool {
    a.desired_status == i32::from(pb::DesiredStatus::Run)
}

impl NodeAllocs {
    /// What a new watch is told this node holds, so its first message is only what the
    /// servers changed meanwhile (after a server restart, ten thousand simulated nodes
    /// reconnect at once).
    pub(crate) fn known(&self) -> Vec<pb::KnownAllocation> {
        self.allocs
            .iter()
            .map(|a| known_allocation(a.id, a.server_index))
            .collect()
    }

    /// The next `n` tasks to start fail as infrastructure failures.
    pub(crate) fn fail_next_as_infra(&mut self, n: u32) {
        self.infra_pending = self.infra_pending.saturating_add(n);
    }

    pub(crate) fn running(&self) -> usize {
        self.allocs.iter().filter(|a| a.live()).count()
    }

    /// Whether an update is waiting to be sent.
    pub(crate) fn has_dirty(&self) -> bool {
        self.allocs.iter().any(|a| a.dirty && a.reportable())
    }

    /// The allocations started since the last call whose job is to be read, with its key.
    pub(crate) fn take_awaiting_jobs(&mut self) -> Vec<(AllocId, JobKey)> {
        std::mem::take(&mut self.awaiting_jobs)
    }

    /// Allocation `alloc`'s job is known (`None`: it could not be read, or its group offers
    /// no services): its update can go. Returns whether it is held here.
    pub(crate) fn job_known(&mut self, alloc: AllocId, job: Option<&Arc<Job>>) -> bool {
        let Some(a) = self.allocs.iter_mut().find(|a| a.id == alloc) else {
            return false;
        };
        a.services = match std::mem::replace(&mut a.services, Services::Off) {
            Services::Unresolved => {
                let offers = job.is_some_and(|j| {
                    j.groups.iter().any(|g| {
                        a.tasks.first().is_some_and(|t| *t.name == g.name)
                            && (!g.services.is_empty()
                                || g.tasks.iter().any(|t| !t.services.is_empty()))
                    })
                });
                match job {
                    Some(job) if offers => Services::Registered(job.clone()),
                    _ => Services::Off,
                }
            }
            other => other,
        };
        true
    }

    /// Brings the node in line with one watch message. A complete message is the servers'
    /// whole view: start new allocations, kill those the servers stop, and forget those the
    /// servers hold as terminal or no longer list. A later message carries only what changed
    /// (and the ids collected): allocations it does not name are left as they are.
    /// Allocations already terminal on the servers are never started, so a reconnecting node
    /// does not revive what was replaced.
    pub(crate) fn apply_server_change(
        &mut self,
        change: &pb::WatchAllocationsResponse,
        behaviour: &Behaviour,
        now_ms: u64,
    ) -> Vec<ExitTimer> {
        let server = &change.allocations;
        let mut timers = Vec::new();
        let mut seen: HashMap<AllocId, &pb::Allocation> = HashMap::with_capacity(server.len());
        for a in server {
            match a.id.parse::<AllocId>() {
                Ok(id) => {
                    seen.insert(id, a);
                }
                Err(_) => {
                    tracing::warn!(alloc_id = %a.id, "ignoring an allocation with an invalid id")
                }
            }
        }
        let removed: HashSet<AllocId> = change
            .removed
            .iter()
            .filter_map(|id| id.parse().ok())
            .collect();
        if change.complete {
            self.allocs
                .retain_mut(|local| match seen.remove(&local.id) {
                    None => false,
                    Some(a) => follow_server(local, a, now_ms, &mut self.awaiting_jobs),
                });
        } else {
            // A later message names a few of a node's hundred allocations: find those
            // rather than visit every held one (which was a sixth of the simulator's CPU
            // during a large placement).
            if !removed.is_empty() {
                self.allocs
                    .retain(|local| !removed.contains(&local.id) || seen.contains_key(&local.id));
            }
            let allocs = &mut self.allocs;
            let awaiting_jobs = &mut self.awaiting_jobs;
            seen.retain(|id, a| {
                let Some(at) = allocs.iter().position(|local| local.id == *id) else {
                    return true;
                };
                if !follow_server(&mut allocs[at], a, now_ms, awaiting_jobs) {
                    allocs.remove(at);
                }
                false
            });
        }
        // What is left in `seen` is new to this node; keep the servers' order.
        for a in server {
            let Ok(id) = a.id.parse::<AllocId>() else {
                continue;
            };
            if seen.remove(&id).is_none() || !desired_run(a) || server_terminal(a) {
                continue;
            }
            let run_time = behaviour.run_time(runs_to_completion(change, a));
            let mut alloc = self.start(id, a, behaviour, run_time, now_ms, &mut timers);
            if behaviour.register_services {
                let origin = origin_of(a);
                self.awaiting_jobs.push((id, origin.job.clone()));
                alloc.origin = Some(Box::new(origin));
                alloc.services = Services::Unresolved;
            }
            self.allocs.push(alloc);
        }
        timers
    }

    fn start(
        &mut self,
        id: AllocId,
        a: &pb::Allocation,
        behaviour: &Behaviour,
        run_time: Option<Duration>,
        now_ms: u64,
        timers: &mut Vec<ExitTimer>,
    ) -> SimAlloc {
        let name = if a.task_group.is_empty() {
            "task"
        } else {
            a.task_group.as_str()
        };
        let mut rng = task_rng(behaviour.seed, id, name);
        let mut task = SimTask {
            name: name.into(),
            started_ms: now_ms,
            exit_code: i32::from(rng.random_bool(behaviour.failure_rate)),
            end: None,
        };
        if self.infra_pending > 0 {
            self.infra_pending -= 1;
            task.end = Some((End::DriverFailure, now_ms));
        } else {
            match run_time {
                Some(d) if d.is_zero() => task.end = Some((End::Exited(task.exit_code), now_ms)),
                Some(after) => timers.push(ExitTimer {
                    alloc: id,
                    task: 0,
                    after,
                }),
                None => {}
            }
        }
        SimAlloc {
            id,
            server_index: a.alloc_modify_index,
            tasks: vec![task],
            dirty: true,
            in_deployment: !a.deployment_id.is_empty(),
            origin: None,
            services: Services::Off,
        }
    }

    /// A task's run time is over: it exits with its planned code. Returns whether anything
    /// changed (not when the allocation was stopped or forgotten meanwhile).
    pub(crate) fn task_exited(&mut self, alloc: AllocId, task: u16, now_ms: u64) -> bool {
        let Some(a) = self.allocs.iter_mut().find(|a| a.id == alloc) else {
            return false;
        };
        let Some(t) = a.tasks.get_mut(usize::from(task)) else {
            return false;
        };
        if t.end.is_some() {
            return false;
        }
        t.end = Some((End::Exited(t.exit_code), now_ms));
        a.dirty = true;
        true
    }

    /// Reports every allocation again (after a reconnect, so the servers learn they run).
    pub(crate) fn mark_all_dirty(&mut self) {
        for a in &mut self.allocs {
            a.dirty = true;
        }
    }

    /// The updates to send, clearing their dirty marks; [`NodeAllocs::redirty`] puts the
    /// marks back if the servers refuse them.
    #[cfg(test)]
    pub(crate) fn take_updates(&mut self) -> Vec<pb::AllocClientUpdate> {
        let node = NodeContext {
            id: NodeId::from_bytes([7; 16]),
            datacenter: "dc1",
        };
        self.take_batch(&node).1
    }

    /// Like [`NodeAllocs::take_updates`], with the ids of the allocations in the batch.
    /// Allocations whose job is still being read wait, dirty, for the next batch.
    pub(crate) fn take_batch(
        &mut self,
        node: &NodeContext<'_>,
    ) -> (Vec<AllocId>, Vec<pb::AllocClientUpdate>) {
        self.allocs
            .iter_mut()
            .filter(|a| a.dirty && a.reportable())
            .map(|a| {
                a.dirty = false;
                (a.id, a.update(node))
            })
            .unzip()
    }

    pub(crate) fn redirty(&mut self, ids: &[AllocId]) {
        for a in self.allocs.iter_mut().filter(|a| ids.contains(&a.id)) {
            a.dirty = true;
        }
    }

    /// Forgets the allocations of a batch the servers refused outright as unknown (already
    /// collected): their end cannot be reported any more.
    pub(crate) fn forget_finished(&mut self, ids: &[AllocId]) {
        self.allocs.retain(|a| a.live() || !ids.contains(&a.id));
    }
}

#[cfg(test)]
mod tests;
