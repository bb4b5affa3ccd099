//! Running allocations: one supervisor per allocation ([`alloc`]) with one per task
//! ([`task`]) under it, the restart policy they follow ([`restart`]), and the directory
//! layout and environment every task gets.

pub mod alloc;
pub mod artifact;
pub mod job_inputs;
pub mod launch;
pub mod lifecycle;
pub mod ports;
pub mod restart;
pub mod task;
pub mod task_files;
pub mod templates;
pub mod usage;

use crate::heartbeat::Link;
use crate::reporter::Reporter;
use crate::state::{AllocInfo, StateStore};
use drover_core::types::{AllocId, ClientStatus, TaskRunState, TaskStates};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use alloc::{AllocRunner, Desired};

/// What every runner shares.
#[derive(Debug)]
pub struct RunnerContext {
    /// `<data_dir>/allocs`: one directory per allocation.
    pub alloc_root: PathBuf,
    pub store: StateStore,
    pub reporter: Reporter,
    pub link: Arc<Link>,
    pub log_max_bytes: u64,
    pub log_max_files: u32,
    /// Who tasks without a `user` run as (the agent's `default_user`); `None`: the agent's
    /// own user.
    pub default_user: Option<crate::users::TaskUser>,
    /// A core's MHz (the fingerprint's `cpu.frequency`): CPU time becomes MHz with it.
    pub mhz_per_core: u64,
    /// The drivers this node runs, their health, and what they share.
    pub drivers: Arc<crate::driver::health::Drivers>,
    /// Fetches tasks' `artifact` sources, within the agent's limits.
    pub artifacts: artifact::Fetcher,
    /// The node's values templates read with `env`: `node.unique.id`, `node.unique.name`,
    /// `node.datacenter`, `node.class`, `attr.<attribute>`, `meta.<key>`.
    pub node_values: Arc<BTreeMap<String, String>>,
    /// The client service checks of type http share (no proxy, no redirects followed).
    pub checks_http: reqwest::Client,
    /// The services this node's templates read (`nomadService`).
    pub catalog: Arc<crate::checks::catalog::ServiceCatalog>,
}

impl RunnerContext {
    pub fn alloc_dir(&self, id: AllocId) -> PathBuf {
        self.alloc_root.join(id.to_string())
    }
}

/// The directories of one task:
/// `<alloc>/alloc` (shared by the group's tasks, `NOMAD_ALLOC_DIR`), `<alloc>/alloc/logs`,
/// `<alloc>/<task>` (the working directory) and `<alloc>/<task>/local` (`NOMAD_TASK_DIR`).
///
/// Modes (the agent's user owns everything unless said otherwise): the allocation dir is
/// 0751, so a task running as another user can reach its own directory by path while no one
/// else can list the allocation; `alloc` is 0750, owned by the task's user when it runs as
/// another one (the tasks of a group share it); `alloc/logs` is 0750 and its files 0640
/// (the task writes through the descriptors the agent opened, so it needs no access of its
/// own); the task's own directories are 0750, owned by the task's user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskDirs {
    pub alloc: PathBuf,
    pub shared: PathBuf,
    pub logs: PathBuf,
    pub work: PathBuf,
    pub local: PathBuf,
}

/// Mode of an allocation's dir: traverse for the task's user, no listing for anyone else.
pub const ALLOC_DIR_MODE: u32 = 0o751;
/// Mode of the shared, log and task dirs: owner and group only.
pub const TASK_DIR_MODE: u32 = 0o750;

impl TaskDirs {
    pub fn new(alloc_dir: &Path, task: &str) -> Self {
        let shared = alloc_dir.join("alloc");
        Self {
            alloc: alloc_dir.to_path_buf(),
            logs: shared.join("logs"),
            shared,
            work: alloc_dir.join(task),
            local: alloc_dir.join(task).join("local"),
        }
    }

