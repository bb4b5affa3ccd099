//! `drover bench --scenario restart`: how long a big server is out after a crash. The
//! run fills the server (nodes, then jobs until every allocation is placed), notes the
//! Raft index it applied, SIGKILLs it and starts it again on the same data dir. Measured
//! from the restart: until it serves a read that shows everything it had applied (the
//! jobs listed at an index at least the one before the kill), and until it accepts a
//! write (a job registration).
//!
//! Needs the server started by the run: a remote server cannot be killed from here.

use super::error::BenchError;
use super::jobs::{self, Goal};
use super::progress::Progress;
use super::report::secs;
use super::target::Target;
use super::workload::Workload;
use crate::client::Client;
use drover_proto::v1 as pb;
use serde::Serialize;
use std::time::Duration;
use tokio::time::Instant;

/// How often the restarted server is asked while it comes back.
const POLL_EVERY: Duration = Duration::from_millis(20);

#[derive(Clone, Debug, Serialize)]
pub struct RestartReport {
    pub scenario: &'static str,
    pub server_address: String,
    pub nodes: u64,
    pub allocations: u64,
    /// Raft index applied before the kill.
    pub applied_index: u64,
    /// The data dir's size on disk at the kill.
    pub data_dir_mib: f64,
    /// The server's RSS before the kill (what serving that state takes).
    pub rss_before_kill_mib: Option<f64>,
    /// Filling the server: first job submitted to every allocation placed.
    pub fill_secs: f64,
    /// Restart → a read at or past the index applied before the kill.
    pub consistent_read_secs: f64,
    /// Restart → a job registration accepted.
    pub write_secs: f64,
    /// The restarted server's peak RSS while it came back.
    pub restarted_peak_rss_mib: Option<f64>,
    /// Each distinct answer the probe write got before one was accepted, in order.
    pub write_refusals: Vec<String>,
    /// Where the restart's time went, as the server logged it; `None` if it did not.
    pub phases: Option<RestartPhases>,
}

/// A restart's phases as the server logs them ("restart replayed the log").
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RestartPhases {
    pub log_open_secs: f64,
    /// Reading the snapshot file, decoding it and rebuilding every index.
    pub snapshot_load_secs: f64,
    /// Re-applying the log after the snapshot.
    pub replay_secs: f64,
    pub replayed_entries: u64,
}

impl RestartPhases {
    /// The phases of the last restart in a server's log.
    pub fn from_log(log: &str) -> Option<Self> {
        let line = log
            .lines()
            .rev()
            .find(|l| l.contains("restart replayed the log"))?;
        let field = |name: &str| -> Option<u64> {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))?
                .parse()
                .ok()
        };
        let secs = |name: &str| field(name).map(|ms| ms as f64 / 1000.0);
        Some(RestartPhases {
            log_open_secs: secs("log_open_ms")?,
            snapshot_load_secs: secs("snapshot_load_ms")?,
            replay_secs: secs("replay_ms")?,
            replayed_entries: field("entries")?,
        })
    }
}

impl RestartReport {
    pub fn render(&self) -> String {
        let mib = |m: Option<f64>| m.map_or("unknown".into(), |m| format!("{m:.1} MiB"));
        crate::output::key_values(&[
            (
                "Restart",
                format!(
                    "SIGKILL and restart with {} allocations on {} nodes in state",
                    self.allocations, self.nodes
                ),
            ),
            ("Server", self.server_address.clone()),
            (
                "State",
                format!(
                    "raft index {}, data dir {:.1} MiB, RSS {} before the kill",
                    self.applied_index,
                    self.data_dir_mib,
                    mib(self.rss_before_kill_mib)
                ),
            ),
            ("Fill", format!("{:.2}s (all placed)", self.fill_secs)),
            (
                "Consistent read",
                format!(
                    "{:.2}s after restart (reads at index >= {})",
                    self.consistent_read_secs, self.applied_index
                ),
            ),
            (
                "Write accepted",
                format!("{:.2}s after restart", self.write_secs),
            ),
            ("Restarted peak RSS", mib(self.restarted_peak_rss_mib)),
            (
                "Phases",
                self.phases.as_ref().map_or("not logged".into(), |p| {
                    format!(
                        "log open {:.2}s, snapshot load {:.2}s, replay of {} entries {:.2}s",
                        p.log_open_secs, p.snapshot_load_secs, p.replayed_entries, p.replay_secs
                    )
                }),
            ),
        ])
    }
}

