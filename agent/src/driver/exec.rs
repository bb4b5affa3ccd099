//! Starting, watching and stopping one task process.

use super::process::ProcessRecord;
use super::{DriverError, LogPaths};
use nix::sys::signal::Signal;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How often a re-attached process (not the agent's child, so not waitable) is looked at.
const ADOPTED_POLL: Duration = Duration::from_millis(200);

/// What to run, where.
#[derive(Clone, Debug)]
pub struct TaskLaunch<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    /// The task's whole environment: the agent's own is never inherited.
    pub env: &'a BTreeMap<String, String>,
    /// Run as this user rather than the agent's.
    pub user: Option<&'a crate::users::TaskUser>,
    /// Start through the task shim (a cgroup to join, `exec`'s isolation); `None`: spawn
    /// the command directly.
    pub shim: Option<ShimLaunch<'a>>,
    /// The working directory; relative commands are looked up in it.
    pub task_dir: &'a Path,
    pub logs: &'a LogPaths,
}

/// What the shim adds to a launch.
#[derive(Clone, Debug)]
pub struct ShimLaunch<'a> {
    /// The binary that dispatches the shim (the agent's own, by default).
    pub path: &'a Path,
    pub cgroup_procs: Vec<PathBuf>,
    pub isolation: Option<crate::isolation::Isolation>,
}

/// How a task process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitOutcome {
    Exited(i32),
    Signaled(i32),
    /// The kernel's OOM killer ended it (as a container engine reports it), with its code.
    OomKilled(i32),
    /// The process was not the agent's child (re-attached after an agent restart), so its
    /// exit status cannot be known; the reason says so.
    Unknown(&'static str),
}

impl ExitOutcome {
    pub fn success(&self) -> bool {
        matches!(self, ExitOutcome::Exited(0))
    }

    pub fn exit_code(&self) -> Option<i32> {
        match self {
            ExitOutcome::Exited(c) | ExitOutcome::OomKilled(c) => Some(*c),
            _ => None,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            ExitOutcome::Exited(c) => format!("exited with code {c}"),
            ExitOutcome::Signaled(s) => {
                let name = Signal::try_from(*s).map_or("unknown signal", Signal::as_str);
                format!("killed by signal {s} ({name})")
            }
            ExitOutcome::OomKilled(c) => format!("was OOM killed (exit code {c})"),
            ExitOutcome::Unknown(why) => format!("exited; exit code unknown: {why}"),
        }
    }
}

/// A running task: the agent's own child process, one re-attached from the state file
/// after an agent restart, or a container of the docker driver.
#[derive(Debug)]
pub enum TaskHandle {
    Child(tokio::process::Child, ProcessRecord),
    Adopted(ProcessRecord),
    Docker(Box<super::docker::Container>),
}

impl TaskHandle {
    /// The process to persist and re-attach by pid; `None` for a container (found again by
    /// its name and labels).
    pub fn record(&self) -> Option<ProcessRecord> {
        match self {
            TaskHandle::Child(_, r) | TaskHandle::Adopted(r) => Some(*r),
            TaskHandle::Docker(_) => None,
        }
    }

    /// What runs, for task events: `pid 42`, `container web-<alloc>`.
    pub fn describe(&self) -> String {
        match self {
            TaskHandle::Child(_, r) | TaskHandle::Adopted(r) => format!("pid {}", r.pid),
            TaskHandle::Docker(c) => format!("container {}", c.name),
        }
    }

    /// Waits for the task to end. Cancel-safe: dropping the future loses nothing.
    pub async fn wait(&mut self) -> ExitOutcome {
        match self {
            TaskHandle::Docker(c) => c.wait().await,
            TaskHandle::Child(child, _) => match child.wait().await {
                Ok(status) => match (status.code(), status.signal()) {
                    (Some(c), _) => ExitOutcome::Exited(c),
                    (None, Some(s)) => ExitOutcome::Signaled(s),
                    (None, None) => ExitOutcome::Unknown("the kernel reported no status"),
                },
                Err(e) => {
                    tracing::warn!(error = %e, "waiting for a task process failed");
                    ExitOutcome::Unknown("waiting for the process failed")
                }
            },
            TaskHandle::Adopted(record) => {
                while record.is_alive() {
                    tokio::time::sleep(ADOPTED_POLL).await;
                }
                ExitOutcome::Unknown("the process was re-attached after an agent restart")
            }
        }
    }

    /// Sends `signal` to the task (its process group, or its container) and leaves it
    /// running: what a template's `change_mode = "signal"` does.
    pub async fn signal(&self, signal: Signal) {
        let record = match self {
            TaskHandle::Docker(c) => return c.signal(signal).await,
            TaskHandle::Adopted(r) if !r.is_alive() => return,
            TaskHandle::Child(_, r) | TaskHandle::Adopted(r) => *r,
        };
        if let Err(e) = record.signal_group(signal) {
            tracing::warn!(pid = record.pid, %signal, error = %e, "cannot signal task");
        }
    }

