//! Nomad's `ACLToken` and `ACLPolicy`.

use super::rfc3339;
use drover_proto::v1 as pb;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct AclToken {
    #[serde(rename = "AccessorID")]
    pub accessor_id: String,
    #[serde(rename = "SecretID")]
    pub secret_id: String,
    pub name: String,
    #[serde(rename = "Type")]
    pub kind: String,
    pub policies: Vec<String>,
    pub global: bool,
    pub create_time: String,
    pub expiration_time: Option<String>,
    pub create_index: u64,
    pub modify_index: u64,
}

impl From<&pb::AclToken> for AclToken {
    fn from(t: &pb::AclToken) -> Self {
        AclToken {
            accessor_id: t.accessor_id.clone(),
            secret_id: t.secret_id.clone(),
            name: t.name.clone(),
            kind: t.r#type.clone(),
            policies: t.policies.clone(),
            global: false,
            create_time: rfc3339(t.create_time_ms),
            expiration_time: (t.expiry_time_ms > 0).then(|| rfc3339(t.expiry_time_ms)),
            create_index: t.create_index,
            modify_index: t.modify_index,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct AclPolicy {
    pub name: String,
    pub description: String,
    /// Absent in lists, as Nomad's `ACLPolicyListStub`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<String>,
    pub create_index: u64,
    pub modify_index: u64,
}

impl AclPolicy {
    pub fn of(p: &pb::AclPolicy, with_rules: bool) -> Self {
        AclPolicy {
            name: p.name.clone(),
            description: p.description.clone(),
            rules: with_rules.then(|| p.rules.clone()),
            create_index: p.create_index,
            modify_index: p.modify_index,
        }
    }
}

/// The body of a token create or policy write.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
pub struct TokenRequest {
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "Type")]
    pub kind: String,
    #[serde(default)]
    pub policies: Vec<String>,
    #[serde(default)]
    pub global: bool,
    /// A Go duration (`"1h"`).
    #[serde(default, rename = "ExpirationTTL")]
    pub expiration_ttl: Option<String>,
    #[serde(default, rename = "AccessorID")]
    pub accessor_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
pub struct PolicyRequest {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub rules: String,
    #[serde(default)]
    pub create_index: u64,
    #[serde(default)]
    pub modify_index: u64,
}
