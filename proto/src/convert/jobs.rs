//! Jobs and everything inside them, job summaries, and the job service's requests.

use super::enums::optional_enum;
use super::resources::{constraints, constraints_to, required_resources};
use super::{
    ConvertError, Problem, Result, WireEnum, Within, each_named, from_ms, narrow_u8, required,
    to_ms,
};
use crate::v1 as pb;
use drover_core::scheduler::annotate::DryRun;
use drover_core::state::{GroupSummary, JobSummary};
use drover_core::*;
use std::collections::BTreeMap;

// --- Core → proto ---------------------------------------------------------------------------

impl From<&UpdateStrategy> for pb::UpdateStrategy {
    fn from(u: &UpdateStrategy) -> Self {
        pb::UpdateStrategy {
            max_parallel: u.max_parallel,
            stagger_ms: to_ms(u.stagger),
            deployment: u.deployment.as_ref().map(Into::into),
        }
    }
}

impl From<&PeriodicConfig> for pb::PeriodicConfig {
    fn from(p: &PeriodicConfig) -> Self {
        pb::PeriodicConfig {
            cron: p.cron.clone(),
            prohibit_overlap: p.prohibit_overlap,
            time_zone: p.time_zone.clone(),
            enabled: p.enabled,
        }
    }
}

impl From<&ParameterizedConfig> for pb::ParameterizedConfig {
    fn from(p: &ParameterizedConfig) -> Self {
        pb::ParameterizedConfig {
            payload: p.payload.to_wire(),
            meta_required: p.meta_required.clone(),
            meta_optional: p.meta_optional.clone(),
        }
    }
}

impl From<&TaskConfig> for pb::TaskConfig {
    fn from(c: &TaskConfig) -> Self {
        pb::TaskConfig {
            command: c.command.clone(),
            args: c.args.clone(),
            extra: c.extra.clone(),
            ports: c.ports.clone(),
        }
    }
}

impl From<&Task> for pb::Task {
    fn from(t: &Task) -> Self {
        pb::Task {
            name: t.name.clone(),
            driver: t.driver.clone(),
            config: Some((&t.config).into()),
            env: t.env.clone(),
            resources: Some((&t.resources).into()),
            snapshot: t.snapshot.clone(),
            kill_timeout_ms: to_ms(t.kill_timeout),
            meta: t.meta.clone(),
            user: t.user.clone(),
            kill_signal: t.kill_signal.clone(),
            restart: t.restart.as_ref().map(Into::into),
            lifecycle: t.lifecycle.as_ref().map(|l| pb::Lifecycle {
                hook: l.hook.to_wire(),
                sidecar: l.sidecar,
            }),
            artifacts: t.artifacts.iter().map(Into::into).collect(),
            templates: t.templates.iter().map(Into::into).collect(),
            dispatch_payload: t.dispatch_payload.clone(),
            services: t.services.iter().map(Into::into).collect(),
        }
    }
}

impl From<&RestartPolicy> for pb::RestartPolicy {
    fn from(r: &RestartPolicy) -> Self {
        pb::RestartPolicy {
            attempts: r.attempts,
            interval_ms: to_ms(r.interval),
            delay_ms: to_ms(r.delay),
            mode: r.mode.to_wire(),
        }
    }
}

impl From<&ReschedulePolicy> for pb::ReschedulePolicy {
    fn from(r: &ReschedulePolicy) -> Self {
        pb::ReschedulePolicy {
            attempts: r.attempts,
            interval_ms: to_ms(r.interval),
            delay_ms: to_ms(r.delay),
            delay_function: r.delay_function.to_wire(),
            max_delay_ms: to_ms(r.max_delay),
            unlimited: r.unlimited,
        }
    }
}

impl From<&DisconnectPolicy> for pb::DisconnectPolicy {
    fn from(d: &DisconnectPolicy) -> Self {
        pb::DisconnectPolicy {
            lost_after_ms: d.lost_after.map(to_ms),
            replace: d.replace,
            reconcile: d.reconcile.to_wire(),
            stop_on_client_after_ms: d.stop_on_client_after.map(to_ms),
        }
    }
}