    /// Creates the directories with the modes above; `owner` (uid, gid) is the task's
    /// user when it is not the agent's.
    pub fn create(&self, owner: Option<(u32, u32)>) -> std::io::Result<()> {
        use crate::layout::set_mode;
        for d in [
            &self.alloc,
            &self.shared,
            &self.logs,
            &self.work,
            &self.local,
        ] {
            std::fs::create_dir_all(d)?;
        }
        set_mode(&self.alloc, ALLOC_DIR_MODE)?;
        for d in [&self.shared, &self.logs, &self.work, &self.local] {
            set_mode(d, TASK_DIR_MODE)?;
        }
        if let Some((uid, gid)) = owner {
            for d in [&self.shared, &self.work, &self.local] {
                std::os::unix::fs::chown(d, Some(uid), Some(gid))?;
            }
        }
        Ok(())
    }
}

/// `PATH` for every task: the agent's own is never passed on (see [`task_env`]).
pub const TASK_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The whole environment a task starts with: an allow-list, never the agent's own (which
/// holds its join token and whatever else its operator exported). A minimal `PATH` and
/// `HOME` (the task's working dir), then drover's variables under
/// Nomad's names (so job files written for Nomad work) and drover's own, the allocation's
/// ports ([`ports::port_env`]), then the task's own `env` on top.
pub fn task_env(
    alloc: &AllocInfo,
    group: &str,
    task: &str,
    dirs: &TaskDirs,
    own: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let index = alloc
        .name
        .rsplit_once('[')
        .and_then(|(_, rest)| rest.strip_suffix(']'))
        .unwrap_or("0")
        .to_string();
    let pairs = [
        ("ALLOC_DIR", dirs.shared.display().to_string()),
        ("TASK_DIR", dirs.local.display().to_string()),
        ("ALLOC_ID", alloc.id.to_string()),
        ("ALLOC_NAME", alloc.name.clone()),
        ("ALLOC_INDEX", index),
        ("JOB_ID", alloc.job_id.clone()),
        ("JOB_NAME", alloc.job_name.clone()),
        ("NAMESPACE", alloc.namespace.clone()),
        ("GROUP_NAME", group.to_string()),
        ("TASK_NAME", task.to_string()),
        ("DC", alloc.datacenter.clone()),
    ];
    let mut env = BTreeMap::from([
        ("PATH".to_string(), TASK_PATH.to_string()),
        ("HOME".to_string(), dirs.work.display().to_string()),
    ]);
    for (key, value) in pairs {
        env.insert(format!("NOMAD_{key}"), value.clone());
        env.insert(format!("DROVER_{key}"), value);
    }
    env.extend(ports::port_env(&alloc.ports));
    let own: Vec<_> = own
        .iter()
        .map(|(k, v)| (k.clone(), interpolate(v, &env)))
        .collect();
    env.extend(own);
    env
}

/// The task as it runs: `${NAME}` (or Nomad's `${env.NAME}`) in its command, args and env
/// values replaced by the task's environment, as Nomad's client does, so a job file can say
/// `command = "${NOMAD_TASK_DIR}/run.sh"`. Unknown names stay as written.
pub fn interpolate_task(
    mut task: drover_core::types::Task,
    env: &BTreeMap<String, String>,
) -> drover_core::types::Task {
    task.config.command = interpolate(&task.config.command, env);
    for arg in &mut task.config.args {
        *arg = interpolate(arg, env);
    }
    task
}

