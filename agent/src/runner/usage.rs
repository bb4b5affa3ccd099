//! Sampling a running task's usage from its cgroup (or its container's engine) for the
//! allocation updates. Every
//! report is a Raft write on the servers, so a sample is sent only when it moved enough
//! to matter to an operator (see [`worth_reporting`]), and at most every [`EVERY`].

use crate::cgroups::limits::cpu_mhz;
use crate::cgroups::{Sample, TaskCgroup};
use drover_core::types::TaskUsage;
use std::time::{Duration, Instant};

/// How often a task's cgroup is read.
pub const EVERY: Duration = Duration::from_secs(5);
/// The first read, soon after the start so a new task shows usage at once.
const FIRST: Duration = Duration::from_secs(1);

/// Whether `next` differs from what was last reported by at least 10% (and 5 MB of
/// memory or 20 MHz of CPU, so an idle task's jitter stays home).
pub fn worth_reporting(last: Option<TaskUsage>, next: TaskUsage) -> bool {
    let Some(last) = last else {
        return true;
    };
    let moved = |a: u64, b: u64, floor: u64| {
        let diff = a.abs_diff(b);
        diff >= floor && diff.saturating_mul(10) >= a.max(b)
    };
    moved(last.memory_mb, next.memory_mb, 5) || moved(last.cpu_mhz, next.cpu_mhz, 20)
}

/// Where a task's usage is read: its cgroup, or its container's stats from the engine.
#[derive(Clone, Debug)]
pub enum UsageSource {
    Cgroup(TaskCgroup),
    Container(crate::driver::docker::ContainerStats),
}

impl UsageSource {
    async fn sample(&self) -> Option<Sample> {
        match self {
            UsageSource::Cgroup(c) => c.sample(),
            UsageSource::Container(c) => c.sample().await,
        }
    }
}

/// Reads one task's usage at a cadence and yields the samples worth sending.
#[derive(Debug)]
pub struct Sampler {
    source: Option<UsageSource>,
    mhz_per_core: u64,
    ticks: tokio::time::Interval,
    previous: Option<(Instant, Sample)>,
    reported: Option<TaskUsage>,
}

impl Sampler {
    pub fn new(source: Option<UsageSource>, mhz_per_core: u64) -> Self {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + FIRST, EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            source,
            mhz_per_core,
            ticks,
            previous: None,
            reported: None,
        }
    }

    /// The next usage worth reporting; never resolves for a task without a source.
    pub async fn next(&mut self) -> TaskUsage {
        let Some(source) = self.source.clone() else {
            return std::future::pending().await;
        };
        loop {
            self.ticks.tick().await;
            let Some(sample) = source.sample().await else {
                continue;
            };
            let now = Instant::now();
            let cpu = match self.previous {
                Some((at, before)) => {
                    let wall = u64::try_from(now.duration_since(at).as_nanos()).unwrap_or(u64::MAX);
                    cpu_mhz(
                        sample.cpu_ns.saturating_sub(before.cpu_ns),
                        wall,
                        self.mhz_per_core,
                    )
                }
                None => 0,
            };
            self.previous = Some((now, sample));
            let usage = TaskUsage {
                cpu_mhz: cpu,
                memory_mb: sample.memory_bytes / (1024 * 1024),
            };
            if worth_reporting(self.reported, usage) {
                self.reported = Some(usage);
                return usage;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_moves_that_matter_are_reported() {
        let u = |cpu_mhz, memory_mb| TaskUsage { cpu_mhz, memory_mb };
        let cases = [
            (None, u(0, 0), true),
            (Some(u(100, 100)), u(100, 100), false),
            (Some(u(100, 100)), u(104, 104), false),
            (Some(u(100, 100)), u(100, 120), true),
            (Some(u(100, 2)), u(100, 6), false),
            (Some(u(100, 100)), u(200, 100), true),
            (Some(u(10, 100)), u(25, 100), false),
            (Some(u(1000, 1000)), u(1060, 1040), false),
        ];
        for (last, next, want) in cases {
            assert_eq!(worth_reporting(last, next), want, "{last:?} -> {next:?}");
        }
    }
}
