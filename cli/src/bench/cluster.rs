//! `drover bench --servers N`: c1m against N `drover server` processes forming one Raft
//! cluster on this machine, beside the same load against a single server in the same run.
//!
//! Both runs start their own servers (production settings, on-disk Raft logs), one after
//! the other, so the ratio compares like with like on whatever else the machine is doing.
//! What a cluster must show besides its time: no leader change while it places (each
//! server's `drover_leader_establishments_total`), every server at the same applied index
//! at the end (no acknowledged write missing on any of them), and followers' memory close
//! to the leader's.

use super::error::BenchError;
use super::progress::Progress;
use super::report::Report;
use super::scrape;
use super::target::{ChildServer, ServerSettings, Target};
use super::workload::Workload;
use super::{BenchArgs, measure};
use crate::client::Client;
use crate::output::key_values;
use serde::Serialize;
use std::time::Duration;
use tokio::time::Instant;

/// How long followers may take to apply what the leader applied once placement ends.
const CATCH_UP: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClusterReport {
    pub servers: u64,
    /// The same load against one server, first.
    pub single: Report,
    pub cluster: Report,
    /// The cluster's placement time over the single server's (goal: at most 1.6).
    pub cluster_vs_single: f64,
    /// Leaderships established while the cluster placed (0: the first leader kept it).
    pub leader_changes: u64,
    /// Times a leader's lease lapsed while the cluster placed.
    pub lease_lapses: u64,
    /// Whether every server reached the same applied index after placement.
    pub applied_alike: bool,
    /// The largest follower's peak RSS over the leader's.
    pub follower_rss_vs_leader: Option<f64>,
    pub members: Vec<Member>,
}

/// One server of the cluster at the end of the run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Member {
    pub server_id: u64,
    pub leader: bool,
    pub peak_rss_mib: Option<f64>,
    pub cpu_secs: Option<f64>,
    pub applied_index: u64,
    pub leader_establishments: u64,
    pub lease_lapses: u64,
}

/// What one server's metrics say of its leadership.
#[derive(Clone, Copy, Debug, Default)]
struct Reading {
    leader: bool,
    establishments: u64,
    lapses: u64,
    applied: u64,
}

async fn read(server: &ChildServer) -> Reading {
    match scrape::fetch(server.metrics_addr()).await {
        Ok(page) => Reading {
            leader: scrape::counter(&page, "drover_leader") == 1.0,
            establishments: scrape::counter(&page, "drover_leader_establishments_total") as u64,
            lapses: scrape::counter(&page, "drover_leader_lease_lapses_total") as u64,
            applied: scrape::counter(&page, "drover_applied_index") as u64,
        },
        Err(error) => {
            tracing::warn!(%error, "cannot read a cluster server's metrics");
            Reading::default()
        }
    }
}

async fn read_all(target: &Target) -> Vec<Reading> {
    let mut out = Vec::new();
    for server in target.children() {
        out.push(read(server).await);
    }
    out
}

/// The single-server run, then the cluster's; the caller adds core's reference.
pub async fn run(
    args: &BenchArgs,
    workload: &Workload,
    settings: &ServerSettings,
    progress: &mut Progress,
) -> Result<ClusterReport, BenchError> {
    progress.phase("the reference: one drover server as a child process");
    let single = Target::start_child(settings).await?;
    let single_report = measured(single, workload, args, progress).await?;

    let n = usize::from(args.servers);
    progress.phase(&format!(
        "starting {n} drover servers as one Raft cluster (child processes, static peers)"
    ));
    let target = Target::start_cluster(settings, n).await?;
    let before = read_all(&target).await;
    let client = Client::connect(target.url()).await?;
    let placed = measure(&target, &client, workload, args, progress).await;
    let after = read_all(&target).await;
    let (members, applied_alike) = match &placed {
        Ok(_) => settle(&target, &after).await,
        Err(_) => (Vec::new(), false),
    };
    let stopped = target.stop().await;
    let cluster_report = placed?;
    stopped?;

    let sum = |r: &[Reading], f: fn(&Reading) -> u64| r.iter().map(f).sum::<u64>();
    let leader_rss = members
        .iter()
        .find(|m| m.leader)
        .and_then(|m| m.peak_rss_mib);
    let largest_follower = members
        .iter()
        .filter(|m| !m.leader)
        .filter_map(|m| m.peak_rss_mib)
        .reduce(f64::max);
    Ok(ClusterReport {
        servers: n as u64,
        cluster_vs_single: cluster_report.placement_secs / single_report.placement_secs.max(1e-9),
        leader_changes: sum(&after, |r| r.establishments)
            .saturating_sub(sum(&before, |r| r.establishments)),
        lease_lapses: sum(&after, |r| r.lapses).saturating_sub(sum(&before, |r| r.lapses)),
        applied_alike,
        follower_rss_vs_leader: leader_rss
            .zip(largest_follower)
            .map(|(l, f)| f / l.max(1e-9)),
        members,
        single: single_report,
        cluster: cluster_report,
    })
}

