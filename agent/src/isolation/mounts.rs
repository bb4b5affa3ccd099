//! The filesystem an `exec` task sees: its task directory as `/`, the host directories of
//! the agent's `chroot_env` bound read-only at the same paths (symlinks such as a merged-usr
//! `/bin -> usr/bin` copied as symlinks), the allocation's shared dir at `/alloc`, a fresh
//! `/proc` of the task's own PID namespace, a `/dev` with only the harmless device nodes, and
//! a sticky, world-writable `/tmp`. The plan is pure ([`plan`]); [`apply`] runs it inside
//! the task's new mount namespace, whose propagation is made private first so nothing
//! mounted here is ever seen by the host (and removing an allocation dir can never reach
//! through a bind into `/usr`).

use nix::mount::{MsFlags, mount};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Nomad's default `chroot_env`, as host paths (each at the same path inside).
pub const DEFAULT_CHROOT_ENV: [&str; 8] = [
    "/bin",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/run/resolvconf",
    "/sbin",
    "/usr",
];

/// Device nodes a task gets in its `/dev`.
const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// One step of building the task's root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    /// Bind `source` (a directory, or a file when `file`) onto `target`.
    Bind {
        source: PathBuf,
        target: PathBuf,
        read_only: bool,
        file: bool,
    },
    /// A symlink at `target` pointing at `to` (copied from the host as it is).
    Symlink { target: PathBuf, to: PathBuf },
    /// A new procfs (of the PID namespace the mounting process is in).
    Proc { target: PathBuf },
    /// A small tmpfs (for `/dev`).
    Tmpfs { target: PathBuf, mode: u32 },
    /// A plain directory with `mode`.
    Dir { target: PathBuf, mode: u32 },
}

/// A host directory of `chroot_env` as the agent found it: a directory, or a symlink and
/// its target. Missing ones are left out by the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostEntry {
    Dir(PathBuf),
    Symlink(PathBuf, PathBuf),
}