/// Replaces every `${NAME}` / `${env.NAME}` whose NAME is in `env`; anything else is kept.
pub fn interpolate(text: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = &after[..end];
        match env.get(name.strip_prefix("env.").unwrap_or(name)) {
            Some(value) => out.push_str(value),
            None => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// An allocation's client status from its tasks' states: failed as soon as one task failed,
/// complete once all finished, running while any runs, pending before.
pub fn alloc_status(tasks: &TaskStates) -> (ClientStatus, &'static str) {
    if tasks.values().any(|t| t.failed) {
        (ClientStatus::Failed, "Failed tasks")
    } else if tasks.values().all(|t| t.state == TaskRunState::Dead) {
        (ClientStatus::Complete, "All tasks have completed")
    } else if tasks.values().any(|t| t.state == TaskRunState::Running) {
        (ClientStatus::Running, "Tasks are running")
    } else {
        (ClientStatus::Pending, "No tasks have started")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolate_replaces_known_names_and_keeps_the_rest() {
        let env: BTreeMap<String, String> = [("NOMAD_TASK_DIR", "/a/t/local"), ("X", "1")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cases = [
            ("${NOMAD_TASK_DIR}/run.sh", "/a/t/local/run.sh"),
            ("${env.X}-${X}", "1-1"),
            ("${attr.kernel.name}", "${attr.kernel.name}"),
            ("$HOME and ${", "$HOME and ${"),
            ("no vars", "no vars"),
            ("${UNKNOWN}${X}", "${UNKNOWN}1"),
        ];
        for (text, want) in cases {
            assert_eq!(interpolate(text, &env), want, "{text}");
        }
    }
    use drover_core::mock;
    use drover_core::types::{JobType, TaskState};

    #[test]
    fn alloc_status_follows_the_tasks() {
        let t = |state, failed| TaskState {
            state,
            failed,
            ..TaskState::default()
        };
        use TaskRunState::{Dead, Pending, Running};
        let cases = [
            (
                vec![t(Pending, false), t(Pending, false)],
                ClientStatus::Pending,
            ),
            (
                vec![t(Running, false), t(Pending, false)],
                ClientStatus::Running,
            ),
            (
                vec![t(Running, false), t(Dead, false)],
                ClientStatus::Running,
            ),
            (vec![t(Dead, false), t(Dead, false)], ClientStatus::Complete),
            (vec![t(Running, false), t(Dead, true)], ClientStatus::Failed),
        ];
        for (tasks, want) in cases {
            let map: TaskStates = tasks
                .into_iter()
                .enumerate()
                .map(|(i, s)| (i.to_string(), s))
                .collect();
            assert_eq!(alloc_status(&map).0, want, "{map:?}");
        }
    }

    #[test]
    fn tasks_get_nomad_and_drover_variables_with_their_own_env_on_top() {
        let alloc = AllocInfo {
            id: mock::alloc_id(1),
            name: "web.api[3]".into(),
            namespace: "default".into(),
            job_id: "web".into(),
            job_name: "Web".into(),
            job_type: JobType::Service,
            job_version: 0,
            datacenter: "dc1".into(),
            ports: vec![drover_core::types::AllocatedPort {
                label: "http".into(),
                value: 21042,
                to: 0,
                host_ip: "10.0.0.4".parse().expect("ip"),
            }],
            job_meta: BTreeMap::new(),
            payload: Vec::new(),
        };
        let dirs = TaskDirs::new(Path::new("/d/a1"), "server");
        let own = BTreeMap::from([("NOMAD_DC".to_string(), "mine".to_string())]);
        let env = task_env(&alloc, "api", "server", &dirs, &own);
        let cases = [
            ("NOMAD_ALLOC_DIR", "/d/a1/alloc"),
            ("DROVER_TASK_DIR", "/d/a1/server/local"),
            ("NOMAD_ALLOC_INDEX", "3"),
            ("DROVER_JOB_NAME", "Web"),
            ("NOMAD_GROUP_NAME", "api"),
            ("NOMAD_TASK_NAME", "server"),
            ("NOMAD_DC", "mine"),
            ("DROVER_DC", "dc1"),
            ("NOMAD_PORT_http", "21042"),
            ("NOMAD_ADDR_http", "10.0.0.4:21042"),
        ];
        for (key, want) in cases {
            assert_eq!(env.get(key).map(String::as_str), Some(want), "{key}");
        }
        assert_eq!(
            env.get("DROVER_ALLOC_ID"),
            Some(&mock::alloc_id(1).to_string())
        );
    }
}
