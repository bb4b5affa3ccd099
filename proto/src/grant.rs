//! Grants: what a server lets a node's agent serve for one call (task logs, a restart),
//! after the server checked the caller's token itself.
//!
//! The operator's token never leaves the servers. Instead a server sends the agent an
//! [`pb::AgentGrant`] naming the node, the one allocation, the task and the access, valid
//! for [`GRANT_LIFETIME`], in the [`GRANT_HEADER`] header as `base64(grant).base64(mac)`.
//! The MAC is HMAC-SHA256 under a key derived from the node's secret digest, which only the
//! servers (they keep the digest) and the node itself (it keeps the secret) can compute. So
//! a grant proves the call comes from a server, and an agent that is not the node it names,
//! or an address that is not the node's agent, learns nothing it could use elsewhere: a
//! grant for one allocation of one node, for a minute.

use crate::v1 as pb;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use prost::Message;
use ring::hmac;
use std::time::Duration;

/// The metadata header that carries a grant on a call to an agent.
pub const GRANT_HEADER: &str = "drover-agent-grant";

/// How long a grant is good for after the server signs it. Long enough for a call to reach
/// the agent over a slow link and for modest clock skew; short enough that a grant seen on
/// a plaintext link is worth little.
pub const GRANT_LIFETIME: Duration = Duration::from_secs(60);

/// How far an agent's clock may be behind the server's before a fresh grant looks expired
/// (added to the expiry when the agent checks it).
pub const CLOCK_SKEW: Duration = Duration::from_secs(30);

/// The largest header an agent decodes: a grant is a few hundred bytes.
const MAX_HEADER_BYTES: usize = 2048;

/// Separates this key and MAC from any other use of the node secret's digest.
const KEY_CONTEXT: &[u8] = b"drover agent grant key v1\0";
const MAC_CONTEXT: &[u8] = b"drover agent grant v1\0";

/// Why an agent refuses a grant.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GrantError {
    #[error("no grant: the call did not come through a server ({GRANT_HEADER} is missing)")]
    Missing,
    #[error("malformed grant: {0}")]
    Malformed(&'static str),
    #[error(
        "grant signature does not verify: it was not made by this cluster's servers for this node"
    )]
    BadSignature,
    #[error("grant is for node {granted}, not this one ({own})")]
    OtherNode { granted: String, own: String },
    #[error("grant is for allocation {granted}, not {asked}")]
    OtherAlloc { granted: String, asked: String },
    #[error("grant is for task {granted:?}, not {asked:?}")]
    OtherTask { granted: String, asked: String },
    #[error("grant allows {granted:?}, not {asked:?}")]
    OtherAccess {
        granted: pb::AllocAccess,
        asked: pb::AllocAccess,
    },
    #[error("grant expired at {expired_unix_ms} (now {now_unix_ms}, unix ms)")]
    Expired {
        expired_unix_ms: u64,
        now_unix_ms: u64,
    },
}

/// The signing key of a node whose secret's digest (as servers keep it) is `digest`.
fn key(digest: &str) -> hmac::Key {
    let mut material = Vec::with_capacity(KEY_CONTEXT.len() + digest.len());
    material.extend_from_slice(KEY_CONTEXT);
    material.extend_from_slice(digest.as_bytes());
    let derived = ring::digest::digest(&ring::digest::SHA256, &material);
    hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref())
}

fn mac_input(grant: &[u8]) -> Vec<u8> {
    let mut input = Vec::with_capacity(MAC_CONTEXT.len() + grant.len());
    input.extend_from_slice(MAC_CONTEXT);
    input.extend_from_slice(grant);
    input
}

/// The header value for `grant`, signed for the node whose secret's digest is `digest`.
pub fn sign(digest: &str, grant: &pb::AgentGrant) -> String {
    let bytes = grant.encode_to_vec();
    let tag = hmac::sign(&key(digest), &mac_input(&bytes));
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(&bytes),
        URL_SAFE_NO_PAD.encode(tag.as_ref())
    )
}

/// What one call to an agent asks to do, checked against the grant it carries.
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    pub alloc_id: &'a str,
    /// Empty: the call names no task (any of the allocation's, or its only one).
    pub task: &'a str,
    pub access: pb::AllocAccess,
}