impl From<&TaskGroup> for pb::TaskGroup {
    fn from(g: &TaskGroup) -> Self {
        pb::TaskGroup {
            name: g.name.clone(),
            count: g.count,
            constraints: constraints_to(&g.constraints),
            tasks: g.tasks.iter().map(Into::into).collect(),
            restart: Some((&g.restart).into()),
            reschedule: Some((&g.reschedule).into()),
            disconnect: g.disconnect.as_ref().map(Into::into),
            stop_after_client_disconnect_ms: g.stop_after_client_disconnect.map(to_ms),
            update: g.update.as_ref().map(Into::into),
            meta: g.meta.clone(),
            migrate: Some((&g.migrate).into()),
            ephemeral_disk: g
                .ephemeral_disk
                .map(|d| pb::EphemeralDisk { size_mb: d.size_mb }),
            network: g.network.as_ref().map(Into::into),
            services: g.services.iter().map(Into::into).collect(),
        }
    }
}

impl From<&MigrateStrategy> for pb::MigrateStrategy {
    fn from(m: &MigrateStrategy) -> Self {
        pb::MigrateStrategy {
            max_parallel: m.max_parallel,
            health_check: m.health_check.as_str().to_string(),
            min_healthy_time_ms: to_ms(m.min_healthy_time),
            healthy_deadline_ms: to_ms(m.healthy_deadline),
        }
    }
}

fn migrate(p: pb::MigrateStrategy) -> Result<MigrateStrategy> {
    if p.max_parallel == 0 {
        return Err(ConvertError::new(
            "max_parallel",
            Problem::Invalid("must be at least 1"),
        ));
    }
    let health_check = HealthCheck::parse(&p.health_check).ok_or_else(|| {
        ConvertError::new(
            "health_check",
            Problem::Invalid("must be \"checks\" or \"task_states\""),
        )
    })?;
    Ok(MigrateStrategy {
        max_parallel: p.max_parallel,
        health_check,
        min_healthy_time: from_ms(p.min_healthy_time_ms),
        healthy_deadline: from_ms(p.healthy_deadline_ms),
    })
}

impl From<&Job> for pb::Job {
    fn from(j: &Job) -> Self {
        pb::Job {
            id: j.id.to_string(),
            namespace: j.namespace.clone(),
            name: j.name.clone(),
            job_type: j.job_type.to_wire(),
            priority: j.priority.into(),
            datacenters: j.datacenters.clone(),
            constraints: constraints_to(&j.constraints),
            groups: j.groups.iter().map(Into::into).collect(),
            update: Some((&j.update).into()),
            periodic: j.periodic.as_ref().map(Into::into),
            parameterized: j.parameterized.as_ref().map(Into::into),
            parent_id: j.parent_id.as_ref().map(ToString::to_string),
            payload: j.payload.clone(),
            meta: j.meta.clone(),
            version: j.version,
            status: j.status.to_wire(),
            stop: j.stop,
            submit_time_unix_ms: j.submit_time.as_millis(),
            create_index: j.create_index,
            modify_index: j.modify_index,
            job_modify_index: j.job_modify_index,
            stable: j.stable,
        }
    }
}

impl From<&JobKey> for pb::JobRef {
    fn from(k: &JobKey) -> Self {
        pb::JobRef {
            namespace: k.namespace.to_string(),
            id: k.id.to_string(),
        }
    }
}

impl From<&GroupSummary> for pb::GroupSummary {
    fn from(g: &GroupSummary) -> Self {
        pb::GroupSummary {
            queued: g.queued,
            starting: g.starting,
            running: g.running,
            complete: g.complete,
            failed: g.failed,
            lost: g.lost,
            unknown: g.unknown,
        }
    }
}

impl From<&JobSummary> for pb::JobSummary {
    fn from(s: &JobSummary) -> Self {
        pb::JobSummary {
            job: Some((&s.job).into()),
            groups: s
                .groups
                .iter()
                .map(|(k, g)| (k.clone(), g.into()))
                .collect(),
            live_allocs: s.live_allocs,
            total_allocs: s.total_allocs,
            open_evals: s.open_evals,
            total_evals: s.total_evals,
            queued_from: s.queued_from.map(|(index, eval)| pb::QueuedFrom {
                index,
                eval_id: eval.to_string(),
            }),
            modify_index: s.modify_index,
        }
    }
}