/// `path` inside `root` (host paths are absolute).
fn inside(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// The steps that turn `root` (the task dir) into the task's `/`.
pub fn plan(root: &Path, env: &[HostEntry], alloc_shared: &Path) -> Vec<Step> {
    let mut steps = Vec::new();
    for entry in env {
        steps.push(match entry {
            HostEntry::Dir(dir) => Step::Bind {
                source: dir.clone(),
                target: inside(root, dir),
                read_only: true,
                file: false,
            },
            HostEntry::Symlink(link, to) => Step::Symlink {
                target: inside(root, link),
                to: to.clone(),
            },
        });
    }
    steps.push(Step::Bind {
        source: alloc_shared.to_path_buf(),
        target: root.join("alloc"),
        read_only: false,
        file: false,
    });
    steps.push(Step::Proc {
        target: root.join("proc"),
    });
    steps.push(Step::Tmpfs {
        target: root.join("dev"),
        mode: 0o755,
    });
    for dev in DEVICES {
        steps.push(Step::Bind {
            source: Path::new("/dev").join(dev),
            target: root.join("dev").join(dev),
            read_only: false,
            file: true,
        });
    }
    steps.push(Step::Dir {
        target: root.join("tmp"),
        mode: 0o1777,
    });
    steps
}

/// Removes whatever sits at `target` unless it already is a real directory (or a regular
/// file, for `file`): the task owns its directory and may have planted a symlink there
/// to redirect a mount made as root.
fn clear_target(target: &Path, file: bool) -> std::io::Result<()> {
    match std::fs::symlink_metadata(target) {
        Ok(m) if !m.file_type().is_symlink() && (m.is_dir() != file) => Ok(()),
        Ok(m) if m.is_dir() && !m.file_type().is_symlink() => std::fs::remove_dir_all(target),
        Ok(_) => std::fs::remove_file(target),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn ensure(target: &Path, file: bool) -> std::io::Result<()> {
    clear_target(target, file)?;
    if file {
        if !target.exists() {
            std::fs::write(target, b"")?;
        }
        Ok(())
    } else {
        std::fs::create_dir_all(target)
    }
}

fn io(step: &str, target: &Path, e: impl std::fmt::Display) -> String {
    format!("{step} {}: {e}", target.display())
}

/// Makes every mount private, then runs `steps`. Must run in a new mount namespace.
pub fn apply(steps: &[Step]) -> Result<(), String> {
    let none: Option<&str> = None;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| format!("cannot make mounts private: {e}"))?;
    for step in steps {
        match step {
            Step::Bind {
                source,
                target,
                read_only,
                file,
            } => {
                ensure(target, *file).map_err(|e| io("cannot prepare", target, e))?;
                let flags = MsFlags::MS_BIND | MsFlags::MS_REC;
                mount(Some(source.as_path()), target.as_path(), none, flags, none)
                    .map_err(|e| io(&format!("cannot bind {} on", source.display()), target, e))?;
                if *read_only {
                    let flags = MsFlags::MS_BIND
                        | MsFlags::MS_REMOUNT
                        | MsFlags::MS_RDONLY
                        | MsFlags::MS_NOSUID
                        | MsFlags::MS_NODEV;
                    mount(none, target.as_path(), none, flags, none)
                        .map_err(|e| io("cannot make read-only", target, e))?;
                }
            }
            Step::Symlink { target, to } => {
                clear_target(target, true).map_err(|e| io("cannot prepare", target, e))?;
                if std::fs::read_link(target).ok().as_deref() != Some(to.as_path()) {
                    let _ = std::fs::remove_file(target);
                    std::os::unix::fs::symlink(to, target)
                        .map_err(|e| io("cannot link", target, e))?;
                }
            }
            Step::Proc { target } => {
                ensure(target, false).map_err(|e| io("cannot prepare", target, e))?;
                let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
                mount(Some("proc"), target.as_path(), Some("proc"), flags, none)
                    .map_err(|e| io("cannot mount proc on", target, e))?;
            }
            Step::Tmpfs { target, mode } => {
                ensure(target, false).map_err(|e| io("cannot prepare", target, e))?;
                let data = format!("mode={mode:o},size=64k");
                let flags = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
                mount(
                    Some("tmpfs"),
                    target.as_path(),
                    Some("tmpfs"),
                    flags,
                    Some(data.as_str()),
                )
                .map_err(|e| io("cannot mount tmpfs on", target, e))?;
            }
            Step::Dir { target, mode } => {
                ensure(target, false).map_err(|e| io("cannot prepare", target, e))?;
                crate::layout::set_mode(target, *mode)
                    .map_err(|e| io("cannot chmod", target, e))?;
            }
        }
    }
    Ok(())
}

/// What of `chroot_env` exists on this host (read by the agent when it plans a task).
pub fn host_entries(env: &[PathBuf]) -> Vec<HostEntry> {
    env.iter()
        .filter_map(|p| {
            let meta = std::fs::symlink_metadata(p).ok()?;
            if meta.file_type().is_symlink() {
                Some(HostEntry::Symlink(p.clone(), std::fs::read_link(p).ok()?))
            } else if meta.is_dir() {
                Some(HostEntry::Dir(p.clone()))
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_binds_the_env_read_only_and_gives_the_task_its_own_proc_dev_and_tmp() {
        let root = Path::new("/d/allocs/a1/web");
        let env = [
            HostEntry::Symlink("/bin".into(), "usr/bin".into()),
            HostEntry::Dir("/usr".into()),
            HostEntry::Dir("/run/resolvconf".into()),
        ];
        let steps = plan(root, &env, Path::new("/d/allocs/a1/alloc"));
        let bind = |s: &str, t: &str, ro, file| Step::Bind {
            source: s.into(),
            target: t.into(),
            read_only: ro,
            file,
        };
        let want_prefix = [
            Step::Symlink {
                target: "/d/allocs/a1/web/bin".into(),
                to: "usr/bin".into(),
            },
            bind("/usr", "/d/allocs/a1/web/usr", true, false),
            bind(
                "/run/resolvconf",
                "/d/allocs/a1/web/run/resolvconf",
                true,
                false,
            ),
            bind("/d/allocs/a1/alloc", "/d/allocs/a1/web/alloc", false, false),
            Step::Proc {
                target: "/d/allocs/a1/web/proc".into(),
            },
            Step::Tmpfs {
                target: "/d/allocs/a1/web/dev".into(),
                mode: 0o755,
            },
            bind("/dev/null", "/d/allocs/a1/web/dev/null", false, true),
        ];
        assert_eq!(steps[..want_prefix.len()], want_prefix[..]);
        assert_eq!(
            steps.last(),
            Some(&Step::Dir {
                target: "/d/allocs/a1/web/tmp".into(),
                mode: 0o1777
            })
        );
        // Nothing of the host but the env, the alloc dir and harmless devices is bound.
        for step in &steps {
            if let Step::Bind { source, .. } = step {
                let ok = source.starts_with("/usr")
                    || source.starts_with("/run/resolvconf")
                    || source.starts_with("/d/allocs/a1/alloc")
                    || DEVICES.iter().any(|d| source == &Path::new("/dev").join(d));
                assert!(ok, "{}", source.display());
            }
        }
    }

    #[test]
    fn planted_symlinks_are_replaced_not_followed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).expect("mkdir");
        let target = dir.path().join("usr");
        std::os::unix::fs::symlink(&elsewhere, &target).expect("plant");
        ensure(&target, false).expect("ensure");
        let meta = std::fs::symlink_metadata(&target).expect("exists");
        assert!(meta.is_dir() && !meta.file_type().is_symlink());
        assert!(elsewhere.is_dir(), "the link's target is left alone");

        let file = dir.path().join("null");
        std::fs::create_dir(&file).expect("a dir where a file belongs");
        ensure(&file, true).expect("ensure");
        assert!(std::fs::symlink_metadata(&file).expect("exists").is_file());
    }
}
