//! `drover bench --scenario services`: what service registrations cost placement (issues
//! 33 and 35), and how soon a blocking read of one service wakes after it changed.
//!
//! The same run goes twice, each time on a fresh server with fresh simulated nodes that
//! register services as the real agent does: first with jobs that offer no service, then
//! with jobs whose group offers one service with one tcp check (so `jobs x count`
//! registrations, 100,000 by default). Everything else is equal on both sides: the same
//! shape, the same ports, the same `update` block, the same simulator reading every job.
//! Each side:
//!
//! 1. places every job and waits until the nodes run every allocation and (with services)
//!    the catalog holds every registration: `place` is the first submit to every
//!    allocation placed, as the c1m scenario times it;
//! 2. places a probe (jobs without services, 10,000 allocations by default, ten times the
//!    rollout) on the quiet cluster;
//! 3. rolls out a destructive update of the first jobs, 1,000 allocations in all (10 jobs
//!    of 100 by default), through deployments: each replaced allocation takes its
//!    registration out of the catalog and its replacement puts one in. Once the first
//!    replacement runs, a second probe of the same shape is placed while the rollout goes
//!    on.
//!
//! Placement slows by registrations when `place` is slower with services than without;
//! registration churn slows placement when the probe placed during the rollout is slower
//! with services than without (the rollout's own scheduling is the same on both sides, so
//! the difference is what its registration writes cost). Both are reported as percentages.
//!
//! During the rollout with services, one blocking `ServiceService.Info` per updated job's
//! service is held at the index it last saw. Each time a service's instances changed, the
//! wake is matched to the simulator's write that made the change (by the Raft index the
//! write committed at, which becomes the catalog's index) and timed from when that write
//! was sent and from when its acknowledgement arrived: the commit lies between the two, so
//! the first is an upper bound of the delay and the second a lower one. Wakes whose index
//! no simulated write made (the servers' own changes: a plan that stops an allocation
//! unlists its registrations) are counted, not timed.

use super::error::BenchError;
use super::jobs::{self, Goal};
use super::latency::Spread;
use super::nodes;
use super::progress::Progress;
use super::report::secs;
use super::rolling::{self, Wait};
use super::target::{ServerSettings, Target};
use super::workload::Workload;
use crate::client::Client;
use crate::error::rpc_failed;
use drover_agent::sim::ServiceWrite;
use drover_core::types::{Job, Service};
use drover_proto::v1 as pb;
use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Allocations the rollout replaces, as the issue asks: 10 jobs of the default 100.
pub const CHURN_ALLOCATIONS: u32 = 1_000;

/// Allocations of each probe: ten times the rollout, so the probe's placement lasts long
/// enough (about half a second here) to time against the rollout's churn rather than the
/// machine's noise.
pub const PROBE_ALLOCATIONS: u32 = 10_000;

/// How long one blocking read waits before it is asked again.
const BLOCK_MS: u64 = 1_000;
/// How often the catalog and the rollout are polled while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// One side of the comparison.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Side {
    /// The fresh server this side ran against.
    pub server_address: String,
    /// Services each allocation offers (0 or 1, with one check each).
    pub services_per_allocation: u64,
    pub node_registration_secs: f64,
    /// First submit to every allocation placed.
    pub place_secs: f64,
    /// First submit to every allocation reported running.
    pub running_secs: f64,
    /// First submit to every registration in the catalog (with services).
    pub registered_secs: Option<f64>,
    /// Registrations of the run in the catalog once every allocation ran.
    pub registrations: u64,
    /// The probe placed on the quiet cluster: first submit to every allocation placed.
    pub probe_quiet_secs: f64,
    /// The same probe placed while the rollout ran.
    pub probe_during_rollout_secs: f64,
    /// First version-2 submit to every rolled-out job on version 2.
    pub rollout_secs: f64,
    /// Allocations the rollout replaced.
    pub replaced: u64,
    /// Registrations of the run in the catalog once the rollout ended.
    pub registrations_after_rollout: u64,
}