/// A job as `JobService.List` shows it: identity and status without the spec.
pub fn job_list_entry(job: &Job, summary: Option<&JobSummary>) -> pb::JobListEntry {
    pb::JobListEntry {
        id: job.id.to_string(),
        namespace: job.namespace.clone(),
        name: job.name.clone(),
        job_type: job.job_type.to_wire(),
        priority: job.priority.into(),
        status: job.status.to_wire(),
        stop: job.stop,
        version: job.version,
        parent_id: job
            .parent_id
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        is_template: job.is_template(),
        submit_time_unix_ms: job.submit_time.as_millis(),
        modify_index: job.modify_index,
        summary: summary.map(Into::into),
    }
}

/// The answer to `JobService.Plan`: the dry run's per-group changes and failures, the
/// plan's per-node detail, and `index`, the state index the dry run was computed at.
pub fn plan_response(dry: &DryRun, index: Index) -> pb::PlanJobResponse {
    pb::PlanJobResponse {
        desired_updates: dry
            .desired
            .iter()
            .map(|(g, d)| (g.clone(), d.into()))
            .collect(),
        failures: dry
            .failures
            .iter()
            .map(|(g, m)| (g.clone(), m.into()))
            .collect(),
        nodes: dry.plan.as_ref().map(super::node_plans).unwrap_or_default(),
        job_version: dry.job_version,
        spec_changed: dry.spec_changed,
        has_changes: dry.has_changes(),
        index,
    }
}

// --- Proto → core ---------------------------------------------------------------------------

pub(crate) fn update_strategy(p: pb::UpdateStrategy) -> Result<UpdateStrategy> {
    Ok(UpdateStrategy {
        max_parallel: p.max_parallel,
        stagger: from_ms(p.stagger_ms),
        deployment: p
            .deployment
            .map(super::deployments::deployment_strategy)
            .transpose()
            .within("deployment")?,
    })
}

fn periodic(p: pb::PeriodicConfig) -> PeriodicConfig {
    PeriodicConfig {
        cron: p.cron,
        prohibit_overlap: p.prohibit_overlap,
        time_zone: p.time_zone,
        enabled: p.enabled,
    }
}

fn parameterized(p: pb::ParameterizedConfig) -> Result<ParameterizedConfig> {
    Ok(ParameterizedConfig {
        payload: PayloadRequirement::from_wire("payload", p.payload)?,
        meta_required: p.meta_required,
        meta_optional: p.meta_optional,
    })
}

fn task(p: pb::Task) -> Result<Task> {
    let config = required("config", p.config)?;
    Ok(Task {
        name: p.name,
        driver: p.driver,
        config: TaskConfig {
            command: config.command,
            args: config.args,
            extra: config.extra,
            ports: config.ports,
        },
        env: p.env,
        resources: required_resources("resources", p.resources)?,
        snapshot: p.snapshot,
        kill_timeout: from_ms(p.kill_timeout_ms),
        meta: p.meta,
        user: p.user,
        kill_signal: p.kill_signal,
        restart: p.restart.map(restart).transpose().within("restart")?,
        lifecycle: p
            .lifecycle
            .map(|l| {
                Ok::<_, ConvertError>(Lifecycle {
                    hook: LifecycleHook::from_wire("lifecycle.hook", l.hook)?,
                    sidecar: l.sidecar,
                })
            })
            .transpose()?,
        artifacts: super::task_files::each("artifacts", p.artifacts, super::task_files::artifact)?,
        templates: super::task_files::each("templates", p.templates, super::task_files::template)?,
        dispatch_payload: p.dispatch_payload,
        services: super::service::services("services", p.services)?,
    })
}

/// An enum whose UNSPECIFIED value means a documented default; unknown values still fail.
fn or_default<E: WireEnum>(field: &str, value: i32, default: E) -> Result<E> {
    Ok(optional_enum(field, value)?.unwrap_or(default))
}

