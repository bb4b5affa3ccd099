//! One task's supervisor: starts the process (or keeps watching the one re-attached after an
//! agent restart), applies the restart policy when it exits, kills it when told to, and
//! hands every state change (with its task event) to the allocation's supervisor.

use super::artifact::Target;
use super::lifecycle::Gate;
use super::restart::{RestartTracker, Verdict};
use super::templates::{Change, RERENDER_EVERY, TaskTemplates};
use super::usage::UsageSource;
use super::{RunnerContext, TaskDirs};
use crate::cgroups::TaskCgroup;
use crate::driver::{self, ExitOutcome, LogPaths, TaskHandle};
use crate::state::TaskRecord;
use drover_core::types::{
    MAX_TASK_EVENTS, RestartPolicy, Task, TaskEvent, TaskRunState, Timestamp,
};
use nix::sys::signal::Signal;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, watch};

/// What the allocation's supervisor wants from its tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskCommand {
    /// Do not start anything yet (a restored allocation the servers have not confirmed);
    /// keep watching a re-attached process.
    Hold,
    Run,
    /// Stop for good (the allocation stops, or a sibling task failed).
    Kill,
}

/// One task's new state.
#[derive(Clone, Debug)]
pub struct TaskChange {
    pub name: String,
    pub record: TaskRecord,
    /// This change is a failure that was the node's fault.
    pub infra_failure: bool,
}

/// Everything one task runner needs.
#[derive(Debug)]
pub struct TaskRun {
    pub alloc_id: drover_core::types::AllocId,
    pub task: Task,
    pub env: BTreeMap<String, String>,
    /// Who the task runs as; `None`: the agent's user.
    pub user: Option<crate::users::TaskUser>,
    pub dirs: TaskDirs,
    pub restart: RestartPolicy,
    /// Batch-like jobs: an exit 0 finishes the task instead of restarting it.
    pub runs_to_completion: bool,
    /// When the task's lifecycle hook lets it run (see [`super::lifecycle`]).
    pub gate: watch::Receiver<Gate>,
    /// The state to continue from: fresh, or restored from disk.
    pub record: TaskRecord,
    /// Changes each time an operator asks to restart the task in place.
    pub restarts: watch::Receiver<u64>,
    /// The allocation's namespace: where its templates look services up.
    pub namespace: String,
    /// Changes each time a service check's `check_restart` gives up on the task: a restart
    /// counted against its restart policy, like an exit.
    pub check_restarts: watch::Receiver<u64>,
    /// The allocation's ports (a docker task publishes those its `config.ports` names).
    pub ports: Vec<drover_core::types::AllocatedPort>,
}

pub fn now() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Timestamp::from_millis(ms)
}

/// The signal a task is stopped with: its `kill_signal`, else a driver config's
/// `kill_signal` (other drivers' settings are kept in `config.extra`), else SIGTERM.
pub fn kill_signal(task: &Task) -> Signal {
    task.kill_signal
        .as_deref()
        .or_else(|| task.config.extra.get("kill_signal").map(String::as_str))
        .and_then(driver::process::parse_signal)
        .unwrap_or(Signal::SIGTERM)
}

struct Runner {
    name: String,
    record: TaskRecord,
    updates: mpsc::UnboundedSender<TaskChange>,
}

impl Runner {
    fn event(&mut self, kind: &str, message: String, exit_code: Option<i32>, infra: bool) {
        let events = &mut self.record.state.events;
        events.push(
            TaskEvent::new(now(), kind, message)
                .with_exit_code(exit_code)
                .with_infra_failure(infra),
        );
        if events.len() > MAX_TASK_EVENTS {
            events.drain(..events.len() - MAX_TASK_EVENTS);
        }
    }

    fn send(&self, infra_failure: bool) {
        // The allocation's supervisor outlives its task runners; a closed channel means the
        // agent is shutting down, when there is no one left to tell.
        let _ = self.updates.send(TaskChange {
            name: self.name.clone(),
            record: self.record.clone(),
            infra_failure,
        });
    }

