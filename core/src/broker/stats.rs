//! Queue sizes, kept as counters that every state change of an eval updates, so reading
//! them is O(1) however many evals the broker holds.

use crate::SchedulerType;

/// How many evals sit in each part of the broker, for one scheduler type or in total.
///
/// Blocked evals are not counted: they live in the blocked-evals tracker, which reports
/// its own count; the server adds the two together where it shows both.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct QueueCounts {
    /// Waiting in a ready queue to be dequeued.
    pub ready: usize,
    /// Handed out and not yet acked or nacked (including failed evals the leader took).
    pub unacked: usize,
    /// Waiting behind another eval of the same job.
    pub pending: usize,
    /// Delayed by `wait`, `wait_until` or a nack back-off.
    pub waiting: usize,
    /// Superseded by a newer eval of the same job, waiting for the reaper to write their
    /// cancellation.
    pub cancelable: usize,
    /// Past the delivery limit, waiting for the leader to mark them failed.
    pub failed: usize,
}

impl QueueCounts {
    /// Every eval counted, whatever its place.
    pub fn tracked(&self) -> usize {
        self.ready + self.unacked + self.pending + self.waiting + self.cancelable + self.failed
    }

    fn add(&mut self, other: &QueueCounts) {
        self.ready += other.ready;
        self.unacked += other.unacked;
        self.pending += other.pending;
        self.waiting += other.waiting;
        self.cancelable += other.cancelable;
        self.failed += other.failed;
    }

    fn slot(&mut self, bucket: Bucket) -> &mut usize {
        match bucket {
            Bucket::Ready => &mut self.ready,
            Bucket::Unacked => &mut self.unacked,
            Bucket::Pending => &mut self.pending,
            Bucket::Waiting => &mut self.waiting,
            Bucket::Cancelable => &mut self.cancelable,
            Bucket::Failed => &mut self.failed,
        }
    }
}

/// A point-in-time copy of the broker's counters.
#[derive(Clone, Default, Debug, PartialEq, Eq)]
pub struct BrokerStats {
    pub total: QueueCounts,
    /// Indexed by scheduler type, in [`SchedulerType::ALL`] order; see [`Self::for_type`].
    pub by_type: [QueueCounts; SchedulerType::ALL.len()],
    /// The most evals one job held at once (any state but cancelable) since the broker
    /// was last enabled: the storm bound (at most one outstanding and one pending per job,
    /// plus delayed ones) as observed.
    pub peak_job_evals: usize,
}

impl BrokerStats {
    pub fn for_type(&self, t: SchedulerType) -> &QueueCounts {
        &self.by_type[t as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = (SchedulerType, &QueueCounts)> {
        SchedulerType::ALL.into_iter().zip(self.by_type.iter())
    }
}

/// Which counter an eval's state feeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Bucket {
    Ready,
    Unacked,
    Pending,
    Waiting,
    Cancelable,
    Failed,
}

/// The live counters. Invariant: each equals the number of tracked evals of that type in
/// that bucket (the property tests recount to check it).
#[derive(Clone, Default, Debug)]
pub(super) struct Counters {
    by_type: [QueueCounts; SchedulerType::ALL.len()],
}

impl Counters {
    pub(super) fn inc(&mut self, t: SchedulerType, bucket: Bucket) {
        *self.by_type[t as usize].slot(bucket) += 1;
    }

    pub(super) fn dec(&mut self, t: SchedulerType, bucket: Bucket) {
        let n = self.by_type[t as usize].slot(bucket);
        debug_assert!(*n > 0, "broker counter underflow: {t} {bucket:?}");
        *n -= 1;
    }

    pub(super) fn snapshot(&self) -> BrokerStats {
        let mut total = QueueCounts::default();
        for counts in &self.by_type {
            total.add(counts);
        }
        BrokerStats {
            total,
            by_type: self.by_type,
            peak_job_evals: 0,
        }
    }

    pub(super) fn clear(&mut self) {
        self.by_type = Default::default();
    }
}
