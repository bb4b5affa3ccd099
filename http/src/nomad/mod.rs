//! Nomad's JSON shapes: serde structs with the field names of Nomad's Go `api` module
//! (PascalCase, `ID`, `JobID`, ...), built from drover's messages. drover's own additions
//! (Scoot health, state history) ride along as extra fields Nomad's clients ignore.
//!
//! Times follow Nomad: `CreateTime`, `ModifyTime`, `SubmitTime` and event times are
//! nanoseconds since the epoch; task `StartedAt` / `FinishedAt` and node event timestamps
//! are RFC 3339 strings; durations are nanoseconds.

pub mod acl;
pub mod alloc;
pub mod check;
pub mod deployment;
pub mod eval;
pub mod event;
pub mod job;
pub mod misc;
pub mod node;
pub mod service;

use drover_core::types::{
    ClientStatus, DesiredStatus, Eligibility, EvalStatus, JobStatus, JobType, NodeHealth,
    NodeStatus, SchedulerAlgorithm, SchedulerType, TaskRunState, TriggeredBy,
};
use drover_proto::WireEnum;
use std::time::Duration;

/// A duration as Nomad writes it: whole nanoseconds.
pub fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Milliseconds since the epoch as Nomad's nanoseconds.
pub fn time_ns(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}

/// Milliseconds since the epoch as RFC 3339 (UTC), Go's zero time for 0.
pub fn rfc3339(ms: u64) -> String {
    if ms == 0 {
        return "0001-01-01T00:00:00Z".into();
    }
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// Days since 1970-01-01 as a proleptic Gregorian (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (era * 400 + yoe + i64::from(m <= 2), m, d)
}

macro_rules! spell {
    ($($fn:ident: $core:ty),* $(,)?) => {
        $(
            /// Nomad's spelling of a wire enum value; empty for one drover does not know.
            pub fn $fn(v: i32) -> &'static str {
                <$core as WireEnum>::Proto::try_from(v)
                    .ok()
                    .and_then(<$core as WireEnum>::from_proto)
                    .map_or("", <$core>::as_str)
            }
        )*
    };
}

spell! {
    job_type: JobType,
    job_status: JobStatus,
    desired_status: DesiredStatus,
    client_status: ClientStatus,
    scheduler_type: SchedulerType,
    triggered_by: TriggeredBy,
    eval_status: EvalStatus,
    node_status: NodeStatus,
    eligibility: Eligibility,
    node_health: NodeHealth,
    algorithm: SchedulerAlgorithm,
}

/// Nomad's spelling of a task's state.
pub fn task_state(v: i32) -> &'static str {
    match pb_task_state(v) {
        Some(TaskRunState::Pending) => "pending",
        Some(TaskRunState::Running) => "running",
        Some(TaskRunState::Dead) => "dead",
        None => "",
    }
}

fn pb_task_state(v: i32) -> Option<TaskRunState> {
    <TaskRunState as WireEnum>::Proto::try_from(v)
        .ok()
        .and_then(TaskRunState::from_proto)
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_are_written_as_go_writes_them() {
        assert_eq!(super::rfc3339(0), "0001-01-01T00:00:00Z");
        assert_eq!(
            super::rfc3339(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
        assert_eq!(super::rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
