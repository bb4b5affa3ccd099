//! Keeps what runs on this node in line with the servers' list of its allocations (the
//! `WatchAllocations` stream): starts allocations that should run, stops those the servers
//! stop, applies in-place updates, and forgets what the servers garbage collected.
//!
//! Allocations already terminal on the servers are never started; one the servers consider
//! over while it still runs here (lost during a disconnect) is stopped without reporting,
//! so the servers' decision stands.

use crate::reporter::auth;
use crate::rpc::{Servers, request};
use crate::runner::{AllocRunner, Desired, RunnerContext};
use crate::state::{AllocInfo, AllocRecord, DeploymentWatch, NodeIdentity, TaskRecord};
use drover_core::types::{AllocId, Allocation, ClientStatus, DesiredStatus, Job};
use drover_proto::bearer::BearerChannel;
use drover_proto::convert::known_allocation;
use drover_proto::v1 as pb;
use drover_proto::v1::job_service_client::JobServiceClient;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// How soon allocations that could not be started (their job could not be fetched) are
/// tried again.
const RETRY_PENDING: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Supervisor {
    ctx: Arc<RunnerContext>,
    servers: Arc<Servers>,
    datacenter: String,
    runners: HashMap<AllocId, AllocRunner>,
    /// Job versions fetched so far, by (namespace, id, version); versions never change.
    jobs: HashMap<(String, String, u64), Arc<Job>>,
}

impl Supervisor {
    pub fn new(ctx: Arc<RunnerContext>, servers: Arc<Servers>, datacenter: String) -> Self {
        Self {
            ctx,
            servers,
            datacenter,
            runners: HashMap::new(),
            jobs: HashMap::new(),
        }
    }

    /// Resumes allocations recorded on disk: live processes are re-attached at once, nothing
    /// new starts until the servers' list confirms the allocation.
    pub fn restore(&mut self, records: Vec<AllocRecord>) {
        for record in records {
            tracing::info!(alloc_id = %record.alloc.id, "restoring allocation from disk");
            let runner = AllocRunner::start(self.ctx.clone(), record, Desired::Unconfirmed);
            self.runners.insert(runner.id(), runner);
        }
    }

    /// Allocations being supervised.
    pub fn running(&self) -> usize {
        self.runners.values().filter(|r| !r.is_finished()).count()
    }

    /// Whether `id`'s tasks are still supervised here (false once they all ended).
    pub fn is_live(&self, id: AllocId) -> bool {
        self.runners.get(&id).is_some_and(|r| !r.is_finished())
    }

    /// The task names of allocation `id`, if it is known here.
    pub fn tasks(&self, id: AllocId) -> Option<Vec<String>> {
        self.runners
            .get(&id)
            .map(|r| r.tasks().map(str::to_string).collect())
    }

    /// Restarts `task` (or every running task) of allocation `id` in place; the tasks
    /// restarted, or `None` when the allocation is not running here.
    pub fn restart(&self, id: AllocId, task: Option<&str>) -> Option<Vec<String>> {
        let runner = self.runners.get(&id).filter(|r| !r.is_finished())?;
        Some(runner.restart(task))
    }

    /// Applies one list from the servers; returns whether some allocation must be tried
    /// again later.
    pub async fn apply(&mut self, allocs: &[Allocation], index: u64) -> bool {
        let mut retry = false;
        let listed: HashSet<AllocId> = allocs.iter().map(|a| a.id).collect();
        for alloc in allocs {
            if self.runners.contains_key(&alloc.id) {
                self.reconcile(alloc, index).await;
            } else if !alloc.is_terminal() && !self.start(alloc, index).await {
                retry = true;
            }
        }
        let gone: Vec<AllocId> = self
            .runners
            .keys()
            .filter(|id| !listed.contains(id))
            .copied()
            .collect();
        for id in gone {
            let finished = self.runners.get(&id).is_some_and(AllocRunner::is_finished);
            if finished {
                self.runners.remove(&id);
                self.forget(id);
            } else if let Some(runner) = self.runners.get(&id) {
                runner.silence();
                runner.set_desired(Desired::Stop);
            }
        }
        retry
    }

    /// Drops the state and directory of an allocation the servers no longer have.
    fn forget(&self, id: AllocId) {
        self.ctx.reporter.forget(id);
        if let Err(e) = self.ctx.store.remove_alloc(id) {
            tracing::warn!(alloc_id = %id, error = %e, "cannot remove allocation state");
        }
        let dir = self.ctx.alloc_dir(id);
        if let Err(e) = std::fs::remove_dir_all(&dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(alloc_id = %id, error = %e, "cannot remove allocation dir");
        }
    }

