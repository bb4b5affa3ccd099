//! What the console's token may do, asked of a server (`AclService.TokenSelf`) at start and
//! at each load; the app greys and refuses what it may not.

use crate::app::{JobRights, Permissions};
use drover_proto::bearer::BearerChannel as Channel;
use std::collections::BTreeSet;

/// What the console's token may do, asked of the server for the default namespace and
/// each of `namespaces`. `None` when ACLs are off or the server cannot be asked: then every
/// action is offered, and the server still refuses what the token may not do.
pub(crate) async fn token_permissions<'a>(
    channel: &Channel,
    namespaces: impl IntoIterator<Item = &'a str>,
) -> Option<Permissions> {
    use drover_proto::v1::acl_service_client::AclServiceClient;
    let mut client = AclServiceClient::new(channel.clone());
    let ask = |namespace: &str| drover_proto::v1::AclTokenSelfRequest {
        namespace: namespace.to_string(),
    };
    let first = client.token_self(ask("default")).await.ok()?.into_inner();
    if !first.acl_enabled || first.management {
        return None;
    }
    let holds = |r: &drover_proto::v1::AclTokenSelfResponse, capability: &str| {
        r.namespace_capabilities.iter().any(|c| c == capability)
    };
    let mut jobs = Rights::default();
    let mut allocs = Rights::default();
    let mut sort = |namespace: &str, answer: &drover_proto::v1::AclTokenSelfResponse| {
        jobs.sort(namespace, holds(answer, "submit-job"));
        allocs.sort(namespace, holds(answer, "alloc-lifecycle"));
    };
    sort("default", &first);
    let others: BTreeSet<&str> = namespaces.into_iter().filter(|n| *n != "default").collect();
    for namespace in others.into_iter().take(MAX_NAMESPACES_ASKED) {
        if let Ok(r) = client.token_self(ask(namespace)).await {
            sort(namespace, &r.into_inner());
        }
    }
    Some(Permissions {
        nodes: first.node == "write",
        operator: first.operator == "write",
        jobs: jobs.into(),
        allocs: allocs.into(),
    })
}

/// The namespaces asked about, split by whether the token holds a capability there.
#[derive(Default)]
struct Rights {
    allowed: BTreeSet<String>,
    denied: BTreeSet<String>,
}

impl Rights {
    fn sort(&mut self, namespace: &str, holds: bool) {
        let set = if holds {
            &mut self.allowed
        } else {
            &mut self.denied
        };
        set.insert(namespace.to_string());
    }
}

impl From<Rights> for JobRights {
    fn from(r: Rights) -> Self {
        JobRights::Asked {
            allowed: r.allowed,
            denied: r.denied,
        }
    }
}

/// Namespaces asked about at one load; jobs in others are offered and left to the server.
/// Asked again at each (re)load, so a namespace that appears is learnt at the next one.
const MAX_NAMESPACES_ASKED: usize = 64;
