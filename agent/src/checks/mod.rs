//! One allocation's services and their checks, as the agent running it sees them: the
//! registrations it writes to the catalog (through its allocation updates), the checks it
//! runs for them, and what their results mean: each registration's health, the
//! allocation's aggregated check health (what a deployment's `health_check = "checks"`
//! reads), and which tasks `check_restart` restarts.
//!
//! Checks start once the allocation runs, each after a random part of its interval (so a
//! node's checks do not fire together) and then every interval with a tenth of jitter. A
//! check has not passed until it has: a registration starts with its checks pending, which
//! is critical. A check's result is kept (and so reported) only when its status changes: a
//! check that keeps passing writes nothing to the servers, whatever its output says.

pub mod catalog;
pub mod probe;

use crate::state::AllocInfo;
use drover_core::types::{
    CheckRestart, CheckState, CheckStatus, MetaLayers, NodeId, OnUpdate, Service, ServiceHealth,
    ServiceRegistration, TaskGroup, Timestamp,
};
use probe::{Outcome, Target};
use rand::Rng;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// What one run of a check found, for the allocation's supervisor.
#[derive(Clone, Debug)]
pub struct CheckResult {
    /// The registration's position in [`AllocChecks`] and the check's in it.
    pub service: usize,
    pub check: usize,
    pub outcome: Outcome,
}

/// Where a task's script checks run: its environment and working directory.
#[derive(Clone, Debug, Default)]
pub struct TaskContext {
    pub env: BTreeMap<String, String>,
    pub dir: Option<PathBuf>,
}

struct PlannedCheck {
    target: Target,
    interval: Duration,
    restart: Option<CheckRestart>,
    /// How its result weighs on the allocation's deployment health.
    on_update: OnUpdate,
    /// The tasks `check_restart` restarts: the service's task, or a group service's tasks.
    tasks: Vec<String>,
    /// Unhealthy results in a row past the grace.
    failures: u32,
}

/// A registration and how to run its checks: `checks[i]` runs what
/// `registration.checks[i]` holds the latest state of.
struct Planned {
    registration: ServiceRegistration,
    checks: Vec<PlannedCheck>,
}

/// The services of one allocation and the state of their checks.
pub struct AllocChecks {
    services: Vec<Planned>,
}

impl std::fmt::Debug for AllocChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllocChecks")
            .field("services", &self.services.len())
            .finish()
    }
}

