//! `drover bench --scenario rolling`: a rolling update of many jobs at once (issues 31 and
//! 35). Every job's group has an `update` block that makes a new version roll out as a
//! deployment, `max_parallel` allocations at a time, each step gated on the health of the
//! allocations it placed. Version 1 of every job is placed and runs first; then version 2
//! of every job, whose task changes its environment, is registered: a destructive update
//! (the reconciler replaces an allocation whose task env changed, as Nomad does), so every
//! allocation is stopped and placed again.
//!
//! A job has rolled out once its deployment of the version registered is `successful` and
//! its node reports running exactly `count` allocations, all of that version. A failed or
//! cancelled deployment ends the run.

use super::error::BenchError;
use super::jobs::{self, Goal};
use super::progress::Progress;
use super::report::secs;
use super::server_figures::{Probe, ServerFigures};
use super::target::Target;
use super::workload::Workload;
use crate::client::Client;
use crate::error::rpc_failed;
use drover_core::types::{DeploymentStrategy, HealthCheck, Job, UpdateStrategy};
use drover_proto::v1 as pb;
use futures::StreamExt;
use serde::Serialize;
use std::time::Duration;
use tokio::time::Instant;

/// Allocations of a job replaced at once: a quarter of the default count, so a job rolls
/// out in four health-gated steps.
pub const MAX_PARALLEL: u32 = 25;
/// Simulated tasks turn healthy as soon as they run, so waiting longer measures nothing;
/// zero is the least validation allows (it must be shorter than the healthy deadline).
pub const MIN_HEALTHY_TIME: Duration = Duration::ZERO;
/// Nomad's defaults: generous enough that a loaded server's slow steps are measured as
/// slow, not failed.
pub const HEALTHY_DEADLINE: Duration = Duration::from_secs(5 * 60);
pub const PROGRESS_DEADLINE: Duration = Duration::from_secs(10 * 60);

/// The environment variable whose value is the job's version in this run.
const VERSION_ENV: &str = "BENCH_VERSION";

/// How often deployments are listed while waiting: one list holds two deployments per
/// job, so this is slower than the summary polls.
const POLL_INTERVAL: Duration = Duration::from_millis(250);

#[derive(Clone, Debug, Serialize)]
pub struct RollingReport {
    pub scenario: &'static str,
    pub server_address: String,
    /// Scheduler workers of the cluster, as the server lists them.
    pub scheduler_workers: u64,
    pub nodes: u64,
    pub jobs: u64,
    pub count_per_job: u64,
    /// Allocations asked for: jobs times count.
    pub allocations: u64,
    /// The update block of every job's group.
    pub max_parallel: u64,
    pub min_healthy_time_secs: f64,
    pub healthy_deadline_secs: f64,
    pub progress_deadline_secs: f64,
    pub health_check: &'static str,
    pub in_flight: u64,
    /// Simulator start to every node healthy on the server.
    pub node_registration_secs: f64,
    /// First version-1 submit to every allocation running and every version-1
    /// deployment successful.
    pub place_v1_secs: f64,
    /// First version-2 submit to the last one accepted.
    pub submit_v2_secs: f64,
    /// First version-2 submit to every job rolled out: its version-2 deployment
    /// successful and only version-2 allocations running.
    pub rollout_secs: f64,
    /// Version-2 allocations running at the end (each replaced a version-1 one).
    pub replaced: u64,
    /// Version-1 allocations finished at the end: stopped by the update, not updated in
    /// place (an in-place update would leave this at zero).
    pub old_finished: u64,
    pub replaced_per_sec: f64,
    /// The version-2 deployments, by how they ended.
    pub deployments_successful: u64,
    pub deployments_failed: u64,
    /// Raft entries the server applied during the rollout.
    pub raft_entries_applied: u64,
    /// The server's own figures while version 1 was placed (absent against a remote
    /// server).
    pub place_server: ServerFigures,
    /// The server's own figures over the rollout.
    pub rollout_server: ServerFigures,
    /// VmHWM of the bench process (the simulated nodes and the load generator).
    pub bench_peak_rss_mib: Option<f64>,
    pub timeout_secs: f64,
}

