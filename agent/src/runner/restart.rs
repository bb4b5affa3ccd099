//! The restart policy: what a task's exit leads to. Pure (time is passed in), so every rule
//! is tested without processes.
//!
//! Rules, as in Nomad: a batch-like task (batch, sysbatch) that exits 0 is done; any other
//! exit, including a service task's exit 0, is unexpected. Unexpected exits restart after
//! `delay` while fewer than `attempts` restarts happened in the current `interval`; past
//! that, mode `fail` gives up, mode `delay` waits until the interval ends and starts a
//! fresh one.

use drover_core::types::{RestartMode, RestartPolicy, Timestamp};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Start the task again after this wait.
    Restart(Duration),
    /// Give up: the task failed.
    Fail,
    /// The task finished its work.
    Done,
}

#[derive(Clone, Debug)]
pub struct RestartTracker {
    policy: RestartPolicy,
    /// When the current interval began; `None` before the first unexpected exit.
    window_start: Option<Timestamp>,
    restarts_in_window: u32,
}

impl RestartTracker {
    pub fn new(policy: RestartPolicy) -> Self {
        Self {
            policy,
            window_start: None,
            restarts_in_window: 0,
        }
    }

    pub fn policy(&self) -> &RestartPolicy {
        &self.policy
    }

    /// Decides what follows an exit at `now`.
    pub fn on_exit(&mut self, now: Timestamp, success: bool, runs_to_completion: bool) -> Verdict {
        if success && runs_to_completion {
            return Verdict::Done;
        }
        let in_window = self
            .window_start
            .is_some_and(|start| now.since(start) < self.policy.interval);
        if !in_window {
            self.window_start = Some(now);
            self.restarts_in_window = 0;
        }
        if self.restarts_in_window < self.policy.attempts {
            self.restarts_in_window += 1;
            return Verdict::Restart(self.policy.delay);
        }
        match self.policy.mode {
            RestartMode::Fail => Verdict::Fail,
            RestartMode::Delay => {
                let start = self.window_start.unwrap_or(now);
                let rest = self.policy.interval.saturating_sub(now.since(start));
                let wait = rest.max(self.policy.delay);
                // The restart opens the next interval, and is its first restart.
                self.window_start = Some(now.saturating_add(wait));
                self.restarts_in_window = 1;
                Verdict::Restart(wait)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: Duration = Duration::from_secs(1);

    fn policy(attempts: u32, interval_s: u64, delay_s: u64, mode: RestartMode) -> RestartPolicy {
        RestartPolicy {
            attempts,
            interval: S * interval_s as u32,
            delay: S * delay_s as u32,
            mode,
        }
    }

    /// Feeds exits at the given seconds (all unexpected unless `ok`), returning verdicts.
    fn run(policy: RestartPolicy, exits: &[(u64, bool)], batch: bool) -> Vec<Verdict> {
        let mut t = RestartTracker::new(policy);
        exits
            .iter()
            .map(|&(sec, ok)| t.on_exit(Timestamp::from_millis(sec * 1000), ok, batch))
            .collect()
    }

    #[test]
    fn verdicts_follow_the_policy() {
        use Verdict::*;
        let fail = policy(2, 60, 1, RestartMode::Fail);
        let delay = policy(1, 60, 1, RestartMode::Delay);
        let cases: Vec<(&str, RestartPolicy, Vec<(u64, bool)>, bool, Vec<Verdict>)> = vec![
            (
                "two restarts then fail",
                fail.clone(),
                vec![(0, false), (2, false), (4, false)],
                false,
                vec![Restart(S), Restart(S), Fail],
            ),
            (
                "a new interval resets the count",
                fail.clone(),
                vec![(0, false), (2, false), (70, false), (72, false)],
                false,
                vec![Restart(S), Restart(S), Restart(S), Restart(S)],
            ),
            (
                "batch success is done",
                fail.clone(),
                vec![(0, true)],
                true,
                vec![Done],
            ),
            (
                "service success still restarts",
                fail.clone(),
                vec![(0, true)],
                false,
                vec![Restart(S)],
            ),
            (
                "zero attempts fail at once",
                policy(0, 60, 1, RestartMode::Fail),
                vec![(0, false)],
                false,
                vec![Fail],
            ),
            (
                "delay mode waits out the interval",
                delay,
                vec![(0, false), (10, false), (70, false)],
                false,
                vec![Restart(S), Restart(S * 50), Restart(S * 50)],
            ),
        ];
        for (name, policy, exits, batch, want) in cases {
            assert_eq!(run(policy, &exits, batch), want, "{name}");
        }
    }

    proptest! {
        #[test]
        fn fail_mode_never_restarts_more_than_attempts_per_interval(
            attempts in 0u32..5,
            gaps in proptest::collection::vec(0u64..30, 1..40),
        ) {
            let p = policy(attempts, 60, 0, RestartMode::Fail);
            let mut t = RestartTracker::new(p);
            let mut now = 0;
            let mut restarts: Vec<u64> = Vec::new();
            for gap in gaps {
                now += gap;
                match t.on_exit(Timestamp::from_millis(now * 1000), false, false) {
                    Verdict::Restart(_) => restarts.push(now),
                    Verdict::Fail => break,
                    Verdict::Done => prop_assert!(false, "unexpected exits are never done"),
                }
                let recent = restarts.iter().filter(|&&r| now - r < 60).count();
                prop_assert!(recent <= 2 * attempts as usize);
            }
        }

        #[test]
        fn delay_mode_never_gives_up(gaps in proptest::collection::vec(0u64..100, 1..40)) {
            let mut t = RestartTracker::new(policy(2, 60, 1, RestartMode::Delay));
            let mut now = 0;
            for gap in gaps {
                now += gap;
                let v = t.on_exit(Timestamp::from_millis(now * 1000), false, false);
                prop_assert!(matches!(v, Verdict::Restart(_)));
            }
        }
    }
}
