//! One allocation's supervisor: creates its directories, runs one task runner per task,
//! folds their changes into the allocation's client status, persists every change before
//! reporting it (so what the servers hear is never ahead of what a restarted agent knows),
//! rotates the task logs, and stops the tasks when the servers stop the allocation or one
//! task fails.

use super::job_inputs::{meta_env, write_payload};
use super::lifecycle::{self, Gate, Role};
use super::task::{TaskChange, TaskCommand, TaskRun, run_task};
use super::{RunnerContext, TaskDirs, alloc_status, task_env};
use crate::checks::{AllocChecks, CheckResult, TaskContext};
use crate::driver::LogPaths;
use crate::driver::logs::rotate_if_needed;
use crate::state::{AllocRecord, DeploymentWatch};
use drover_core::client_report::health::{self, ChecksGate, HealthGate, Verdict};
use drover_core::fsm::AllocClientUpdate;
use drover_core::types::{
    AllocId, ClientStatus, HealthCheck, TaskEvent, TaskGroup, TaskRunState, TaskStates,
};
use drover_proto::convert::ClientAllocUpdate;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

/// How often task logs are checked against the size limit.
const ROTATE_EVERY: Duration = Duration::from_secs(1);

/// What the servers want for an allocation, as far as the agent knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Desired {
    /// Restored from disk after an agent restart, not yet seen in the servers' list: keep
    /// watching live processes but start nothing (the servers may have stopped it).
    Unconfirmed,
    Run,
    Stop,
}

/// An in-place update: the new job version, its group, and the deployment that moved the
/// allocation to it (whose health the agent then decides anew).
pub type InPlace = (u64, TaskGroup, Option<DeploymentWatch>);

/// The handle the agent keeps per allocation.
#[derive(Debug)]
pub struct AllocRunner {
    id: AllocId,
    desired: watch::Sender<Desired>,
    in_place: mpsc::UnboundedSender<InPlace>,
    job_version: u64,
    /// The newest status this allocation reported.
    latest: watch::Receiver<Option<ClientAllocUpdate>>,
    /// Set once the servers consider the allocation over: its updates are no longer sent.
    silenced: Arc<AtomicBool>,
    /// Per task, the restart requests it follows (a counter bumped per request).
    restarts: BTreeMap<String, watch::Sender<u64>>,
    join: JoinHandle<()>,
}

impl AllocRunner {
    pub fn start(ctx: Arc<RunnerContext>, record: AllocRecord, desired: Desired) -> Self {
        let id = record.alloc.id;
        let job_version = record.alloc.job_version;
        let (desired_tx, desired_rx) = watch::channel(desired);
        let (in_place_tx, in_place_rx) = mpsc::unbounded_channel();
        let (latest_tx, latest_rx) = watch::channel(None);
        let silenced = Arc::new(AtomicBool::new(false));
        let restarts: BTreeMap<String, watch::Sender<u64>> = record
            .group
            .tasks
            .iter()
            .map(|t| (t.name.clone(), watch::channel(0).0))
            .collect();
        let followers = restarts
            .iter()
            .map(|(name, tx)| (name.clone(), tx.subscribe()))
            .collect();
        let publisher = Publisher {
            ctx: ctx.clone(),
            latest: latest_tx,
            silenced: silenced.clone(),
        };
        let channels = Channels {
            desired: desired_rx,
            in_place: in_place_rx,
            restarts: followers,
        };
        let join = tokio::spawn(run_alloc(ctx, record, channels, publisher));
        Self {
            id,
            desired: desired_tx,
            in_place: in_place_tx,
            job_version,
            latest: latest_rx,
            silenced,
            restarts,
            join,
        }
    }

    /// The allocation's task names.
    pub fn tasks(&self) -> impl Iterator<Item = &str> {
        self.restarts.keys().map(String::as_str)
    }

    /// Restarts `task` (or every task) in place if it is running; returns the tasks asked.
    pub fn restart(&self, task: Option<&str>) -> Vec<String> {
        let running = |name: &str| {
            self.latest.borrow().as_ref().is_some_and(|l| {
                l.update
                    .task_states
                    .get(name)
                    .is_some_and(|s| s.state == TaskRunState::Running)
            })
        };
        let mut restarted = Vec::new();
        for (name, tx) in &self.restarts {
            if task.is_none_or(|t| t == name) && running(name) {
                tx.send_modify(|n| *n += 1);
                restarted.push(name.clone());
            }
        }
        restarted
    }

