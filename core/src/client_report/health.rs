//! An allocation's health for its deployment, from its tasks' states: what the agent
//! reports once (`AllocClientUpdate::deployment_health`). Pure, so the agent only
//! supplies the states and the time, and re-asks at the time this answers.
//!
//! Healthy: every task that has not finished successfully runs, at least one does, and
//! the newest start is `min_healthy_time` old. Unhealthy: a task failed (its restarts
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
    if all_running
        && any_running
        && let Some(start) = newest_start
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
}
