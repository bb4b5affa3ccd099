//! Secrets the server checks: compared in constant time, and kept only as digests.
//!
//! A node's secret is what proves an agent speaks for its node. State (the Raft log, its
//! snapshots, every event) keeps a SHA-256 digest of it, never the secret itself, so a
//! copy of the data dir or a snapshot sent to a follower lets nobody act as a node.

use sha2::{Digest, Sha256};
use std::fmt::Write;

/// Marks a stored secret as a digest (state written before digests holds plain ones).
const DIGEST_PREFIX: &str = "sha256:";

/// What state keeps of `secret`.
pub fn digest(secret: &str) -> String {
    let hash = Sha256::digest(secret.as_bytes());
    let mut out = String::with_capacity(DIGEST_PREFIX.len() + 64);
    out.push_str(DIGEST_PREFIX);
    for b in hash {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Whether `presented` is the secret `stored` keeps (a digest, or a plain secret from
/// state written before digests).
pub fn matches(stored: &str, presented: &str) -> bool {
    if stored.starts_with(DIGEST_PREFIX) {
        constant_time_eq(stored.as_bytes(), digest(presented).as_bytes())
    } else {
        constant_time_eq(stored.as_bytes(), presented.as_bytes())
    }
}

/// Equal-length inputs compare in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_match_only_their_secret() {
        let stored = digest("s3cret-of-node-1");
        assert!(stored.starts_with("sha256:") && !stored.contains("s3cret"));
        assert!(matches(&stored, "s3cret-of-node-1"));
        assert!(!matches(&stored, "s3cret-of-node-2"));
        assert!(!matches(&stored, &stored), "the digest is not the secret");
        assert!(matches("legacy-plain", "legacy-plain"));
        assert!(!matches("legacy-plain", "legacy-plaiN"));
    }
}
