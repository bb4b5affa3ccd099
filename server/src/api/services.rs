//! `drover.v1.ServiceService`: the service catalog, as blocking reads.
//!
//! A blocking read waits for the catalog's table index to pass the caller's `wait_index`:
//! every applied entry wakes it once, it answers as soon as one changed the catalog (a
//! registration written or removed, or an allocation's registrations listed or hidden),
//! and at the wait's end it answers the catalog as it is, as Nomad's blocking queries do.
//! A read of one service by name waits on that service's own index instead
//! ([`StateSnapshot::service_index`]): a rollout of one job does not wake every reader of
//! every other service (Nomad wakes them all, on the whole table's index).

use super::Api;
use crate::auth::{authorize, caller, namespace_or_default as ns_of};
use drover_core::acl::{NamespaceCapability as Cap, Need};
use drover_core::state::{StateSnapshot, Table};
use drover_core::types::{AllocId, JobId, JobKey, NodeId, ServiceRegistration};
use drover_proto::WireEnum;
use drover_proto::v1 as pb;
use drover_proto::v1::service_service_server::ServiceService;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tonic::{Request, Response, Status};

/// How long a blocking read waits when the caller names no wait.
const DEFAULT_BLOCK: Duration = Duration::from_secs(300);

/// The ServiceService implementation.
#[derive(Clone, Debug)]
pub struct ServiceApi(pub(crate) Api);

impl ServiceApi {
    /// The state once what `changed_at` reads of it is past `wait_index`, or as it is when
    /// `max_wait_ms` (capped by the server's longest query wait) runs out.
    async fn blocking_read(
        &self,
        query: Option<&pb::QueryOptions>,
        wait_index: u64,
        max_wait_ms: u64,
        changed_at: impl Fn(&StateSnapshot) -> u64,
    ) -> Result<StateSnapshot, Status> {
        let mut snap = self.0.read(query).await?;
        if wait_index == 0 {
            return Ok(snap);
        }
        let cap = self.0.opts.max_query_wait.max(DEFAULT_BLOCK);
        let wait = match max_wait_ms {
            0 => DEFAULT_BLOCK,
            ms => Duration::from_millis(ms),
        }
        .min(cap);
        let deadline = Instant::now() + wait;
        while changed_at(&snap) <= wait_index {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let next = self.0.handle.applied_index() + 1;
            match self.0.handle.wait_for_index(next, left).await {
                Ok(s) => snap = s,
                Err(_) => break,
            }
        }
        Ok(snap)
    }
}

/// Who may read the catalog of `namespace`: a token with `read-job` there, or a node's own
/// identity (returned), which [`node_reads`] checks against the state.
fn service_reader<T>(req: &Request<T>, namespace: &str) -> Result<Option<NodeId>, Status> {
    let acl = caller(req)?;
    match acl.node() {
        Some(node) => Ok(Some(node)),
        None => authorize(req, Need::Namespace(Cap::ReadJob, ns_of(namespace))).map(|_| None),
    }
}

/// A node reads the catalog of the namespaces it runs allocations in (its templates
/// render services), no other.
fn node_reads(node: Option<NodeId>, namespace: &str, snap: &StateSnapshot) -> Result<(), Status> {
    let Some(node) = node else { return Ok(()) };
    if snap
        .allocs_by_node(&node)
        .any(|a| *a.namespace == *namespace)
    {
        Ok(())
    } else {
        Err(Status::permission_denied(format!(
            "node {node} runs no allocation in namespace {namespace:?}: a node reads only the services of its namespaces"
        )))
    }
}

/// Whose instances an Info read answers: one service's, or (narrowed by name when it
/// names one) one job's or one allocation's.
enum Scope {
    Service,
    Job(JobId),
    Alloc(AllocId),
}

impl Scope {
    fn of(req: &pb::ServiceInfoRequest) -> Result<Self, Status> {
        match (req.job_id.is_empty(), req.alloc_id.is_empty()) {
            (false, false) => Err(Status::invalid_argument(
                "job_id and alloc_id: name one of them, not both",
            )),
            (false, true) => Ok(Scope::Job(JobId::new(&req.job_id))),
            (true, false) => req.alloc_id.parse().map(Scope::Alloc).map_err(|_| {
                Status::invalid_argument(format!(
                    "alloc_id: {:?} is not an allocation id",
                    req.alloc_id
                ))
            }),
            (true, true) if req.name.is_empty() => Err(Status::invalid_argument("name: missing")),
            (true, true) => Ok(Scope::Service),
        }
    }