impl AllocChecks {
    /// The registrations of `alloc`'s group and tasks, on the ports the allocation holds,
    /// their checks pending since `now`.
    pub fn plan(
        alloc: &AllocInfo,
        group: &TaskGroup,
        node_id: NodeId,
        contexts: &BTreeMap<String, TaskContext>,
        now: Timestamp,
    ) -> Self {
        let mut services = Vec::new();
        let all_tasks: Vec<String> = group.tasks.iter().map(|t| t.name.clone()).collect();
        for (task, list) in owners(group) {
            for (index, service) in list.iter().enumerate() {
                let registration = registration(alloc, group, node_id, task, index, service, now);
                let addr = registration
                    .address
                    .filter(|_| registration.port != 0)
                    .map(|ip| SocketAddr::new(ip, registration.port));
                let checks = service
                    .checks
                    .iter()
                    .map(|c| {
                        let runs_in = task.map(str::to_owned).or_else(|| c.task.clone());
                        let context = runs_in
                            .as_deref()
                            .and_then(|t| contexts.get(t))
                            .cloned()
                            .unwrap_or_default();
                        PlannedCheck {
                            target: Target {
                                kind: c.kind.clone(),
                                addr,
                                timeout: c.timeout,
                                env: context.env,
                                dir: context.dir,
                            },
                            interval: c.interval,
                            restart: c.check_restart.filter(|r| r.limit > 0),
                            on_update: c.on_update,
                            tasks: match task {
                                Some(t) => vec![t.to_owned()],
                                None => all_tasks.clone(),
                            },
                            failures: 0,
                        }
                    })
                    .collect();
                services.push(Planned {
                    registration,
                    checks,
                });
            }
        }
        Self { services }
    }

    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }

    /// Starts every check; results arrive on `results` until the returned set is dropped.
    pub fn spawn(
        &self,
        results: mpsc::UnboundedSender<CheckResult>,
        http: reqwest::Client,
    ) -> JoinSet<()> {
        let mut set = JoinSet::new();
        for (service, planned) in self.services.iter().enumerate() {
            for (check, c) in planned.checks.iter().enumerate() {
                let (target, interval) = (c.target.clone(), c.interval);
                let (results, http) = (results.clone(), http.clone());
                set.spawn(async move {
                    let first = rand::rng().random_range(Duration::ZERO..=interval);
                    tokio::time::sleep(first).await;
                    loop {
                        let outcome = probe::probe(&target, &http).await;
                        let result = CheckResult {
                            service,
                            check,
                            outcome,
                        };
                        if results.send(result).is_err() {
                            return;
                        }
                        let jitter = rand::rng().random_range(Duration::ZERO..=interval / 10);
                        tokio::time::sleep(interval + jitter).await;
                    }
                });
            }
        }
        set
    }

    /// Records a result found at `at`; returns whether the check's status changed (its
    /// registration is then worth reporting) and the tasks `check_restart` now restarts.
    /// `started` says when each task last started: results before its grace ran out do
    /// not count.
    pub fn record(
        &mut self,
        result: &CheckResult,
        started: &BTreeMap<String, Instant>,
        now: Instant,
        at: Timestamp,
    ) -> (bool, Vec<String>) {
        let Some(planned) = self.services.get_mut(result.service) else {
            return (false, Vec::new());
        };
        let (Some(check), Some(state)) = (
            planned.checks.get_mut(result.check),
            planned.registration.checks.get_mut(result.check),
        ) else {
            return (false, Vec::new());
        };
        let status = CheckStatus::from(result.outcome.health);
        let changed = state.status != status;
        if changed {
            *state = CheckState {
                name: std::mem::take(&mut state.name),
                check_type: state.check_type,
                status,
                output: result.outcome.output.clone(),
                http_status: result.outcome.http_status,
                time: at,
            }
            .bound();
        }
        let mut restart = Vec::new();
        if let Some(policy) = check.restart {
            let unhealthy = match result.outcome.health {
                ServiceHealth::Passing => false,
                ServiceHealth::Warning => !policy.ignore_warnings,
                ServiceHealth::Critical => true,
            };
            let in_grace = check.tasks.iter().any(|t| {
                started
                    .get(t)
                    .is_none_or(|at| now.saturating_duration_since(*at) < policy.grace)
            });
            if !unhealthy {
                check.failures = 0;
            } else if !in_grace {
                check.failures += 1;
                if check.failures >= policy.limit {
                    check.failures = 0;
                    restart = check.tasks.clone();
                }
            }
        }
        planned.registration.health = CheckState::health_of(&planned.registration.checks);
        (changed, restart)
    }

    /// Forgets the failures counted against the checks of `task` (it started again).
    pub fn task_started(&mut self, task: &str) {
        for planned in &mut self.services {
            for c in &mut planned.checks {
                if c.tasks.iter().any(|t| t == task) {
                    c.failures = 0;
                }
            }
        }
    }

    /// The registrations with their checks' health.
    pub fn registrations(&self) -> Vec<ServiceRegistration> {
        self.services
            .iter()
            .map(|p| p.registration.clone())
            .collect()
    }

    /// The allocation's check health: the worst of its services' (passing without any).
    pub fn health(&self) -> ServiceHealth {
        ServiceHealth::worst(self.services.iter().map(|p| p.registration.health))
    }

    /// Whether every check that gates updates lets the allocation be healthy now, as each
    /// check's `on_update` says: `require_healthy` needs passing, `ignore_warnings`
    /// anything but critical (or pending), `ignore` nothing.
    pub fn pass_for_updates(&self) -> bool {
        self.services.iter().all(|p| {
            p.checks
                .iter()
                .zip(&p.registration.checks)
                .all(|(c, state)| match c.on_update {
                    OnUpdate::RequireHealthy => state.status == CheckStatus::Passing,
                    OnUpdate::IgnoreWarnings => state.status.health() != ServiceHealth::Critical,
                    OnUpdate::Ignore => true,
                })
        })
    }
}

