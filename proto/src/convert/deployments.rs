//! Deployments, their strategies and an allocation's part in one.

use super::enums::WireEnum;
use super::{ConvertError, Problem, Result, each, each_value, from_ms, parse_id, to_ms};
use crate::v1 as pb;
use drover_core::types::*;

impl From<&DeploymentStrategy> for pb::DeploymentStrategy {
    fn from(d: &DeploymentStrategy) -> Self {
        pb::DeploymentStrategy {
            health_check: d.health_check.as_str().to_string(),
            min_healthy_time_ms: to_ms(d.min_healthy_time),
            healthy_deadline_ms: to_ms(d.healthy_deadline),
            progress_deadline_ms: to_ms(d.progress_deadline),
            canary: d.canary,
            auto_promote: d.auto_promote,
            auto_revert: d.auto_revert,
        }
    }
}

pub(crate) fn deployment_strategy(p: pb::DeploymentStrategy) -> Result<DeploymentStrategy> {
    let health_check = if p.health_check.is_empty() {
        HealthCheck::TaskStates
    } else {
        HealthCheck::parse(&p.health_check).ok_or_else(|| {
            ConvertError::new(
                "health_check",
                Problem::Invalid("must be \"checks\" or \"task_states\""),
            )
        })?
    };
    Ok(DeploymentStrategy {
        health_check,
        min_healthy_time: from_ms(p.min_healthy_time_ms),
        healthy_deadline: from_ms(p.healthy_deadline_ms),
        progress_deadline: from_ms(p.progress_deadline_ms),
        canary: p.canary,
        auto_promote: p.auto_promote,
        auto_revert: p.auto_revert,
    })
}

impl From<&DeploymentGroup> for pb::DeploymentGroup {
    fn from(g: &DeploymentGroup) -> Self {
        pb::DeploymentGroup {
            desired_total: g.desired_total,
            desired_canaries: g.desired_canaries,
            placed_canaries: g.placed_canaries.iter().map(ToString::to_string).collect(),
            placed: g.placed,
            healthy: g.healthy,
            unhealthy: g.unhealthy,
            promoted: g.promoted,
            auto_promote: g.auto_promote,
            auto_revert: g.auto_revert,
            progress_deadline_ms: to_ms(g.progress_deadline),
            require_progress_by_unix_ms: g.require_progress_by.map_or(0, Timestamp::as_millis),
        }
    }
}

fn deployment_group(p: pb::DeploymentGroup) -> Result<DeploymentGroup> {
    Ok(DeploymentGroup {
        desired_total: p.desired_total,
        desired_canaries: p.desired_canaries,
        placed_canaries: each("placed_canaries", p.placed_canaries, |id| parse_id("", &id))?,
        placed: p.placed,
        healthy: p.healthy,
        unhealthy: p.unhealthy,
        promoted: p.promoted,
        auto_promote: p.auto_promote,
        auto_revert: p.auto_revert,
        progress_deadline: from_ms(p.progress_deadline_ms),
        require_progress_by: (p.require_progress_by_unix_ms != 0)
            .then(|| Timestamp::from_millis(p.require_progress_by_unix_ms)),
    })
}

impl From<&Deployment> for pb::Deployment {
    fn from(d: &Deployment) -> Self {
        pb::Deployment {
            id: d.id.to_string(),
            namespace: d.namespace.clone(),
            job_id: d.job_id.to_string(),
            job_version: d.job_version,
            job_create_index: d.job_create_index,
            status: d.status.to_wire(),
            description: d.description.clone(),
            groups: d
                .groups
                .iter()
                .map(|(k, g)| (k.clone(), g.into()))
                .collect(),
            create_time_unix_ms: d.create_time.as_millis(),
            create_index: d.create_index,
            modify_index: d.modify_index,
        }
    }
}

pub(crate) fn deployment(p: pb::Deployment) -> Result<Deployment> {
    if p.job_id.is_empty() {
        return Err(ConvertError::new("job_id", Problem::Missing));
    }
    Ok(Deployment {
        id: parse_id("id", &p.id)?,
        namespace: p.namespace,
        job_id: JobId::new(&p.job_id),
        job_version: p.job_version,
        job_create_index: p.job_create_index,
        status: DeploymentStatus::from_wire("status", p.status)?,
        description: p.description,
        groups: each_value("groups", p.groups, deployment_group)?,
        create_time: Timestamp::from_millis(p.create_time_unix_ms),
        create_index: p.create_index,
        modify_index: p.modify_index,
    })
}

super::rooted_try_from!(pb::Deployment => Deployment, "deployment", deployment);

/// An allocation's deployment link from its wire fields (empty id: none).
pub(crate) fn alloc_deployment(
    id: &str,
    canary: bool,
    health: Option<pb::AllocDeploymentHealth>,
) -> Result<Option<AllocDeployment>> {
    if id.is_empty() {
        return Ok(None);
    }
    Ok(Some(AllocDeployment {
        id: parse_id("deployment_id", id)?,
        canary,
        health: health.map(|h| DeploymentHealth {
            healthy: h.healthy,
            time: Timestamp::from_millis(h.time_unix_ms),
        }),
    }))
}

pub(crate) fn health_wire(h: &DeploymentHealth) -> pb::AllocDeploymentHealth {
    pb::AllocDeploymentHealth {
        healthy: h.healthy,
        time_unix_ms: h.time.as_millis(),
    }
}
