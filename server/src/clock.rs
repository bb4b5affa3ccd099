//! The server's one clock. Everything below the runtime (core's engine, schedulers, FSM)
//! takes time as an argument; the runtime reads it here, so a test or a simulation that
//! needs another clock has one place to look.

use drover_core::Timestamp;
use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock now, in milliseconds since the Unix epoch.
pub fn now() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    Timestamp::from_millis(ms)
}
