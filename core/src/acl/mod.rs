//! Access control: tokens, policies, and the check every RPC makes.
//!
//! The model follows Nomad's, simplified: a token (accessor id + secret) is either a
//! management token, which may do anything, or a client token whose named policies grant
//! capabilities per namespace (`read-job`, `submit-job`, ...) and levels for the
//! cluster-wide areas (`node`, `operator`, `agent`). Tokens and policies are replicated
//! state ([`crate::state`]), changed only through FSM commands; the one-time bootstrap is
//! checked in the FSM so that of two concurrent bootstraps exactly one wins.

mod authorizer;
mod capability;
mod policy;
mod token;

#[cfg(test)]
mod tests;

pub use authorizer::{Acl, Denied, Grants};
pub use capability::{Area, Level, NamespaceCapability, Need};
pub use policy::{
    AclPolicy, MAX_POLICY_NAME, NamespaceRule, PolicyError, PolicyRules, parse_rules,
    validate_policy_name,
};
pub use token::{AclToken, MAX_TOKEN_NAME, MAX_TOKEN_POLICIES, TokenKind};
