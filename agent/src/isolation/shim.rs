//! The shim's two stages (see the module docs of [`super`]). Both run single-threaded, in a
//! process of their own, before any runtime starts; whatever goes wrong is reported to the
//! parent as a [`Report::Failed`] and printed to stderr, which is the task's own stderr log,
//! so an operator reading `alloc logs -stderr` sees why the task never ran.

use super::protocol::Report;
use super::{INIT_ARG, ShimSpec};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SigSet, Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};

/// Exit code of a shim that could not set the task up.
const SETUP_FAILED: u8 = 125;
/// Exit code of a shim whose task command could not be executed.
const EXEC_FAILED: u8 = 127;

/// Signals the shim holds for itself (stage one) or passes on to the task (stage two).
const FORWARDED: [Signal; 9] = [
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
    Signal::SIGALRM,
    Signal::SIGCONT,
];

fn forwarded() -> SigSet {
    let mut set = SigSet::empty();
    for s in FORWARDED {
        set.add(s);
    }
    set
}

/// The socket on stdin, as a stream of its own (the copy is close-on-exec, so a shim that
/// execs the task leaves no open end behind once stdin is replaced).
fn parent_socket() -> std::io::Result<UnixStream> {
    let fd: OwnedFd = std::io::stdin().as_fd().try_clone_to_owned()?;
    Ok(UnixStream::from(fd))
}

fn read_spec(socket: &mut UnixStream) -> Result<ShimSpec, String> {
    let mut text = Vec::new();
    socket
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read the task spec: {e}"))?;
    serde_json::from_slice(&text).map_err(|e| format!("invalid task spec: {e}"))
}

fn send(socket: &mut UnixStream, report: &Report) {
    let _ = socket.write_all(report.line().as_bytes());
}

/// Reports a failure to the parent and on stderr, and returns the exit code for it.
fn fail(socket: &mut UnixStream, message: String, infra: bool) -> ExitCode {
    eprintln!("drover task shim: {message}");
    send(socket, &Report::Failed { message, infra });
    ExitCode::from(if infra { SETUP_FAILED } else { EXEC_FAILED })
}

fn join_cgroup(spec: &ShimSpec) -> Result<(), String> {
    for procs in &spec.cgroup_procs {
        // "0" is the writing process, whatever PID namespace it is in.
        std::fs::write(procs, "0")
            .map_err(|e| format!("cannot join cgroup {}: {e}", procs.display()))?;
    }
    Ok(())
}

/// The task's command, with its environment, user and no stdin.
fn task_command(spec: &ShimSpec) -> Command {
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .env_clear()
        .envs(&spec.env)
        .stdin(Stdio::null());
    if let Some((uid, gid)) = spec.user {
        command.uid(uid).gid(gid);
    }
    command
}

/// Whether a failure to execute the task's command is the node's fault.
fn exec_is_infra(e: &std::io::Error) -> bool {
    !matches!(
        e.kind(),
        std::io::ErrorKind::NotFound
            | std::io::ErrorKind::PermissionDenied
            | std::io::ErrorKind::InvalidInput
            | std::io::ErrorKind::ExecutableFileBusy
    )
}

/// Stage one: `raw_exec` joins the cgroup and becomes the task; `exec` enters new
/// namespaces and supervises stage two.
pub(super) fn stage_one() -> ExitCode {
    let Ok(mut parent) = parent_socket() else {
        eprintln!("drover task shim: stdin is not the agent's socket");
        return ExitCode::from(SETUP_FAILED);
    };
    let spec = match read_spec(&mut parent) {
        Ok(spec) => spec,
        Err(e) => return fail(&mut parent, e, true),
    };
    if spec.isolation.is_some() {
        return isolated(spec, parent);
    }
    if let Err(e) = join_cgroup(&spec) {
        return fail(&mut parent, e, true);
    }
    if let Err(e) = std::env::set_current_dir(&spec.cwd) {
        let message = format!("cannot enter task dir {}: {e}", spec.cwd.display());
        return fail(&mut parent, message, true);
    }
    let e = task_command(&spec).exec();
    let infra = exec_is_infra(&e);
    fail(
        &mut parent,
        format!("cannot start {:?}: {e}", spec.program),
        infra,
    )
}

