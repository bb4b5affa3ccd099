//! The checks of a task's `user`, `kill_signal`, own `restart` and `lifecycle`, and of a
//! group's `ephemeral_disk` and lifecycle mix.

use super::group::check_restart;
use super::{Report, show};
use crate::types::{LifecycleHook, Task, TaskGroup};

/// Signal names a task may be stopped with (with or without `SIG`, any case).
const SIGNALS: [&str; 31] = [
    "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
    "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
    "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
];

/// The largest ephemeral disk a group may ask for, in MB (1 PB: above it is a typo).
const MAX_EPHEMERAL_DISK_MB: u64 = 1 << 30;

/// Whether `name` is a signal a task can be sent.
pub fn is_signal(name: &str) -> bool {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS.contains(&bare)
}

pub(super) fn check_task_blocks(r: &mut Report<'_>, p: &str, t: &Task) {
    let max = r.limits.max_name_len;
    if let Some(user) = &t.user {
        if user.is_empty() {
            r.err(p, "user", "user must not be empty when set");
        } else {
            r.text(p, "user", "user", user, max);
        }
    }
    if let Some(signal) = &t.kill_signal
        && !is_signal(signal)
    {
        r.err(
            p,
            "kill_signal",
            format!(
                "kill_signal {} is not a signal name (e.g. SIGINT)",
                show(signal)
            ),
        );
    }
    if let Some(restart) = &t.restart {
        check_restart(r, p, restart);
    }
}

pub(super) fn check_group_blocks(r: &mut Report<'_>, p: &str, g: &TaskGroup) {
    if !g.tasks.is_empty() && g.tasks.iter().all(|t| t.lifecycle.is_some()) {
        r.err(
            p,
            "tasks",
            "at least one main task (without a lifecycle block) is required",
        );
    }
    for t in &g.tasks {
        if let Some(l) = &t.lifecycle
            && l.sidecar
            && l.hook == LifecycleHook::Poststop
        {
            r.err(
                &format!("{p}.tasks[{}]", t.name),
                "lifecycle.sidecar",
                "a poststop task cannot be a sidecar (it runs after the main tasks end)",
            );
        }
    }
    if let Some(disk) = g.ephemeral_disk {
        if disk.size_mb == 0 {
            r.err(
                p,
                "ephemeral_disk.size",
                "size 0 MB is below the minimum of 1 MB",
            );
        } else if disk.size_mb > MAX_EPHEMERAL_DISK_MB {
            r.err(
                p,
                "ephemeral_disk.size",
                format!(
                    "size {} MB is above the limit of {MAX_EPHEMERAL_DISK_MB} MB",
                    disk.size_mb
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_are_known_with_or_without_prefix() {
        let cases = [
            ("SIGINT", true),
            ("int", true),
            (" sigusr1 ", true),
            ("SIGNOPE", false),
            ("", false),
            ("9", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_signal(name), want, "{name:?}");
        }
    }
}
