//! ACL tokens and policies on the wire. A stored token's secret is a digest and is never
//! sent; the one answer that carries a secret (creating a token) sets it explicitly.

use crate::v1 as pb;
use drover_core::acl::{AclPolicy, AclToken};

impl From<&AclToken> for pb::AclToken {
    fn from(t: &AclToken) -> Self {
        pb::AclToken {
            accessor_id: t.accessor_id.to_string(),
            secret_id: String::new(),
            name: t.name.clone(),
            r#type: t.kind.as_str().to_string(),
            policies: t.policies.clone(),
            create_time_ms: t.create_time.as_millis(),
            expiry_time_ms: t.expiry.map_or(0, |e| e.as_millis()),
            create_index: t.create_index,
            modify_index: t.modify_index,
        }
    }
}

impl From<&AclPolicy> for pb::AclPolicy {
    fn from(p: &AclPolicy) -> Self {
        pb::AclPolicy {
            name: p.name.clone(),
            description: p.description.clone(),
            rules: p.rules_source.clone(),
            create_index: p.create_index,
            modify_index: p.modify_index,
        }
    }
}
