//! How many bytes of entries one AppendEntries to a peer may carry, learned from how fast
//! that peer answers.
//!
//! openraft 0.9 gives every AppendEntries one heartbeat interval to be answered, and the
//! heartbeats themselves wait behind it in the same replication stream. A batch the
//! follower cannot take in time is dropped by the leader, never counts as delivered, and is
//! sent again whole: a loaded follower falls behind for good, misses heartbeats, and calls
//! an election. So the budget follows the answers, as a congestion window does: it is cut
//! in half when a call is dropped (the previous send never finished), cut by a quarter when
//! an answer took more than half the deadline, and grows by an eighth of the ceiling when
//! a full batch was answered within a quarter of it. A partial success tells openraft to
//! send the rest, so a smaller budget costs round trips, never entries.

use std::time::Duration;

/// The smallest budget: a few plans, so a follower always gets something it can answer.
pub const MIN_PAYLOAD_BYTES: usize = 32 * 1024;

/// One peer's budget. Invariant: `min <= current <= max`.
#[derive(Debug, Clone)]
pub struct PayloadBudget {
    current: usize,
    min: usize,
    max: usize,
    /// A send started and has not finished: if the next send finds it still set, the
    /// previous call was dropped by its deadline.
    in_flight: bool,
}

impl PayloadBudget {
    /// Starts at the ceiling `max` (at least [`MIN_PAYLOAD_BYTES`]).
    pub fn new(max: usize) -> Self {
        let max = max.max(MIN_PAYLOAD_BYTES);
        Self {
            current: max,
            min: MIN_PAYLOAD_BYTES,
            max,
            in_flight: false,
        }
    }

    /// The budget of the send about to start.
    pub fn take(&mut self) -> usize {
        if self.in_flight {
            self.shrink(1, 2);
        }
        self.in_flight = true;
        self.current
    }

    /// The send finished with an answer after `elapsed`, against a deadline of `deadline`;
    /// `full` is whether the budget, not the entries at hand, bounded what it carried.
    pub fn answered(&mut self, elapsed: Duration, deadline: Duration, full: bool) {
        self.in_flight = false;
        if elapsed * 2 > deadline {
            self.shrink(3, 4);
        } else if full && elapsed * 4 < deadline {
            self.current = (self.current + self.max / 8).min(self.max);
        }
    }

    /// The send finished without an answer (unreachable, reset): says nothing of speed.
    pub fn failed(&mut self) {
        self.in_flight = false;
    }

    pub fn current(&self) -> usize {
        self.current
    }

    fn shrink(&mut self, num: usize, den: usize) {
        self.current = (self.current / den * num).max(self.min);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEADLINE: Duration = Duration::from_millis(100);
    const MAX: usize = 1024 * 1024;

    enum Step {
        /// A send answered after this many milliseconds, full or not.
        Answer(u64, bool),
        /// A send dropped by its deadline (the next take sees it).
        Dropped,
        Failed,
    }
    use Step::*;

    /// Plays `steps` from a fresh budget and returns the budget after each.
    fn check(steps: &[Step]) -> Vec<usize> {
        let mut b = PayloadBudget::new(MAX);
        steps
            .iter()
            .map(|step| {
                b.take();
                match step {
                    Answer(ms, full) => b.answered(Duration::from_millis(*ms), DEADLINE, *full),
                    Dropped => {}
                    Failed => b.failed(),
                }
                assert!(b.current() >= MIN_PAYLOAD_BYTES && b.current() <= MAX);
                b.current()
            })
            .collect()
    }

    #[test]
    fn the_budget_follows_the_answers() {
        let cases: &[(&str, &[Step], &[usize])] = &[
            (
                "fast answers keep the ceiling",
                &[Answer(5, true), Answer(5, true)],
                &[MAX, MAX],
            ),
            (
                "a slow answer costs a quarter",
                &[Answer(60, true)],
                &[MAX / 4 * 3],
            ),
            // The drop is seen when the next send starts: halved, then that one's answer.
            (
                "a dropped send halves it",
                &[Dropped, Answer(30, false)],
                &[MAX, MAX / 2],
            ),
            (
                "fast full answers grow it back by an eighth each",
                &[Dropped, Answer(5, true), Answer(5, true)],
                &[MAX, MAX / 2 + MAX / 8, MAX / 2 + MAX / 4],
            ),
            (
                "a batch that was not full does not grow it",
                &[Answer(60, true), Answer(1, false)],
                &[MAX / 4 * 3, MAX / 4 * 3],
            ),
            (
                "a failure says nothing of speed",
                &[Answer(60, true), Failed, Failed],
                &[MAX / 4 * 3; 3],
            ),
        ];
        for (what, steps, want) in cases {
            assert_eq!(check(steps), *want, "{what}");
        }
    }

    #[test]
    fn repeated_drops_stop_at_the_floor() {
        let steps: Vec<Step> = (0..40).map(|_| Dropped).collect();
        let got = check(&steps);
        assert_eq!(*got.last().unwrap(), MIN_PAYLOAD_BYTES);
    }
}
