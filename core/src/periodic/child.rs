//! Child jobs: the jobs periodic launches and dispatches register, and their ids.

use crate::types::{Job, JobId, JobStatus, Timestamp};

/// What a periodic child's id ends with, before the launch time in unix seconds.
pub const PERIODIC_SUFFIX: &str = "periodic-";
/// What a dispatched child's id ends with, before `<unix seconds>-<8 hex digits>`.
pub const DISPATCH_SUFFIX: &str = "dispatch-";

/// The id of a child of `parent` whose own part is `suffix`: `<parent>/<suffix>`, Nomad's
/// form, whenever that fits in `max_len` bytes (validation's `max_name_len`).
///
/// A longer parent id is cut at a character boundary and tagged with a hash of the whole
/// parent id: `<parent prefix>~<8 hex>/<suffix>`. So every child id stays within the limit
/// submitted ids are held to, and anything downstream that checks or displays ids against
/// that limit (re-validation, tables, proto fields) treats children like any other job,
/// while two long parents that share a prefix still get distinct children. Such a child no
/// longer starts with its parent's id: find children by [`Job::parent_id`], never by prefix.
///
/// The result is at most `max(max_len, suffix.len() + 10)` bytes long; the second term only
/// matters for limits too small for any suffix, which no configuration uses.
pub fn child_id(parent: &JobId, suffix: &str, max_len: usize) -> JobId {
    let parent = parent.as_str();
    if parent.len() + 1 + suffix.len() <= max_len {
        return JobId::new(format!("{parent}/{suffix}"));
    }
    let tag = format!("~{:08x}", fnv1a(parent.as_bytes()));
    let mut room = max_len.saturating_sub(1 + suffix.len() + tag.len());
    while !parent.is_char_boundary(room) {
        room -= 1;
    }
    JobId::new(format!("{}{tag}/{suffix}", &parent[..room]))
}

/// The launch time a periodic child's id carries (`…/periodic-<unix seconds>`), in whole
/// seconds. `None` for ids that are not periodic children.
///
/// The id is where the launch time is kept durably: the FSM stamps `submit_time` with the
/// time of the register command, and meta is the operator's (tasks see it), so neither is
/// relied on.
pub fn periodic_launch_time(child: &JobId) -> Option<Timestamp> {
    let (_, own) = child.as_str().rsplit_once('/')?;
    let secs = own.strip_prefix(PERIODIC_SUFFIX)?;
    if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    Some(Timestamp::from_millis(secs.checked_mul(1000)?))
}

/// A fresh child of `parent` with id `id`: the parent's spec, no longer a template, linked to
/// the parent, with every server-owned field reset for the FSM to fill in.
pub(crate) fn derive(parent: &Job, id: JobId, submit_time: Timestamp) -> Job {
    let mut child = parent.clone();
    child.name = id.to_string();
    child.id = id;
    child.periodic = None;
    child.parameterized = None;
    child.parent_id = Some(parent.id.clone());
    child.version = 0;
    child.status = JobStatus::Pending;
    child.stop = false;
    child.submit_time = submit_time;
    child.create_index = 0;
    child.modify_index = 0;
    child.job_modify_index = 0;
    child
}

/// 32-bit FNV-1a: tiny and stable across Rust releases and platforms (unlike std's hasher),
/// which ids stored in the Raft log need.
fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}