/// The services of a group and of each of its tasks, with the task that offers them
/// (`None`: the group).
fn owners(group: &TaskGroup) -> impl Iterator<Item = (Option<&str>, &Vec<Service>)> {
    std::iter::once((None, &group.services)).chain(
        group
            .tasks
            .iter()
            .map(|t| (Some(t.name.as_str()), &t.services)),
    )
}

/// The registrations `alloc` of `group` writes to the catalog, before any check ran: what
/// [`AllocChecks::plan`] starts from, for callers that run no checks (the simulator).
pub fn registrations(
    alloc: &AllocInfo,
    group: &TaskGroup,
    node_id: NodeId,
    now: Timestamp,
) -> Vec<ServiceRegistration> {
    owners(group)
        .flat_map(|(task, list)| {
            list.iter().enumerate().map(move |(index, service)| {
                registration(alloc, group, node_id, task, index, service, now)
            })
        })
        .collect()
}

fn registration(
    alloc: &AllocInfo,
    group: &TaskGroup,
    node_id: NodeId,
    task: Option<&str>,
    index: usize,
    service: &Service,
    now: Timestamp,
) -> ServiceRegistration {
    let port = alloc
        .ports
        .iter()
        .find(|p| !service.port_label.is_empty() && p.label == service.port_label.as_str());
    let none = std::collections::BTreeMap::new();
    let service_name = service.resolved_name(&alloc.job_name, &group.name, task, {
        let task_meta = task
            .and_then(|t| group.tasks.iter().find(|x| x.name == t))
            .map_or(&none, |t| &t.meta);
        MetaLayers([&alloc.job_meta, &group.meta, task_meta])
    });
    let checks: Vec<CheckState> = service
        .checks
        .iter()
        .map(|c| {
            CheckState {
                // Nomad's name for an unnamed check.
                name: if c.name.is_empty() {
                    format!("service: {service_name:?} check")
                } else {
                    c.name.clone()
                },
                check_type: c.kind.check_type(),
                status: CheckStatus::Pending,
                output: String::new(),
                http_status: None,
                time: now,
            }
            .bound()
        })
        .collect();
    // Without checks a service is as healthy as its allocation is running.
    let health = CheckState::health_of(&checks);
    ServiceRegistration {
        id: ServiceRegistration::make_id(alloc.id, task, index),
        service_name,
        namespace: alloc.namespace.clone(),
        job_id: alloc.job_id.clone(),
        alloc_id: alloc.id,
        node_id,
        task: task.map(str::to_owned),
        address: port.map(|p| p.host_ip),
        port: port.map_or(0, |p| p.value),
        tags: service.tags.clone(),
        health,
        checks,
        create_index: 0,
        modify_index: 0,
    }
}

