//! The task and group blocks real Nomad jobs use beyond a command: `lifecycle` (hooks
//! around the main tasks), group `ephemeral_disk`, and what a task reports of its own use
//! of the node.

use serde::{Deserialize, Serialize};

/// When a task runs relative to the group's main tasks (Nomad's `lifecycle` block).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Lifecycle {
    pub hook: LifecycleHook,
    /// Keeps running beside the main tasks (restarted as they are) instead of running to
    /// completion at its hook.
    pub sidecar: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum LifecycleHook {
    /// Before any main task starts; a non-sidecar prestart task must succeed first.
    Prestart,
    /// Once every main task has started.
    Poststart,
    /// After every main task has ended.
    Poststop,
}

impl LifecycleHook {
    pub const ALL: [LifecycleHook; 3] = [Self::Prestart, Self::Poststart, Self::Poststop];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prestart => "prestart",
            Self::Poststart => "poststart",
            Self::Poststop => "poststop",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.as_str() == s)
    }
}

/// A group's scratch space on the node (Nomad's `ephemeral_disk`): counted as disk when
/// the group is placed, on top of its tasks' own.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct EphemeralDisk {
    pub size_mb: u64,
}

impl EphemeralDisk {
    /// Nomad's default size.
    pub const DEFAULT_SIZE_MB: u64 = 300;
}

/// What a running task uses, sampled by the agent from its cgroup.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct TaskUsage {
    /// CPU in MHz of the node (the unit `resources { cpu }` asks in).
    pub cpu_mhz: u64,
    /// Memory in MB (the working set).
    pub memory_mb: u64,
}