pub async fn measure(
    target: &mut Target,
    workload: &Workload,
    in_flight: usize,
    deadline: Instant,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<RestartReport, BenchError> {
    if !target.is_child() {
        return Err(needs_own_server());
    }
    let client = Client::connect(target.url()).await?;
    let sim = super::nodes::start(&client, workload, deadline, timeout, progress).await?;
    let measured = fill_kill_restart(
        target, &client, workload, in_flight, deadline, timeout, progress,
    )
    .await;
    sim.shutdown().await;
    measured
}

async fn fill_kill_restart(
    target: &mut Target,
    client: &Client,
    workload: &Workload,
    in_flight: usize,
    deadline: Instant,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<RestartReport, BenchError> {
    progress.phase(&format!(
        "filling: {} jobs of {} allocations",
        workload.jobs, workload.count
    ));
    let started = Instant::now();
    jobs::submit(client, workload, in_flight, deadline, timeout).await?;
    let tally = jobs::wait_for(client, workload, Goal::Placed, deadline, timeout, progress).await?;
    let fill = started.elapsed();
    let applied_index = jobs::applied_index(client).await?;
    let Some(server) = target.child_mut() else {
        return Err(needs_own_server());
    };
    let data_dir_mib = server.data_dir_bytes() as f64 / 1_048_576.0;
    let rss_before_kill_mib = server.usage().map(|u| u.rss_kib as f64 / 1024.0);
    progress.phase(&format!(
        "SIGKILL at raft index {applied_index} ({data_dir_mib:.0} MiB on disk), then restart"
    ));
    server.kill();
    server.restart()?;
    let restarted = Instant::now();
    let url = server.url().to_string();
    let consistent_read = loop {
        if let Some(index) = jobs_index(&url, workload).await
            && index >= applied_index
        {
            break restarted.elapsed();
        }
        give_up_at(deadline, timeout, "consistent reads after the restart")?;
        tokio::time::sleep(POLL_EVERY).await;
    };
    progress.phase(&format!(
        "reads back after {:.2}s; waiting for a write",
        secs(consistent_read)
    ));
    let probe_job = workload.job(workload.jobs);
    let mut refusals: Vec<String> = Vec::new();
    let write = loop {
        let refused = match Client::connect(&url).await {
            Ok(c) => match c
                .jobs()
                .register(pb::RegisterJobRequest {
                    job: Some((&probe_job).into()),
                    enforce_index: None,
                })
                .await
            {
                Ok(_) => break restarted.elapsed(),
                Err(status) => format!("{:?}: {}", status.code(), status.message()),
            },
            Err(e) => e.to_string(),
        };
        if !refusals.contains(&refused) {
            tracing::debug!(after = ?restarted.elapsed(), %refused, "write refused after restart");
            refusals.push(refused);
        }
        give_up_at(deadline, timeout, "writes after the restart")?;
        tokio::time::sleep(POLL_EVERY).await;
    };
    Ok(RestartReport {
        scenario: "restart",
        server_address: url,
        nodes: u64::from(workload.nodes),
        allocations: tally.placed,
        applied_index,
        data_dir_mib,
        rss_before_kill_mib,
        fill_secs: secs(fill),
        consistent_read_secs: secs(consistent_read),
        write_secs: secs(write),
        restarted_peak_rss_mib: server.usage().map(|u| u.peak_rss_kib as f64 / 1024.0),
        write_refusals: refusals,
        phases: RestartPhases::from_log(&server.log_text()),
    })
}

pub fn needs_own_server() -> BenchError {
    BenchError::Setting {
        flag: "--address",
        reason: "the restart scenario kills its server, so it starts its own".into(),
    }
}

fn give_up_at(deadline: Instant, timeout: Duration, what: &'static str) -> Result<(), BenchError> {
    if Instant::now() >= deadline {
        return Err(BenchError::Deadline {
            what,
            done: 0,
            wanted: 1,
            timeout,
        });
    }
    Ok(())
}

/// The index the server answers the run's job list at, once it lists all of them.
async fn jobs_index(url: &str, workload: &Workload) -> Option<u64> {
    let client = Client::connect(url).await.ok()?;
    let answer = drover_proto::paging::job_list_all(
        &client.jobs(),
        pb::ListJobsRequest {
            id_prefix: workload.job_prefix(),
            ..Default::default()
        },
    )
    .await
    .ok()?;
    (answer.jobs.len() as u64 >= u64::from(workload.jobs)).then_some(answer.index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_come_from_the_last_restart_the_server_logged() {
        let log = "\
2026-11-27T17:00:04Z  INFO drover_server::raft: restart replayed the log node_id=1 entries=9 log_open_ms=1 snapshot_load_ms=2 replay_ms=3
2026-11-27T17:00:59Z  INFO drover_server::raft: restart replayed the log node_id=1 entries=171 log_open_ms=51 snapshot_load_ms=2480 replay_ms=3012
2026-11-27T17:01:00Z  WARN drover_server::leader: something else
";
        assert_eq!(
            RestartPhases::from_log(log),
            Some(RestartPhases {
                log_open_secs: 0.051,
                snapshot_load_secs: 2.48,
                replay_secs: 3.012,
                replayed_entries: 171,
            })
        );
        assert_eq!(RestartPhases::from_log("no restart here"), None);
    }
}