/// The node id the agent's node values name (`node.unique.id`).
pub fn node_id_of(values: &BTreeMap<String, String>) -> Option<NodeId> {
    values.get("node.unique.id").and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::types::{AllocatedPort, CheckKind, OnUpdate, ServiceCheck, Task};
    use std::time::Duration;

    const T0: Timestamp = Timestamp(1_700_000_000_000);

    fn alloc() -> AllocInfo {
        AllocInfo {
            id: drover_core::mock::alloc_id(1),
            name: "shop.db[0]".into(),
            namespace: "default".into(),
            job_id: "shop".into(),
            job_name: "shop".into(),
            job_type: drover_core::types::JobType::Service,
            job_version: 0,
            datacenter: "dc1".into(),
            ports: vec![AllocatedPort {
                label: "db".into(),
                value: 25000,
                to: 0,
                host_ip: "127.0.0.1".parse().expect("ip"),
            }],
            job_meta: BTreeMap::new(),
            payload: Vec::new(),
        }
    }

    /// A group `db` with task `db` offering `${NOMAD_JOB_NAME}-db` on port `db`, with one
    /// tcp check restarting after `limit` failures past a 10 s grace.
    fn group(limit: u32, ignore_warnings: bool) -> TaskGroup {
        let mut task = Task::raw_exec("db", "/bin/true");
        task.services.push(Service {
            name: "${NOMAD_JOB_NAME}-db".into(),
            port_label: "db".into(),
            tags: vec!["primary".into()],
            meta: BTreeMap::new(),
            address_mode: Default::default(),
            checks: vec![ServiceCheck {
                name: String::new(),
                kind: CheckKind::Tcp,
                interval: Duration::from_secs(1),
                timeout: Duration::from_secs(1),
                on_update: OnUpdate::RequireHealthy,
                check_restart: Some(CheckRestart {
                    limit,
                    grace: Duration::from_secs(10),
                    ignore_warnings,
                }),
                task: None,
            }],
        });
        TaskGroup::new("db", 1, vec![task])
    }

    fn result(health: ServiceHealth) -> CheckResult {
        CheckResult {
            service: 0,
            check: 0,
            outcome: Outcome {
                health,
                output: String::new(),
                http_status: None,
            },
        }
    }

    #[test]
    fn a_registration_is_where_its_port_is_and_starts_critical() {
        let checks = AllocChecks::plan(
            &alloc(),
            &group(0, false),
            drover_core::mock::node_id(1),
            &BTreeMap::new(),
            T0,
        );
        let regs = checks.registrations();
        assert_eq!(regs.len(), 1);
        let r = &regs[0];
        assert_eq!(r.service_name, "shop-db");
        assert_eq!(r.task.as_deref(), Some("db"));
        assert_eq!(
            (r.address.map(|a| a.to_string()), r.port),
            (Some("127.0.0.1".into()), 25000)
        );
        assert_eq!(r.health, ServiceHealth::Critical);
        assert_eq!(checks.health(), ServiceHealth::Critical);
    }

    #[test]
    fn registrations_without_checks_are_those_the_plan_starts_from() {
        let mut g = group(0, false);
        g.services.push(Service {
            name: "${NOMAD_GROUP_NAME}-edge".into(),
            ..g.tasks[0].services[0].clone()
        });
        let node = drover_core::mock::node_id(1);
        let at = Timestamp(1_000);
        let planned = AllocChecks::plan(&alloc(), &g, node, &BTreeMap::new(), at);
        let plain = registrations(&alloc(), &g, node, at);
        assert_eq!(plain, planned.registrations());
        let names: Vec<_> = plain.iter().map(|r| r.service_name.as_str()).collect();
        assert_eq!(
            names,
            ["db-edge", "shop-db"],
            "the group's services come first"
        );
    }

    #[test]
    fn a_registration_name_reads_the_task_meta_over_the_job_meta() {
        let mut info = alloc();
        info.job_meta.insert("tier".into(), "gold".into());
        let mut g = group(0, false);
        g.tasks[0].meta.insert("tier".into(), "silver".into());
        g.tasks[0].services[0].name = "${NOMAD_JOB_NAME}-${NOMAD_META_TIER}".into();
        let checks = AllocChecks::plan(
            &info,
            &g,
            drover_core::mock::node_id(1),
            &BTreeMap::new(),
            T0,
        );
        assert_eq!(checks.registrations()[0].service_name, "shop-silver");
    }

    #[test]
    fn check_restart_counts_failures_in_a_row_past_the_grace() {
        use ServiceHealth::*;
        // (limit, ignore_warnings, seconds since the task started and the result, per
        // step), and after which steps the task is restarted.
        let cases: Vec<(u32, bool, Vec<(u64, ServiceHealth)>, Vec<usize>)> = vec![
            (2, false, vec![(11, Critical), (12, Critical)], vec![1]),
            // In the grace nothing counts.
            (
                2,
                false,
                vec![(1, Critical), (2, Critical), (11, Critical)],
                vec![],
            ),
            // A pass starts the count again.
            (
                2,
                false,
                vec![(11, Critical), (12, Passing), (13, Critical)],
                vec![],
            ),
            // Warnings count unless ignored.
            (2, false, vec![(11, Warning), (12, Warning)], vec![1]),
            (2, true, vec![(11, Warning), (12, Warning)], vec![]),
            // After a restart the count starts again.
            (1, false, vec![(11, Critical), (12, Critical)], vec![0, 1]),
        ];
        for (limit, ignore, steps, want) in cases {
            let mut checks = AllocChecks::plan(
                &alloc(),
                &group(limit, ignore),
                drover_core::mock::node_id(1),
                &BTreeMap::new(),
                T0,
            );
            let start = Instant::now();
            let started = BTreeMap::from([("db".to_owned(), start)]);
            let mut restarted = Vec::new();
            for (i, (secs, health)) in steps.iter().enumerate() {
                let now = start + Duration::from_secs(*secs);
                let (_, restart) = checks.record(&result(*health), &started, now, T0);
                if !restart.is_empty() {
                    assert_eq!(restart, ["db"]);
                    restarted.push(i);
                }
            }
            assert_eq!(restarted, want, "limit {limit} ignore {ignore} {steps:?}");
        }
    }

    #[test]
    fn results_set_the_registrations_health() {
        let mut checks = AllocChecks::plan(
            &alloc(),
            &group(0, false),
            drover_core::mock::node_id(1),
            &BTreeMap::new(),
            T0,
        );
        let started = BTreeMap::new();
        let (changed, restart) = checks.record(
            &result(ServiceHealth::Passing),
            &started,
            Instant::now(),
            T0,
        );
        assert!(changed && restart.is_empty());
        assert_eq!(checks.registrations()[0].health, ServiceHealth::Passing);
        let (changed, _) = checks.record(
            &result(ServiceHealth::Passing),
            &started,
            Instant::now(),
            T0,
        );
        assert!(!changed, "the same result again changes nothing");
        assert_eq!(checks.health(), ServiceHealth::Passing);
    }

    #[test]
    fn a_check_is_reported_only_when_its_status_changes() {
        let mut checks = AllocChecks::plan(
            &alloc(),
            &group(0, false),
            drover_core::mock::node_id(1),
            &BTreeMap::new(),
            T0,
        );
        let pending = &checks.registrations()[0].checks;
        assert_eq!(pending.len(), 1);
        assert_eq!(
            (
                pending[0].name.as_str(),
                pending[0].check_type,
                pending[0].status,
                pending[0].time
            ),
            (
                "service: \"shop-db\" check",
                drover_core::types::CheckType::Tcp,
                CheckStatus::Pending,
                T0
            )
        );
        let started = BTreeMap::new();
        let at = |s: u64| Timestamp(T0.0 + s * 1000);
        let run = |health, output: &str| CheckResult {
            service: 0,
            check: 0,
            outcome: Outcome {
                health,
                output: output.into(),
                http_status: None,
            },
        };
        // (result, its output, whether it is reported, the output and time then held).
        let steps = [
            (ServiceHealth::Passing, "up 1", true, "up 1", at(1)),
            (ServiceHealth::Passing, "up 2", false, "up 1", at(1)),
            (ServiceHealth::Critical, "refused", true, "refused", at(3)),
            (
                ServiceHealth::Critical,
                "refused again",
                false,
                "refused",
                at(3),
            ),
            (ServiceHealth::Warning, "slow", true, "slow", at(5)),
            (ServiceHealth::Passing, "up 3", true, "up 3", at(6)),
        ];
        for (i, (health, output, reported, held, time)) in steps.into_iter().enumerate() {
            let (changed, _) = checks.record(
                &run(health, output),
                &started,
                Instant::now(),
                at(i as u64 + 1),
            );
            assert_eq!(changed, reported, "step {i}");
            let state = &checks.registrations()[0].checks[0];
            assert_eq!(
                (state.status, state.output.as_str(), state.time),
                (CheckStatus::from(health), held, time),
                "step {i}"
            );
            assert_eq!(checks.registrations()[0].health, health, "step {i}");
        }
        // What a check prints is cut before it travels.
        let (changed, _) = checks.record(
            &run(ServiceHealth::Critical, &"x".repeat(10_000)),
            &started,
            Instant::now(),
            at(9),
        );
        assert!(changed);
        let state = &checks.registrations()[0].checks[0];
        assert_eq!(state.output.len(), drover_core::types::MAX_CHECK_OUTPUT);
    }
}
