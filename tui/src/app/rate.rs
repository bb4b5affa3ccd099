//! Placements per second over the last minute, for the header's sparkline.

use drover_core::Timestamp;
use std::collections::VecDeque;

/// Seconds of history kept.
pub const RATE_WINDOW: usize = 60;

/// Per-second counts, oldest first. Invariant: at most [`RATE_WINDOW`] buckets, the last
/// one for the second `current`.
#[derive(Clone, Debug, Default)]
pub struct PlacementRate {
    buckets: VecDeque<u64>,
    current: u64,
}

impl PlacementRate {
    /// Moves the window so its last bucket is `now`'s second, adding empty seconds.
    pub fn advance(&mut self, now: Timestamp) {
        let second = now.as_millis() / 1_000;
        if self.buckets.is_empty() {
            self.buckets.push_back(0);
            self.current = second;
            return;
        }
        if second <= self.current {
            return;
        }
        let gap = (second - self.current).min(RATE_WINDOW as u64);
        for _ in 0..gap {
            self.buckets.push_back(0);
        }
        while self.buckets.len() > RATE_WINDOW {
            self.buckets.pop_front();
        }
        self.current = second;
    }

    pub fn record(&mut self, now: Timestamp) {
        self.advance(now);
        if let Some(last) = self.buckets.back_mut() {
            *last += 1;
        }
    }

    /// The counts, oldest first.
    pub fn series(&self) -> Vec<u64> {
        self.buckets.iter().copied().collect()
    }

    /// The last complete second's count (the current one is still filling).
    pub fn last_rate(&self) -> u64 {
        let n = self.buckets.len();
        if n >= 2 { self.buckets[n - 2] } else { 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_land_in_their_second_and_old_seconds_fall_off() {
        let mut rate = PlacementRate::default();
        let at = |s: u64| Timestamp::from_millis(s * 1_000 + 500);
        rate.record(at(100));
        rate.record(at(100));
        rate.record(at(101));
        assert_eq!(rate.series(), vec![2, 1]);
        assert_eq!(rate.last_rate(), 2);
        rate.advance(at(103));
        assert_eq!(rate.series(), vec![2, 1, 0, 0]);
        rate.advance(at(100 + 500));
        assert_eq!(rate.series().len(), RATE_WINDOW);
        assert!(rate.series().iter().all(|n| *n == 0));
    }
}
