//! The ACL tables: policies by name, tokens by accessor, and the secret-digest index a
//! request's token is looked up by. Written only by the FSM's ACL commands.

use super::StateStore;
use crate::acl::{AclPolicy, AclToken};
use crate::types::{AccessorId, Index};
use imbl::OrdMap;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, Default)]
pub(super) struct AclTables {
    policies: OrdMap<String, Arc<AclPolicy>>,
    tokens: OrdMap<AccessorId, Arc<AclToken>>,
    /// Secret digest → accessor; holds exactly the tokens of `tokens`.
    by_digest: OrdMap<String, AccessorId>,
    /// The index of the bootstrap, 0 while the cluster has not been bootstrapped.
    bootstrap_index: Index,
    /// The last index at which any ACL table changed.
    index: Index,
}

/// The ACL tables as a snapshot stores them.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
pub struct AclParts {
    pub policies: Vec<AclPolicy>,
    pub tokens: Vec<AclToken>,
    pub bootstrap_index: Index,
    pub index: Index,
}

impl StateStore {
    pub fn acl_policy(&self, name: &str) -> Option<&Arc<AclPolicy>> {
        self.acl.policies.get(name)
    }

    pub fn acl_policies(&self) -> impl Iterator<Item = &Arc<AclPolicy>> {
        self.acl.policies.values()
    }

    pub fn acl_token(&self, accessor: AccessorId) -> Option<&Arc<AclToken>> {
        self.acl.tokens.get(&accessor)
    }

    /// The token whose secret has this digest (see `AclToken::secret_digest`).
    pub fn acl_token_by_digest(&self, digest: &str) -> Option<&Arc<AclToken>> {
        self.acl
            .by_digest
            .get(digest)
            .and_then(|a| self.acl.tokens.get(a))
    }

    pub fn acl_tokens(&self) -> impl Iterator<Item = &Arc<AclToken>> {
        self.acl.tokens.values()
    }

    /// The index at which the cluster's ACLs were bootstrapped, if they were.
    pub fn acl_bootstrap_index(&self) -> Option<Index> {
        (self.acl.bootstrap_index > 0).then_some(self.acl.bootstrap_index)
    }

    /// The last index at which a token or policy changed: a cache of resolved tokens is
    /// current while this is unchanged.
    pub fn acl_index(&self) -> Index {
        self.acl.index
    }

    pub(crate) fn put_acl_policy(&mut self, index: Index, policy: AclPolicy) {
        self.acl
            .policies
            .insert(policy.name.clone(), Arc::new(policy));
        self.acl.index = index;
    }

    pub(crate) fn remove_acl_policy(&mut self, index: Index, name: &str) -> bool {
        let removed = self.acl.policies.remove(name).is_some();
        if removed {
            self.acl.index = index;
        }
        removed
    }

    pub(crate) fn put_acl_token(&mut self, index: Index, token: AclToken) {
        if let Some(old) = self.acl.tokens.get(&token.accessor_id) {
            self.acl.by_digest.remove(&old.secret_digest);
        }
        self.acl
            .by_digest
            .insert(token.secret_digest.clone(), token.accessor_id);
        self.acl.tokens.insert(token.accessor_id, Arc::new(token));
        self.acl.index = index;
    }

    pub(crate) fn remove_acl_token(&mut self, index: Index, accessor: AccessorId) -> bool {
        let Some(old) = self.acl.tokens.remove(&accessor) else {
            return false;
        };
        self.acl.by_digest.remove(&old.secret_digest);
        self.acl.index = index;
        true
    }

    pub(crate) fn set_acl_bootstrapped(&mut self, index: Index) {
        self.acl.bootstrap_index = index;
        self.acl.index = index;
    }

    pub fn acl_parts(&self) -> AclParts {
        AclParts {
            policies: self.acl.policies.values().map(|p| (**p).clone()).collect(),
            tokens: self.acl.tokens.values().map(|t| (**t).clone()).collect(),
            bootstrap_index: self.acl.bootstrap_index,
            index: self.acl.index,
        }
    }

    pub fn restore_acl(&mut self, parts: AclParts) {
        let mut tables = AclTables {
            bootstrap_index: parts.bootstrap_index,
            index: parts.index,
            ..AclTables::default()
        };
        for p in parts.policies {
            tables.policies.insert(p.name.clone(), Arc::new(p));
        }
        for t in parts.tokens {
            tables
                .by_digest
                .insert(t.secret_digest.clone(), t.accessor_id);
            tables.tokens.insert(t.accessor_id, Arc::new(t));
        }
        self.acl = tables;
    }

    /// Whether the digest index holds exactly the tokens' digests.
    pub(super) fn acl_consistent(&self) -> Result<(), String> {
        let same = self.acl.by_digest.len() == self.acl.tokens.len()
            && self
                .acl
                .tokens
                .values()
                .all(|t| self.acl.by_digest.get(&t.secret_digest) == Some(&t.accessor_id));
        if same {
            Ok(())
        } else {
            Err("acl secret-digest index does not match the token table".into())
        }
    }
}