    pub fn id(&self) -> AllocId {
        self.id
    }

    pub fn set_desired(&self, desired: Desired) {
        self.desired.send_if_modified(|d| {
            let changed = *d != desired;
            *d = desired;
            changed
        });
    }

    pub fn job_version(&self) -> u64 {
        self.job_version
    }

    /// Applies a new job version whose changes do not need a restart.
    pub fn update_in_place(
        &mut self,
        job_version: u64,
        group: TaskGroup,
        deployment: Option<DeploymentWatch>,
    ) {
        self.job_version = job_version;
        let _ = self.in_place.send((job_version, group, deployment));
    }

    pub fn latest(&self) -> Option<ClientAllocUpdate> {
        self.latest.borrow().clone()
    }

    /// Stops reporting this allocation (and drops what is pending): the servers have
    /// already decided its fate.
    pub fn silence(&self) {
        self.silenced.store(true, Ordering::Relaxed);
    }

    /// Whether every task has ended and the final status was recorded.
    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }

    /// Waits for the tasks to end (after `set_desired(Stop)`, at most their kill timeouts).
    pub async fn join(self) {
        let _ = self.join.await;
    }

    /// Stops supervising without touching the processes, which keep running and are
    /// re-attached by the next agent start.
    pub fn detach(self) {
        self.join.abort();
    }
}

struct Publisher {
    ctx: Arc<RunnerContext>,
    latest: watch::Sender<Option<ClientAllocUpdate>>,
    silenced: Arc<AtomicBool>,
}

impl Publisher {
    /// Persists the record, then reports its status, with its service registrations while
    /// it runs (none otherwise, which takes them out of the catalog).
    fn publish(&self, record: &mut AllocRecord, checks: &AllocChecks) {
        let states = record
            .tasks
            .iter()
            .map(|(k, t)| (k.as_str(), t.state.clone()))
            .collect::<TaskStates>();
        let (status, description) = alloc_status(&states);
        record.client_status = status;
        record.client_description = description.to_string();
        if let Err(e) = self.ctx.store.save_alloc(record) {
            tracing::error!(alloc_id = %record.alloc.id, error = %e, "cannot persist allocation state");
        }
        let update = ClientAllocUpdate {
            update: AllocClientUpdate {
                deployment_health: record.deployment.as_ref().and_then(|d| d.healthy),
                alloc_id: record.alloc.id,
                client_status: status,
                client_description: description.into(),
                task_states: states,
            },
            infra_failure: record.infra_failure && status == ClientStatus::Failed,
            services: (!checks.is_empty()).then(|| {
                if status == ClientStatus::Running {
                    checks.registrations()
                } else {
                    Vec::new()
                }
            }),
        };
        self.latest.send_replace(Some(update.clone()));
        if self.silenced.load(Ordering::Relaxed) {
            self.ctx.reporter.forget(record.alloc.id);
        } else {
            self.ctx.reporter.submit(update);
        }
    }
}

fn command_for(desired: Desired) -> TaskCommand {
    match desired {
        Desired::Unconfirmed => TaskCommand::Hold,
        Desired::Run => TaskCommand::Run,
        Desired::Stop => TaskCommand::Kill,
    }
}

/// What an allocation's supervisor listens to.
struct Channels {
    desired: watch::Receiver<Desired>,
    in_place: mpsc::UnboundedReceiver<InPlace>,
    restarts: BTreeMap<String, watch::Receiver<u64>>,
}