/// How soon a blocking read of one service woke after the service changed.
#[derive(Clone, Debug, Serialize)]
pub struct Wakes {
    /// Services read, one blocking read each: those of the updated jobs.
    pub services: u64,
    /// Wakes on a change of the service that a simulated write made, timed.
    pub samples: u64,
    /// Wakes on a change whose index no simulated write had (the servers' own).
    pub unmatched: u64,
    /// From the acknowledgement of the write (a lower bound of the delay).
    pub from_ack: Spread,
    /// From the sending of the write (an upper bound: includes its commit).
    pub from_sent: Spread,
}

#[derive(Clone, Debug, Serialize)]
pub struct ServicesReport {
    pub scenario: &'static str,
    pub nodes: u64,
    pub jobs: u64,
    pub count_per_job: u64,
    pub allocations: u64,
    /// Jobs the rollout updates, and their allocations.
    pub churn_jobs: u64,
    pub churn_allocations: u64,
    /// Allocations of each probe.
    pub probe_allocations: u64,
    pub in_flight: u64,
    pub without_services: Side,
    pub with_services: Side,
    /// How much slower every job was placed with registrations than without, in percent.
    pub placement_slowdown_pct: f64,
    /// How much slower the probe was placed during the rollout with registrations than
    /// without, in percent: what registration churn costs placement.
    pub churn_placement_slowdown_pct: f64,
    pub wakes: Wakes,
    /// VmHWM of the bench process (the simulated nodes and the load generator).
    pub bench_peak_rss_mib: Option<f64>,
    pub timeout_secs: f64,
}

fn slowdown_pct(with: f64, without: f64) -> f64 {
    (with / without.max(1e-9) - 1.0) * 100.0
}

impl ServicesReport {
    pub fn render(&self) -> String {
        let (a, b) = (&self.without_services, &self.with_services);
        let both = |f: fn(&Side) -> f64| format!("{:.2}s without, {:.2}s with", f(a), f(b));
        let spread = |s: &Spread| {
            format!(
                "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                s.p50_ms, s.p99_ms, s.max_ms
            )
        };
        let pairs = vec![
            (
                "Services",
                format!(
                    "{} service jobs x {} allocations on {} simulated nodes, without and \
                     with one service and check each",
                    self.jobs, self.count_per_job, self.nodes
                ),
            ),
            (
                "Servers",
                format!("{} without, {} with", a.server_address, b.server_address),
            ),
            ("Node registration", both(|s| s.node_registration_secs)),
            ("Placement", both(|s| s.place_secs)),
            (
                "Placement slowdown",
                format!("{:+.1}% with registrations", self.placement_slowdown_pct),
            ),
            ("All running", both(|s| s.running_secs)),
            (
                "Registrations",
                format!(
                    "{} in the catalog ({:.2}s from the first submit); {} without",
                    b.registrations,
                    b.registered_secs.unwrap_or(0.0),
                    a.registrations
                ),
            ),
            (
                "Rollout",
                format!(
                    "{} jobs, {} allocations replaced: {}",
                    self.churn_jobs,
                    b.replaced,
                    both(|s| s.rollout_secs)
                ),
            ),
            (
                "Probe, quiet",
                format!(
                    "{} allocations: {}",
                    self.probe_allocations,
                    both(|s| s.probe_quiet_secs)
                ),
            ),
            (
                "Probe, during rollout",
                both(|s| s.probe_during_rollout_secs),
            ),
            (
                "Churn slowdown",
                format!(
                    "{:+.1}% with registrations",
                    self.churn_placement_slowdown_pct
                ),
            ),
            (
                "Registrations after",
                format!("{} in the catalog", b.registrations_after_rollout),
            ),
            (
                "Blocking read wakes",
                format!(
                    "{} on changes of the {} updated jobs' services, one blocking read each \
                     ({} not made by a simulated write)",
                    self.wakes.samples, self.wakes.services, self.wakes.unmatched
                ),
            ),
            ("  from the write's ack", spread(&self.wakes.from_ack)),
            ("  from the write's send", spread(&self.wakes.from_sent)),
            (
                "Bench peak RSS",
                match self.bench_peak_rss_mib {
                    Some(mib) => format!("{mib:.1} MiB (simulated nodes and load generator)"),
                    None => "unknown (no /proc on this system)".into(),
                },
            ),
        ];
        crate::output::key_values(&pairs)
    }
}