    fn finish(&mut self, failed: bool) {
        self.record.process = None;
        self.record.state.state = TaskRunState::Dead;
        self.record.state.failed = failed;
        self.record.state.finished_at = Some(now());
    }
}

enum Step {
    Start,
    Wait(TaskHandle),
    Exited(ExitOutcome),
    Sleep(Duration),
}

/// Waits for a command other than `Hold`; a closed channel counts as `Kill`.
async fn next_command(commands: &mut watch::Receiver<TaskCommand>) -> TaskCommand {
    match commands.wait_for(|c| *c != TaskCommand::Hold).await {
        Ok(c) => *c,
        Err(_) => TaskCommand::Kill,
    }
}

async fn kill_requested(commands: &mut watch::Receiver<TaskCommand>) {
    let _ = commands.wait_for(|c| *c == TaskCommand::Kill).await;
}

/// Resolves once a sidecar's main tasks have ended (never for other tasks).
async fn sidecar_stop(gate: &mut watch::Receiver<Gate>) {
    if gate.wait_for(|g| *g == Gate::Stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Runs the task to its end, then kills whatever it left in its cgroup and removes it.
/// (An agent that detaches aborts this future: the task and its cgroup stay.)
pub async fn run_task(
    run: TaskRun,
    ctx: Arc<RunnerContext>,
    commands: watch::Receiver<TaskCommand>,
    updates: mpsc::UnboundedSender<TaskChange>,
) {
    let cgroup = super::launch::task_cgroup(&ctx, run.alloc_id, &run.task);
    let (alloc_id, task) = (run.alloc_id, run.task.clone());
    run_steps(run, ctx.clone(), commands, updates, cgroup.clone()).await;
    super::launch::remove_container(&ctx, alloc_id, &task).await;
    if let Some(cgroup) = cgroup {
        let _ = tokio::task::spawn_blocking(move || {
            cgroup.kill_all();
            cgroup.remove();
        })
        .await;
    }
}

async fn run_steps(
    run: TaskRun,
    ctx: Arc<RunnerContext>,
    mut commands: watch::Receiver<TaskCommand>,
    updates: mpsc::UnboundedSender<TaskChange>,
    cgroup: Option<TaskCgroup>,
) {
    let TaskRun {
        alloc_id,
        task,
        env,
        user,
        dirs,
        restart,
        runs_to_completion,
        mut gate,
        record,
        mut restarts,
        mut check_restarts,
        namespace,
        ports,
    } = run;
    restarts.mark_unchanged();
    check_restarts.mark_unchanged();
    let mut me = Runner {
        name: task.name.clone(),
        record,
        updates,
    };
    if me.record.state.state == TaskRunState::Dead {
        return;
    }
    let logs = LogPaths::new(&dirs.logs, &task.name);
    let owner = user.as_ref().map(|u| (u.uid, u.gid));
    let mut inputs = Inputs {
        fetched: false,
        templates: TaskTemplates::new(&task.templates, &dirs.work, owner),
        owner,
    };
    let mut tracker = RestartTracker::new(restart);
    let mut oom_baseline = 0;
    let mut step = match me.record.process.take() {
        Some(p) if p.is_alive() => {
            me.record.process = Some(p);
            me.event(
                "Re-attached",
                format!("re-attached to pid {} after an agent restart", p.pid),
                None,
                false,
            );
            me.send(false);
            Step::Wait(TaskHandle::Adopted(p))
        }
        Some(_) => Step::Exited(ExitOutcome::Unknown(
            "the process ended while the agent was down",
        )),
        None if task.driver == "docker" && me.record.state.state == TaskRunState::Running => {
            match super::launch::reattach_container(&ctx, alloc_id, &task, &logs).await {
                Ok(Some(Ok(handle))) => {
                    me.event(
                        "Re-attached",
                        format!(
                            "re-attached to {} after an agent restart",
                            handle.describe()
                        ),
                        None,
                        false,
                    );
                    me.send(false);
                    Step::Wait(handle)
                }
                Ok(Some(Err(outcome))) => Step::Exited(outcome),
                Ok(None) => Step::Exited(ExitOutcome::Unknown(
                    "the container was removed while the agent was down",
                )),
                Err(e) => {
                    tracing::warn!(task = %me.name, error = %e, "cannot re-attach to the container");
                    Step::Exited(ExitOutcome::Unknown("the engine did not answer"))
                }
            }
        }
        None => {
            if me.record.state.events.is_empty() {
                me.event("Received", "task received by the agent".into(), None, false);
                me.send(false);
            }
            Step::Start
        }
    };
    loop {
        step = match step {
            Step::Start => {
                // Wait for the task's hook to come (unless the allocation is stopped first).
                let go = tokio::select! {
                    g = gate.wait_for(|g| *g != Gate::Wait) => g.is_ok_and(|g| *g == Gate::Open),
                    () = kill_requested(&mut commands) => false,
                };
                // The hook's turn came; the allocation may still have been stopped meanwhile.
                if !go || next_command(&mut commands).await == TaskCommand::Kill {
                    me.finish(false);
                    me.event("Killed", "stopped before it started".into(), None, false);
                    me.send(false);
                    return;
                }
                let run_env = match inputs
                    .prepare(&mut me, &ctx, &task, &dirs, &env, &namespace)
                    .await
                {
                    Ok(run_env) => run_env,
                    Err((kind, message, infra)) => {
                        tracing::warn!(task = %me.name, %message, infra, "task inputs failed");
                        me.finish(true);
                        me.event(kind, message, None, infra);
                        me.send(infra);
                        return;
                    }
                };
                oom_baseline = cgroup.as_ref().map_or(0, TaskCgroup::oom_kills);
                let started = super::launch::start(super::launch::Start {
                    ctx: &ctx,
                    alloc_id,
                    task: &task,
                    env: &run_env,
                    user: user.as_ref(),
                    dirs: &dirs,
                    logs: &logs,
                    cgroup: cgroup.as_ref(),
                    ports: &ports,
                })
                .await;
                match started {
                    Ok(handle) => {
                        let what = handle.describe();
                        me.record.process = handle.record();
                        me.record.state.state = TaskRunState::Running;
                        me.record.state.started_at.get_or_insert_with(now);
                        me.event("Started", format!("task started as {what}"), None, false);
                        if let Some(snapshot) = &task.snapshot {
                            ctx.link.last_snapshot.send_replace(Some(snapshot.clone()));
                        }
                        tracing::info!(task = %me.name, %what, command = %task.config.command, "task started");
                        me.send(false);
                        Step::Wait(handle)
                    }
                    Err(e) => {
                        let infra = e.is_infra();
                        tracing::warn!(task = %me.name, error = %e, infra, "task could not start");
                        me.finish(true);
                        me.event("Driver Failure", e.to_string(), None, infra);
                        me.send(infra);
                        return;
                    }
                }
            }
            Step::Wait(mut handle) => {
                let source = match &handle {
                    TaskHandle::Docker(c) => Some(UsageSource::Container(c.stats())),
                    _ => cgroup.clone().map(UsageSource::Cgroup),
                };
                let mut sampler = super::usage::Sampler::new(source, ctx.mhz_per_core);
                let mut rerender = tokio::time::interval_at(
                    tokio::time::Instant::now() + RERENDER_EVERY,
                    RERENDER_EVERY,
                );
                // Ok(Some(why)): restart in place; Ok(None): stop.
                let killed = loop {
                    tokio::select! {
                        outcome = handle.wait() => break Err(outcome),
                        () = kill_requested(&mut commands) => break Ok(None),
                        () = sidecar_stop(&mut gate) => break Ok(None),
                        Ok(()) = restarts.changed() => {
                            break Ok(Some("restart requested by an operator".to_string()));
                        }
                        Ok(()) = check_restarts.changed() => {
                            let signal = kill_signal(&task);
                            me.event(
                                "Restart Signaled",
                                format!("healthcheck: check_restart limit reached; sent {signal}"),
                                None,
                                false,
                            );
                            me.send(false);
                            // Then it is an exit like any other: the restart policy decides.
                            break Err(handle.kill(signal, task.kill_timeout).await);
                        }
                        usage = sampler.next() => {
                            me.record.state.usage = Some(usage);
                            me.send(false);
                        }
                        _ = rerender.tick(), if !inputs.templates.is_empty() => {
                            if let Some(why) =
                                inputs.rerender(&mut me, &ctx, &env, &namespace, &handle).await
                            {
                                break Ok(Some(why));
                            }
                        }
                    }
                };
                // Usage is reported while the task runs only.
                me.record.state.usage = None;
                match killed {
                    Err(outcome) => Step::Exited(outcome),
                    Ok(Some(why)) => {
                        let signal = kill_signal(&task);
                        me.event(
                            "Restart Signaled",
                            format!("{why}; sent {signal}"),
                            None,
                            false,
                        );
                        me.send(false);
                        let outcome = handle.kill(signal, task.kill_timeout).await;
                        me.record.process = None;
                        me.record.state.restarts += 1;
                        me.record.state.state = TaskRunState::Pending;
                        me.event(
                            "Restarting",
                            format!("task {}; starting again now", outcome.describe()),
                            outcome.exit_code(),
                            false,
                        );
                        me.send(false);
                        Step::Start
                    }
                    Ok(None) => {
                        let signal = kill_signal(&task);
                        me.event(
                            "Killing",
                            format!("sent {signal}; SIGKILL after {:?}", task.kill_timeout),
                            None,
                            false,
                        );
                        me.send(false);
                        let outcome = handle.kill(signal, task.kill_timeout).await;
                        me.finish(false);
                        me.event(
                            "Killed",
                            format!("task {}", outcome.describe()),
                            None,
                            false,
                        );
                        me.send(false);
                        return;
                    }
                }
            }
            Step::Exited(outcome) => {
                me.record.process = None;
                // The OOM killer picks the biggest process, which need not be the task's
                // first one (a shell's pipeline): any OOM kill in its cgroup since it
                // started, and an unsuccessful end, is an OOM kill of the task.
                let oom = matches!(outcome, ExitOutcome::OomKilled(_))
                    || !outcome.success()
                        && cgroup
                            .as_ref()
                            .is_some_and(|c| c.oom_kills() > oom_baseline);
                if oom {
                    // The job's own doing (it used more than it asked for): never the node's.
                    me.event(
                        "OOM Killed",
                        format!(
                            "task used more than its {} MB of memory and was killed by the kernel's OOM killer",
                            task.resources.memory_mb
                        ),
                        None,
                        false,
                    );
                    tracing::info!(task = %me.name, memory_mb = task.resources.memory_mb, "task OOM killed");
                }
                me.event("Terminated", outcome.describe(), outcome.exit_code(), false);
                match tracker.on_exit(now(), outcome.success(), runs_to_completion) {
                    Verdict::Restart(delay) => {
                        me.record.state.restarts += 1;
                        me.record.state.state = TaskRunState::Pending;
                        me.event(
                            "Restarting",
                            format!("restarting in {delay:?}"),
                            None,
                            false,
                        );
                        me.send(false);
                        Step::Sleep(delay)
                    }
                    Verdict::Fail => {
                        me.finish(true);
                        me.event(
                            "Not Restarting",
                            format!(
                                "exceeded {} restart attempts in {:?}",
                                tracker.policy().attempts,
                                tracker.policy().interval
                            ),
                            None,
                            false,
                        );
                        me.send(false);
                        return;
                    }
                    Verdict::Done => {
                        me.finish(false);
                        me.send(false);
                        return;
                    }
                }
            }
            Step::Sleep(delay) => {
                tokio::select! {
                    () = tokio::time::sleep(delay) => Step::Start,
                    Ok(()) = restarts.changed() => Step::Start,
                    () = kill_requested(&mut commands) => {
                        me.finish(false);
                        me.event("Killed", "stopped while waiting to restart".into(), None, false);
                        me.send(false);
                        return;
                    }
                }
            }
        };
    }
}

/// What a task brings into its directory before it starts: artifacts (fetched once) and
/// templates (rendered before every start, and again while it runs).
struct Inputs {
    fetched: bool,
    templates: TaskTemplates,
    owner: Option<(u32, u32)>,
}

impl Inputs {
    /// Fetches the artifacts (the first time) and renders the templates; the environment
    /// the task starts with (its own plus the `env = true` templates'), or the failure's
    /// event kind, message and whether the node is at fault.
    async fn prepare(
        &mut self,
        me: &mut Runner,
        ctx: &RunnerContext,
        task: &Task,
        dirs: &TaskDirs,
        env: &BTreeMap<String, String>,
        namespace: &str,
    ) -> Result<BTreeMap<String, String>, (&'static str, String, bool)> {
        if !self.fetched && !task.artifacts.is_empty() {
            me.event(
                "Downloading Artifacts",
                format!("fetching {} artifact(s)", task.artifacts.len()),
                None,
                false,
            );
            me.send(false);
            for artifact in &task.artifacts {
                let target = Target {
                    task_dir: &dirs.work,
                    alloc_dir: &dirs.alloc,
                    owner: self.owner,
                };
                let placed = ctx.artifacts.fetch(artifact, target).await;
                let placed = placed
                    .map_err(|e| ("Failed Artifact Download", e.to_string(), e.is_infra()))?;
                tracing::info!(task = %me.name, source = %artifact.source, to = %placed.display(), "artifact fetched");
            }
            self.fetched = true;
        }
        let mut run_env = env.clone();
        if !self.templates.is_empty() {
            let lookup = super::templates::TaskLookup {
                values: super::templates::lookup(env, &ctx.node_values),
                catalog: &ctx.catalog,
                namespace,
            };
            let rendered = self
                .templates
                .render(&lookup)
                .map_err(|e| ("Failed Template", e.to_string(), e.is_infra()))?;
            run_env.extend(rendered.env);
        }
        Ok(run_env)
    }

    /// Renders the templates of a running task again; `Some(why)` when a change asks for
    /// a restart. A render that fails leaves the task running with what it has.
    async fn rerender(
        &mut self,
        me: &mut Runner,
        ctx: &RunnerContext,
        env: &BTreeMap<String, String>,
        namespace: &str,
        handle: &TaskHandle,
    ) -> Option<String> {
        let lookup = super::templates::TaskLookup {
            values: super::templates::lookup(env, &ctx.node_values),
            catalog: &ctx.catalog,
            namespace,
        };
        let rendered = match self.templates.render(&lookup) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(task = %me.name, error = %e, "template re-render failed; the task keeps its last render");
                return None;
            }
        };
        if rendered.changed.is_empty() {
            return None;
        }
        let which = rendered.changed.join(", ");
        match rendered.change {
            Some(Change::Restart) => {
                return Some(format!("template {which} changed (change_mode restart)"));
            }
            Some(Change::Signal(signal)) => {
                handle.signal(signal).await;
                me.event(
                    "Signaling",
                    format!("template {which} changed; sent {signal}"),
                    None,
                    false,
                );
            }
            None => me.event(
                "Template Re-rendered",
                format!("template {which} changed (change_mode noop)"),
                None,
                false,
            ),
        }
        me.send(false);
        None
    }
}
