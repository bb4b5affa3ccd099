//! What a run measured, printed for people (`key = value` lines) or as JSON for scripts.
//! Both show the same fields; durations are seconds as decimals in JSON.

use crate::output::key_values;
use serde::Serialize;
use std::time::Duration;

use super::server_figures::ServerFigures;

pub const MODE_CHILD: &str = "child-process";
pub const MODE_REMOTE: &str = "remote";

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// `child-process` (a `drover server` started by the run) or `remote` (`--address`).
    pub server_mode: &'static str,
    pub server_address: String,
    /// Scheduler workers of the cluster, as the server lists them.
    pub scheduler_workers: u64,
    pub nodes: u64,
    pub jobs: u64,
    pub count_per_job: u64,
    /// Allocations asked for: jobs times count.
    pub allocations: u64,
    pub placed: u64,
    /// Reported running by the simulated nodes; only with `--until running`.
    pub running: Option<u64>,
    /// Simulator start to every node healthy on the server.
    pub node_registration_secs: f64,
    /// First job submitted to the last one accepted.
    pub submit_secs: f64,
    /// First job submitted to every allocation placed.
    pub placement_secs: f64,
    /// First job submitted to every allocation running; only with `--until running`.
    pub running_secs: Option<f64>,
    pub placements_per_sec: f64,
    /// The same placements through core alone, in this process, after the server stopped.
    pub core: Option<super::core_run::CoreRun>,
    /// End-to-end placement rate over core's (1.0: no cost around core).
    pub end_to_end_vs_core: Option<f64>,
    /// Raft entries the server applied between the first submit and the end of the wait.
    pub raft_entries_applied: u64,
    /// The server's own figures over the same span (absent against a remote server).
    pub server: ServerFigures,
    /// Disk bytes the server wrote during the span over the placements made.
    pub disk_bytes_per_placement: Option<f64>,
    /// The server's data dir at the end of the span (Raft log and snapshots).
    pub data_dir_mib: Option<f64>,
    /// VmHWM of the bench process: the simulated nodes, the load generator and the
    /// console load below.
    pub bench_peak_rss_mib: Option<f64>,
    /// The console's initial load of the placed state over gRPC, as `drover console` does
    /// it at start (absent if it failed; the failure is logged).
    pub console_load: Option<ConsoleLoad>,
    pub settings: Settings,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConsoleLoad {
    /// From the first call to the first frame drawn.
    pub total_secs: f64,
    pub read_secs: f64,
    pub build_secs: f64,
    pub nodes: u64,
    pub allocations: u64,
    /// The server's VmHWM after the load: its peak over the whole run, the console's
    /// reads included (the server figures above end when the placements do).
    pub server_peak_rss_mib: Option<f64>,
    /// The console's memory for the loaded state: how much the bench process's resident
    /// set grew from before the load to its first frame, with that state still held.
    pub console_resident_mib: Option<f64>,
    /// Raft snapshots the server was writing at some point during the load (from its log;
    /// `None` for a server the run did not start): each takes a core of the two the
    /// figures above share, so a load beside one is slower than the read path alone.
    pub server_snapshots_during: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    pub run_id: String,
    pub in_flight: u64,
    pub timeout_secs: f64,
    /// `placed` or `running`.
    pub until: &'static str,
    pub alloc_cpu_mhz: u64,
    pub alloc_memory_mb: u64,
    /// Dynamic ports each allocation asks for (`--ports`).
    pub alloc_ports: u64,
    pub node_cpu_mhz: u64,
    pub node_memory_mb: u64,
}