/// c1m against `target`, which is stopped afterwards whatever the outcome.
async fn measured(
    target: Target,
    workload: &Workload,
    args: &BenchArgs,
    progress: &mut Progress,
) -> Result<Report, BenchError> {
    let measured = match Client::connect(target.url()).await {
        Ok(client) => measure(&target, &client, workload, args, progress).await,
        Err(e) => Err(e.into()),
    };
    let stopped = target.stop().await;
    let report = measured?;
    stopped?;
    Ok(report)
}

/// Waits until every server applied as far as the furthest one (up to [`CATCH_UP`]) and
/// reads each one's figures.
async fn settle(target: &Target, after: &[Reading]) -> (Vec<Member>, bool) {
    let goal = after.iter().map(|r| r.applied).max().unwrap_or(0);
    let deadline = Instant::now() + CATCH_UP;
    let mut readings = after.to_vec();
    while readings.iter().any(|r| r.applied < goal) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        readings = read_all(target).await;
    }
    let alike = readings.iter().all(|r| r.applied >= goal);
    let members = target
        .children()
        .into_iter()
        .zip(&readings)
        .enumerate()
        .map(|(i, (server, r))| {
            let usage = server.usage();
            Member {
                server_id: i as u64 + 1,
                leader: r.leader,
                peak_rss_mib: usage.map(|u| u.peak_rss_kib as f64 / 1024.0),
                cpu_secs: usage.map(|u| u.cpu_secs),
                applied_index: r.applied,
                leader_establishments: r.establishments,
                lease_lapses: r.lapses,
            }
        })
        .collect();
    (members, alike)
}

impl ClusterReport {
    pub fn render(&self) -> String {
        let mut out = format!("== one server ==\n{}\n", self.single.render());
        out.push_str(&format!(
            "== {} servers, one Raft cluster ==\n{}\n",
            self.servers,
            self.cluster.render()
        ));
        let mut pairs = vec![
            (
                "Cluster vs single",
                format!(
                    "{:.2}x the single server's placement time ({:.2}s against {:.2}s)",
                    self.cluster_vs_single, self.cluster.placement_secs, self.single.placement_secs
                ),
            ),
            (
                "Leader changes",
                format!(
                    "{} while placing ({} lease lapses)",
                    self.leader_changes, self.lease_lapses
                ),
            ),
            (
                "Applied alike",
                if self.applied_alike {
                    "every server reached the same applied index".to_string()
                } else {
                    "NO: a server stayed behind".to_string()
                },
            ),
        ];
        if let Some(ratio) = self.follower_rss_vs_leader {
            pairs.push((
                "Follower memory",
                format!("largest follower peak RSS {ratio:.2}x the leader's"),
            ));
        }
        let members: Vec<String> = self
            .members
            .iter()
            .map(|m| {
                format!(
                    "server {}{}: peak RSS {} MiB, CPU {}s, applied {}",
                    m.server_id,
                    if m.leader { " (leader)" } else { "" },
                    m.peak_rss_mib.map_or("-".into(), |v| format!("{v:.0}")),
                    m.cpu_secs.map_or("-".into(), |v| format!("{v:.1}")),
                    m.applied_index
                )
            })
            .collect();
        for line in &members {
            pairs.push(("Member", line.clone()));
        }
        out.push_str(&key_values(&pairs));
        out
    }
}
