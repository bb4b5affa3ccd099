//! One log line per interval for events an outsider can cause at will (a refused Raft call,
//! a refused connection), with the count of those not logged: a client must not be able to
//! fill the disk through the server's log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct LogLimit {
    every_ms: u64,
    born: Instant,
    /// When the last line was allowed, in ms since `born` plus one (0: never).
    last: AtomicU64,
    suppressed: AtomicU64,
}

impl LogLimit {
    pub fn new(every: Duration) -> Self {
        Self {
            every_ms: u64::try_from(every.as_millis()).unwrap_or(u64::MAX),
            born: Instant::now(),
            last: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// `Some(n)` when a line may be logged now, `n` being the events not logged since the
    /// last line; `None` when this one is to be counted only.
    pub fn allow(&self) -> Option<u64> {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> Option<u64> {
        let now_ms = u64::try_from(now.saturating_duration_since(self.born).as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let last = self.last.load(Ordering::Relaxed);
        if (last == 0 || now_ms.saturating_sub(last) >= self.every_ms)
            && self
                .last
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.suppressed.swap(0, Ordering::Relaxed));
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_counts_the_rest() {
        let limit = LogLimit::new(Duration::from_secs(1));
        let t0 = limit.born;
        assert_eq!(limit.allow_at(t0), Some(0), "the first is logged");
        for _ in 0..1000 {
            assert_eq!(limit.allow_at(t0 + Duration::from_millis(500)), None);
        }
        assert_eq!(
            limit.allow_at(t0 + Duration::from_millis(1001)),
            Some(1000),
            "the next line says how many were dropped"
        );
        assert_eq!(limit.allow_at(t0 + Duration::from_millis(1500)), None);
    }
}