    async fn reconcile(&mut self, alloc: &Allocation, index: u64) {
        let job_version = match self.runners.get(&alloc.id) {
            Some(r) => r.job_version(),
            None => return,
        };
        if alloc.client_terminal() {
            if let Some(runner) = self.runners.get(&alloc.id)
                && !runner.is_finished()
            {
                tracing::info!(alloc_id = %alloc.id, client_status = alloc.client_status.as_str(), "servers consider the allocation over; stopping it");
                runner.silence();
                self.ctx.reporter.forget(alloc.id);
                runner.set_desired(Desired::Stop);
            }
            return;
        }
        if alloc.desired_status != DesiredStatus::Run {
            if let Some(runner) = self.runners.get(&alloc.id) {
                runner.set_desired(Desired::Stop);
            }
            return;
        }
        if alloc.job_version != job_version
            && let Some(job) = self.job(alloc, index).await
            && let Some(group) = job.groups.iter().find(|g| g.name == alloc.task_group)
            && let Some(runner) = self.runners.get_mut(&alloc.id)
        {
            let deployment = DeploymentWatch::of(alloc, &job, group, crate::runner::task::now());
            runner.update_in_place(alloc.job_version, group.clone(), deployment);
        }
        let Some(runner) = self.runners.get(&alloc.id) else {
            return;
        };
        runner.set_desired(Desired::Run);
        // After a disconnect the servers hold an older status (unknown, or pending): send
        // ours again so they see the allocation is still alive (the reconnect).
        if let Some(latest) = runner.latest()
            && latest.update.client_status != alloc.client_status
        {
            self.ctx.reporter.submit(latest);
        }
    }

    /// Starts a new allocation; false if its job could not be fetched yet.
    async fn start(&mut self, alloc: &Allocation, index: u64) -> bool {
        let Some(job) = self.job(alloc, index).await else {
            return false;
        };
        let Some(group) = job.groups.iter().find(|g| g.name == alloc.task_group) else {
            tracing::error!(alloc_id = %alloc.id, group = %alloc.task_group, "allocation names a group its job does not have");
            return true;
        };
        let tasks: BTreeMap<String, TaskRecord> = group
            .tasks
            .iter()
            .map(|t| (t.name.clone(), TaskRecord::default()))
            .collect();
        let record = AllocRecord {
            alloc: AllocInfo {
                id: alloc.id,
                name: alloc.name.to_string(),
                namespace: alloc.namespace.to_string(),
                job_id: alloc.job_id.as_str().to_string(),
                job_name: job.name.clone(),
                job_type: job.job_type,
                job_version: alloc.job_version,
                datacenter: self.datacenter.clone(),
                ports: alloc.ports.to_vec(),
                job_meta: job.meta.clone(),
                payload: job.payload.clone(),
            },
            group: group.clone(),
            tasks,
            client_status: ClientStatus::Pending,
            client_description: Default::default(),
            infra_failure: false,
            deployment: DeploymentWatch::of(alloc, &job, group, crate::runner::task::now()),
        };
        tracing::info!(alloc_id = %alloc.id, name = %alloc.name, "starting allocation");
        let runner = AllocRunner::start(self.ctx.clone(), record, Desired::Run);
        self.runners.insert(alloc.id, runner);
        true
    }

    /// The job version an allocation was placed with, fetched once.
    async fn job(&mut self, alloc: &Allocation, index: u64) -> Option<Arc<Job>> {
        let key = (
            alloc.namespace.to_string(),
            alloc.job_id.as_str().to_string(),
            alloc.job_version,
        );
        if let Some(job) = self.jobs.get(&key) {
            return Some(job.clone());
        }
        match fetch_job(&self.servers, &key.0, &key.1, key.2, index).await {
            Ok(job) => {
                let job = Arc::new(job);
                self.jobs.insert(key, job.clone());
                Some(job)
            }
            Err(e) => {
                tracing::warn!(alloc_id = %alloc.id, job_id = %key.1, version = key.2, error = %e, "cannot fetch the allocation's job");
                None
            }
        }
    }

    /// Stops every allocation and waits for their tasks to end.
    pub async fn stop_all(&mut self) {
        for runner in self.runners.values() {
            runner.set_desired(Desired::Stop);
        }
        for (_, runner) in self.runners.drain() {
            runner.join().await;
        }
    }

