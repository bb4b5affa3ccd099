//! What Nomad serves and drover does not: 501 with a JSON error naming the endpoint, never
//! a silent empty answer. A path of an area drover serves that it cannot answer (manual
//! allocation health, a job's scaling events) is refused the same way beside that area's
//! routes.

use super::Ctx;
use crate::reply::ApiError;
use axum::Router;
use axum::http::{Method, Uri};
use axum::routing::any;

/// (path pattern, why drover does not serve it).
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "/v1/job/{id}/stable",
        "drover marks a version stable when its deployment succeeds, never by hand",
    ),
    ("/v1/job/{id}/submission", "drover keeps no job sources"),
    ("/v1/jobs/statuses", "not served"),
    (
        "/v1/node/{id}/evaluate",
        "drover evaluates nodes on every change",
    ),
    ("/v1/node/pools", "drover has no node pools"),
    ("/v1/node/pool/{*rest}", "drover has no node pools"),
    (
        "/v1/allocation/{id}/checks",
        "Nomad serves an allocation's checks at /v1/client/allocation/{id}/checks, as drover does",
    ),
    ("/v1/client/fs/{*rest}", "only client/fs/logs is served"),
    ("/v1/client/stats", "drover's agents report no host stats"),
    (
        "/v1/client/allocation/{id}/stats",
        "drover's agents report no allocation stats",
    ),
    (
        "/v1/client/allocation/{id}/signal",
        "drover cannot signal tasks",
    ),
    (
        "/v1/client/allocation/{id}/exec",
        "drover cannot exec into tasks",
    ),
    (
        "/v1/client/allocation/{id}/gc",
        "drover collects allocations itself",
    ),
    ("/v1/client/gc", "drover collects allocations itself"),
    ("/v1/evaluations/count", "not served"),
    ("/v1/volumes", "drover has no volumes"),
    ("/v1/volume/{*rest}", "drover has no volumes"),
    ("/v1/plugins", "drover has no plugins"),
    ("/v1/vars", "drover has no variables"),
    ("/v1/var/{*rest}", "drover has no variables"),
    ("/v1/scaling/{*rest}", "drover has no scaling policies"),
    ("/v1/quotas", "drover has no quotas"),
    ("/v1/sentinel/{*rest}", "drover has no sentinel policies"),
    ("/v1/acl/roles", "drover has no acl roles"),
    ("/v1/acl/role/{*rest}", "drover has no acl roles"),
    ("/v1/acl/auth-methods", "drover has no auth methods"),
    ("/v1/acl/binding-rules", "drover has no binding rules"),
    (
        "/v1/namespace",
        "drover keeps no namespace objects: a namespace exists by being named",
    ),
    (
        "/v1/metrics",
        "metrics are served in Prometheus form on /metrics",
    ),
    (
        "/v1/system/gc",
        "drover collects garbage on its own schedule",
    ),
    (
        "/v1/system/reconcile/summaries",
        "drover keeps summaries consistent in its state store",
    ),
    ("/v1/operator/autopilot/{*rest}", "drover has no autopilot"),
    ("/v1/operator/snapshot", "use drover's own snapshots"),
    ("/v1/operator/license", "drover has no licence"),
    ("/v1/agent/servers", "not served"),
    ("/v1/agent/join", "use drover operator raft add-peer"),
    (
        "/v1/agent/force-leave",
        "use drover operator raft remove-peer",
    ),
    ("/v1/agent/monitor", "not served"),
    ("/v1/agent/pprof/{*rest}", "not served"),
    ("/v1/agent/host", "not served"),
    ("/v1/agent/keyring/{*rest}", "drover has no gossip keyring"),
    ("/v1/regions/{*rest}", "drover runs one region"),
    ("/v1/acl/role", "drover has no acl roles"),
    ("/v1/acl/auth-method", "drover has no auth methods"),
    ("/v1/acl/auth-method/{*rest}", "drover has no auth methods"),
    ("/v1/acl/binding-rule", "drover has no binding rules"),
    (
        "/v1/acl/binding-rule/{*rest}",
        "drover has no binding rules",
    ),
    ("/v1/acl/login", "drover has no auth methods"),
    ("/v1/acl/oidc/{*rest}", "drover has no auth methods"),
    ("/v1/acl/token/onetime", "drover has no one-time tokens"),
    (
        "/v1/acl/token/onetime/exchange",
        "drover has no one-time tokens",
    ),
    ("/v1/client/metadata", "drover has no dynamic node metadata"),
    ("/v1/job/{id}/actions", "drover has no task actions"),
    ("/v1/job/{id}/action", "drover has no task actions"),
    ("/v1/plugin/{*rest}", "drover has no plugins"),
    ("/v1/volumes/{*rest}", "drover has no volumes"),
    ("/v1/operator/keyring/{*rest}", "drover has no keyring"),
    ("/v1/operator/utilization", "not served"),
    ("/v1/operator/upgrade-check/{*rest}", "not served"),
    ("/v1/quota/{*rest}", "drover has no quotas"),
    ("/v1/quota-usages", "drover has no quotas"),
    ("/v1/recommendations", "drover has no recommendations"),
    (
        "/v1/recommendation/{*rest}",
        "drover has no recommendations",
    ),
];

/// The 501 answer for `method` on `uri`.
pub fn refuse(method: &Method, uri: &Uri, reason: &'static str) -> ApiError {
    ApiError::NotImplemented {
        endpoint: format!("{method} {}", uri.path()),
        reason,
    }
}

pub fn routes() -> Router<Ctx> {
    UNSUPPORTED
        .iter()
        .fold(Router::new(), |router, &(path, reason)| {
            router.route(
                path,
                any(move |method: Method, uri: Uri| async move { refuse(&method, &uri, reason) }),
            )
        })
}