fn restart(p: pb::RestartPolicy) -> Result<RestartPolicy> {
    Ok(RestartPolicy {
        attempts: p.attempts,
        interval: from_ms(p.interval_ms),
        delay: from_ms(p.delay_ms),
        mode: or_default("mode", p.mode, RestartPolicy::default().mode)?,
    })
}

/// The job type's default delay function stands in for an unspecified one.
fn reschedule(p: pb::ReschedulePolicy, job_type: JobType) -> Result<ReschedulePolicy> {
    let default = match job_type {
        JobType::Service => ReschedulePolicy::service_default(),
        JobType::Batch => ReschedulePolicy::batch_default(),
        JobType::System | JobType::SysBatch => ReschedulePolicy::disabled(),
    };
    Ok(ReschedulePolicy {
        attempts: p.attempts,
        interval: from_ms(p.interval_ms),
        delay: from_ms(p.delay_ms),
        delay_function: or_default("delay_function", p.delay_function, default.delay_function)?,
        max_delay: from_ms(p.max_delay_ms),
        unlimited: p.unlimited,
    })
}

fn disconnect(p: pb::DisconnectPolicy) -> Result<DisconnectPolicy> {
    Ok(DisconnectPolicy {
        lost_after: p.lost_after_ms.map(from_ms),
        replace: p.replace,
        reconcile: or_default(
            "reconcile",
            p.reconcile,
            DisconnectPolicy::default().reconcile,
        )?,
        stop_on_client_after: p.stop_on_client_after_ms.map(from_ms),
    })
}

fn group(p: pb::TaskGroup, job_type: JobType) -> Result<TaskGroup> {
    Ok(TaskGroup {
        name: p.name,
        count: p.count,
        constraints: constraints(p.constraints)?,
        tasks: each_named("tasks", p.tasks, |t| &t.name, task)?,
        restart: restart(required("restart", p.restart)?).within("restart")?,
        reschedule: reschedule(required("reschedule", p.reschedule)?, job_type)
            .within("reschedule")?,
        disconnect: p
            .disconnect
            .map(disconnect)
            .transpose()
            .within("disconnect")?,
        stop_after_client_disconnect: p.stop_after_client_disconnect_ms.map(from_ms),
        update: p.update.map(update_strategy).transpose().within("update")?,
        meta: p.meta,
        migrate: p
            .migrate
            .map(migrate)
            .transpose()
            .within("migrate")?
            .unwrap_or_default(),
        ephemeral_disk: p
            .ephemeral_disk
            .map(|d| EphemeralDisk { size_mb: d.size_mb }),
        network: p
            .network
            .map(super::network::group_network)
            .transpose()
            .within("network")?,
        services: super::service::services("services", p.services)?,
    })
}

/// Whether the server-owned fields must be well formed (`Strict`, for a job the servers
/// sent) or are ignored because the servers will set them (`Submitted`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Strict,
    Submitted,
}

fn job_with(p: pb::Job, origin: Origin) -> Result<Job> {
    if p.id.is_empty() {
        return Err(ConvertError::new("id", Problem::Missing));
    }
    let status = match origin {
        Origin::Strict => JobStatus::from_wire("status", p.status)?,
        // The FSM sets the status of what it stores; a submitter has nothing to say.
        Origin::Submitted => JobStatus::Pending,
    };
    let job_type = JobType::from_wire("job_type", p.job_type)?;
    let mut job = Job {
        stable: p.stable,
        id: JobId::new(&p.id),
        namespace: p.namespace,
        name: p.name,
        job_type,
        priority: narrow_u8("priority", p.priority)?,
        datacenters: p.datacenters,
        constraints: constraints(p.constraints)?,
        groups: each_named("groups", p.groups, |g| &g.name, |g| group(g, job_type))?,
        // Absent: the defaults, so a job (a system job, typically) may leave it out.
        update: p
            .update
            .map(update_strategy)
            .transpose()
            .within("update")?
            .unwrap_or_default(),
        periodic: p.periodic.map(periodic),
        parameterized: p
            .parameterized
            .map(parameterized)
            .transpose()
            .within("parameterized")?,
        parent_id: p.parent_id.map(JobId::new),
        payload: p.payload,
        meta: p.meta,
        version: p.version,
        status,
        stop: p.stop,
        submit_time: Timestamp::from_millis(p.submit_time_unix_ms),
        create_index: p.create_index,
        modify_index: p.modify_index,
        job_modify_index: p.job_modify_index,
    };
    if origin == Origin::Submitted {
        job.version = 0;
        job.submit_time = Timestamp::ZERO;
        job.create_index = 0;
        job.modify_index = 0;
        job.job_modify_index = 0;
        job.stable = false;
    }
    Ok(job)
}