/// Seconds as a decimal, as the JSON report carries durations.
pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Report {
    fn server(&self) -> String {
        let what = if self.server_mode == MODE_CHILD {
            " (started for the run: production settings, raft log on disk)"
        } else {
            ""
        };
        format!("{} at {}{what}", self.server_mode, self.server_address)
    }

    /// The report as `key = value` lines under a one-line summary.
    pub fn render(&self) -> String {
        let s = &self.settings;
        let mut pairs = vec![
            ("Server", self.server()),
            ("Scheduler workers", self.scheduler_workers.to_string()),
            ("Simulated nodes", self.nodes.to_string()),
            (
                "Jobs",
                format!(
                    "{} service jobs x {} allocations",
                    self.jobs, self.count_per_job
                ),
            ),
            (
                "Allocations placed",
                format!("{} of {}", self.placed, self.allocations),
            ),
        ];
        if let Some(running) = self.running {
            pairs.push((
                "Allocations running",
                format!("{running} of {}", self.allocations),
            ));
        }
        pairs.extend([
            (
                "Node registration",
                format!("{:.2}s (start to all healthy)", self.node_registration_secs),
            ),
            (
                "Job submission",
                format!("{:.2}s (all jobs accepted)", self.submit_secs),
            ),
            (
                "Placement",
                format!("{:.2}s (first submit to all placed)", self.placement_secs),
            ),
        ]);
        if let Some(running) = self.running_secs {
            pairs.push((
                "Running",
                format!("{running:.2}s (first submit to all running)"),
            ));
        }
        pairs.extend([
            (
                "Placement rate",
                format!("{:.0} allocations/s", self.placements_per_sec),
            ),
            (
                "Core alone",
                match (&self.core, self.end_to_end_vs_core) {
                    (Some(c), Some(ratio)) => format!(
                        "{:.0} allocations/s in process, no IO (end to end is {ratio:.3} of it)",
                        c.placements_per_sec
                    ),
                    _ => "not measured".into(),
                },
            ),
            (
                "Raft entries applied",
                self.raft_entries_applied.to_string(),
            ),
        ]);
        pairs.extend(self.server.pairs());
        pairs.extend([
            (
                "Disk per placement",
                match self.disk_bytes_per_placement {
                    Some(b) => format!("{b:.0} bytes"),
                    None => "unknown".into(),
                },
            ),
            (
                "Data dir",
                match self.data_dir_mib {
                    Some(mib) => format!("{mib:.1} MiB at the end"),
                    None => "unknown (remote server)".into(),
                },
            ),
            (
                "Console load",
                match &self.console_load {
                    Some(c) => format!(
                        "{:.2}s for {} nodes and {} allocations (read {:.2}s, first frame {:.2}s){}{}{}",
                        c.total_secs,
                        c.nodes,
                        c.allocations,
                        c.read_secs,
                        c.build_secs,
                        c.console_resident_mib.map_or_else(String::new, |mib| format!(
                            ", console memory {mib:.1} MiB"
                        )),
                        c.server_peak_rss_mib.map_or_else(String::new, |mib| format!(
                            "; server peak RSS {mib:.1} MiB by its end"
                        )),
                        match c.server_snapshots_during {
                            Some(n) if n > 0 => {
                                format!("; the server was writing {n} snapshot(s) during it")
                            }
                            _ => String::new(),
                        }
                    ),
                    None => "not measured".into(),
                },
            ),
            (
                "Bench peak RSS",
                match self.bench_peak_rss_mib {
                    Some(mib) => format!("{mib:.1} MiB (simulated nodes and load generator)"),
                    None => "unknown (no /proc on this system)".into(),
                },
            ),
            (
                "Settings",
                format!(
                    "run {}, in-flight {}, timeout {}, until {}",
                    s.run_id,
                    s.in_flight,
                    humantime::format_duration(Duration::from_secs_f64(s.timeout_secs)),
                    s.until,
                ),
            ),
            (
                "Sizes",
                format!(
                    "{} MHz / {} MB / {} dynamic ports per allocation, {} MHz / {} MB per node",
                    s.alloc_cpu_mhz,
                    s.alloc_memory_mb,
                    s.alloc_ports,
                    s.node_cpu_mhz,
                    s.node_memory_mb
                ),
            ),
        ]);
        let pairs: Vec<(&str, String)> = pairs;
        format!(
            "==> {} allocations placed on {} simulated nodes in {:.2}s\n{}",
            self.placed,
            self.nodes,
            self.placement_secs,
            key_values(&pairs)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(running: bool) -> Report {
        Report {
            server_mode: MODE_CHILD,
            server_address: "http://127.0.0.1:40123".into(),
            scheduler_workers: 2,
            nodes: 1_000,
            jobs: 100,
            count_per_job: 100,
            allocations: 10_000,
            placed: 10_000,
            running: running.then_some(10_000),
            node_registration_secs: 5.123,
            submit_secs: 0.456,
            placement_secs: 3.1,
            running_secs: running.then_some(4.25),
            placements_per_sec: 3225.8,
            core: Some(super::super::core_run::CoreRun {
                placed: 10_000,
                secs: 0.05,
                placements_per_sec: 200_000.0,
            }),
            end_to_end_vs_core: Some(0.016),
            raft_entries_applied: 312,
            server: ServerFigures {
                peak_rss_mib: Some(245.31),
                cpu_secs: Some(4.5),
                disk_written_bytes: Some(3_250_000),
                eval_ms: Some(super::super::server_figures::Quantiles {
                    count: 100,
                    p50: 3.5,
                    p99: 41.0,
                }),
                plan_apply_ms: Some(super::super::server_figures::Quantiles {
                    count: 300,
                    p50: 1.25,
                    p99: 9.5,
                }),
                heartbeats: Some(2_000),
                raft_log: Some(super::super::server_figures::RaftLogFigures {
                    appends: 200,
                    entries: 312,
                    bytes: 1_625_000,
                    write_amplification: Some(2.0),
                }),
            },
            disk_bytes_per_placement: Some(325.0),
            data_dir_mib: Some(12.5),
            bench_peak_rss_mib: Some(120.0),
            console_load: Some(ConsoleLoad {
                total_secs: 0.75,
                read_secs: 0.5,
                build_secs: 0.25,
                nodes: 1_000,
                allocations: 10_000,
                server_peak_rss_mib: Some(250.5),
                console_resident_mib: Some(42.0),
                server_snapshots_during: Some(1),
            }),
            settings: Settings {
                run_id: "0a1b2c3d".into(),
                in_flight: 64,
                timeout_secs: 600.0,
                until: if running { "running" } else { "placed" },
                alloc_cpu_mhz: 10,
                alloc_memory_mb: 16,
                alloc_ports: 0,
                node_cpu_mhz: 4000,
                node_memory_mb: 8192,
            },
        }
    }

    #[test]
    fn human_report_until_placed() {
        insta::assert_snapshot!(report(false).render());
    }

    #[test]
    fn human_report_until_running() {
        insta::assert_snapshot!(report(true).render());
    }

    #[test]
    fn json_report() {
        let json = serde_json::to_string_pretty(&report(false)).expect("serializes");
        insta::assert_snapshot!(json);
    }
}