async fn run_alloc(
    ctx: Arc<RunnerContext>,
    mut record: AllocRecord,
    channels: Channels,
    publisher: Publisher,
) {
    let Channels {
        mut desired,
        mut in_place,
        restarts,
    } = channels;
    let alloc_id = record.alloc.id;
    let alloc_dir = ctx.alloc_dir(alloc_id);
    let runs_to_completion = record.alloc.job_type.runs_to_completion();
    let (commands, _) = watch::channel(command_for(*desired.borrow()));
    let (changes_tx, mut changes) = mpsc::unbounded_channel::<TaskChange>();
    let mut tasks = JoinSet::new();
    let mut log_paths = Vec::new();
    let roles: BTreeMap<String, Role> = record
        .group
        .tasks
        .iter()
        .map(|t| (t.name.clone(), Role::of(t)))
        .collect();
    let gates: BTreeMap<String, watch::Sender<Gate>> = lifecycle::gates(&roles, &states(&record))
        .into_iter()
        .map(|(name, gate)| (name, watch::channel(gate).0))
        .collect();
    let mut check_restarts: BTreeMap<String, watch::Sender<u64>> = BTreeMap::new();
    let mut contexts: BTreeMap<String, TaskContext> = BTreeMap::new();
    for task in record.group.tasks.clone() {
        let dirs = TaskDirs::new(&alloc_dir, &task.name);
        let entry = record.tasks.entry(task.name.clone()).or_default();
        let user = match super::launch::task_user(&ctx, &task) {
            Ok(user) => user,
            Err(e) => {
                // The job names a user this node lacks: the job's fault.
                tracing::warn!(%alloc_id, task = %task.name, error = %e, "task cannot start");
                entry.state.state = TaskRunState::Dead;
                entry.state.failed = true;
                entry.state.events.push(TaskEvent::new(
                    super::task::now(),
                    "Driver Failure",
                    e.to_string(),
                ));
                commands.send_replace(TaskCommand::Kill);
                continue;
            }
        };
        let owner = user.as_ref().map(|u| (u.uid, u.gid));
        let prepared = dirs
            .create(owner)
            .and_then(|()| match &task.dispatch_payload {
                Some(file) => write_payload(&dirs.local, file, &record.alloc.payload, owner),
                None => Ok(()),
            });
        if let Err(e) = prepared {
            // The node's fault: it cannot give the task a place to run.
            tracing::warn!(%alloc_id, task = %task.name, error = %e, "cannot create task directories");
            entry.state.state = TaskRunState::Dead;
            entry.state.failed = true;
            entry.state.events.push(
                TaskEvent::new(
                    super::task::now(),
                    "Setup Failure",
                    format!("cannot create alloc dir {}: {e}", dirs.work.display()),
                )
                .with_infra_failure(true),
            );
            record.infra_failure = true;
            commands.send_replace(TaskCommand::Kill);
            continue;
        }
        log_paths.push(LogPaths::new(&dirs.logs, &task.name));
        let mut own = meta_env(&record.alloc.job_meta, &record.group.meta, &task.meta);
        own.extend(task.env.clone());
        let env = task_env(
            &record.alloc,
            &record.group.name,
            &task.name,
            &super::launch::visible_dirs(&task, &dirs),
            &own,
        );
        let task = super::interpolate_task(task, &env);
        contexts.insert(
            task.name.clone(),
            TaskContext {
                env: env.clone(),
                dir: Some(dirs.work.clone()),
            },
        );
        let (check_restart_tx, check_restart_rx) = watch::channel(0);
        check_restarts.insert(task.name.clone(), check_restart_tx);
        let run = TaskRun {
            alloc_id,
            env,
            user,
            dirs,
            restart: task
                .restart
                .clone()
                .unwrap_or_else(|| record.group.restart.clone()),
            runs_to_completion: runs_to_completion || Role::of(&task).runs_once(),
            gate: gates
                .get(&task.name)
                .map(watch::Sender::subscribe)
                .unwrap_or_else(|| watch::channel(Gate::Open).1),
            record: entry.clone(),
            restarts: restarts
                .get(&task.name)
                .cloned()
                .unwrap_or_else(|| watch::channel(0).1),
            check_restarts: check_restart_rx,
            namespace: record.alloc.namespace.clone(),
            ports: record.alloc.ports.to_vec(),
            task,
        };
        tasks.spawn(run_task(
            run,
            ctx.clone(),
            commands.subscribe(),
            changes_tx.clone(),
        ));
    }
    drop(changes_tx);
    let node_id = crate::checks::node_id_of(&ctx.node_values).unwrap_or_else(|| {
        // The servers set the registration's node from the report's; this is a stand-in.
        drover_core::types::NodeId::from_bytes([0; 16])
    });
    let mut checks = AllocChecks::plan(
        &record.alloc,
        &record.group,
        node_id,
        &contexts,
        super::task::now(),
    );
    let (mut results_tx, mut results) = mpsc::unbounded_channel::<CheckResult>();
    // Checks start once the allocation runs, and stop with this supervisor.
    let mut running_checks: Option<JoinSet<()>> = None;
    let mut started: BTreeMap<String, tokio::time::Instant> = BTreeMap::new();
    publisher.publish(&mut record, &checks);
    let health_sleep = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(health_sleep);
    // Since when the checks that gate updates have all passed (none: they do not now).
    let mut checks_since = checks.pass_for_updates().then(super::task::now);
    let mut health_armed = watch_health(
        &mut record,
        &publisher,
        &checks,
        checks_since,
        health_sleep.as_mut(),
    );

    let mut rotate = tokio::time::interval(ROTATE_EVERY);
    let mut desired_open = true;
    let mut changes_open = true;
    loop {
        tokio::select! {
            change = changes.recv(), if changes_open => {
                let Some(change) = change else {
                    changes_open = false;
                    continue;
                };
                if change.record.state.state == TaskRunState::Running
                    && record
                        .tasks
                        .get(&change.name)
                        .is_none_or(|t| t.state.state != TaskRunState::Running)
                {
                    started.insert(change.name.clone(), tokio::time::Instant::now());
                    checks.task_started(&change.name);
                }
                apply_change(&mut record, change, &commands);
                update_gates(&roles, &gates, &record);
                if running_checks.is_none()
                    && !checks.is_empty()
                    && alloc_status(&states_of(&record)).0 == ClientStatus::Running
                {
                    running_checks = Some(checks.spawn(results_tx.clone(), ctx.checks_http.clone()));
                }
                publisher.publish(&mut record, &checks);
                health_armed = watch_health(&mut record, &publisher, &checks, checks_since, health_sleep.as_mut());
            }
            () = &mut health_sleep, if health_armed => {
                health_armed = watch_health(&mut record, &publisher, &checks, checks_since, health_sleep.as_mut());
            }
            Some(result) = results.recv() => {
                let (changed, restart) =
                    checks.record(&result, &started, tokio::time::Instant::now(), super::task::now());
                for task in restart {
                    tracing::info!(%alloc_id, %task, output = %result.outcome.output, "check_restart: restarting the task");
                    if let Some(tx) = check_restarts.get(&task) {
                        tx.send_modify(|n| *n += 1);
                    }
                }
                if changed {
                    tracing::info!(%alloc_id, check_status = result.outcome.health.as_str(), health = checks.health().as_str(), output = %result.outcome.output, "check status changed");
                    publisher.publish(&mut record, &checks);
                }
                let pass = checks.pass_for_updates();
                if pass != checks_since.is_some() {
                    checks_since = pass.then(super::task::now);
                    health_armed = watch_health(&mut record, &publisher, &checks, checks_since, health_sleep.as_mut());
                }
            }
            res = desired.changed(), if desired_open => {
                if res.is_err() {
                    // The agent detached from this allocation; its tasks carry on.
                    desired_open = false;
                    continue;
                }
                let wanted = command_for(*desired.borrow_and_update());
                commands.send_if_modified(|c| {
                    // Kill is final; Hold never replaces Run.
                    let next = match (*c, wanted) {
                        (TaskCommand::Kill, _) | (_, TaskCommand::Hold) => *c,
                        (_, w) => w,
                    };
                    let changed = next != *c;
                    *c = next;
                    changed
                });
            }
            update = in_place.recv() => {
                if let Some((version, group, deployment)) = update {
                    tracing::info!(%alloc_id, job_version = version, "allocation updated in place");
                    record.alloc.job_version = version;
                    let services_changed = services_of(&record.group) != services_of(&group);
                    record.group = group;
                    if deployment.is_some() {
                        record.deployment = deployment;
                    }
                    if services_changed {
                        // Services change in place (Nomad does the same): the new version's
                        // registrations and checks replace the old, whose pending results
                        // are dropped with their channel.
                        tracing::info!(%alloc_id, "services changed; checks planned again");
                        drop(running_checks.take());
                        checks = AllocChecks::plan(&record.alloc, &record.group, node_id, &contexts, super::task::now());
                        (results_tx, results) = mpsc::unbounded_channel::<CheckResult>();
                        if !checks.is_empty()
                            && alloc_status(&states_of(&record)).0 == ClientStatus::Running
                        {
                            running_checks = Some(checks.spawn(results_tx.clone(), ctx.checks_http.clone()));
                        }
                        checks_since = checks.pass_for_updates().then(super::task::now);
                    }
                    publisher.publish(&mut record, &checks);
                    health_armed = watch_health(&mut record, &publisher, &checks, checks_since, health_sleep.as_mut());
                }
            }
            _ = rotate.tick() => {
                for logs in &log_paths {
                    for path in [&logs.stdout, &logs.stderr] {
                        if let Err(e) = rotate_if_needed(path, ctx.log_max_bytes, ctx.log_max_files) {
                            tracing::warn!(path = %path.display(), error = %e, "cannot rotate task log");
                        }
                    }
                }
            }
            joined = tasks.join_next() => {
                if joined.is_none() {
                    break;
                }
            }
        }
    }
    // Every task runner sent its last change before it returned.
    while let Ok(change) = changes.try_recv() {
        apply_change(&mut record, change, &commands);
    }
    drop(running_checks);
    // A task that failed as the loop ended still decides the allocation's health.
    watch_health(
        &mut record,
        &publisher,
        &checks,
        checks_since,
        health_sleep.as_mut(),
    );
    publisher.publish(&mut record, &checks);
    tracing::info!(%alloc_id, status = record.client_status.as_str(), "allocation finished");
}