impl RollingReport {
    pub fn render(&self) -> String {
        let mut pairs = vec![
            (
                "Rolling update",
                format!(
                    "{} service jobs x {} allocations on {} simulated nodes",
                    self.jobs, self.count_per_job, self.nodes
                ),
            ),
            ("Server", self.server_address.clone()),
            ("Scheduler workers", self.scheduler_workers.to_string()),
            (
                "Update block",
                format!(
                    "max_parallel {}, min_healthy_time {}s, healthy_deadline {}s, \
                     progress_deadline {}s, health_check {:?}",
                    self.max_parallel,
                    self.min_healthy_time_secs,
                    self.healthy_deadline_secs,
                    self.progress_deadline_secs,
                    self.health_check
                ),
            ),
            (
                "Node registration",
                format!("{:.2}s (start to all healthy)", self.node_registration_secs),
            ),
            (
                "Version 1",
                format!(
                    "{:.2}s (first submit to all {} running, deployments successful)",
                    self.place_v1_secs, self.allocations
                ),
            ),
            (
                "Version 2 submission",
                format!(
                    "{:.2}s (all jobs accepted, {} in flight)",
                    self.submit_v2_secs, self.in_flight
                ),
            ),
            (
                "Rollout",
                format!(
                    "{:.2}s (first submit to every job on version 2)",
                    self.rollout_secs
                ),
            ),
            (
                "Replaced",
                format!(
                    "{} of {} allocations ({:.0}/s); {} of version 1 stopped",
                    self.replaced, self.allocations, self.replaced_per_sec, self.old_finished
                ),
            ),
            (
                "Deployments",
                format!(
                    "{} successful, {} failed",
                    self.deployments_successful, self.deployments_failed
                ),
            ),
            (
                "Raft entries applied",
                format!("{} during the rollout", self.raft_entries_applied),
            ),
        ];
        pairs.push((
            "Bench peak RSS",
            match self.bench_peak_rss_mib {
                Some(mib) => format!("{mib:.1} MiB (simulated nodes and load generator)"),
                None => "unknown (no /proc on this system)".into(),
            },
        ));
        format!(
            "{}\n==> the server while version 1 was placed\n{}\n==> the server during the rollout\n{}",
            crate::output::key_values(&pairs),
            crate::output::key_values(&self.place_server.pairs()),
            crate::output::key_values(&self.rollout_server.pairs()),
        )
    }
}

/// The update block of every job of the run.
pub fn update_block() -> UpdateStrategy {
    UpdateStrategy {
        max_parallel: MAX_PARALLEL,
        deployment: Some(DeploymentStrategy {
            health_check: HealthCheck::TaskStates,
            min_healthy_time: MIN_HEALTHY_TIME,
            healthy_deadline: HEALTHY_DEADLINE,
            progress_deadline: PROGRESS_DEADLINE,
            ..DeploymentStrategy::default()
        }),
        ..UpdateStrategy::default()
    }
}

/// Job `n` at `version` (1 or 2): the run's job with the update block, its task's
/// environment naming the version.
pub fn versioned_job(workload: &Workload, n: u32, version: u32) -> Job {
    let mut job = workload.job(n);
    let group = &mut job.groups[0];
    group.update = Some(update_block());
    group.tasks[0]
        .env
        .insert(VERSION_ENV.into(), version.to_string());
    job
}

