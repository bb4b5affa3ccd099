//! Which waiting unary call starts next. At most `max_in_flight` run at once; the rest wait
//! in arrival order, with two exceptions. Heartbeats go first and a quarter of the slots is
//! theirs alone: each simulated node stands for a machine with a connection of its own,
//! whose heartbeat never waits for another machine's report, so reports waiting on a busy
//! leader's commit must not make a thousand nodes miss their TTL. Registrations wait
//! behind everything else and take at most a quarter of the slots: they are writes that
//! queue on the leader, and a node already up must not miss its heartbeat because
//! thousands of others are still registering.

use super::Call;
use std::collections::VecDeque;

/// The calls running now, by kind.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Running {
    pub(super) total: usize,
    pub(super) heartbeats: usize,
    pub(super) registrations: usize,
}

#[derive(Debug)]
pub(super) struct CallQueue {
    max_in_flight: usize,
    heartbeats: VecDeque<u32>,
    others: VecDeque<Call>,
    registrations: VecDeque<u32>,
}

impl CallQueue {
    pub(super) fn new(max_in_flight: usize, nodes: usize) -> Self {
        Self {
            max_in_flight: max_in_flight.max(1),
            heartbeats: VecDeque::new(),
            others: VecDeque::new(),
            registrations: VecDeque::with_capacity(nodes),
        }
    }

    pub(super) fn push(&mut self, call: Call) {
        match call {
            Call::Heartbeat(n) => self.heartbeats.push_back(n),
            Call::Register(n) => self.registrations.push_back(n),
            other => self.others.push_back(other),
        }
    }

    /// The call to start now, given what runs, or `None` while the slots it could take are
    /// full.
    pub(super) fn next(&mut self, running: Running) -> Option<Call> {
        if running.total >= self.max_in_flight {
            return None;
        }
        if let Some(n) = self.heartbeats.pop_front() {
            return Some(Call::Heartbeat(n));
        }
        if running.total - running.heartbeats.min(running.total) >= self.others_slots() {
            return None;
        }
        if let Some(call) = self.others.pop_front() {
            return Some(call);
        }
        if running.registrations < self.registration_slots() {
            return self.registrations.pop_front().map(Call::Register);
        }
        None
    }

    pub(super) fn len(&self) -> usize {
        self.heartbeats.len() + self.others.len() + self.registrations.len()
    }

    /// All slots but a quarter, kept for heartbeats (every slot when there is only one).
    fn others_slots(&self) -> usize {
        (self.max_in_flight - self.max_in_flight / 4).max(1)
    }

    fn registration_slots(&self) -> usize {
        (self.max_in_flight / 4).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::{Call, CallQueue, Running};

    fn kind(call: &Call) -> &'static str {
        match call {
            Call::Heartbeat(_) => "heartbeat",
            Call::Report(_) => "report",
            Call::Register(_) => "register",
            Call::ReadJob(..) => "read",
        }
    }

    /// Queues `waiting` (in order) with `running` calls already started, then starts calls
    /// until the queue says stop, counting each as running; returns the kinds started.
    fn check(max: usize, running: Running, waiting: &[Call], expected: &[&str]) {
        let mut queue = CallQueue::new(max, 0);
        for call in waiting {
            queue.push(call.clone());
        }
        let mut running = running;
        let mut started = Vec::new();
        while let Some(call) = queue.next(running) {
            running.total += 1;
            match call {
                Call::Heartbeat(_) => running.heartbeats += 1,
                Call::Register(_) => running.registrations += 1,
                _ => {}
            }
            started.push(kind(&call));
        }
        assert_eq!(started, expected, "max {max}, running {running:?}");
    }

    #[test]
    fn heartbeats_start_first_and_keep_a_quarter_of_the_slots() {
        use Call::{Heartbeat as H, Register as G, Report as R};
        let idle = Running::default();
        let six_reports = Running {
            total: 6,
            ..Running::default()
        };
        let full_of_reports = Running {
            total: 8,
            ..Running::default()
        };
        // Heartbeats pass reports that arrived before them.
        check(
            8,
            idle,
            &[R(1), R(2), H(3)],
            &["heartbeat", "report", "report"],
        );
        // Reports stop at three quarters of the slots; heartbeats take the rest.
        check(
            8,
            six_reports,
            &[R(1), H(2), R(3), H(4), H(5)],
            &["heartbeat", "heartbeat"],
        );
        let eight_reports: Vec<Call> = (1..=8).map(R).collect();
        check(8, idle, &eight_reports, &["report"; 6]);
        // Nothing starts over the limit, heartbeats included.
        check(8, full_of_reports, &[H(1)], &[]);
        // Registrations come last and take at most a quarter.
        check(
            8,
            idle,
            &[G(1), G(2), G(3), R(4)],
            &["report", "register", "register"],
        );
        // One slot: every kind may use it.
        check(1, idle, &[R(1)], &["report"]);
        check(1, idle, &[G(1)], &["register"]);
    }
}