pub fn needs_own_server() -> BenchError {
    BenchError::Setting {
        flag: "--address",
        reason: "the services scenario compares two fresh servers, so it starts its own".into(),
    }
}

/// The service every job offers on the services side: `<job>-svc` on its first port, with
/// one tcp check.
pub fn service() -> Service {
    drover_core::mock::tcp_service("${NOMAD_JOB_NAME}-svc", "p0", "bench")
}

/// The name job `n`'s service has once interpolated.
pub fn service_name(workload: &Workload, n: u32) -> String {
    format!("{}-svc", workload.job_id(n))
}

/// Job `n` at `version`, as the rolling scenario builds it, offering [`service`] when
/// `with_service`.
pub fn job(workload: &Workload, n: u32, version: u32, with_service: bool) -> Job {
    let mut job = rolling::versioned_job(workload, n, version);
    if with_service {
        job.groups[0].services.push(service());
    }
    job
}

/// The jobs the rollout updates (the first ones) and each probe's shape: as many jobs
/// as make [`CHURN_ALLOCATIONS`], at most all of them.
fn churn_jobs(workload: &Workload) -> u32 {
    CHURN_ALLOCATIONS
        .div_ceil(workload.count)
        .clamp(1, workload.jobs)
}

/// A probe: as many jobs without services as make [`PROBE_ALLOCATIONS`] (at most as
/// many as the run has), ids of their own (`tag` tells the two probes apart), on the
/// run's nodes.
fn probe(workload: &Workload, tag: &str) -> Workload {
    Workload {
        run_id: format!("{}{tag}", workload.run_id),
        jobs: PROBE_ALLOCATIONS
            .div_ceil(workload.count)
            .clamp(1, workload.jobs),
        ..workload.clone()
    }
}

fn probe_job(run: &Workload, probe: &Workload, n: u32) -> Job {
    let mut job = probe.job(n);
    job.datacenters = vec![run.datacenter()];
    job
}