    /// The listed instances in scope, of `name` when it is not empty, in id order.
    fn instances(
        &self,
        snap: &StateSnapshot,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<Arc<ServiceRegistration>>, Status> {
        let named = |r: &&Arc<ServiceRegistration>| name.is_empty() || r.service_name == name;
        let of_allocs = |allocs: Vec<AllocId>| {
            let mut found: Vec<_> = allocs
                .iter()
                .flat_map(|a| snap.alloc_services(*a))
                .filter(|r| snap.service_listed(r))
                .filter(|r| named(r))
                .cloned()
                .collect();
            found.sort_by(|a, b| a.id.cmp(&b.id));
            found
        };
        match self {
            Scope::Service => Ok(snap.service_instances(namespace, name).cloned().collect()),
            Scope::Job(id) => {
                let key = JobKey::new(namespace, id.as_str());
                if snap.job(&key).is_none() {
                    return Err(Status::not_found(format!("job {key} not found")));
                }
                Ok(of_allocs(snap.job_allocs(&key).map(|a| a.id).collect()))
            }
            Scope::Alloc(id) => match snap.alloc(id) {
                Some(a) if *a.namespace == *namespace => Ok(of_allocs(vec![*id])),
                _ => Err(Status::not_found(format!(
                    "allocation {id} not found in namespace {namespace:?}"
                ))),
            },
        }
    }
}

/// The listed instances of one service with their checks, for a list that asked for them.
fn instance_checks(
    snap: &StateSnapshot,
    namespace: &str,
    name: &str,
) -> Vec<pb::ServiceInstanceChecks> {
    snap.service_instances(namespace, name)
        .map(|r| pb::ServiceInstanceChecks {
            id: r.id.clone(),
            alloc_id: r.alloc_id.to_string(),
            node_id: r.node_id.to_string(),
            health: r.health.to_wire(),
            checks: checks_pb(snap, r),
        })
        .collect()
}

/// A registration's check results with each check's `on_update` from the job version its
/// allocation runs, which the catalog does not keep.
fn checks_pb(snap: &StateSnapshot, r: &ServiceRegistration) -> Vec<pb::CheckState> {
    let defined = snap
        .service_definition(r)
        .map_or(&[][..], |s| &s.checks[..]);
    r.checks
        .iter()
        .enumerate()
        .map(|(i, c)| pb::CheckState {
            on_update: defined
                .get(i)
                .map_or("", |d| d.on_update.as_str())
                .to_owned(),
            ..c.into()
        })
        .collect()
}

fn registration_pb(snap: &StateSnapshot, r: &ServiceRegistration) -> pb::ServiceRegistration {
    pb::ServiceRegistration {
        checks: checks_pb(snap, r),
        ..r.into()
    }
}

#[tonic::async_trait]
impl ServiceService for ServiceApi {
    async fn list(
        &self,
        req: Request<pb::ListServicesRequest>,
    ) -> Result<Response<pb::ListServicesResponse>, Status> {
        let all = req.get_ref().namespace == "*";
        let (acl, node) = if all {
            (
                Some(authorize(&req, Need::AnyNamespace(Cap::ReadJob))?),
                None,
            )
        } else {
            (None, service_reader(&req, &req.get_ref().namespace)?)
        };
        let req = req.into_inner();
        let namespace = ns_of(&req.namespace).to_owned();
        let snap = self
            .blocking_read(req.query.as_ref(), req.wait_index, req.max_wait_ms, |s| {
                s.table_index(Table::Services)
            })
            .await?;
        if !all {
            node_reads(node, &namespace, &snap)?;
        }
        let summaries = snap.service_summaries((!all).then_some(namespace.as_str()));
        let services = summaries
            .into_iter()
            .filter(|s| {
                acl.as_ref()
                    .is_none_or(|acl| acl.allows(&Need::Namespace(Cap::ReadJob, &s.namespace)))
            })
            .map(|s| pb::ServiceListEntry {
                checks: match req.with_checks {
                    true => instance_checks(&snap, &s.namespace, &s.name),
                    false => Vec::new(),
                },
                namespace: s.namespace,
                name: s.name,
                tags: s.tags,
                instances: u32::try_from(s.instances).unwrap_or(u32::MAX),
                health: s.health.to_wire(),
            })
            .collect();
        Ok(Response::new(pb::ListServicesResponse {
            services,
            index: snap.table_index(Table::Services),
        }))
    }

    async fn info(
        &self,
        req: Request<pb::ServiceInfoRequest>,
    ) -> Result<Response<pb::ServiceInfoResponse>, Status> {
        let node = service_reader(&req, &req.get_ref().namespace)?;
        let req = req.into_inner();
        let scope = Scope::of(&req)?;
        let namespace = ns_of(&req.namespace).to_owned();
        let changed_at = |s: &StateSnapshot| match scope {
            Scope::Service => s.service_index(&namespace, &req.name),
            _ => s.table_index(Table::Services),
        };
        let snap = self
            .blocking_read(
                req.query.as_ref(),
                req.wait_index,
                req.max_wait_ms,
                changed_at,
            )
            .await?;
        node_reads(node, &namespace, &snap)?;
        let instances = scope
            .instances(&snap, &namespace, &req.name)?
            .into_iter()
            .map(|r| registration_pb(&snap, &r))
            .collect();
        Ok(Response::new(pb::ServiceInfoResponse {
            instances,
            index: changed_at(&snap),
        }))
    }
}