pub(crate) fn job(p: pb::Job) -> Result<Job> {
    job_with(p, Origin::Strict)
}

super::rooted_try_from!(pb::Job => Job, "job", job);

/// The job of a `Register` or `Plan` request: required, with the server-owned fields
/// (version, status, submit time, indexes) reset rather than checked, since the servers
/// set them. Errors are rooted at `job`.
pub fn submitted_job(p: Option<pb::Job>) -> std::result::Result<Job, ConvertError> {
    let p = required("job", p)?;
    job_with(p, Origin::Submitted).within("job")
}

/// A decoded `JobService.Register` request.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRegistration {
    pub job: Job,
    /// Register only if the job's `job_modify_index` still equals this (0: must not exist).
    pub enforce_index: Option<Index>,
}

impl TryFrom<pb::RegisterJobRequest> for JobRegistration {
    type Error = ConvertError;
    fn try_from(p: pb::RegisterJobRequest) -> std::result::Result<Self, ConvertError> {
        Ok(JobRegistration {
            job: submitted_job(p.job)?,
            enforce_index: p.enforce_index,
        })
    }
}

/// The job a request names: an empty namespace is `default`, an empty id is missing.
pub fn job_key(namespace: &str, job_id: &str) -> std::result::Result<JobKey, ConvertError> {
    if job_id.is_empty() {
        return Err(ConvertError::new("job_id", Problem::Missing));
    }
    let ns = if namespace.is_empty() {
        DEFAULT_NAMESPACE
    } else {
        namespace
    };
    Ok(JobKey::new(ns, job_id))
}

pub(crate) fn job_ref(p: pb::JobRef) -> Result<JobKey> {
    if p.id.is_empty() {
        return Err(ConvertError::new("id", Problem::Missing));
    }
    // Kept verbatim (an empty namespace stays empty) so a key round-trips exactly.
    Ok(JobKey::new(p.namespace, p.id))
}

super::rooted_try_from!(pb::JobRef => JobKey, "job", job_ref);

/// A decoded `JobService.Dispatch` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DispatchRequest {
    /// The parameterized parent.
    pub parent: JobKey,
    pub payload: Vec<u8>,
    pub meta: BTreeMap<String, String>,
}

impl TryFrom<pb::DispatchJobRequest> for DispatchRequest {
    type Error = ConvertError;
    fn try_from(p: pb::DispatchJobRequest) -> std::result::Result<Self, ConvertError> {
        Ok(DispatchRequest {
            parent: job_key(&p.namespace, &p.job_id)?,
            payload: p.payload,
            meta: p.meta,
        })
    }
}

fn group_summary(p: pb::GroupSummary) -> GroupSummary {
    GroupSummary {
        queued: p.queued,
        starting: p.starting,
        running: p.running,
        complete: p.complete,
        failed: p.failed,
        lost: p.lost,
        unknown: p.unknown,
    }
}

pub(crate) fn job_summary(p: pb::JobSummary) -> Result<JobSummary> {
    let queued_from = match p.queued_from {
        None => None,
        Some(q) => Some((
            q.index,
            super::parse_id("eval_id", &q.eval_id).within("queued_from")?,
        )),
    };
    Ok(JobSummary {
        job: job_ref(required("job", p.job)?).within("job")?,
        groups: p
            .groups
            .into_iter()
            .map(|(k, g)| (k, group_summary(g)))
            .collect(),
        live_allocs: p.live_allocs,
        total_allocs: p.total_allocs,
        open_evals: p.open_evals,
        total_evals: p.total_evals,
        queued_from,
        modify_index: p.modify_index,
    })
}

super::rooted_try_from!(pb::JobSummary => JobSummary, "summary", job_summary);
