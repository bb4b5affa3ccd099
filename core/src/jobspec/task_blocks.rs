//! The task and group blocks beyond a command: task `lifecycle`, `user`, `kill_signal` and
//! its own `restart` (read in `task.rs` with the group's reader), and group
//! `ephemeral_disk`. A task's `restart` block starts from the job type's defaults, not from
//! its group's block: a setting it leaves out takes the type's default.

use super::decoder::{Decoder, join};
use super::job::one_of;
use super::reader::{Item, Shape, walk};
use crate::types::{EphemeralDisk, Lifecycle, LifecycleHook};
use hcl::edit::structure::Block;

const LIFECYCLE_FIELDS: &[(&str, Shape)] = &[("hook", Shape::Attr), ("sidecar", Shape::Attr)];

const EPHEMERAL_DISK_FIELDS: &[(&str, Shape)] = &[
    ("size", Shape::Attr),
    ("migrate", Shape::Unsupported),
    ("sticky", Shape::Unsupported),
];

/// A `lifecycle` block; `None` (with a problem recorded) when its `hook` is missing or bad.
pub(super) fn lifecycle(d: &mut Decoder<'_>, task_path: &str, block: &Block) -> Option<Lifecycle> {
    let path = join(task_path, "lifecycle");
    let at = Item::Block(block).at();
    d.mark(path.clone(), at);
    let mut hook = None;
    let mut hook_written = false;
    let mut sidecar = false;
    for (name, item) in walk(d, &block.body, "lifecycle", LIFECYCLE_FIELDS) {
        let Item::Attr(a) = item else { continue };
        match name {
            "hook" => {
                hook_written = true;
                hook = d.read(&path, a, |v, f| {
                    let text = v.string(f)?;
                    let names = LifecycleHook::ALL.map(LifecycleHook::as_str);
                    LifecycleHook::parse(&text).ok_or_else(|| (v.at, one_of(f, &text, &names)))
                });
            }
            "sidecar" => sidecar = d.read(&path, a, |v, f| v.bool(f)).unwrap_or(false),
            _ => {}
        }
    }
    if !hook_written {
        d.problems.at(
            at,
            "lifecycle needs a hook (prestart, poststart or poststop)",
        );
    }
    Some(Lifecycle {
        hook: hook?,
        sidecar,
    })
}

/// A group's `ephemeral_disk` block (Nomad's default size when `size` is left out).
pub(super) fn ephemeral_disk(
    d: &mut Decoder<'_>,
    group_path: &str,
    block: &Block,
) -> EphemeralDisk {
    let path = join(group_path, "ephemeral_disk");
    d.mark(path.clone(), Item::Block(block).at());
    let mut disk = EphemeralDisk {
        size_mb: EphemeralDisk::DEFAULT_SIZE_MB,
    };
    for (name, item) in walk(d, &block.body, "ephemeral_disk", EPHEMERAL_DISK_FIELDS) {
        if let ("size", Item::Attr(a)) = (name, item) {
            disk.size_mb = d.read(&path, a, |v, f| v.whole(f)).unwrap_or(disk.size_mb);
        }
    }
    disk
}
