//! Task cgroups: one per task (`<parent>/<alloc id>.<task>`), made before the task starts,
//! holding its limits, read for its usage and for OOM kills, emptied and removed when the
//! task ends for good.
//!
//! The hierarchy (v1 or v2) is detected once at agent start ([`Cgroups::detect`]) and
//! fingerprinted as `unique.cgroup.version`. A task joins its cgroup before its command
//! runs: the task shim writes its own pid into [`TaskCgroup::procs_files`] and only then
//! executes the command, so nothing the task forks escapes.

pub mod detect;
pub mod limits;

use detect::Hierarchy;
use limits::Limits;
use std::path::{Path, PathBuf};

/// The cgroup hierarchy this agent puts tasks in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroups {
    hierarchy: Hierarchy,
}

/// One sample of a task's usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// CPU time used since the cgroup was made, in nanoseconds.
    pub cpu_ns: u64,
    /// The working set (charged memory minus inactive page cache), in bytes.
    pub memory_bytes: u64,
}

impl Cgroups {
    /// Finds the hierarchy from `/proc/self/mountinfo` and `/proc/self/cgroup`; task
    /// cgroups go under `parent` (see [`detect::choose`]). Errors say why none fits.
    pub fn detect(parent: &str) -> Result<Self, String> {
        let read =
            |p: &str| std::fs::read_to_string(p).map_err(|e| format!("cannot read {p}: {e}"));
        let mounts = detect::parse_mountinfo(&read("/proc/self/mountinfo")?);
        let own = detect::parse_proc_cgroup(&read("/proc/self/cgroup")?);
        let v2_controllers = mounts
            .iter()
            .find(|m| m.v2)
            .and_then(|m| std::fs::read_to_string(m.mount_point.join("cgroup.controllers")).ok());
        let hierarchy = detect::choose(&mounts, &own, v2_controllers.as_deref(), parent)?;
        let cgroups = Self { hierarchy };
        cgroups
            .prepare_parent()
            .map_err(|e| format!("cannot make drover's cgroup: {e}"))?;
        Ok(cgroups)
    }

    /// `v1` or `v2`.
    pub fn version(&self) -> &'static str {
        self.hierarchy.version()
    }

    /// Makes the parent dirs; on v2 also enables drover's controllers for their children.
    fn prepare_parent(&self) -> std::io::Result<()> {
        match &self.hierarchy {
            Hierarchy::V1(dirs) => dirs.values().try_for_each(std::fs::create_dir_all),
            Hierarchy::V2(parent) => {
                std::fs::create_dir_all(parent)?;
                let enable: Vec<String> = detect::V2_CONTROLLERS
                    .iter()
                    .map(|c| format!("+{c}"))
                    .collect();
                let enable = enable.join(" ");
                if let Some(root) = parent.parent() {
                    std::fs::write(root.join("cgroup.subtree_control"), &enable)?;
                }
                std::fs::write(parent.join("cgroup.subtree_control"), &enable)
            }
        }
    }

    /// The cgroup of one task (not made yet: see [`TaskCgroup::create`]).
    pub fn task(&self, alloc_id: &str, task: &str) -> TaskCgroup {
        let name = format!("{alloc_id}.{task}");
        match &self.hierarchy {
            Hierarchy::V1(dirs) => TaskCgroup {
                v1: true,
                dirs: dirs
                    .iter()
                    .map(|(c, d)| (c.clone(), d.join(&name)))
                    .collect(),
            },
            Hierarchy::V2(parent) => TaskCgroup {
                v1: false,
                dirs: vec![(String::new(), parent.join(name))],
            },
        }
    }
}

/// One task's cgroup: a directory per v1 controller, or one v2 directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskCgroup {
    v1: bool,
    /// (controller, dir); v2 has one entry with an empty controller.
    dirs: Vec<(String, PathBuf)>,
}

impl TaskCgroup {
    fn dir(&self, controller: &str) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|(c, _)| !self.v1 || c == controller)
            .map(|(_, d)| d.as_path())
    }

    fn read(&self, controller: &str, file: &str) -> Option<String> {
        std::fs::read_to_string(self.dir(controller)?.join(file)).ok()
    }

    /// Makes the directories (again, if a previous run left them) and writes `limits`.
    pub fn create(&self, limits: &Limits) -> std::io::Result<()> {
        for (_, dir) in &self.dirs {
            std::fs::create_dir_all(dir)?;
        }
        for (controller, file, value) in limits::writes(limits, self.v1) {
            let Some(dir) = self.dir(controller) else {
                continue;
            };
            let path = dir.join(file);
            // v2's swap file exists only with swap accounting; its absence is no failure.
            if file == "memory.swap.max" && !path.exists() {
                continue;
            }
            std::fs::write(&path, value)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        }
        Ok(())
    }

    /// The files a process writes its pid into to join this cgroup.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .map(|(_, d)| d.join("cgroup.procs"))
            .collect()
    }

    /// The number of OOM kills in this cgroup so far.
    pub fn oom_kills(&self) -> u64 {
        let text = if self.v1 {
            self.read("memory", "memory.oom_control")
        } else {
            self.read("memory", "memory.events")
        };
        text.and_then(|t| limits::keyed(&t, "oom_kill"))
            .unwrap_or(0)
    }

    /// The task's usage now; `None` when the cgroup is gone.
    pub fn sample(&self) -> Option<Sample> {
        let (cpu_ns, usage, inactive) = if self.v1 {
            let cpu = self.read("cpuacct", "cpuacct.usage")?.trim().parse().ok()?;
            let usage = self
                .read("memory", "memory.usage_in_bytes")?
                .trim()
                .parse()
                .ok()?;
            let stat = self.read("memory", "memory.stat").unwrap_or_default();
            (cpu, usage, limits::keyed(&stat, "total_inactive_file"))
        } else {
            let cpu_stat = self.read("cpu", "cpu.stat")?;
            let cpu = limits::keyed(&cpu_stat, "usage_usec")?.saturating_mul(1000);
            let usage = self.read("memory", "memory.current")?.trim().parse().ok()?;
            let stat = self.read("memory", "memory.stat").unwrap_or_default();
            (cpu, usage, limits::keyed(&stat, "inactive_file"))
        };
        Some(Sample {
            cpu_ns,
            memory_bytes: limits::working_set(usage, inactive.unwrap_or(0)),
        })
    }

    /// The pids in the cgroup now.
    fn pids(&self) -> Vec<i32> {
        self.read("pids", "cgroup.procs")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// SIGKILLs everything left in the cgroup (what a task forked and left behind) and
    /// waits briefly for it to empty.
    pub fn kill_all(&self) {
        if !self.v1
            && let Some(dir) = self.dir("")
            && std::fs::write(dir.join("cgroup.kill"), "1").is_ok()
        {
            return;
        }
        for _ in 0..50 {
            let pids = self.pids();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Removes the directories (they must be empty of processes).
    pub fn remove(&self) {
        for (_, dir) in &self.dirs {
            if let Err(e) = std::fs::remove_dir(dir)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(cgroup = %dir.display(), error = %e, "cannot remove task cgroup");
            }
        }
    }
}
