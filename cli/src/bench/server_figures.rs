//! The benchmarked server's own figures over a measured phase: its CPU time, its disk
//! writes, its peak memory, and the latencies its `/metrics` histograms recorded, each
//! the difference between a reading before the phase and one after.
//!
//! Only a server started for the run can be read this way; against a remote one every
//! figure is absent rather than guessed.

use super::procfs::Usage;
use super::scrape::{self, Histogram};
use super::target::Target;
use serde::Serialize;

/// A reading of the server at one moment.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    usage: Option<Usage>,
    page: Option<String>,
}

impl Probe {
    pub async fn take(target: &Target) -> Probe {
        let Some(child) = target.leader().await else {
            return Probe::default();
        };
        let page = match scrape::fetch(child.metrics_addr()).await {
            Ok(page) => Some(page),
            Err(error) => {
                tracing::warn!(%error, "cannot read the bench server's metrics");
                None
            }
        };
        Probe {
            usage: child.usage(),
            page,
        }
    }

    fn histogram(&self, name: &str) -> Histogram {
        self.page
            .as_deref()
            .map(|p| Histogram::parse(p, name))
            .unwrap_or_default()
    }

    fn counter(&self, name: &str) -> Option<f64> {
        self.page.as_deref().map(|p| scrape::counter(p, name))
    }
}

/// What the server spent and how long its work took between two probes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ServerFigures {
    /// The server process's VmHWM at the end: its own peak, never the simulator's.
    pub peak_rss_mib: Option<f64>,
    pub cpu_secs: Option<f64>,
    /// Bytes the server caused to be written to disk during the phase.
    pub disk_written_bytes: Option<u64>,
    /// Eval creation to ack (`drover_eval_seconds`), during the phase.
    pub eval_ms: Option<Quantiles>,
    /// The plan applier's time per plan (`drover_plan_apply_seconds`).
    pub plan_apply_ms: Option<Quantiles>,
    /// Heartbeats the server handled (`drover_heartbeats_total`).
    pub heartbeats: Option<u64>,
    /// What the Raft log appended (`drover_raft_log_*_total`).
    pub raft_log: Option<RaftLogFigures>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RaftLogFigures {
    /// Append transactions, each one fsync.
    pub appends: u64,
    pub entries: u64,
    /// Encoded bytes of the entries.
    pub bytes: u64,
    /// Disk bytes written over log bytes: what the storage engine adds (snapshots
    /// included).
    pub write_amplification: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Quantiles {
    pub count: u64,
    pub p50: f64,
    pub p99: f64,
}

fn quantiles_ms(h: &Histogram) -> Option<Quantiles> {
    Some(Quantiles {
        count: h.count(),
        p50: h.quantile(0.5)? * 1e3,
        p99: h.quantile(0.99)? * 1e3,
    })
}

impl ServerFigures {
    pub fn between(before: &Probe, after: &Probe) -> ServerFigures {
        let usage = before.usage.zip(after.usage);
        let delta = |name: &str| {
            before
                .counter(name)
                .zip(after.counter(name))
                .map(|(b, a)| (a - b).max(0.0) as u64)
        };
        let disk_written_bytes = usage.map(|(b, a)| a.write_bytes.saturating_sub(b.write_bytes));
        let raft_log = match (
            delta("drover_raft_log_appends_total"),
            delta("drover_raft_log_entries_total"),
            delta("drover_raft_log_bytes_total"),
        ) {
            (Some(appends), Some(entries), Some(bytes)) => Some(RaftLogFigures {
                appends,
                entries,
                bytes,
                write_amplification: disk_written_bytes
                    .filter(|_| bytes > 0)
                    .map(|d| d as f64 / bytes as f64),
            }),
            _ => None,
        };
        let eval = after
            .histogram("drover_eval_seconds")
            .since(&before.histogram("drover_eval_seconds"));
        let plan = after
            .histogram("drover_plan_apply_seconds")
            .since(&before.histogram("drover_plan_apply_seconds"));
        ServerFigures {
            peak_rss_mib: after.usage.map(|u| u.peak_rss_kib as f64 / 1024.0),
            cpu_secs: usage.map(|(b, a)| (a.cpu_secs - b.cpu_secs).max(0.0)),
            disk_written_bytes,
            eval_ms: quantiles_ms(&eval),
            plan_apply_ms: quantiles_ms(&plan),
            heartbeats: delta("drover_heartbeats_total"),
            raft_log,
        }
    }

    /// `key = value` lines for the human report; absent figures say why.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let unknown = || "unknown (remote server or no /proc)".to_string();
        let q = |q: &Option<Quantiles>| match q {
            Some(q) => format!(
                "p50 {:.2} ms, p99 {:.2} ms ({} samples)",
                q.p50, q.p99, q.count
            ),
            None => "none measured".to_string(),
        };
        vec![
            (
                "Server peak RSS",
                self.peak_rss_mib.map_or_else(unknown, |m| {
                    format!("{m:.1} MiB (the server process alone)")
                }),
            ),
            (
                "Server CPU",
                self.cpu_secs.map_or_else(unknown, |s| format!("{s:.2}s")),
            ),
            (
                "Server disk writes",
                self.disk_written_bytes
                    .map_or_else(unknown, |b| format!("{:.1} MiB", b as f64 / 1_048_576.0)),
            ),
            (
                "Raft log",
                match &self.raft_log {
                    Some(l) => format!(
                        "{} entries in {} appends, {:.1} MiB{}",
                        l.entries,
                        l.appends,
                        l.bytes as f64 / 1_048_576.0,
                        l.write_amplification
                            .map(|w| format!(" (disk writes {w:.1}x the log)"))
                            .unwrap_or_default()
                    ),
                    None => unknown(),
                },
            ),
            ("Eval latency", q(&self.eval_ms)),
            ("Plan apply", q(&self.plan_apply_ms)),
        ]
    }
}
