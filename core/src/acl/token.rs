//! ACL tokens: what a client presents (the secret) and what names it (the accessor).

use crate::types::{AccessorId, Index, Timestamp};
use serde::{Deserialize, Serialize};

/// The longest token name.
pub const MAX_TOKEN_NAME: usize = 256;
/// The most policies one token may name.
pub const MAX_TOKEN_POLICIES: usize = 64;

/// Management tokens may do anything; client tokens what their policies grant.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum TokenKind {
    Client,
    Management,
}

impl TokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Client => "client",
            TokenKind::Management => "management",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "client" => Some(TokenKind::Client),
            "management" => Some(TokenKind::Management),
            _ => None,
        }
    }
}

/// A stored token. State keeps a digest of the secret, never the secret: the server
/// returns the secret once, to whoever created the token.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct AclToken {
    pub accessor_id: AccessorId,
    /// `sha256:<hex>` of the secret.
    pub secret_digest: String,
    pub name: String,
    pub kind: TokenKind,
    /// Policy names; ignored for management tokens.
    pub policies: Vec<String>,
    pub create_time: Timestamp,
    /// After this the token is refused as if unknown.
    pub expiry: Option<Timestamp>,
    pub create_index: Index,
    pub modify_index: Index,
}

impl AclToken {
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.expiry.is_some_and(|e| e <= now)
    }
}
