//! How fast one join credential may register new nodes: a token bucket per token, so a
//! leaked join token cannot flood the cluster with nodes (every node costs a Raft entry, a
//! heartbeat timer and a place in every system job), while an operator bringing up a rack
//! of machines still registers them as fast as they boot.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tonic::Status;

/// Keys (tokens) remembered at once; past it the table starts over, so a flood of
/// distinct tokens cannot grow memory.
const MAX_KEYS: usize = 4096;

/// The rate and burst of new registrations per join credential.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RegisterRate {
    pub per_second: f64,
    pub burst: u32,
}

impl Default for RegisterRate {
    /// 20 nodes a second after a burst of 100.
    fn default() -> Self {
        Self {
            per_second: 20.0,
            burst: 100,
        }
    }
}

/// Each credential's bucket: tokens left and when it was last filled.
#[derive(Debug)]
pub struct RegisterLimiter {
    rate: RegisterRate,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl RegisterLimiter {
    pub fn new(rate: RegisterRate) -> Self {
        Self {
            rate,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one registration from `key`'s bucket at `now`, or RESOURCE_EXHAUSTED saying
    /// when the next one is allowed.
    pub fn take(&self, key: &str, now: Instant) -> Result<(), Status> {
        let RegisterRate { per_second, burst } = self.rate;
        let burst = f64::from(burst.max(1));
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= MAX_KEYS && !buckets.contains_key(key) {
            buckets.clear();
        }
        let (tokens, at) = buckets.entry(key.to_string()).or_insert((burst, now));
        let refill = now.saturating_duration_since(*at).as_secs_f64() * per_second;
        *tokens = (*tokens + refill).min(burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            return Ok(());
        }
        let wait = if per_second > 0.0 {
            Duration::from_secs_f64((1.0 - *tokens) / per_second)
        } else {
            Duration::MAX
        };
        let mut status = Status::resource_exhausted(format!(
            "this join credential registers nodes faster than limits.node_register_rate ({per_second}/s after a burst of {burst}): retry in {} ms",
            wait.as_millis()
        ));
        let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        if let Ok(v) = ms.to_string().parse() {
            status
                .metadata_mut()
                .insert(crate::error::RETRY_AFTER_MS, v);
        }
        Err(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_registers_a_burst_then_at_its_rate() {
        let limiter = RegisterLimiter::new(RegisterRate {
            per_second: 10.0,
            burst: 3,
        });
        let t0 = Instant::now();
        for i in 0..3 {
            assert!(limiter.take("join", t0).is_ok(), "burst {i}");
        }
        let refused = limiter.take("join", t0).expect_err("past the burst");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(
            refused.message().contains("retry in 100 ms"),
            "{}",
            refused.message()
        );
        assert!(
            limiter.take("other", t0).is_ok(),
            "another token has its own bucket"
        );
        assert!(
            limiter
                .take("join", t0 + Duration::from_millis(100))
                .is_ok(),
            "refilled one"
        );
        assert!(
            limiter
                .take("join", t0 + Duration::from_millis(150))
                .is_err()
        );
        assert!(limiter.take("join", t0 + Duration::from_secs(10)).is_ok());
    }
}
