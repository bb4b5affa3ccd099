//! The measured phase: register the run's jobs with bounded concurrency, then watch the
//! server's job summaries until every allocation is placed (and, if asked, running).
//!
//! Completion is read from the summaries of the run's jobs (`JobService/List` with the
//! run's id prefix), which the server keeps up to date with every committed plan and
//! every client update; the times measured are therefore accurate to one poll.

use super::error::BenchError;
use super::progress::Progress;
use super::workload::Workload;
use crate::client::Client;
use crate::error::rpc_failed;
use backon::{ExponentialBuilder, Retryable};
use drover_core::types::Job;
use drover_proto::v1 as pb;
use futures::{StreamExt, TryStreamExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// How often the summaries are read while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The run's allocations as the server counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Placed and not terminal.
    pub placed: u64,
    /// Reported running by their (simulated) node.
    pub running: u64,
    /// Placements the newest evaluations could not make yet.
    pub queued: u64,
}

/// When the wait ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Goal {
    Placed,
    Running,
}

impl Goal {
    fn reached(self, tally: &Tally) -> u64 {
        match self {
            Goal::Placed => tally.placed,
            Goal::Running => tally.running,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Goal::Placed => "allocations placed",
            Goal::Running => "allocations running",
        }
    }
}

/// Registers every job of the run, at most `in_flight` at once. A busy server (too many
/// outstanding evals) or a leader change is retried until the deadline.
pub async fn submit(
    client: &Client,
    workload: &Workload,
    in_flight: usize,
    deadline: Instant,
    timeout: Duration,
) -> Result<(), BenchError> {
    submit_each(client, workload, in_flight, deadline, timeout, &|n| {
        workload.job(n)
    })
    .await
    .map(drop)
}

/// Registers `job(n)` for every job number of the run, at most `in_flight` at once, with
/// the retries of [`submit`]; returns each job's version after its registration, by job
/// number.
pub async fn submit_each(
    client: &Client,
    workload: &Workload,
    in_flight: usize,
    deadline: Instant,
    timeout: Duration,
    job: &(dyn Fn(u32) -> Job + Sync),
) -> Result<Vec<u64>, BenchError> {
    let registered = AtomicU64::new(0);
    let all = futures::stream::iter(0..workload.jobs)
        .map(|n| {
            let registered = &registered;
            async move {
                let version = register(client, workload.job_id(n), &job(n)).await?;
                registered.fetch_add(1, Ordering::Relaxed);
                Ok::<(u32, u64), BenchError>((n, version))
            }
        })
        .buffer_unordered(in_flight)
        .try_collect::<Vec<_>>();
    match tokio::time::timeout_at(deadline, all).await {
        Ok(result) => {
            let mut versions = vec![0; workload.jobs as usize];
            for (n, version) in result? {
                versions[n as usize] = version;
            }
            Ok(versions)
        }
        Err(_) => Err(BenchError::Deadline {
            what: "jobs registered",
            done: registered.load(Ordering::Relaxed),
            wanted: u64::from(workload.jobs),
            timeout,
        }),
    }
}

/// Registers `job`; returns its version after the registration.
async fn register(client: &Client, job_id: String, job: &Job) -> Result<u64, BenchError> {
    let job = pb::Job::from(job);
    let call = || {
        let mut jobs = client.jobs();
        let request = pb::RegisterJobRequest {
            job: Some(job.clone()),
            enforce_index: None,
        };
        async move { jobs.register(request).await }
    };
    let backoff = ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(2))
        .without_max_times()
        .with_jitter();
    call.retry(backoff)
        .when(transient)
        .await
        .map(|answer| answer.into_inner().job_version)
        .map_err(|status| BenchError::Register {
            job: job_id,
            message: status.message().to_string(),
        })
}

/// A refusal that goes away by itself: the server is busy or between leaders.
fn transient(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::ResourceExhausted | tonic::Code::Unavailable | tonic::Code::Aborted
    )
}