    /// Stops supervising; the processes keep running for the next agent start.
    pub fn detach_all(&mut self) {
        for (_, runner) in self.runners.drain() {
            runner.detach();
        }
    }
}

async fn fetch_job(
    servers: &Servers,
    namespace: &str,
    job_id: &str,
    version: u64,
    index: u64,
) -> Result<Job, String> {
    read_job_version(|| servers.jobs(), namespace, job_id, version, index)
        .await
        .map_err(|e| {
            if let JobReadError::Rpc(status) = &e {
                servers.on_error(status);
            }
            e.to_string()
        })
}

/// Why an allocation's job could not be read.
#[derive(Debug, thiserror::Error)]
pub enum JobReadError {
    #[error("{}", .0.message())]
    Rpc(tonic::Status),
    #[error("job {job_id} has no version {version}")]
    NoVersion { job_id: String, version: u64 },
    #[error("{0}")]
    Invalid(String),
}

/// The version of a job an allocation was placed with, read as the node (`jobs` makes a
/// client presenting its identity): the current version, or from the job's history when it
/// moved on. `index` is the state the caller has seen, which the read must reflect. The
/// agent's supervisor and the simulator read jobs through this.
pub async fn read_job_version(
    jobs: impl Fn() -> JobServiceClient<BearerChannel>,
    namespace: &str,
    job_id: &str,
    version: u64,
    index: u64,
) -> Result<Job, JobReadError> {
    let query = Some(pb::QueryOptions {
        min_index: index,
        max_wait_ms: 0,
    });
    let current = jobs()
        .get(request(pb::GetJobRequest {
            query,
            namespace: namespace.to_string(),
            job_id: job_id.to_string(),
        }))
        .await
        .map_err(JobReadError::Rpc)?
        .into_inner();
    let wire = match current.job {
        Some(job) if job.version == version => job,
        _ => jobs()
            .versions(request(pb::JobVersionsRequest {
                query,
                namespace: namespace.to_string(),
                job_id: job_id.to_string(),
            }))
            .await
            .map_err(JobReadError::Rpc)?
            .into_inner()
            .versions
            .into_iter()
            .find(|j| j.version == version)
            .ok_or_else(|| JobReadError::NoVersion {
                job_id: job_id.to_string(),
                version,
            })?,
    };
    Job::try_from(wire).map_err(|e| JobReadError::Invalid(e.to_string()))
}

/// Follows the servers' allocation list for this node until the task is aborted,
/// reconnecting (and failing over) whenever the stream breaks.
pub async fn watch(
    supervisor: Arc<Mutex<Supervisor>>,
    servers: Arc<Servers>,
    identity: NodeIdentity,
) {
    let mut failures: u32 = 0;
    // Kept across reconnects: a new stream starts from what this node already holds.
    let mut held = HeldAllocs::default();
    loop {
        match servers
            .nodes()
            .watch_allocations(watch_request(&identity, &held))
            .await
        {
            Ok(resp) => {
                failures = 0;
                let mut stream = resp.into_inner();
                let mut last: Option<(Vec<Allocation>, u64)> = None;
                let mut retry = false;
                loop {
                    tokio::select! {
                        msg = stream.message() => match msg {
                            Ok(Some(msg)) => {
                                let allocs = held.apply(msg.allocations, &msg.removed, msg.complete);
                                retry = supervisor.lock().await.apply(&allocs, msg.index).await;
                                last = Some((allocs, msg.index));
                            }
                            Ok(None) => break,
                            Err(status) => {
                                tracing::warn!(code = ?status.code(), message = status.message(), "allocation watch broke; reconnecting");
                                servers.on_error(&status);
                                break;
                            }
                        },
                        () = tokio::time::sleep(RETRY_PENDING), if retry => {
                            if let Some((allocs, index)) = &last {
                                retry = supervisor.lock().await.apply(allocs, *index).await;
                            }
                        }
                    }
                }
            }
            Err(status) => {
                failures = failures.saturating_add(1);
                servers.on_error(&status);
                tracing::debug!(code = ?status.code(), message = status.message(), "cannot watch allocations yet");
            }
        }
        let wait = Duration::from_millis(100) * (1 << failures.min(4));
        tokio::time::sleep(wait.min(Duration::from_secs(2))).await;
    }
}

