//! From a task to a running process: the driver's check, the task's cgroup and limits,
//! `exec`'s root, then the driver's start.

use super::{RunnerContext, TaskDirs};
use crate::cgroups::TaskCgroup;
use crate::cgroups::limits::Limits;
use crate::driver::{self, DriverError, LogPaths, ShimLaunch, TaskHandle, TaskLaunch};
use crate::isolation::{Isolation, mounts};
use crate::users::TaskUser;
use drover_core::types::{AllocId, Task};
use std::collections::BTreeMap;

/// The user an `exec` task runs as when neither it nor the agent names one (Nomad's).
pub const EXEC_DEFAULT_USER: &str = "nobody";

/// The cgroup of `task`, when its driver runs tasks in one on this node.
pub fn task_cgroup(ctx: &RunnerContext, alloc_id: AllocId, task: &Task) -> Option<TaskCgroup> {
    let drivers = &ctx.drivers;
    let cgroups = drivers.cgroups.as_ref()?;
    let wanted = match task.driver.as_str() {
        "exec" => true,
        "raw_exec" => drivers.raw_exec_cgroups,
        _ => false,
    };
    wanted.then(|| cgroups.task(&alloc_id.to_string(), &task.name))
}

/// Who `task` runs as: its own `user`, else the agent's `default_user`, else `nobody` for
/// `exec`, else the agent's own user.
pub fn task_user(ctx: &RunnerContext, task: &Task) -> Result<Option<TaskUser>, DriverError> {
    if let Some(name) = &task.user {
        return Ok(Some(crate::users::lookup(name)?));
    }
    if let Some(user) = &ctx.default_user {
        return Ok(Some(user.clone()));
    }
    if task.driver == "exec" {
        return Ok(Some(crate::users::lookup(EXEC_DEFAULT_USER)?));
    }
    Ok(None)
}

/// The directories as the task sees them: its own root for `exec`, the host's otherwise.
pub fn visible_dirs(task: &Task, dirs: &TaskDirs) -> TaskDirs {
    if task.driver != "exec" {
        return dirs.clone();
    }
    TaskDirs {
        alloc: "/".into(),
        shared: "/alloc".into(),
        logs: "/alloc/logs".into(),
        work: "/".into(),
        local: "/local".into(),
    }
}

/// Everything one start needs.
#[derive(Debug)]
pub struct Start<'a> {
    pub ctx: &'a RunnerContext,
    pub task: &'a Task,
    pub env: &'a BTreeMap<String, String>,
    pub user: Option<&'a TaskUser>,
    pub dirs: &'a TaskDirs,
    pub logs: &'a LogPaths,
    pub cgroup: Option<&'a TaskCgroup>,
}

/// Starts the task once.
pub async fn start(s: Start<'_>) -> Result<TaskHandle, DriverError> {
    let drivers = &s.ctx.drivers;
    drivers.check(&s.task.driver)?;
    if let Some(cgroup) = s.cgroup {
        let limits = Limits {
            memory_mb: s.task.resources.memory_mb,
            cpu_mhz: s.task.resources.cpu_mhz,
            pids: drivers.pids_limit,
        };
        cgroup.create(&limits).map_err(DriverError::Cgroup)?;
    }
    let isolation = (s.task.driver == "exec").then(|| Isolation {
        root: s.dirs.work.clone(),
        mounts: mounts::plan(
            &s.dirs.work,
            &mounts::host_entries(&drivers.chroot_env),
            &s.dirs.shared,
        ),
        hostname: s.task.name.clone(),
    });
    let shim = (s.cgroup.is_some() || isolation.is_some()).then(|| ShimLaunch {
        path: &drivers.shim,
        cgroup_procs: s.cgroup.map(TaskCgroup::procs_files).unwrap_or_default(),
        isolation,
    });
    let launch = TaskLaunch {
        command: &s.task.config.command,
        args: &s.task.config.args,
        env: s.env,
        user: s.user,
        task_dir: &s.dirs.work,
        logs: s.logs,
        shim,
    };
    driver::start(&launch).await
}
