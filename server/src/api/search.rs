//! `drover.v1.SearchService`: ids by prefix, so that every command can take the eight
//! characters the tables print. Each context is one range scan of the state, bounded by
//! the request's limit.

use super::Api;
use drover_core::acl::{Area, Level, NamespaceCapability, Need};
use drover_core::state::StateSnapshot;
use drover_core::{DEFAULT_NAMESPACE, IdPrefix, NodeStatus};
use drover_proto::v1 as pb;
use drover_proto::v1::search_service_server::SearchService;
use tonic::{Request, Response, Status};

/// The SearchService implementation.
#[derive(Clone, Debug)]
pub struct SearchApi(pub(crate) Api);

/// Ids per context when the request names no limit, and the most it may ask for.
const DEFAULT_LIMIT: usize = 20;
const MAX_LIMIT: usize = 1_000;

const ID_CONTEXTS: [pb::SearchContext; 3] = [
    pb::SearchContext::Evals,
    pb::SearchContext::Allocs,
    pb::SearchContext::Nodes,
];

/// Up to `limit` items of `found`, and whether more were there.
fn take(found: impl Iterator<Item = String>, limit: usize) -> (Vec<String>, bool) {
    let mut ids: Vec<String> = found.take(limit + 1).collect();
    let truncated = ids.len() > limit;
    ids.truncate(limit);
    (ids, truncated)
}

fn search(
    snap: &StateSnapshot,
    context: pb::SearchContext,
    prefix: &str,
    id: Option<&IdPrefix>,
    namespace: &str,
    limit: usize,
) -> pb::SearchMatches {
    let (ids, truncated) = match (context, id) {
        (pb::SearchContext::Jobs, _) => take(
            snap.jobs_with_prefix(namespace, prefix)
                .map(|j| j.id.to_string()),
            limit,
        ),
        (pb::SearchContext::Evals, Some(p)) => {
            take(snap.evals_with_prefix(p).map(|e| e.id.to_string()), limit)
        }
        (pb::SearchContext::Allocs, Some(p)) => {
            take(snap.allocs_with_prefix(p).map(|a| a.id.to_string()), limit)
        }
        (pb::SearchContext::Nodes, id) => node_ids(snap, prefix, id, limit),
        // Not hex: no UUID can start with it (searched for all contexts at once).
        _ => (Vec::new(), false),
    };
    pb::SearchMatches {
        context: context as i32,
        ids,
        truncated,
    }
}

/// Nodes whose id starts with `prefix`, or else the node called `prefix` (every node
/// argument takes a name, as the console does). A name a down node left behind yields to
/// the live node that took it over.
fn node_ids(
    snap: &StateSnapshot,
    prefix: &str,
    id: Option<&IdPrefix>,
    limit: usize,
) -> (Vec<String>, bool) {
    if let Some(p) = id {
        let by_id = take(snap.nodes_with_prefix(p).map(|n| n.id.to_string()), limit);
        if !by_id.0.is_empty() {
            return by_id;
        }
    }
    let named: Vec<_> = snap.nodes_named(prefix).collect();
    let live: Vec<_> = named
        .iter()
        .filter(|n| n.status != NodeStatus::Down)
        .collect();
    if live.len() == 1 {
        return (vec![live[0].id.to_string()], false);
    }
    take(named.iter().map(|n| n.id.to_string()), limit)
}

#[tonic::async_trait]
impl SearchService for SearchApi {
    async fn prefix_search(
        &self,
        req: Request<pb::PrefixSearchRequest>,
    ) -> Result<Response<pb::PrefixSearchResponse>, Status> {
        let acl = crate::auth::caller(&req)?;
        let req = req.into_inner();
        let context = pb::SearchContext::try_from(req.context).map_err(|_| {
            Status::invalid_argument(format!("context: unknown value {}", req.context))
        })?;
        let limit = match req.limit as usize {
            0 => DEFAULT_LIMIT,
            n if n > MAX_LIMIT => {
                return Err(Status::invalid_argument(format!(
                    "limit: {n} is over the maximum of {MAX_LIMIT}"
                )));
            }
            n => n,
        };
        let namespace = if req.namespace.is_empty() {
            DEFAULT_NAMESPACE
        } else {
            req.namespace.as_str()
        };
        let contexts: Vec<pb::SearchContext> = match context {
            pb::SearchContext::Unspecified => {
                let mut all = ID_CONTEXTS.to_vec();
                all.push(pb::SearchContext::Jobs);
                all
            }
            one => vec![one],
        };
        // Only the contexts the token may read: nodes need read-node, the rest read-job in
        // the namespace searched.
        let readable = |c: &pb::SearchContext| match c {
            pb::SearchContext::Nodes => acl.allows(&Need::Area(Area::Node, Level::Read)),
            _ => acl.allows(&Need::Namespace(NamespaceCapability::ReadJob, namespace)),
        };
        if !contexts.iter().any(readable) {
            let need = match context {
                pb::SearchContext::Nodes => Need::Area(Area::Node, Level::Read),
                _ => Need::Namespace(NamespaceCapability::ReadJob, namespace),
            };
            acl.check(&need)
                .map_err(|d| Status::permission_denied(d.to_string()))?;
        }
        let contexts: Vec<_> = contexts.into_iter().filter(readable).collect();
        let id = match IdPrefix::parse(&req.prefix) {
            Ok(p) => Some(p),
            // Asked for ids only: a prefix no id can have is the caller's mistake (nodes
            // are looked up by name too).
            Err(e) if ID_CONTEXTS.contains(&context) && context != pb::SearchContext::Nodes => {
                return Err(Status::invalid_argument(format!("prefix: {e}")));
            }
            Err(_) => None,
        };
        let snap = self.0.handle.snapshot();
        let matches = contexts
            .into_iter()
            .map(|c| search(&snap, c, &req.prefix, id.as_ref(), namespace, limit))
            .collect();
        Ok(Response::new(pb::PrefixSearchResponse {
            matches,
            index: snap.latest_index(),
        }))
    }
}
