//! Starting a task through the task shim: the binary that runs the agent, executed again
//! (`/proc/self/exe`, or [`crate::AgentConfig::shim`]) with a hidden first argument, so the
//! steps that must happen between fork and exec (join the cgroup, enter namespaces, chroot,
//! drop privileges) run as ordinary code in a process of their own, with no `unsafe`
//! `pre_exec` in the agent.
//!
//! - `raw_exec` with a cgroup: the shim joins the task's cgroup, then replaces itself with
//!   the task's command (`exec`): the task keeps the pid the agent spawned.
//! - `exec`: stage one unshares mount, PID, IPC and UTS namespaces and starts stage two,
//!   PID 1 of the new PID namespace, which joins the cgroup, builds the task's root
//!   ([`mounts`]), chroots, sets `no_new_privs`, starts the task as its user, forwards
//!   signals to it, reaps every orphan, and reports how it ended. Stage one stays the
//!   agent's child and ends the way the task did (same code, same signal), so the agent
//!   sees the task's exit status; if stage one is SIGKILLed, stage two dies with it (parent
//!   death signal) and the kernel kills everything left in the namespace.
//!
//! The agent and the shim talk over a socket on the shim's stdin ([`protocol`]): the agent
//! writes the [`ShimSpec`], the shim answers `started` or an error saying whose fault it
//! is; a shim that `exec`s simply closes it.
//!
//! Binaries that can run tasks call [`dispatch`] first thing in `main`, before any thread
//! starts (namespaces cannot be unshared by a multi-threaded process).

pub mod launch;
pub mod mounts;
pub mod protocol;
mod shim;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The hidden first argument that makes a binary the task shim.
pub const SHIM_ARG: &str = "__drover-task-shim";
/// The hidden first argument of the shim's second stage (PID 1 of an `exec` task).
pub const INIT_ARG: &str = "__drover-task-init";

/// Everything the shim needs to start one task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimSpec {
    /// The command: an absolute path for `raw_exec` (the agent resolved it), as written
    /// for `exec` (resolved inside the task's root by its `PATH`).
    pub program: String,
    pub args: Vec<String>,
    /// The task's whole environment.
    pub env: BTreeMap<String, String>,
    /// The working directory: a host path for `raw_exec`, a path inside the root for `exec`.
    pub cwd: PathBuf,
    /// (uid, gid) to run as; `None`: the agent's user.
    pub user: Option<(u32, u32)>,
    /// `cgroup.procs` files to join before anything of the task runs.
    pub cgroup_procs: Vec<PathBuf>,
    /// `exec`'s isolation; `None`: `raw_exec`.
    pub isolation: Option<Isolation>,
}

/// How an `exec` task is isolated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Isolation {
    /// The host directory that becomes the task's `/` (its task dir).
    pub root: PathBuf,
    pub mounts: Vec<mounts::Step>,
    /// The task's host name in its own UTS namespace.
    pub hostname: String,
}

/// Runs the shim if this process was started as one, returning its exit code; `None` for
/// any other command line. Call it first thing in `main`.
pub fn dispatch() -> Option<std::process::ExitCode> {
    let first = std::env::args_os().nth(1)?;
    if first == SHIM_ARG {
        Some(shim::stage_one())
    } else if first == INIT_ARG {
        Some(shim::stage_two())
    } else {
        None
    }
}