/// The grant in `header`, if the servers signed it for the node whose secret is `secret`,
/// it names `own` and covers `asked`, and it has not expired at `now_unix_ms`.
pub fn verify(
    header: Option<&str>,
    secret: &str,
    own: &str,
    asked: Asked<'_>,
    now_unix_ms: u64,
) -> Result<pb::AgentGrant, GrantError> {
    let header = header.ok_or(GrantError::Missing)?;
    if header.len() > MAX_HEADER_BYTES {
        return Err(GrantError::Malformed("longer than any grant"));
    }
    let (body, tag) = header
        .split_once('.')
        .ok_or(GrantError::Malformed("no signature part"))?;
    let body = URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| GrantError::Malformed("grant is not base64"))?;
    let tag = URL_SAFE_NO_PAD
        .decode(tag)
        .map_err(|_| GrantError::Malformed("signature is not base64"))?;
    hmac::verify(
        &key(&crate::secret::digest(secret)),
        &mac_input(&body),
        &tag,
    )
    .map_err(|_| GrantError::BadSignature)?;
    let grant = pb::AgentGrant::decode(body.as_slice())
        .map_err(|_| GrantError::Malformed("grant does not decode"))?;
    if grant.node_id != own {
        return Err(GrantError::OtherNode {
            granted: grant.node_id,
            own: own.to_string(),
        });
    }
    if grant.alloc_id != asked.alloc_id {
        return Err(GrantError::OtherAlloc {
            granted: grant.alloc_id,
            asked: asked.alloc_id.to_string(),
        });
    }
    if !grant.task.is_empty() && grant.task != asked.task {
        return Err(GrantError::OtherTask {
            granted: grant.task,
            asked: asked.task.to_string(),
        });
    }
    if grant.access() != asked.access {
        return Err(GrantError::OtherAccess {
            granted: grant.access(),
            asked: asked.access,
        });
    }
    let skew = u64::try_from(CLOCK_SKEW.as_millis()).unwrap_or(u64::MAX);
    if grant.expires_unix_ms.saturating_add(skew) <= now_unix_ms {
        return Err(GrantError::Expired {
            expired_unix_ms: grant.expires_unix_ms,
            now_unix_ms,
        });
    }
    Ok(grant)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "node-secret-1";
    const NODE: &str = "n1";

    fn grant() -> pb::AgentGrant {
        pb::AgentGrant {
            node_id: NODE.into(),
            alloc_id: "a1".into(),
            task: "web".into(),
            access: pb::AllocAccess::ReadLogs.into(),
            expires_unix_ms: 1_000_000,
        }
    }

    fn asked<'a>(alloc_id: &'a str, task: &'a str, access: pb::AllocAccess) -> Asked<'a> {
        Asked {
            alloc_id,
            task,
            access,
        }
    }

    #[test]
    fn a_grant_verifies_only_for_what_it_names() {
        let digest = crate::secret::digest(SECRET);
        let header = sign(&digest, &grant());
        let logs = pb::AllocAccess::ReadLogs;
        let rows: Vec<(
            &str,
            Option<&str>,
            &str,
            &str,
            Asked<'_>,
            u64,
            Result<(), GrantError>,
        )> = vec![
            (
                "fresh",
                Some(&header),
                SECRET,
                NODE,
                asked("a1", "web", logs),
                999_000,
                Ok(()),
            ),
            (
                "within skew",
                Some(&header),
                SECRET,
                NODE,
                asked("a1", "web", logs),
                1_029_999,
                Ok(()),
            ),
            (
                "expired",
                Some(&header),
                SECRET,
                NODE,
                asked("a1", "web", logs),
                1_030_000,
                Err(GrantError::Expired {
                    expired_unix_ms: 1_000_000,
                    now_unix_ms: 1_030_000,
                }),
            ),
            (
                "missing",
                None,
                SECRET,
                NODE,
                asked("a1", "web", logs),
                0,
                Err(GrantError::Missing),
            ),
            (
                "another node's secret",
                Some(&header),
                "node-secret-2",
                NODE,
                asked("a1", "web", logs),
                0,
                Err(GrantError::BadSignature),
            ),
            (
                "another node",
                Some(&header),
                SECRET,
                "n2",
                asked("a1", "web", logs),
                0,
                Err(GrantError::OtherNode {
                    granted: NODE.into(),
                    own: "n2".into(),
                }),
            ),
            (
                "another alloc",
                Some(&header),
                SECRET,
                NODE,
                asked("a2", "web", logs),
                0,
                Err(GrantError::OtherAlloc {
                    granted: "a1".into(),
                    asked: "a2".into(),
                }),
            ),
            (
                "another task",
                Some(&header),
                SECRET,
                NODE,
                asked("a1", "db", logs),
                0,
                Err(GrantError::OtherTask {
                    granted: "web".into(),
                    asked: "db".into(),
                }),
            ),
            (
                "another access",
                Some(&header),
                SECRET,
                NODE,
                asked("a1", "web", pb::AllocAccess::Lifecycle),
                0,
                Err(GrantError::OtherAccess {
                    granted: logs,
                    asked: pb::AllocAccess::Lifecycle,
                }),
            ),
            (
                "garbage",
                Some("not a grant"),
                SECRET,
                NODE,
                asked("a1", "web", logs),
                0,
                Err(GrantError::Malformed("no signature part")),
            ),
        ];
        for (name, header, secret, own, asked, now, want) in rows {
            let got = verify(header, secret, own, asked, now).map(|_| ());
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn a_tampered_grant_does_not_verify() {
        let digest = crate::secret::digest(SECRET);
        let header = sign(&digest, &grant());
        let (_, tag) = header.split_once('.').expect("two parts");
        let mut other = grant();
        other.alloc_id = "a2".into();
        let forged = format!("{}.{tag}", URL_SAFE_NO_PAD.encode(other.encode_to_vec()));
        let asked = asked("a2", "web", pb::AllocAccess::ReadLogs);
        assert_eq!(
            verify(Some(&forged), SECRET, NODE, asked, 0),
            Err(GrantError::BadSignature)
        );
    }

    #[test]
    fn a_grant_without_a_task_covers_every_task() {
        let digest = crate::secret::digest(SECRET);
        let mut g = grant();
        g.task.clear();
        g.access = pb::AllocAccess::Lifecycle.into();
        let header = sign(&digest, &g);
        for task in ["", "web", "db"] {
            let asked = asked("a1", task, pb::AllocAccess::Lifecycle);
            assert!(
                verify(Some(&header), SECRET, NODE, asked, 0).is_ok(),
                "{task:?}"
            );
        }
    }
}
