//! An allocation with only the fields a list of allocations shows, for
//! `JobAllocationsRequest.list_fields_only`: a console loading five million allocations
//! keeps these, and converting and sending each one's state history, task states and
//! placement metrics was most of what its load cost the server.

use super::{WireEnum, opt_id_text};
use crate::v1 as pb;
use drover_core::Allocation;

/// `a` as [`pb::Allocation`] with only the listed fields set (the proto field's comment
/// names them); every other field is its default, so the message decodes as any other.
pub fn listed_allocation(a: &Allocation) -> pb::Allocation {
    let links = a.links.get();
    let deployment = links.deployment.as_ref();
    pb::Allocation {
        id: a.id.to_string(),
        name: a.name.to_string(),
        namespace: a.namespace.to_string(),
        job_id: a.job_id.to_string(),
        task_group: a.task_group.to_string(),
        node_id: a.node_id.to_string(),
        desired_status: a.desired_status.to_wire(),
        client_status: a.client_status.to_wire(),
        resources: Some((&a.resources).into()),
        modify_index: a.modify_index,
        create_time_unix_ms: a.create_time.as_millis(),
        deployment_id: opt_id_text(&deployment.map(|d| d.id)),
        canary: deployment.is_some_and(|d| d.canary),
        deployment_health: deployment
            .and_then(|d| d.health.as_ref())
            .map(super::deployments::health_wire),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::mock;

    /// The full conversion with everything but the listed fields cleared.
    fn listed_part(full: pb::Allocation) -> pb::Allocation {
        pb::Allocation {
            id: full.id,
            name: full.name,
            namespace: full.namespace,
            job_id: full.job_id,
            task_group: full.task_group,
            node_id: full.node_id,
            desired_status: full.desired_status,
            client_status: full.client_status,
            resources: full.resources,
            modify_index: full.modify_index,
            create_time_unix_ms: full.create_time_unix_ms,
            deployment_id: full.deployment_id,
            canary: full.canary,
            deployment_health: full.deployment_health,
            ..Default::default()
        }
    }

    #[test]
    fn the_listed_fields_are_the_full_conversions_and_nothing_else_is_sent() {
        let job = mock::service_job("web", 2);
        let mut a = mock::alloc(7, &job, mock::node_id(3), 1);
        a.client_status = drover_core::ClientStatus::Running;
        a.modify_index = 9;
        a.links.update(|l| {
            l.deployment = Some(drover_core::AllocDeployment {
                id: drover_core::DeploymentId::random(),
                canary: true,
                health: Some(drover_core::DeploymentHealth {
                    healthy: true,
                    time: drover_core::Timestamp(1_700_000_000_000),
                }),
            })
        });
        let full = pb::Allocation::from(&a);
        assert!(
            !full.eval_id.is_empty() && full.metrics.is_some(),
            "the full conversion carries fields the list leaves out"
        );
        let listed = listed_allocation(&a);
        assert_eq!(listed, listed_part(full));
        assert!(listed.canary && listed.deployment_health.is_some());
        assert!(listed.eval_id.is_empty() && listed.metrics.is_none());
        assert!(listed.state_history.is_empty() && listed.task_states.is_empty());
    }
}