/// Places version 1, then rolls every job out to version 2 and times it.
pub async fn measure(
    target: &Target,
    client: &Client,
    workload: &Workload,
    in_flight: usize,
    deadline: Instant,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<RollingReport, BenchError> {
    let started = Instant::now();
    let sim = super::nodes::start(client, workload, deadline, timeout, progress).await?;
    let node_registration = started.elapsed();
    let measured = phases(
        target, client, workload, in_flight, deadline, timeout, progress,
    )
    .await;
    sim.shutdown().await;
    let mut report = measured?;
    report.node_registration_secs = secs(node_registration);
    report.timeout_secs = secs(timeout);
    Ok(report)
}

async fn phases(
    target: &Target,
    client: &Client,
    workload: &Workload,
    in_flight: usize,
    deadline: Instant,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<RollingReport, BenchError> {
    let wait = Wait {
        client,
        workload,
        in_flight,
        deadline,
        timeout,
    };
    progress.phase(&format!(
        "submitting version 1 of {} jobs of {} allocations ({in_flight} in flight)",
        workload.jobs, workload.count
    ));
    let scheduler_workers = jobs::worker_count(client).await?;
    let before_v1 = Probe::take(target).await;
    let v1_started = Instant::now();
    let v1 = jobs::submit_each(client, workload, in_flight, deadline, timeout, &|n| {
        versioned_job(workload, n, 1)
    })
    .await?;
    jobs::wait_for(client, workload, Goal::Running, deadline, timeout, progress).await?;
    progress.phase("all running; waiting for the version-1 deployments to succeed");
    wait.rolled_out(&v1, v1_started, progress).await?;
    let place_v1 = v1_started.elapsed();
    let before_v2 = Probe::take(target).await;
    let first_index = jobs::applied_index(client).await?;

    progress.phase(&format!(
        "version 1 settled in {:.2}s; submitting version 2 (a destructive update, \
         max_parallel {MAX_PARALLEL})",
        secs(place_v1)
    ));
    let v2_started = Instant::now();
    let v2 = jobs::submit_each(client, workload, in_flight, deadline, timeout, &|n| {
        versioned_job(workload, n, 2)
    })
    .await?;
    let submit_v2 = v2_started.elapsed();
    progress.phase(&format!(
        "all accepted in {:.2}s; waiting for every job's version-2 deployment",
        secs(submit_v2)
    ));
    let rolled = wait.rolled_out(&v2, v2_started, progress).await?;
    let rollout = v2_started.elapsed();
    let after_v2 = Probe::take(target).await;
    let raft_entries_applied = jobs::applied_index(client)
        .await?
        .saturating_sub(first_index);
    Ok(RollingReport {
        scenario: "rolling",
        server_address: client.address().to_string(),
        scheduler_workers,
        nodes: u64::from(workload.nodes),
        jobs: u64::from(workload.jobs),
        count_per_job: u64::from(workload.count),
        allocations: workload.allocations(),
        max_parallel: u64::from(MAX_PARALLEL),
        min_healthy_time_secs: secs(MIN_HEALTHY_TIME),
        healthy_deadline_secs: secs(HEALTHY_DEADLINE),
        progress_deadline_secs: secs(PROGRESS_DEADLINE),
        health_check: HealthCheck::TaskStates.as_str(),
        in_flight: in_flight as u64,
        node_registration_secs: 0.0,
        place_v1_secs: secs(place_v1),
        submit_v2_secs: secs(submit_v2),
        rollout_secs: secs(rollout),
        replaced: rolled.running,
        old_finished: rolled.replaced_finished,
        replaced_per_sec: rolled.running as f64 / secs(rollout).max(1e-9),
        deployments_successful: rolled.successful,
        deployments_failed: rolled.failed,
        raft_entries_applied,
        place_server: ServerFigures::between(&before_v1, &before_v2),
        rollout_server: ServerFigures::between(&before_v2, &after_v2),
        bench_peak_rss_mib: super::procfs::peak_rss_kib().map(|kib| kib as f64 / 1024.0),
        timeout_secs: 0.0,
    })
}

/// What a wait for one version found at its end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct RolledOut {
    pub successful: u64,
    pub failed: u64,
    /// Allocations of the version running.
    pub running: u64,
    /// Allocations of older versions finished.
    pub replaced_finished: u64,
}

/// The run's deployments of the versions waited for, as one list showed them.
#[derive(Debug, Default, PartialEq)]
struct DeploymentTally {
    successful: Vec<u32>,
    running: u64,
    /// The first deployment that failed or was cancelled: (job number, status, why).
    ended: Option<(u32, &'static str, String)>,
    failed: u64,
}

/// Sorts the run's deployments of the wanted versions (`versions[n]` for job `n`) by
/// status; other jobs' deployments and older versions are left out.
fn tally_deployments(
    workload: &Workload,
    versions: &[u64],
    deployments: &[pb::Deployment],
) -> DeploymentTally {
    let prefix = workload.job_prefix();
    let mut tally = DeploymentTally::default();
    for d in deployments {
        let Some(n) = d
            .job_id
            .strip_prefix(&prefix)
            .and_then(|rest| rest.parse::<u32>().ok())
        else {
            continue;
        };
        if versions.get(n as usize) != Some(&d.job_version) {
            continue;
        }
        match d.status() {
            pb::DeploymentStatus::Successful => tally.successful.push(n),
            pb::DeploymentStatus::Failed | pb::DeploymentStatus::Cancelled => {
                tally.failed += 1;
                let status = if d.status() == pb::DeploymentStatus::Failed {
                    "failed"
                } else {
                    "cancelled"
                };
                tally
                    .ended
                    .get_or_insert((n, status, d.description.clone()));
            }
            _ => tally.running += 1,
        }
    }
    tally
}

/// A job's allocations by version and by what their nodes report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ByVersion {
    /// Of the version waited for, running.
    running: u64,
    /// Of another version, still running.
    other_running: u64,
    /// Of another version, finished (stopped by the update, or failed).
    other_finished: u64,
}

fn by_version(allocations: &[pb::Allocation], version: u64) -> ByVersion {
    let mut counted = ByVersion::default();
    for a in allocations {
        let status = a.client_status();
        match (a.job_version == version, status) {
            (true, pb::ClientStatus::Running) => counted.running += 1,
            (false, pb::ClientStatus::Running) => counted.other_running += 1,
            (false, pb::ClientStatus::Pending | pb::ClientStatus::Unspecified) => {}
            (false, _) => counted.other_finished += 1,
            (true, _) => {}
        }
    }
    counted
}

/// The reads a wait makes and its limits.
pub(super) struct Wait<'a> {
    pub client: &'a Client,
    pub workload: &'a Workload,
    pub in_flight: usize,
    pub deadline: Instant,
    pub timeout: Duration,
}

