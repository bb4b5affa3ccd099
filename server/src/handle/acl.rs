//! ACL administration: bootstrap, tokens and policies. Checks that need no state (names,
//! rules, types) run here; the ones that must hold across concurrent writers (bootstrap
//! once, tokens naming existing policies) run in the FSM.

use crate::error::ServerError;
use crate::handle::ServerHandle;
use drover_core::acl::{
    AclPolicy, AclToken, MAX_TOKEN_NAME, MAX_TOKEN_POLICIES, TokenKind, parse_rules,
    validate_policy_name,
};
use drover_core::fsm::Command;
use drover_core::types::{AccessorId, Index, Timestamp};
use std::time::Duration;

/// The longest a token may be made to live for (ten years); longer is a mistake.
const MAX_TOKEN_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// The largest policy rules text.
const MAX_RULES_BYTES: usize = 64 * 1024;

/// A token just made, with the secret that only this answer carries.
#[derive(Clone, Debug)]
pub struct CreatedToken {
    pub token: AclToken,
    pub secret: String,
    pub index: Index,
}

/// What a caller asks for in `acl token create`.
#[derive(Clone, Debug)]
pub struct TokenRequest {
    pub name: String,
    pub kind: String,
    pub policies: Vec<String>,
    pub ttl: Option<Duration>,
}

fn invalid(reason: String) -> ServerError {
    ServerError::InvalidArgument { reason }
}

impl ServerHandle {
    fn require_acl(&self) -> Result<(), ServerError> {
        if self.config().acl_enabled {
            Ok(())
        } else {
            Err(ServerError::precondition(
                "acl is disabled on this server: enable it with acl { enabled = true }",
            ))
        }
    }

    /// A fresh token: a random accessor and a random secret, of which state keeps only
    /// the digest.
    fn new_token(
        kind: TokenKind,
        name: String,
        policies: Vec<String>,
        now: Timestamp,
        ttl: Option<Duration>,
    ) -> (AclToken, String) {
        // 122 random bits in the UUID form operators know from Nomad's secret ids.
        let secret = AccessorId::from_bytes(rand::random()).to_string();
        let token = AclToken {
            accessor_id: AccessorId::random(),
            secret_digest: crate::secrets::digest(&secret),
            name,
            kind,
            policies,
            create_time: now,
            expiry: ttl.map(|t| now.saturating_add(t)),
            create_index: 0,
            modify_index: 0,
        };
        (token, secret)
    }

    pub async fn acl_bootstrap(&self) -> Result<CreatedToken, ServerError> {
        self.require_acl()?;
        if let Some(at) = self.snapshot().acl_bootstrap_index() {
            return Err(ServerError::precondition(format!(
                "acl bootstrap already done (at index {at})"
            )));
        }
        // The first ACL entry: every server must be able to apply it.
        self.inner
            .membership
            .require(crate::versions::Feature::AclTables)
            .await
            .map_err(|s| ServerError::precondition(s.message()))?;
        let now = crate::clock::now();
        let (token, secret) = Self::new_token(
            TokenKind::Management,
            "bootstrap token".into(),
            vec![],
            now,
            None,
        );
        let index = self
            .inner
            .writer
            .write(Command::AclBootstrap {
                token: token.clone(),
            })
            .await?;
        tracing::info!(accessor_id = %token.accessor_id, "acl bootstrapped");
        Ok(self.created(token, secret, index))
    }

    fn created(&self, token: AclToken, secret: String, index: Index) -> CreatedToken {
        let token = self
            .snapshot()
            .acl_token(token.accessor_id)
            .map_or(token, |t| (**t).clone());
        CreatedToken {
            token,
            secret,
            index,
        }
    }

    pub async fn acl_token_create(&self, req: TokenRequest) -> Result<CreatedToken, ServerError> {
        self.require_acl()?;
        let kind = match req.kind.as_str() {
            "" => TokenKind::Client,
            k => TokenKind::parse(k).ok_or_else(|| {
                invalid(format!(
                    "type: {k:?} is not a token type (expected client or management)"
                ))
            })?,
        };
        if req.name.len() > MAX_TOKEN_NAME {
            return Err(invalid(format!(
                "name: {} bytes is over the maximum of {MAX_TOKEN_NAME}",
                req.name.len()
            )));
        }
        match kind {
            TokenKind::Client if req.policies.is_empty() => {
                return Err(invalid(
                    "policies: a client token needs at least one policy".into(),
                ));
            }
            TokenKind::Management if !req.policies.is_empty() => {
                return Err(invalid(
                    "policies: a management token may do anything and takes no policies".into(),
                ));
            }
            _ => {}
        }
        if req.policies.len() > MAX_TOKEN_POLICIES {
            return Err(invalid(format!(
                "policies: {} is over the maximum of {MAX_TOKEN_POLICIES}",
                req.policies.len()
            )));
        }
        for p in &req.policies {
            validate_policy_name(p).map_err(|e| invalid(format!("policies: {e}")))?;
        }
        if req.ttl.is_some_and(|t| t > MAX_TOKEN_TTL) {
            return Err(invalid(format!(
                "ttl: {:?} is over the maximum of ten years",
                req.ttl.unwrap_or_default()
            )));
        }
        let now = crate::clock::now();
        let (token, secret) = Self::new_token(kind, req.name, req.policies, now, req.ttl);
        let index = self
            .inner
            .writer
            .write(Command::AclTokenUpsert {
                tokens: vec![token.clone()],
            })
            .await?;
        tracing::info!(accessor_id = %token.accessor_id, kind = kind.as_str(), "acl token created");
        Ok(self.created(token, secret, index))
    }

    pub async fn acl_token_delete(&self, accessor: AccessorId) -> Result<Index, ServerError> {
        self.require_acl()?;
        self.inner
            .writer
            .write(Command::AclTokenDelete {
                accessor_ids: vec![accessor],
            })
            .await
    }

    pub async fn acl_policy_apply(
        &self,
        name: String,
        description: String,
        rules: String,
    ) -> Result<Index, ServerError> {
        self.require_acl()?;
        validate_policy_name(&name).map_err(|e| invalid(e.to_string()))?;
        if rules.len() > MAX_RULES_BYTES {
            return Err(invalid(format!(
                "rules: {} bytes is over the maximum of {MAX_RULES_BYTES}",
                rules.len()
            )));
        }
        let parsed = parse_rules(&rules).map_err(|e| invalid(e.to_string()))?;
        self.inner
            .writer
            .write(Command::AclPolicyUpsert {
                policies: vec![AclPolicy {
                    name,
                    description,
                    rules_source: rules,
                    rules: parsed,
                    create_index: 0,
                    modify_index: 0,
                }],
            })
            .await
    }

    pub async fn acl_policy_delete(&self, name: String) -> Result<Index, ServerError> {
        self.require_acl()?;
        self.inner
            .writer
            .write(Command::AclPolicyDelete { names: vec![name] })
            .await
    }
}