/// A new stream's request: it names what this node holds, so the stream starts with only
/// what differs.
fn watch_request(identity: &NodeIdentity, held: &HeldAllocs) -> pb::WatchAllocationsRequest {
    pb::WatchAllocationsRequest {
        auth: Some(auth(identity)),
        min_index: 0,
        known: held.known(),
    }
}

/// The servers' allocation set for this node, kept from the watch's messages: the first is
/// the whole set (or, on a stream opened with [`HeldAllocs::known`], what differs from it),
/// each later one only what changed.
#[derive(Debug, Default)]
struct HeldAllocs {
    by_id: BTreeMap<AllocId, Allocation>,
}

impl HeldAllocs {
    /// What a new stream is told this node holds, so its first message is only the
    /// difference.
    fn known(&self) -> Vec<pb::KnownAllocation> {
        self.by_id
            .values()
            .map(|a| known_allocation(a.id, a.alloc_modify_index))
            .collect()
    }

    /// Applies one message and returns the whole set as it now is. Allocations that do not
    /// decode are skipped (and logged) rather than letting one bad message stop the node.
    fn apply(
        &mut self,
        changed: Vec<pb::Allocation>,
        removed: &[String],
        complete: bool,
    ) -> Vec<Allocation> {
        if complete {
            self.by_id.clear();
        }
        for id in removed {
            match id.parse::<AllocId>() {
                Ok(id) => {
                    self.by_id.remove(&id);
                }
                Err(e) => {
                    tracing::warn!(alloc_id = %id, error = %e, "skipping an undecodable removed id")
                }
            }
        }
        for a in changed {
            let id = a.id.clone();
            match Allocation::try_from(a) {
                Ok(a) => {
                    self.by_id.insert(a.id, a);
                }
                Err(e) => {
                    tracing::warn!(alloc_id = %id, error = %e, "skipping undecodable allocation")
                }
            }
        }
        self.by_id.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::mock;

    fn wire(n: u64, modify_index: u64) -> pb::Allocation {
        let job = mock::service_job("web", 3);
        let mut a = mock::alloc(n, &job, mock::node_id(0), n as u32);
        a.modify_index = modify_index;
        pb::Allocation::from(&a)
    }

    fn held(set: &[Allocation]) -> Vec<(AllocId, u64)> {
        set.iter().map(|a| (a.id, a.modify_index)).collect()
    }

    /// A complete message replaces the set; a delta updates, adds and removes only what it
    /// names; a bad id or allocation is skipped without losing the rest.
    #[test]
    fn held_allocations_follow_complete_sets_and_deltas() {
        let id = mock::alloc_id;
        let mut h = HeldAllocs::default();
        let set = h.apply(vec![wire(1, 5), wire(2, 5)], &[], true);
        assert_eq!(held(&set), [(id(1), 5), (id(2), 5)]);
        let set = h.apply(vec![wire(2, 7), wire(3, 7)], &[id(1).to_string()], false);
        assert_eq!(held(&set), [(id(2), 7), (id(3), 7)]);
        let mut bad = wire(4, 8);
        bad.id = "not-an-id".into();
        let set = h.apply(vec![bad], &["also-bad".to_string()], false);
        assert_eq!(held(&set), [(id(2), 7), (id(3), 7)]);
        let set = h.apply(vec![wire(9, 9)], &[], true);
        assert_eq!(held(&set), [(id(9), 9)]);
    }

    /// A reconnecting stream is told each held allocation with the server index it was
    /// sent at (not the index of the node's own reports).
    #[test]
    fn a_new_stream_is_told_what_is_held() {
        let identity = NodeIdentity {
            node_id: mock::node_id(0),
            secret_id: "s".into(),
        };
        let mut h = HeldAllocs::default();
        assert!(
            watch_request(&identity, &h).known.is_empty(),
            "nothing held: the first message is the whole set"
        );
        let mut a = wire(2, 30);
        a.alloc_modify_index = 12;
        h.apply(vec![wire(1, 5), a], &[], true);
        let req = watch_request(&identity, &h);
        assert_eq!(
            req.auth.map(|a| a.node_id),
            Some(mock::node_id(0).to_string())
        );
        let known: Vec<(String, u64)> = req
            .known
            .into_iter()
            .map(|k| (k.id, k.alloc_modify_index))
            .collect();
        let expected = [(1, 0), (2, 12)].map(|(n, i)| (mock::alloc_id(n).to_string(), i));
        assert_eq!(known, expected);
    }
}