/// Both sides, each on a fresh server: `target` without services, then one started with
/// `settings` with them, which replaces `target` (the caller stops it).
///
/// The first server is stopped before the second side starts: once its simulated nodes
/// are gone it marks them down and tries to replace their allocations, work that would
/// otherwise compete for the machine with the side being measured.
pub async fn measure(
    target: &mut Target,
    settings: &ServerSettings,
    workload: &Workload,
    in_flight: usize,
    deadline: Instant,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<ServicesReport, BenchError> {
    let mut workload = workload.clone();
    // Every job asks for a port, so the service has one to register on either side.
    workload.ports = workload.ports.max(1);
    workload.register_services = true;
    let limits = Limits {
        in_flight,
        deadline,
        timeout,
    };
    progress.phase("without services: a fresh server");
    let (without, _) = side(target, &workload, false, &limits, progress).await?;
    progress.phase("with services: stopping the first server, starting a second fresh one");
    let second = Target::start_child(settings).await?;
    std::mem::replace(target, second).stop().await?;
    let (with, wakes) = side(target, &workload, true, &limits, progress).await?;
    let wakes = wakes.unwrap_or_else(|| Wakes {
        services: 0,
        samples: 0,
        unmatched: 0,
        from_ack: Spread::of(&[]),
        from_sent: Spread::of(&[]),
    });
    let churn = churn_jobs(&workload);
    Ok(ServicesReport {
        scenario: "services",
        nodes: u64::from(workload.nodes),
        jobs: u64::from(workload.jobs),
        count_per_job: u64::from(workload.count),
        allocations: workload.allocations(),
        churn_jobs: u64::from(churn),
        churn_allocations: u64::from(churn) * u64::from(workload.count),
        probe_allocations: probe(&workload, "q").allocations(),
        in_flight: in_flight as u64,
        placement_slowdown_pct: slowdown_pct(with.place_secs, without.place_secs),
        churn_placement_slowdown_pct: slowdown_pct(
            with.probe_during_rollout_secs,
            without.probe_during_rollout_secs,
        ),
        without_services: without,
        with_services: with,
        wakes,
        bench_peak_rss_mib: super::procfs::peak_rss_kib().map(|kib| kib as f64 / 1024.0),
        timeout_secs: secs(timeout),
    })
}

struct Limits {
    in_flight: usize,
    deadline: Instant,
    timeout: Duration,
}

/// One side on `target`: its own simulated nodes, stopped on every path.
async fn side(
    target: &Target,
    workload: &Workload,
    with_services: bool,
    limits: &Limits,
    progress: &mut Progress,
) -> Result<(Side, Option<Wakes>), BenchError> {
    let client = Client::connect(target.url()).await?;
    let started = Instant::now();
    let sim = nodes::start(&client, workload, limits.deadline, limits.timeout, progress).await?;
    let node_registration = started.elapsed();
    let measured = phases(&client, &sim, workload, with_services, limits, progress).await;
    sim.shutdown().await;
    let (mut side, wakes) = measured?;
    side.server_address = client.address().to_string();
    side.node_registration_secs = secs(node_registration);
    Ok((side, wakes))
}

async fn phases(
    client: &Client,
    sim: &drover_agent::sim::Simulator,
    workload: &Workload,
    with_services: bool,
    limits: &Limits,
    progress: &mut Progress,
) -> Result<(Side, Option<Wakes>), BenchError> {
    let Limits {
        in_flight,
        deadline,
        timeout,
    } = *limits;
    let expected = if with_services {
        workload.allocations()
    } else {
        0
    };
    progress.phase(&format!(
        "placing {} jobs of {} allocations ({} registrations)",
        workload.jobs, workload.count, expected
    ));
    let started = Instant::now();
    let submitted = jobs::submit_each(client, workload, in_flight, deadline, timeout, &|n| {
        job(workload, n, 1, with_services)
    })
    .await?;
    jobs::wait_for(client, workload, Goal::Placed, deadline, timeout, progress).await?;
    let place = started.elapsed();
    jobs::wait_for(client, workload, Goal::Running, deadline, timeout, progress).await?;
    let running = started.elapsed();
    let registrations =
        wait_for_registrations(client, workload, expected, limits, progress).await?;
    let registered = started.elapsed();
    let v1 = submitted;
    let churn = Workload {
        jobs: churn_jobs(workload),
        ..workload.clone()
    };

    progress.phase("placing the probe on the quiet cluster");
    let probe_quiet = place_probe(client, workload, "q", limits, progress).await?;

    let wait = Wait {
        client,
        workload: &churn,
        in_flight,
        deadline,
        timeout,
    };
    // The version-1 deployments of the jobs to update end first, as in the rolling
    // scenario, so version 2 rolls out from a settled cluster.
    wait.rolled_out(&v1[..churn.jobs as usize], started, progress)
        .await?;
    progress.phase(&format!(
        "rolling out {} jobs ({} allocations) while placing the probe again",
        churn.jobs,
        churn.allocations()
    ));
    let watchers = match with_services {
        true => Some(Watchers::start(client, sim, workload, churn.jobs).await?),
        false => None,
    };
    let rollout_started = Instant::now();
    let versions = jobs::submit_each(client, &churn, in_flight, deadline, timeout, &|n| {
        job(workload, n, 2, with_services)
    })
    .await?;
    first_replacement_running(client, workload, versions[0], limits).await?;
    let probe_during = place_probe(client, workload, "c", limits, progress).await?;
    let rolled = wait
        .rolled_out(&versions, rollout_started, progress)
        .await?;
    let rollout = rollout_started.elapsed();
    let registrations_after =
        wait_for_registrations(client, workload, expected, limits, progress).await?;
    let wakes = match watchers {
        Some(w) => Some(w.finish().await?),
        None => None,
    };
    Ok((
        Side {
            server_address: String::new(),
            services_per_allocation: u64::from(with_services),
            node_registration_secs: 0.0,
            place_secs: secs(place),
            running_secs: secs(running),
            registered_secs: with_services.then(|| secs(registered)),
            registrations,
            probe_quiet_secs: secs(probe_quiet),
            probe_during_rollout_secs: secs(probe_during),
            rollout_secs: secs(rollout),
            replaced: rolled.running,
            registrations_after_rollout: registrations_after,
        },
        wakes,
    ))
}

/// One blocking read per updated job's service, and the simulator's writes to time their
/// wakes by.
struct Watchers {
    services: u64,
    writes: mpsc::UnboundedReceiver<ServiceWrite>,
    reads: Vec<(
        oneshot::Sender<()>,
        JoinHandle<Result<Vec<Wake>, BenchError>>,
    )>,
}

impl Watchers {
    /// Starts the reads of the first `jobs` jobs' services; returns once each holds, so
    /// they see every change that follows.
    async fn start(
        client: &Client,
        sim: &drover_agent::sim::Simulator,
        workload: &Workload,
        jobs: u32,
    ) -> Result<Watchers, BenchError> {
        let writes = sim.watch_service_writes()?;
        let mut reads = Vec::new();
        let mut holding = Vec::new();
        for n in 0..jobs {
            let (stop, stopped) = oneshot::channel();
            let (ready, held) = oneshot::channel();
            let read = tokio::spawn(watch_service(
                client.services(),
                service_name(workload, n),
                ready,
                stopped,
            ));
            reads.push((stop, read));
            holding.push(held);
        }
        let mut watchers = Watchers {
            services: u64::from(jobs),
            writes,
            reads,
        };
        for (i, held) in holding.into_iter().enumerate() {
            if held.await.is_err() {
                // That read ended at once: its error is the run's.
                let (_, read) = watchers.reads.swap_remove(i);
                read.await.map_err(watch_panicked)??;
                return Err(BenchError::Io {
                    what: "watching a service",
                    source: std::io::Error::other("the blocking read ended before holding"),
                });
            }
        }
        Ok(watchers)
    }

    /// Stops the reads and times their wakes.
    async fn finish(self) -> Result<Wakes, BenchError> {
        let mut wakes = Vec::new();
        for (stop, read) in self.reads {
            let _ = stop.send(());
            wakes.extend(read.await.map_err(watch_panicked)??);
        }
        Ok(time_wakes(self.services, &wakes, self.writes))
    }
}

fn watch_panicked(e: tokio::task::JoinError) -> BenchError {
    BenchError::Io {
        what: "watching a service",
        source: std::io::Error::other(e),
    }
}

/// Submits the probe tagged `tag` and waits until it is placed; how long that took.
async fn place_probe(
    client: &Client,
    workload: &Workload,
    tag: &str,
    limits: &Limits,
    progress: &mut Progress,
) -> Result<Duration, BenchError> {
    let probe = probe(workload, tag);
    let started = Instant::now();
    jobs::submit_each(
        client,
        &probe,
        limits.in_flight,
        limits.deadline,
        limits.timeout,
        &|n| probe_job(workload, &probe, n),
    )
    .await?;
    jobs::wait_for(
        client,
        &probe,
        Goal::Placed,
        limits.deadline,
        limits.timeout,
        progress,
    )
    .await?;
    Ok(started.elapsed())
}

/// The run's registrations in the catalog now.
async fn registrations(client: &Client, workload: &Workload) -> Result<u64, BenchError> {
    let prefix = workload.job_prefix();
    let answer = client
        .services()
        .list(pb::ListServicesRequest {
            namespace: drover_core::DEFAULT_NAMESPACE.into(),
            ..Default::default()
        })
        .await
        .map_err(rpc_failed("listing services"))?
        .into_inner();
    Ok(answer
        .services
        .iter()
        .filter(|s| s.name.starts_with(&prefix))
        .map(|s| u64::from(s.instances))
        .sum())
}

/// Waits until the catalog holds `expected` registrations of the run; returns the count.
async fn wait_for_registrations(
    client: &Client,
    workload: &Workload,
    expected: u64,
    limits: &Limits,
    progress: &mut Progress,
) -> Result<u64, BenchError> {
    loop {
        let count = registrations(client, workload).await?;
        progress.tick(|| format!("{count} of {expected} registrations in the catalog"));
        if count == expected {
            return Ok(count);
        }
        if Instant::now() >= limits.deadline {
            return Err(BenchError::Deadline {
                what: "registrations in the catalog",
                done: count,
                wanted: expected,
                timeout: limits.timeout,
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Waits until the first job runs an allocation of `version`: the rollout's churn began.
async fn first_replacement_running(
    client: &Client,
    workload: &Workload,
    version: u64,
    limits: &Limits,
) -> Result<(), BenchError> {
    loop {
        let answer = drover_proto::paging::job_allocations_all(
            &client.jobs(),
            pb::JobAllocationsRequest {
                job_id: workload.job_id(0),
                ..Default::default()
            },
        )
        .await
        .map_err(rpc_failed("listing a benchmark job's allocations"))?;
        let replaced = answer
            .allocations
            .iter()
            .any(|a| a.job_version == version && a.client_status() == pb::ClientStatus::Running);
        if replaced {
            return Ok(());
        }
        if Instant::now() >= limits.deadline {
            return Err(BenchError::Deadline {
                what: "first replacement running",
                done: 0,
                wanted: 1,
                timeout: limits.timeout,
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// One wake of the blocking read on a change of the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Wake {
    index: u64,
    at: Instant,
}

/// Holds a blocking read of service `name` at the index last seen until `stop`, telling
/// `ready` once the first answer came; returns the wakes on which the service's instances
/// differed from the previous answer.
async fn watch_service(
    mut services: drover_proto::v1::service_service_client::ServiceServiceClient<
        drover_proto::bearer::BearerChannel,
    >,
    name: String,
    ready: oneshot::Sender<()>,
    mut stop: oneshot::Receiver<()>,
) -> Result<Vec<Wake>, BenchError> {
    let mut ready = Some(ready);
    let mut index = 0;
    let mut instances: Option<Vec<pb::ServiceRegistration>> = None;
    let mut wakes = Vec::new();
    loop {
        let read = services.info(pb::ServiceInfoRequest {
            namespace: drover_core::DEFAULT_NAMESPACE.into(),
            name: name.clone(),
            wait_index: index,
            max_wait_ms: BLOCK_MS,
            ..Default::default()
        });
        let answer = tokio::select! {
            _ = &mut stop => return Ok(wakes),
            answer = read => answer.map_err(rpc_failed("reading a service"))?.into_inner(),
        };
        let at = Instant::now();
        let changed = instances
            .as_ref()
            .is_some_and(|before| *before != answer.instances);
        if changed && answer.index > index {
            wakes.push(Wake {
                index: answer.index,
                at,
            });
        }
        index = answer.index;
        instances = Some(answer.instances);
        if let Some(ready) = ready.take() {
            let _ = ready.send(());
        }
    }
}

/// Times each wake from the simulated write that committed at its index.
fn time_wakes(
    services: u64,
    wakes: &[Wake],
    mut writes: mpsc::UnboundedReceiver<ServiceWrite>,
) -> Wakes {
    let mut by_index: HashMap<u64, ServiceWrite> = HashMap::new();
    while let Ok(w) = writes.try_recv() {
        by_index.insert(w.index, w);
    }
    let (mut from_ack, mut from_sent) = (Vec::new(), Vec::new());
    for wake in wakes {
        if let Some(w) = by_index.get(&wake.index) {
            from_ack.push(wake.at.saturating_duration_since(w.acknowledged));
            from_sent.push(wake.at.saturating_duration_since(w.sent));
        }
    }
    Wakes {
        services,
        samples: from_sent.len() as u64,
        unmatched: (wakes.len() - from_sent.len()) as u64,
        from_ack: Spread::of(&from_ack),
        from_sent: Spread::of(&from_sent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload() -> Workload {
        Workload::new(10, 3, 4, 10, 16)
            .expect("fits")
            .with_ports(1)
            .expect("fits")
    }

    #[test]
    fn jobs_are_valid_and_only_the_services_side_offers_one() {
        let w = workload();
        for (with, services) in [(false, 0), (true, 1)] {
            for version in [1, 2] {
                let job = job(&w, 0, version, with);
                let errors = drover_core::validate::validate_job(&job, &Default::default());
                assert!(errors.is_ok(), "{errors:?}");
                assert_eq!(job.groups[0].services.len(), services);
            }
        }
        let job = job(&w, 2, 1, true);
        let name = job.groups[0].services[0].resolved_name(
            &job.name,
            &job.groups[0].name,
            None,
            drover_core::types::MetaLayers([&job.meta, &job.groups[0].meta, &Default::default()]),
        );
        assert_eq!(name, service_name(&w, 2));
    }

    #[test]
    fn the_rollout_makes_the_churn_the_issue_names_and_the_probe_ten_times_it() {
        let cases = [
            // (jobs, count) -> (churn jobs, probe jobs)
            ((1_000, 100), (10, 100)),
            ((4, 5), (4, 4)),
            ((20, 300), (4, 20)),
            ((2, 1), (2, 2)),
        ];
        for ((jobs, count), (churn, probe_jobs)) in cases {
            let w = Workload::new(10_000, jobs, count, 10, 16).expect("fits");
            assert_eq!(churn_jobs(&w), churn, "{jobs} x {count}");
            let p = probe(&w, "q");
            assert_eq!(p.jobs, probe_jobs, "{jobs} x {count}");
            assert!(!p.job_id(0).starts_with(&w.job_prefix()), "own ids");
            assert!(!w.job_id(0).starts_with(&p.job_prefix()), "own ids");
            assert_eq!(probe_job(&w, &p, 0).datacenters, [w.datacenter()]);
        }
    }

    #[test]
    fn wakes_are_timed_from_the_write_of_their_index() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let (tx, rx) = mpsc::unbounded_channel();
        for (index, sent, acked) in [(10, 0, 4), (12, 5, 9)] {
            tx.send(ServiceWrite {
                index,
                sent: t0 + ms(sent),
                acknowledged: t0 + ms(acked),
            })
            .expect("open");
        }
        let wakes = [
            Wake {
                index: 10,
                at: t0 + ms(6),
            },
            // Woke before the acknowledgement arrived: zero from it.
            Wake {
                index: 12,
                at: t0 + ms(8),
            },
            Wake {
                index: 13,
                at: t0 + ms(20),
            },
        ];
        let timed = time_wakes(1, &wakes, rx);
        assert_eq!((timed.samples, timed.unmatched), (2, 1));
        assert_eq!((timed.from_sent.p50_ms, timed.from_sent.max_ms), (3.0, 6.0));
        assert_eq!((timed.from_ack.p50_ms, timed.from_ack.max_ms), (0.0, 2.0));
    }

    fn side(address: &str, services: u64, scale: f64) -> Side {
        Side {
            server_address: address.into(),
            services_per_allocation: services,
            node_registration_secs: 14.0,
            place_secs: 40.0 * scale,
            running_secs: 45.0 * scale,
            registered_secs: (services > 0).then_some(46.5),
            registrations: 100_000 * services,
            probe_quiet_secs: 0.5,
            probe_during_rollout_secs: 0.8 * scale,
            rollout_secs: 6.25,
            replaced: 1_000,
            registrations_after_rollout: 100_000 * services,
        }
    }

    #[test]
    fn human_report() {
        let spread = |p50_ms, p99_ms, max_ms| Spread {
            p50_ms,
            p90_ms: p99_ms,
            p99_ms,
            max_ms,
        };
        let report = ServicesReport {
            scenario: "services",
            nodes: 10_000,
            jobs: 1_000,
            count_per_job: 100,
            allocations: 100_000,
            churn_jobs: 10,
            churn_allocations: 1_000,
            probe_allocations: 1_000,
            in_flight: 64,
            without_services: side("http://127.0.0.1:40001", 0, 1.0),
            with_services: side("http://127.0.0.1:40002", 1, 1.05),
            placement_slowdown_pct: 5.0,
            churn_placement_slowdown_pct: 5.0,
            wakes: Wakes {
                services: 10,
                samples: 180,
                unmatched: 3,
                from_ack: spread(1.5, 6.0, 9.25),
                from_sent: spread(8.0, 21.5, 30.0),
            },
            bench_peak_rss_mib: Some(1_234.5),
            timeout_secs: 600.0,
        };
        insta::assert_snapshot!(report.render());
    }

    #[test]
    fn slowdown_is_relative_to_the_side_without_services() {
        assert!((slowdown_pct(11.0, 10.0) - 10.0).abs() < 1e-9);
        assert!((slowdown_pct(9.0, 10.0) + 10.0).abs() < 1e-9);
    }
}