/// Waits until `goal` holds for every allocation of the run; returns the last tally.
pub async fn wait_for(
    client: &Client,
    workload: &Workload,
    goal: Goal,
    deadline: Instant,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<Tally, BenchError> {
    let wanted = workload.allocations();
    loop {
        let tally = tally(client, workload).await?;
        let done = goal.reached(&tally);
        progress.tick(|| {
            format!(
                "{done} of {wanted} {} ({} placed, {} queued)",
                goal.what(),
                tally.placed,
                tally.queued
            )
        });
        if done >= wanted {
            return Ok(tally);
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Deadline {
                what: goal.what(),
                done,
                wanted,
                timeout,
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// The run's allocations summed over its jobs' summaries.
pub async fn tally(client: &Client, workload: &Workload) -> Result<Tally, BenchError> {
    let answer = drover_proto::paging::job_list_all(
        &client.jobs(),
        pb::ListJobsRequest {
            id_prefix: workload.job_prefix(),
            ..Default::default()
        },
    )
    .await
    .map_err(rpc_failed("listing the benchmark's jobs"))?;
    Ok(sum(answer.jobs.iter().filter_map(|j| j.summary.as_ref())))
}

fn sum<'a>(summaries: impl Iterator<Item = &'a pb::JobSummary>) -> Tally {
    let mut tally = Tally::default();
    for summary in summaries {
        tally.placed += u64::from(summary.live_allocs);
        for group in summary.groups.values() {
            tally.running += u64::from(group.running);
            tally.queued += u64::from(group.queued);
        }
    }
    tally
}

/// The server's applied Raft index now.
pub async fn applied_index(client: &Client) -> Result<u64, BenchError> {
    let status = client
        .status()
        .cluster_status(pb::ClusterStatusRequest {})
        .await
        .map_err(rpc_failed("reading the server's raft status"))?
        .into_inner();
    Ok(status.applied_index)
}

/// How many scheduler workers the cluster runs.
pub async fn worker_count(client: &Client) -> Result<u64, BenchError> {
    let answer = client
        .workers()
        .list(pb::ListWorkersRequest::default())
        .await
        .map_err(rpc_failed("listing the scheduler workers"))?
        .into_inner();
    Ok(answer.workers.len() as u64)
}

/// Removes the run's jobs from a shared server, so their allocations stop and the server
/// keeps no trace of the run. Failures are only logged: the measurement is already done.
pub async fn purge(client: &Client, workload: &Workload, in_flight: usize) {
    futures::stream::iter(0..workload.jobs)
        .for_each_concurrent(in_flight, |n| async move {
            let job_id = workload.job_id(n);
            let result = client
                .jobs()
                .deregister(pb::DeregisterJobRequest {
                    namespace: String::new(),
                    job_id: job_id.clone(),
                    purge: true,
                })
                .await;
            if let Err(status) = result {
                tracing::warn!(job_id = %job_id, error = %status.message(), "benchmark job not purged");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(live: u32, groups: &[(u32, u32)]) -> pb::JobSummary {
        pb::JobSummary {
            live_allocs: live,
            groups: groups
                .iter()
                .enumerate()
                .map(|(i, (running, queued))| {
                    let group = pb::GroupSummary {
                        running: *running,
                        queued: *queued,
                        ..Default::default()
                    };
                    (format!("g{i}"), group)
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn tallies_sum_every_job_and_group() {
        let cases: &[(Vec<pb::JobSummary>, Tally)] = &[
            (vec![], Tally::default()),
            (
                vec![summary(5, &[(3, 0)]), summary(2, &[(1, 4), (1, 1)])],
                Tally {
                    placed: 7,
                    running: 5,
                    queued: 5,
                },
            ),
        ];
        for (summaries, want) in cases {
            assert_eq!(sum(summaries.iter()), *want, "{summaries:?}");
        }
    }

    #[test]
    fn goals_read_their_own_count() {
        let tally = Tally {
            placed: 9,
            running: 4,
            queued: 1,
        };
        assert_eq!(Goal::Placed.reached(&tally), 9);
        assert_eq!(Goal::Running.reached(&tally), 4);
    }
}