/// The group's services and its tasks' (what an in-place update may change).
fn services_of(group: &TaskGroup) -> Vec<&drover_core::types::Service> {
    group
        .services
        .iter()
        .chain(group.tasks.iter().flat_map(|t| &t.services))
        .collect()
}

/// The tasks' states as the allocation's status reads them.
fn states_of(record: &AllocRecord) -> TaskStates {
    record
        .tasks
        .iter()
        .map(|(k, t)| (k.as_str(), t.state.clone()))
        .collect()
}

/// Decides the allocation's deployment health once it can be decided, and reports it;
/// otherwise sets `sleep` to when to ask again. True while the sleep is armed.
fn watch_health(
    record: &mut AllocRecord,
    publisher: &Publisher,
    checks: &AllocChecks,
    checks_since: Option<drover_core::types::Timestamp>,
    sleep: std::pin::Pin<&mut tokio::time::Sleep>,
) -> bool {
    let Some(watch) = record.deployment.as_ref().filter(|d| d.healthy.is_none()) else {
        return false;
    };
    let gate = HealthGate {
        min_healthy_time: watch.min_healthy_time,
        healthy_deadline: watch.healthy_deadline,
        since: watch.since,
        checks: match (watch.health_check, checks_since) {
            (HealthCheck::TaskStates, _) => ChecksGate::Ignored,
            (HealthCheck::Checks, Some(at)) => ChecksGate::PassingSince(at),
            (HealthCheck::Checks, None) => ChecksGate::NotPassing,
        },
    };
    let now = super::task::now();
    let verdict = health::assess(record.tasks.values().map(|t| &t.state), gate, now);
    let healthy = match verdict {
        Verdict::Healthy => true,
        Verdict::Unhealthy => false,
        Verdict::Undecided { recheck_at } => {
            sleep.reset(tokio::time::Instant::now() + recheck_at.since(now));
            return true;
        }
    };
    tracing::info!(alloc_id = %record.alloc.id, healthy, "allocation's deployment health decided");
    if let Some(d) = record.deployment.as_mut() {
        d.healthy = Some(healthy);
    }
    publisher.publish(record, checks);
    false
}

/// The tasks' states, by name.
fn states(record: &AllocRecord) -> BTreeMap<String, drover_core::types::TaskState> {
    record
        .tasks
        .iter()
        .map(|(n, t)| (n.clone(), t.state.clone()))
        .collect()
}

/// Opens (or closes) each task's gate as its siblings' states now allow.
fn update_gates(
    roles: &BTreeMap<String, Role>,
    gates: &BTreeMap<String, watch::Sender<Gate>>,
    record: &AllocRecord,
) {
    for (name, gate) in lifecycle::gates(roles, &states(record)) {
        if let Some(tx) = gates.get(&name) {
            tx.send_if_modified(|g| std::mem::replace(g, gate) != gate);
        }
    }
}

fn apply_change(
    record: &mut AllocRecord,
    change: TaskChange,
    commands: &watch::Sender<TaskCommand>,
) {
    if change.infra_failure {
        record.infra_failure = true;
    }
    if change.record.state.failed {
        // One failed task fails the allocation: its siblings are stopped.
        commands.send_replace(TaskCommand::Kill);
    }
    record.tasks.insert(change.name, change.record);
}