impl Wait<'_> {
    /// Waits until every job has rolled out to `versions[n]`: its deployment of that
    /// version successful and exactly `count` allocations running, all of that version.
    /// A job's allocations are read once its deployment has succeeded, until they hold.
    pub(super) async fn rolled_out(
        &self,
        versions: &[u64],
        started: Instant,
        progress: &mut Progress,
    ) -> Result<RolledOut, BenchError> {
        let jobs = self.workload.jobs as usize;
        let count = u64::from(self.workload.count);
        let mut done = vec![false; jobs];
        let mut rolled = 0u64;
        let mut running = 0u64;
        let mut finished = 0u64;
        loop {
            let deployments = self
                .client
                .deployments()
                .list(pb::ListDeploymentsRequest::default())
                .await
                .map_err(rpc_failed("listing deployments"))?
                .into_inner()
                .deployments;
            let tally = tally_deployments(self.workload, versions, &deployments);
            if let Some((n, status, description)) = tally.ended {
                return Err(BenchError::Deployment {
                    job: self.workload.job_id(n),
                    version: versions[n as usize],
                    status,
                    description,
                    successful: tally.successful.len() as u64,
                    failed: tally.failed,
                    wanted: jobs as u64,
                    elapsed_secs: secs(started.elapsed()),
                });
            }
            let to_check: Vec<u32> = tally
                .successful
                .iter()
                .copied()
                .filter(|n| !done[*n as usize])
                .collect();
            let checked: Vec<_> = futures::stream::iter(to_check)
                .map(|n| async move { (n, self.running(n, versions[n as usize]).await) })
                .buffer_unordered(self.in_flight)
                .collect()
                .await;
            for (n, counted) in checked {
                let counted = counted?;
                if counted.running == count && counted.other_running == 0 {
                    done[n as usize] = true;
                    rolled += 1;
                    running += counted.running;
                    finished += counted.other_finished;
                }
            }
            progress.tick(|| {
                format!(
                    "{rolled} of {jobs} jobs rolled out ({} deployments successful, {} running)",
                    tally.successful.len(),
                    tally.running
                )
            });
            if rolled == jobs as u64 {
                return Ok(RolledOut {
                    successful: tally.successful.len() as u64,
                    failed: tally.failed,
                    running,
                    replaced_finished: finished,
                });
            }
            if Instant::now() >= self.deadline {
                return Err(BenchError::Rollout {
                    rolled_out: rolled,
                    wanted: jobs as u64,
                    successful: tally.successful.len() as u64,
                    running: tally.running,
                    allocations_running: running,
                    elapsed_secs: secs(started.elapsed()),
                    timeout: self.timeout,
                });
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Job `n`'s allocations counted by version.
    async fn running(&self, n: u32, version: u64) -> Result<ByVersion, BenchError> {
        let answer = drover_proto::paging::job_allocations_all(
            &self.client.jobs(),
            pb::JobAllocationsRequest {
                job_id: self.workload.job_id(n),
                ..Default::default()
            },
        )
        .await
        .map_err(rpc_failed("listing a benchmark job's allocations"))?;
        Ok(by_version(&answer.allocations, version))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload() -> Workload {
        Workload::new(10, 3, 4, 10, 16).expect("fits")
    }

    #[test]
    fn both_versions_are_valid_and_differ_in_what_the_task_runs() {
        let w = workload();
        let (v1, v2) = (versioned_job(&w, 1, 1), versioned_job(&w, 1, 2));
        for job in [&v1, &v2] {
            let errors = drover_core::validate::validate_job(job, &Default::default());
            assert!(errors.is_ok(), "{errors:?}");
            let update = job.groups[0].update.as_ref().expect("update block");
            assert_eq!(update.max_parallel, MAX_PARALLEL);
            assert!(update.rollout().is_some(), "rolls out as a deployment");
        }
        assert!(v1.spec_differs(&v2));
        assert!(
            drover_core::scheduler::reconcile::update::tasks_updated(&v1.groups[0], &v2.groups[0]),
            "the change replaces allocations rather than updating them in place"
        );
    }

    fn report() -> RollingReport {
        RollingReport {
            scenario: "rolling",
            server_address: "http://127.0.0.1:40123".into(),
            scheduler_workers: 2,
            nodes: 10_000,
            jobs: 1_000,
            count_per_job: 100,
            allocations: 100_000,
            max_parallel: 25,
            min_healthy_time_secs: 0.0,
            healthy_deadline_secs: 300.0,
            progress_deadline_secs: 600.0,
            health_check: "task_states",
            in_flight: 64,
            node_registration_secs: 14.25,
            place_v1_secs: 9.5,
            submit_v2_secs: 0.75,
            rollout_secs: 40.0,
            replaced: 100_000,
            old_finished: 100_000,
            replaced_per_sec: 2_500.0,
            deployments_successful: 1_000,
            deployments_failed: 0,
            raft_entries_applied: 12_345,
            place_server: ServerFigures {
                peak_rss_mib: Some(400.5),
                cpu_secs: Some(12.25),
                ..ServerFigures::default()
            },
            rollout_server: ServerFigures {
                peak_rss_mib: Some(512.0),
                cpu_secs: Some(50.5),
                disk_written_bytes: Some(104_857_600),
                ..ServerFigures::default()
            },
            bench_peak_rss_mib: Some(900.0),
            timeout_secs: 600.0,
        }
    }

    #[test]
    fn human_report() {
        insta::assert_snapshot!(report().render());
    }

    #[test]
    fn errors_carry_the_counts_so_far() {
        let failed = BenchError::Deployment {
            job: "bench-0a1b2c3d-00007".into(),
            version: 1,
            status: "failed",
            description: "Failed due to unhealthy allocations".into(),
            successful: 12,
            failed: 1,
            wanted: 1_000,
            elapsed_secs: 3.25,
        };
        let late = BenchError::Rollout {
            rolled_out: 640,
            wanted: 1_000,
            successful: 650,
            running: 350,
            allocations_running: 64_000,
            elapsed_secs: 580.5,
            timeout: Duration::from_secs(600),
        };
        insta::assert_snapshot!(format!("{failed}\n{late}"));
    }

    fn deployment(job_id: &str, version: u64, status: pb::DeploymentStatus) -> pb::Deployment {
        pb::Deployment {
            job_id: job_id.into(),
            job_version: version,
            status: status.into(),
            description: format!("{status:?}"),
            ..Default::default()
        }
    }

    #[test]
    fn deployments_count_only_the_runs_jobs_at_the_wanted_version() {
        use pb::DeploymentStatus::*;
        let w = workload();
        let versions = [1, 1, 1];
        let cases: Vec<(Vec<pb::Deployment>, DeploymentTally)> = vec![
            (vec![], DeploymentTally::default()),
            (
                vec![
                    deployment(&w.job_id(0), 1, Successful),
                    deployment(&w.job_id(0), 0, Cancelled),
                    deployment(&w.job_id(1), 1, Running),
                    deployment("other-00002", 1, Failed),
                ],
                DeploymentTally {
                    successful: vec![0],
                    running: 1,
                    ..DeploymentTally::default()
                },
            ),
            (
                vec![
                    deployment(&w.job_id(2), 1, Failed),
                    deployment(&w.job_id(1), 1, Cancelled),
                ],
                DeploymentTally {
                    ended: Some((2, "failed", "Failed".into())),
                    failed: 2,
                    ..DeploymentTally::default()
                },
            ),
        ];
        for (deployments, want) in cases {
            assert_eq!(
                tally_deployments(&w, &versions, &deployments),
                want,
                "{deployments:?}"
            );
        }
    }

    #[test]
    fn allocations_count_by_version_and_what_their_node_reports() {
        use pb::ClientStatus::*;
        let alloc = |version, status: pb::ClientStatus| pb::Allocation {
            job_version: version,
            client_status: status.into(),
            ..Default::default()
        };
        let allocations = [
            alloc(1, Running),
            alloc(1, Pending),
            alloc(1, Failed),
            alloc(0, Running),
            alloc(0, Pending),
            alloc(0, Complete),
            alloc(0, Failed),
        ];
        let cases = [
            (
                1,
                ByVersion {
                    running: 1,
                    other_running: 1,
                    other_finished: 2,
                },
            ),
            (
                0,
                ByVersion {
                    running: 1,
                    other_running: 1,
                    other_finished: 1,
                },
            ),
        ];
        for (version, want) in cases {
            assert_eq!(by_version(&allocations, version), want, "version {version}");
        }
        assert_eq!(by_version(&[], 0), ByVersion::default());
    }
}
