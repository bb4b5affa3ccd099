//! From a task to a running process or container: the driver's check, the task's cgroup
//! and limits, `exec`'s root, then the driver's start; a docker task's container instead.

use super::{RunnerContext, TaskDirs};
use crate::cgroups::TaskCgroup;
use crate::cgroups::limits::Limits;
use crate::driver::docker::{ContainerSpec, DockerDriver, DockerError};
use crate::driver::{self, DriverError, ExitOutcome, LogPaths, ShimLaunch, TaskHandle, TaskLaunch};
use crate::isolation::{Isolation, mounts};
use crate::users::TaskUser;
use drover_core::types::{AllocId, AllocatedPort, Task};
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
    // A container's user is the image's to know (its `user` goes to the engine as is).
    if task.driver == "docker" {
        return Ok(None);
    }
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

/// The directories as the task sees them: its own root for `exec` and `docker` (whose
/// container gets the shared dir at `/alloc` and its local dir at `/local`), the host's
/// otherwise.
pub fn visible_dirs(task: &Task, dirs: &TaskDirs) -> TaskDirs {
    if !matches!(task.driver.as_str(), "exec" | "docker") {
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
    pub alloc_id: AllocId,
    pub task: &'a Task,
    pub env: &'a BTreeMap<String, String>,
    pub user: Option<&'a TaskUser>,
    pub dirs: &'a TaskDirs,
    pub logs: &'a LogPaths,
    pub cgroup: Option<&'a TaskCgroup>,
    /// The allocation's ports.
    pub ports: &'a [AllocatedPort],
}

/// Starts the task once.
pub async fn start(s: Start<'_>) -> Result<TaskHandle, DriverError> {
    let drivers = &s.ctx.drivers;
    drivers.check(&s.task.driver)?;
    if s.task.driver == "docker" {
        return start_container(&s).await;
    }
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

/// The node's engine; a docker task reaches here only when the fingerprint found one.
fn engine(ctx: &RunnerContext) -> Result<&DockerDriver, DriverError> {
    ctx.drivers
        .docker
        .as_ref()
        .ok_or_else(|| DriverError::Unavailable {
            driver: "docker".into(),
            reason: "no docker engine answered the fingerprint".into(),
        })
}

/// The allocation's ports `labels` names, in that order; a label it does not hold is the
/// job's mistake (validation refuses one the group lacks).
fn published_ports(
    labels: &[String],
    held: &[AllocatedPort],
) -> Result<Vec<AllocatedPort>, DockerError> {
    labels
        .iter()
        .map(|label| {
            held.iter()
                .find(|p| p.label == *label)
                .cloned()
                .ok_or_else(|| DockerError::Port {
                    label: label.clone(),
                    held: held
                        .iter()
                        .map(|p| p.label.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
        })
        .collect()
}

/// Starts a docker task's container with the task's limits, its allocation's shared dir at
/// `/alloc`, its local dir at `/local` and the group ports its `config.ports` names.
async fn start_container(s: &Start<'_>) -> Result<TaskHandle, DriverError> {
    let extra = &s.task.config.extra;
    let ports = published_ports(&s.task.config.ports, s.ports)?;
    let alloc_id = s.alloc_id.to_string();
    let spec = ContainerSpec {
        alloc_id: &alloc_id,
        task: &s.task.name,
        image: extra.get("image").map_or("", String::as_str),
        command: &s.task.config.command,
        args: &s.task.config.args,
        env: s.env,
        user: s.task.user.clone(),
        memory_mb: s.task.resources.memory_mb,
        cpu_mhz: s.task.resources.cpu_mhz,
        pids_limit: s.ctx.drivers.pids_limit,
        network_mode: extra.get("network_mode").map(String::as_str),
        binds: vec![
            format!("{}:/alloc", s.dirs.shared.display()),
            format!("{}:/local", s.dirs.local.display()),
        ],
        ports,
    };
    let container = engine(s.ctx)?.start(&spec, s.logs).await?;
    Ok(TaskHandle::Docker(Box::new(container)))
}

/// A docker task's container after an agent restart (see [`DockerDriver::reattach`]).
pub async fn reattach_container(
    ctx: &RunnerContext,
    alloc_id: AllocId,
    task: &Task,
    logs: &LogPaths,
) -> Result<Option<Result<TaskHandle, ExitOutcome>>, DriverError> {
    let found = engine(ctx)?
        .reattach(&alloc_id.to_string(), &task.name, logs)
        .await?;
    Ok(found.map(|r| r.map(|c| TaskHandle::Docker(Box::new(c)))))
}

/// Removes a docker task's container once the task is over for good.
pub async fn remove_container(ctx: &RunnerContext, alloc_id: AllocId, task: &Task) {
    if task.driver != "docker" {
        return;
    }
    if let Ok(engine) = engine(ctx) {
        let name = DockerDriver::container_name(&alloc_id.to_string(), &task.name);
        if let Err(e) = engine.remove(&name).await {
            tracing::warn!(container = %name, error = %e, "cannot remove container");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(label: &str, value: u16, to: u16) -> AllocatedPort {
        AllocatedPort {
            label: label.into(),
            value,
            to,
            host_ip: "127.0.0.1".parse().expect("ip"),
        }
    }

    #[test]
    fn a_docker_task_publishes_the_ports_it_names_and_refuses_others() {
        let held = [port("http", 21000, 80), port("admin", 21001, 0)];
        let labels = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let picked = published_ports(&labels(&["admin", "http"]), &held).expect("held ports");
        assert_eq!(picked, [held[1].clone(), held[0].clone()]);
        assert_eq!(published_ports(&[], &held).expect("none"), []);
        let err = published_ports(&labels(&["http", "metrics"]), &held).expect_err("metrics");
        assert_eq!(
            err.to_string(),
            "port \"metrics\" is not among the allocation's ports [http, admin]"
        );
        assert!(!err.is_infra());
    }
}
