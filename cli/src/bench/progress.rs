//! Progress lines on standard error while a long run waits, so an operator watching a
//! million placements sees them come; standard output keeps only the report.

use std::time::Duration;
use tokio::time::Instant;

/// How often a waiting phase says where it is.
const EVERY: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub struct Progress {
    enabled: bool,
    last: Instant,
}

impl Progress {
    /// Progress that prints only if `enabled` (not with `--json`, whose readers want quiet).
    pub fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            last: Instant::now(),
        }
    }

    /// A phase begins: say so at once.
    pub fn phase(&mut self, what: &str) {
        if self.enabled {
            eprintln!("==> {what}");
        }
        self.last = Instant::now();
    }

    /// Prints `line()` if the last line is a while ago; builds it only then.
    pub fn tick(&mut self, line: impl FnOnce() -> String) {
        if self.enabled && self.last.elapsed() >= EVERY {
            eprintln!("    {}", line());
            self.last = Instant::now();
        }
    }
}
