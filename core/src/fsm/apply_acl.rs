//! Applying the ACL commands. Each checks everything before it changes anything, so a
//! refused command leaves the tables as they were.

use super::apply::ApplyError;
use super::command::Command;
use crate::acl::AclToken;
use crate::state::StateStore;
use crate::types::Index;

pub(super) fn apply(store: &mut StateStore, index: Index, cmd: &Command) -> Result<(), ApplyError> {
    match cmd {
        Command::AclBootstrap { token } => {
            if let Some(at) = store.acl_bootstrap_index() {
                return Err(ApplyError::AclAlreadyBootstrapped(at));
            }
            check_tokens(store, std::slice::from_ref(token))?;
            put_token(store, index, token);
            store.set_acl_bootstrapped(index);
        }
        Command::AclPolicyUpsert { policies } => {
            for p in policies {
                let mut p = p.clone();
                p.create_index = store
                    .acl_policy(&p.name)
                    .map_or(index, |old| old.create_index);
                p.modify_index = index;
                store.put_acl_policy(index, p);
            }
        }
        Command::AclPolicyDelete { names } => {
            if let Some(missing) = names.iter().find(|n| store.acl_policy(n).is_none()) {
                return Err(ApplyError::AclPolicyNotFound(missing.clone()));
            }
            for n in names {
                store.remove_acl_policy(index, n);
            }
        }
        Command::AclTokenUpsert { tokens } => {
            check_tokens(store, tokens)?;
            for t in tokens {
                put_token(store, index, t);
            }
        }
        Command::AclTokenDelete { accessor_ids } => {
            if let Some(missing) = accessor_ids.iter().find(|a| store.acl_token(**a).is_none()) {
                return Err(ApplyError::AclTokenNotFound(*missing));
            }
            for a in accessor_ids {
                store.remove_acl_token(index, *a);
            }
        }
        _ => unreachable!("apply_acl::apply is called only with ACL commands"),
    }
    Ok(())
}

/// Every policy a token names exists, and no secret belongs to another token.
fn check_tokens(store: &StateStore, tokens: &[AclToken]) -> Result<(), ApplyError> {
    for t in tokens {
        if let Some(owner) = store.acl_token_by_digest(&t.secret_digest)
            && owner.accessor_id != t.accessor_id
        {
            return Err(ApplyError::AclSecretInUse(owner.accessor_id));
        }
        if t.kind == crate::acl::TokenKind::Client
            && let Some(missing) = t.policies.iter().find(|p| store.acl_policy(p).is_none())
        {
            return Err(ApplyError::AclPolicyNotFound(missing.clone()));
        }
    }
    Ok(())
}

fn put_token(store: &mut StateStore, index: Index, token: &AclToken) {
    let mut t = token.clone();
    t.create_index = store
        .acl_token(t.accessor_id)
        .map_or(index, |old| old.create_index);
    t.modify_index = index;
    store.put_acl_token(index, t);
}
