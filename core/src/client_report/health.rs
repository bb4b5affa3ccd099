//! An allocation's health for its deployment, from its tasks' states: what the agent
//! reports once (`AllocClientUpdate::deployment_health`). Pure, so the agent only
//! supplies the states and the time, and re-asks at the time this answers.
//!
//! Healthy: every task that has not finished successfully runs, at least one does, and
//! the newest start is `min_healthy_time` old; with `health_check = "checks"`, the checks
//! must also have passed for `min_healthy_time` without a break. Unhealthy: a task failed (its restarts
//! used up) or `healthy_deadline` passed since the allocation was tracked without the
//! allocation turning healthy.

use crate::types::{TaskRunState, TaskState, Timestamp};
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Verdict {
    Healthy,
    Unhealthy,
    /// Not yet: ask again at `recheck_at` (or on the next task change).
    Undecided {
        recheck_at: Timestamp,
    },
}

/// What the verdict is measured against.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct HealthGate {
    pub min_healthy_time: Duration,
    pub healthy_deadline: Duration,
    /// When the allocation started to be watched for this deployment.
    pub since: Timestamp,
    pub checks: ChecksGate,
}

/// The allocation's service checks, as `health_check = "checks"` weighs them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ChecksGate {
    /// `health_check = "task_states"`: checks do not count.
    Ignored,
    /// Every check that gates deployments has passed since then (an allocation without
    /// such checks: since it was planned).
    PassingSince(Timestamp),
    /// At least one gating check does not pass now.
    NotPassing,
}

pub fn assess<'a>(
    tasks: impl IntoIterator<Item = &'a TaskState>,
    gate: HealthGate,
    now: Timestamp,
) -> Verdict {
    let deadline = gate.since.saturating_add(gate.healthy_deadline);
    let mut newest_start: Option<Timestamp> = None;
    let mut all_running = true;
    let mut any_running = false;
    for t in tasks {
        if t.failed {
            return Verdict::Unhealthy;
        }
        match (t.state, t.started_at) {
            (TaskRunState::Running, Some(at)) => {
                any_running = true;
                newest_start = Some(newest_start.map_or(at, |n| n.max(at)));
            }
            // A prestart task that finished its work holds nothing back.
            (TaskRunState::Dead, _) => {}
            _ => all_running = false,
        }
    }
    // Healthy time counts from when the tasks run and (when they gate) the checks pass.
    let ready_from = match gate.checks {
        ChecksGate::Ignored => newest_start,
        ChecksGate::PassingSince(at) => newest_start.map(|s| s.max(at)),
        ChecksGate::NotPassing => None,
    };
    if all_running
        && any_running
        && let Some(start) = ready_from
    {
        let healthy_at = start.saturating_add(gate.min_healthy_time);
        if now >= healthy_at && healthy_at <= deadline {
            return Verdict::Healthy;
        }
        if now < deadline {
            return Verdict::Undecided {
                recheck_at: healthy_at.min(deadline),
            };
        }
    }
    if now >= deadline {
        Verdict::Unhealthy
    } else {
        Verdict::Undecided {
            recheck_at: deadline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp(1_000_000);

    fn task(state: TaskRunState, started_s: Option<u64>, failed: bool) -> TaskState {
        TaskState {
            state,
            failed,
            started_at: started_s.map(|s| T0.saturating_add(Duration::from_secs(s))),
            ..Default::default()
        }
    }

    #[test]
    fn health_follows_the_tasks_and_the_clock() {
        use TaskRunState::*;
        use Verdict::*;
        let gate = HealthGate {
            min_healthy_time: Duration::from_secs(10),
            healthy_deadline: Duration::from_secs(60),
            since: T0,
            checks: ChecksGate::Ignored,
        };
        let at = |s: u64| T0.saturating_add(Duration::from_secs(s));
        let cases: Vec<(&str, Vec<TaskState>, u64, Verdict)> = vec![
            (
                "running 5 s",
                vec![task(Running, Some(0), false)],
                5,
                Undecided { recheck_at: at(10) },
            ),
            (
                "running 10 s",
                vec![task(Running, Some(0), false)],
                10,
                Healthy,
            ),
            (
                "the newest start counts",
                vec![task(Running, Some(0), false), task(Running, Some(8), false)],
                12,
                Undecided { recheck_at: at(18) },
            ),
            (
                "a failed task",
                vec![task(Running, Some(0), false), task(Dead, Some(0), true)],
                30,
                Unhealthy,
            ),
            (
                "still pending",
                vec![task(Pending, None, false)],
                30,
                Undecided { recheck_at: at(60) },
            ),
            (
                "pending past the deadline",
                vec![task(Pending, None, false)],
                60,
                Unhealthy,
            ),
            (
                "started too late to be healthy in time",
                vec![task(Running, Some(55), false)],
                60,
                Unhealthy,
            ),
            (
                "a finished prestart task is no obstacle",
                vec![task(Dead, Some(0), false), task(Running, Some(1), false)],
                11,
                Healthy,
            ),
            (
                "nothing running",
                vec![task(Dead, Some(0), false)],
                20,
                Undecided { recheck_at: at(60) },
            ),
        ];
        for (name, tasks, now, want) in cases {
            assert_eq!(assess(&tasks, gate, at(now)), want, "{name}");
        }
    }

    #[test]
    fn with_checks_gating_health_waits_for_them_to_pass_long_enough() {
        use Verdict::*;
        let at = |s: u64| T0.saturating_add(Duration::from_secs(s));
        let gate = |checks| HealthGate {
            min_healthy_time: Duration::from_secs(10),
            healthy_deadline: Duration::from_secs(60),
            since: T0,
            checks,
        };
        let running = [task(TaskRunState::Running, Some(0), false)];
        let cases = [
            (
                "checks fail",
                ChecksGate::NotPassing,
                30,
                Undecided { recheck_at: at(60) },
            ),
            (
                "checks never passed in time",
                ChecksGate::NotPassing,
                60,
                Unhealthy,
            ),
            (
                "passing since 5 s",
                ChecksGate::PassingSince(at(5)),
                12,
                Undecided { recheck_at: at(15) },
            ),
            (
                "passing for 10 s",
                ChecksGate::PassingSince(at(5)),
                15,
                Healthy,
            ),
            (
                "passing before the task ran: the start counts",
                ChecksGate::PassingSince(T0),
                10,
                Healthy,
            ),
            (
                "passing too late for the deadline",
                ChecksGate::PassingSince(at(55)),
                60,
                Unhealthy,
            ),
        ];
        for (name, checks, now, want) in cases {
            assert_eq!(assess(&running, gate(checks), at(now)), want, "{name}");
        }
    }
}
