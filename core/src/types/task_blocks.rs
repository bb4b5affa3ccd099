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

/// The sum of some tasks' latest samples and how many tasks were sampled: what an allocation
/// or a node uses, as `alloc status`, `node status` and the console show it against what
/// was asked.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct SampledUsage {
    pub used: TaskUsage,
    pub tasks: usize,
}

impl SampledUsage {
    /// Of one allocation's tasks; `None` before any was sampled.
    pub fn of_alloc(alloc: &super::Allocation) -> Option<SampledUsage> {
        let mut sum = SampledUsage::default();
        for usage in alloc.task_states.values().filter_map(|t| t.usage) {
            sum.used.cpu_mhz += usage.cpu_mhz;
            sum.used.memory_mb += usage.memory_mb;
            sum.tasks += 1;
        }
        (sum.tasks > 0).then_some(sum)
    }

    /// Of the running allocations among `allocs` (a node's): a stopped allocation's last
    /// samples no longer use anything. `None` when no task has been sampled.
    pub fn of_running<'a>(
        allocs: impl IntoIterator<Item = &'a super::Allocation>,
    ) -> Option<SampledUsage> {
        let mut sum = SampledUsage::default();
        for one in allocs
            .into_iter()
            .filter(|a| a.client_status == super::ClientStatus::Running)
            .filter_map(SampledUsage::of_alloc)
        {
            sum.used.cpu_mhz += one.used.cpu_mhz;
            sum.used.memory_mb += one.used.memory_mb;
            sum.tasks += one.tasks;
        }
        (sum.tasks > 0).then_some(sum)
    }

    /// `150 MHz, 40 MB memory (2 tasks sampled)`: a node's line, beside what is allocated.
    pub fn summary(&self) -> String {
        let tasks = if self.tasks == 1 { "task" } else { "tasks" };
        format!(
            "{} MHz, {} MB memory ({} {tasks} sampled)",
            self.used.cpu_mhz, self.used.memory_mb, self.tasks
        )
    }

    /// `37 of 100 MHz, 112 of 256 MB memory`: the samples against an ask.
    pub fn against(&self, asked: super::Resources) -> String {
        format!(
            "{} of {} MHz, {} of {} MB memory",
            self.used.cpu_mhz, asked.cpu_mhz, self.used.memory_mb, asked.memory_mb
        )
    }
}

/// A file the agent fetches into the task's directory before the task starts (Nomad's
/// `artifact` block): an http(s) URL or a file path, checked against a checksum when one is
/// given, unpacked when it is an archive.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Artifact {
    /// `https://…`, `http://…`, `file://…` or a path.
    pub source: String,
    /// Relative to the task's directory; Nomad's default is `local/`.
    pub destination: String,
    pub mode: ArtifactMode,
    /// go-getter's options: `checksum = "sha256:<hex>"`, `archive = "false"`.
    pub options: std::collections::BTreeMap<String, String>,
}

impl Artifact {
    pub const DEFAULT_DESTINATION: &'static str = "local/";
}

/// What an artifact's destination is (go-getter's client modes).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ArtifactMode {
    /// An archive is unpacked into the destination directory; any other file is put in it.
    Any,
    /// The destination is the file itself.
    File,
    /// The source is an archive, unpacked into the destination directory.
    Dir,
}

impl ArtifactMode {
    pub const ALL: [ArtifactMode; 3] = [Self::Any, Self::File, Self::Dir];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Any => "any",
            Self::File => "file",
            Self::Dir => "dir",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// A file the agent renders into the task's directory before the task starts (Nomad's
/// `template` block), from inline `data` or a `source` file, in Go's template syntax.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Template {
    pub data: Option<String>,
    /// A template file, relative to the task's directory.
    pub source: Option<String>,
    /// Where the rendered text goes, relative to the task's directory.
    pub destination: String,
    /// The rendered file is `KEY=value` lines that join the task's environment.
    pub env: bool,
    pub change_mode: ChangeMode,
    /// The signal of `change_mode = "signal"`.
    pub change_signal: Option<String>,
    /// The rendered file's mode, octal (`"0644"`).
    pub perms: String,
    pub left_delimiter: String,
    pub right_delimiter: String,
}

impl Template {
    pub const DEFAULT_PERMS: &'static str = "0644";

    /// A template of inline `data` rendered to `destination`, with Nomad's defaults.
    pub fn inline(data: impl Into<String>, destination: impl Into<String>) -> Self {
        Self {
            data: Some(data.into()),
            source: None,
            destination: destination.into(),
            env: false,
            change_mode: ChangeMode::Restart,
            change_signal: None,
            perms: Self::DEFAULT_PERMS.into(),
            left_delimiter: "{{".into(),
            right_delimiter: "}}".into(),
        }
    }
}

/// What a template's re-render does to its running task.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ChangeMode {
    Restart,
    Signal,
    Noop,
}

impl ChangeMode {
    pub const ALL: [ChangeMode; 3] = [Self::Restart, Self::Signal, Self::Noop];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Restart => "restart",
            Self::Signal => "signal",
            Self::Noop => "noop",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }
}