    /// Sends `signal` to the task's process group, then SIGKILL if it still runs after
    /// `timeout`; returns how it ended.
    pub async fn kill(&mut self, signal: Signal, timeout: Duration) -> ExitOutcome {
        let record = match self {
            TaskHandle::Docker(c) => return c.kill(signal, timeout).await,
            TaskHandle::Child(_, r) | TaskHandle::Adopted(r) => *r,
        };
        // A re-attached pid that no longer names our process must not be signalled: it may
        // belong to someone else by now.
        if matches!(self, TaskHandle::Adopted(r) if !r.is_alive()) {
            return self.wait().await;
        }
        if let Err(e) = record.signal_group(signal) {
            tracing::warn!(pid = record.pid, %signal, error = %e, "cannot signal task");
        }
        match tokio::time::timeout(timeout, self.wait()).await {
            Ok(outcome) => outcome,
            Err(_) => {
                tracing::info!(
                    pid = record.pid,
                    "task outlived its kill timeout; sending SIGKILL"
                );
                if let Err(e) = record.signal_group(Signal::SIGKILL) {
                    tracing::warn!(pid = record.pid, error = %e, "cannot SIGKILL task");
                }
                self.wait().await
            }
        }
    }
}

fn is_executable(path: &Path) -> Option<bool> {
    let meta = std::fs::metadata(path).ok()?;
    Some(meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Finds the file `command` names: a path (relative ones from the task dir), or a name
/// looked up in `path_var` (the task's `PATH`; never the agent's, which the task does not
/// get, else the default one tasks get).
pub fn resolve_executable(
    command: &str,
    task_dir: &Path,
    path_var: Option<&str>,
) -> Result<PathBuf, DriverError> {
    if command.is_empty() {
        return Err(DriverError::NoCommand);
    }
    let not_found = || DriverError::ExecutableNotFound {
        command: command.to_string(),
    };
    if command.contains('/') {
        let path = task_dir.join(command);
        return match is_executable(&path) {
            Some(true) => Ok(path),
            Some(false) => Err(DriverError::NotExecutable { path }),
            None => Err(not_found()),
        };
    }
    let search = path_var.unwrap_or(crate::runner::TASK_PATH);
    std::env::split_paths(search)
        .map(|dir| dir.join(command))
        .find(|p| is_executable(p) == Some(true))
        .ok_or_else(not_found)
}

/// Starts the task in its own process group with stdin closed, stdout / stderr appended
/// to its log files, its environment exactly `launch.env` and, when given, as its user;
/// through the shim when the launch needs one.
pub async fn start(launch: &TaskLaunch<'_>) -> Result<TaskHandle, DriverError> {
    let path_var = launch.env.get("PATH").map(String::as_str);
    let isolated = launch.shim.as_ref().is_some_and(|s| s.isolation.is_some());
    // An isolated task's command is found inside its root, by the shim.
    let program = if isolated {
        PathBuf::from(launch.command)
    } else {
        resolve_executable(launch.command, launch.task_dir, path_var)?
    };
    let (stdout, stderr) = launch.logs.open().map_err(|source| DriverError::Logs {
        path: launch.logs.stdout.clone(),
        source,
    })?;
    let child = match &launch.shim {
        Some(shim) => {
            let spec = crate::isolation::ShimSpec {
                program: program.display().to_string(),
                args: launch.args.to_vec(),
                env: launch.env.clone(),
                cwd: if isolated {
                    PathBuf::from("/")
                } else {
                    launch.task_dir.to_path_buf()
                },
                user: launch.user.map(|u| (u.uid, u.gid)),
                cgroup_procs: shim.cgroup_procs.clone(),
                isolation: shim.isolation.clone(),
            };
            crate::isolation::launch::launch(shim.path, &spec, stdout, stderr)
                .await
                .map_err(DriverError::Shim)?
        }
        None => {
            let mut command = tokio::process::Command::new(&program);
            if let Some(user) = launch.user {
                command.uid(user.uid).gid(user.gid);
            }
            command
                .args(launch.args)
                .env_clear()
                .envs(launch.env)
                .current_dir(launch.task_dir)
                .stdin(Stdio::null())
                .stdout(stdout)
                .stderr(stderr)
                .process_group(0)
                .kill_on_drop(false)
                .spawn()
                .map_err(|source| DriverError::Spawn {
                    command: launch.command.to_string(),
                    source,
                })?
        }
    };
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| DriverError::Spawn {
            command: launch.command.to_string(),
            source: std::io::Error::other("the process had no pid"),
        })?;
    // The child is not reaped before we wait, so its stat is readable even if it exited.
    let record = ProcessRecord::of(pid).unwrap_or(ProcessRecord {
        pid,
        start_ticks: 0,
    });
    Ok(TaskHandle::Child(child, record))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn launch_in(dir: &Path, command: &str, args: &[&str]) -> (TaskHandle, LogPaths) {
        let logs = LogPaths::new(dir, "t");
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let env = BTreeMap::from([("GREETING".to_string(), "hello".to_string())]);
        let launch = TaskLaunch {
            command,
            args: &args,
            env: &env,
            user: None,
            shim: None,
            task_dir: dir,
            logs: &logs,
        };
        let handle = start(&launch).await.expect("starts");
        (handle, logs)
    }

    #[tokio::test]
    async fn exit_codes_env_and_logs_come_through() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cases = [
            ("echo $GREETING; exit 0", ExitOutcome::Exited(0), "hello\n"),
            ("echo oops >&2; exit 3", ExitOutcome::Exited(3), ""),
            ("kill -9 $$", ExitOutcome::Signaled(9), ""),
        ];
        for (script, want, stdout) in cases {
            let (mut handle, logs) = launch_in(dir.path(), "sh", &["-c", script]).await;
            assert_eq!(handle.wait().await, want, "{script}");
            assert_eq!(std::fs::read_to_string(&logs.stdout).expect("log"), stdout);
            std::fs::remove_file(&logs.stdout).expect("reset log");
        }
    }

    /// The agent's environment (this test process's, with `PATH`, `HOME` and cargo's
    /// variables) never reaches a task: it gets exactly what it is given.
    #[tokio::test]
    async fn only_the_given_environment_reaches_the_task() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (mut handle, logs) = launch_in(dir.path(), "/usr/bin/env", &[]).await;
        assert_eq!(handle.wait().await, ExitOutcome::Exited(0));
        assert_eq!(
            std::fs::read_to_string(&logs.stdout).expect("log"),
            "GREETING=hello\n"
        );
    }

    #[tokio::test]
    async fn kill_escalates_to_sigkill_after_the_timeout() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (mut polite, _) = launch_in(dir.path(), "sleep", &["30"]).await;
        let out = polite.kill(Signal::SIGTERM, Duration::from_secs(5)).await;
        assert_eq!(out, ExitOutcome::Signaled(Signal::SIGTERM as i32));

        let script = "trap '' TERM; sleep 30 & wait; sleep 30";
        let (mut stubborn, _) = launch_in(dir.path(), "sh", &["-c", script]).await;
        // Give the shell time to install its trap: poll until its child sleep exists.
        let record = stubborn.record().expect("a process");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(format!("/proc/{}/task/{}/children", record.pid, record.pid))
            .unwrap_or_default()
            .trim()
            .is_empty()
        {
            assert!(tokio::time::Instant::now() < deadline, "shell never forked");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let out = stubborn
            .kill(Signal::SIGTERM, Duration::from_millis(300))
            .await;
        assert_eq!(out, ExitOutcome::Signaled(Signal::SIGKILL as i32));
    }

    #[tokio::test]
    async fn re_attached_processes_are_watched_through_proc() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (mut child, _) = launch_in(dir.path(), "sleep", &["30"]).await;
        let mut adopted = TaskHandle::Adopted(child.record().expect("a process"));
        let waiter = tokio::spawn(async move { adopted.wait().await });
        child.kill(Signal::SIGTERM, Duration::from_secs(5)).await;
        let out = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("noticed the exit")
            .expect("joined");
        assert!(matches!(out, ExitOutcome::Unknown(_)), "{out:?}");
    }

    /// Issue 14, item 4: a job's missing or non-executable command is the job's mistake,
    /// never counted against the node (this test asserted the opposite before).
    #[test]
    fn missing_and_non_executable_commands_are_the_jobs_fault() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("data.txt"), "x").expect("write");
        let cases = [
            ("/no/such/binary", "not found"),
            ("no-such-binary-drover", "not found"),
            ("./data.txt", "not an executable"),
        ];
        for (command, needle) in cases {
            let err = resolve_executable(command, dir.path(), None).expect_err(command);
            assert!(!err.is_infra(), "{command}");
            assert!(err.to_string().contains(needle), "{command}: {err}");
        }
        assert!(
            !resolve_executable("", dir.path(), None)
                .expect_err("empty")
                .is_infra()
        );
        assert!(resolve_executable("sh", dir.path(), None).is_ok());
    }

    /// Failures of the node count, failures of the job do not.
    #[test]
    fn whose_fault_a_driver_error_is() {
        use std::io::{Error, ErrorKind};
        let spawn = |kind| DriverError::Spawn {
            command: "/bin/app".into(),
            source: Error::from(kind),
        };
        let disk_full = || Error::other("No space left on device");
        // (error, the node's fault)
        let cases = [
            (spawn(ErrorKind::NotFound), false),
            (spawn(ErrorKind::PermissionDenied), false),
            (spawn(ErrorKind::InvalidInput), false),
            (spawn(ErrorKind::OutOfMemory), true),
            (spawn(ErrorKind::WouldBlock), true),
            (
                DriverError::TaskDir {
                    path: "/data/alloc".into(),
                    source: disk_full(),
                },
                true,
            ),
            (
                DriverError::Logs {
                    path: "/data/alloc/logs".into(),
                    source: disk_full(),
                },
                true,
            ),
            (DriverError::NoCommand, false),
            (
                DriverError::UnknownDriver {
                    driver: "docker".into(),
                },
                false,
            ),
        ];
        for (error, infra) in cases {
            assert_eq!(error.is_infra(), infra, "{error}");
        }
    }
}