/// Stage one of `exec`: new namespaces, stage two as their PID 1, and the task's end
/// reproduced as this process's own.
fn isolated(spec: ShimSpec, mut parent: UnixStream) -> ExitCode {
    // Polite signals reach stage two through the process group; this stage only waits.
    if let Err(e) = forwarded().thread_block() {
        return fail(&mut parent, format!("cannot block signals: {e}"), true);
    }
    let flags = CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    if let Err(e) = unshare(flags) {
        return fail(&mut parent, format!("cannot create namespaces: {e}"), true);
    }
    let (mut mine, theirs) = match UnixStream::pair() {
        Ok(pair) => pair,
        Err(e) => return fail(&mut parent, format!("cannot make a socket: {e}"), true),
    };
    let child = Command::new("/proc/self/exe")
        .arg(INIT_ARG)
        .env_clear()
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return fail(
                &mut parent,
                format!("cannot start the task's init: {e}"),
                true,
            );
        }
    };
    let sent = serde_json::to_vec(&spec)
        .map_err(std::io::Error::other)
        .and_then(|bytes| mine.write_all(&bytes))
        .and_then(|()| mine.shutdown(std::net::Shutdown::Write));
    if let Err(e) = sent {
        let _ = child.kill();
        return fail(
            &mut parent,
            format!("cannot hand the spec to init: {e}"),
            true,
        );
    }
    let mut reports = BufReader::new(mine);
    let mut first = String::new();
    let _ = reports.read_line(&mut first);
    let first = Report::parse_all(&first).pop();
    match &first {
        Some(report @ Report::Started { .. }) => send(&mut parent, report),
        Some(report @ Report::Failed { infra, .. }) => {
            send(&mut parent, report);
            let _ = child.wait();
            return ExitCode::from(if *infra { SETUP_FAILED } else { EXEC_FAILED });
        }
        _ => {
            let _ = child.wait();
            return fail(
                &mut parent,
                "the task's init ended before the task started".into(),
                true,
            );
        }
    }
    drop(parent);
    let status = child.wait();
    let mut rest = String::new();
    let _ = reports.read_to_string(&mut rest);
    match Report::parse_all(&rest).pop() {
        Some(Report::Exited {
            code: Some(code), ..
        }) => ExitCode::from(code as u8),
        Some(Report::Exited {
            signal: Some(signal),
            ..
        }) => die_by(signal),
        // Init was killed (SIGKILL from the agent): end the same way.
        _ => match status
            .ok()
            .and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s))
        {
            Some(signal) => die_by(signal),
            None => ExitCode::from(SETUP_FAILED),
        },
    }
}

/// Ends this process by `signal`, so the agent's wait sees what the task's did.
fn die_by(signal: i32) -> ExitCode {
    if let Ok(s) = Signal::try_from(signal) {
        let _ = nix::sys::signal::raise(s);
        let mut set = SigSet::empty();
        set.add(s);
        let _ = set.thread_unblock();
    }
    // A signal whose default is to be ignored leaves us here.
    ExitCode::from(128u8.saturating_add(u8::try_from(signal).unwrap_or(0)))
}

/// Stage two: PID 1 of the task's namespaces.
pub(super) fn stage_two() -> ExitCode {
    let Ok(mut parent) = parent_socket() else {
        return ExitCode::from(SETUP_FAILED);
    };
    let mut held = forwarded();
    held.add(Signal::SIGCHLD);
    if let Err(e) = held.thread_block() {
        return fail(&mut parent, format!("cannot block signals: {e}"), true);
    }
    // Stage one gone (SIGKILLed with the agent's group) takes the whole namespace along.
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        return fail(
            &mut parent,
            format!("cannot set the parent death signal: {e}"),
            true,
        );
    }
    let spec = match read_spec(&mut parent) {
        Ok(spec) => spec,
        Err(e) => return fail(&mut parent, e, true),
    };
    let Some(isolation) = spec.isolation.clone() else {
        return fail(&mut parent, "init started without isolation".into(), true);
    };
    let setup = join_cgroup(&spec)
        .and_then(|()| super::mounts::apply(&isolation.mounts))
        .and_then(|()| {
            nix::unistd::sethostname(&isolation.hostname)
                .map_err(|e| format!("cannot set the host name: {e}"))
        })
        .and_then(|()| {
            nix::unistd::chroot(&isolation.root)
                .map_err(|e| format!("cannot chroot into {}: {e}", isolation.root.display()))
        })
        .and_then(|()| {
            std::env::set_current_dir(&spec.cwd).map_err(|e| {
                format!(
                    "cannot enter {} in the task's root: {e}",
                    spec.cwd.display()
                )
            })
        })
        .and_then(|()| {
            nix::sys::prctl::set_no_new_privs().map_err(|e| format!("cannot set no_new_privs: {e}"))
        });
    if let Err(e) = setup {
        return fail(&mut parent, e, true);
    }
    let mut command = task_command(&spec);
    command.process_group(0);
    let task = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let infra = exec_is_infra(&e);
            return fail(
                &mut parent,
                format!("cannot start {:?}: {e}", spec.program),
                infra,
            );
        }
    };
    let task_pid = Pid::from_raw(i32::try_from(task.id()).unwrap_or(i32::MAX));
    send(
        &mut parent,
        &Report::Started {
            pid: task_pid.as_raw(),
        },
    );
    // The OOM killer must pick the task, never its init.
    let _ = std::fs::write("/proc/self/oom_score_adj", "-1000");
    let end = supervise(task_pid, &held);
    send(&mut parent, &end);
    ExitCode::SUCCESS
}

/// Forwards signals to the task's process group and reaps every child until the task
/// itself ends; returns how it ended.
fn supervise(task: Pid, held: &SigSet) -> Report {
    loop {
        let Ok(signal) = held.wait() else {
            continue;
        };
        if signal != Signal::SIGCHLD {
            if killpg(task, signal).is_err() {
                let _ = kill(task, signal);
            }
            continue;
        }
        // One SIGCHLD may stand for several children: reap all that ended.
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == task => {
                    return Report::Exited {
                        code: Some(code),
                        signal: None,
                    };
                }
                Ok(WaitStatus::Signaled(pid, signal, _)) if pid == task => {
                    return Report::Exited {
                        code: None,
                        signal: Some(signal as i32),
                    };
                }
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
}
