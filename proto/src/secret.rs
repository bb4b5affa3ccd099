//! Node secrets as both sides hold them: the agent keeps its secret, the servers keep only
//! its digest (state, the Raft log and snapshots never hold the secret itself), and both
//! derive from that digest the key that signs the servers' grants to the agent
//! ([`crate::grant`]).

use sha2::{Digest, Sha256};

/// Marks a stored secret as a digest (state written before digests holds plain ones).
pub const DIGEST_PREFIX: &str = "sha256:";

/// What servers keep of `secret`.
pub fn digest(secret: &str) -> String {
    let mut out = String::with_capacity(DIGEST_PREFIX.len() + 64);
    out.push_str(DIGEST_PREFIX);
    // Lowercase hex digits are ASCII.
    out.push_str(std::str::from_utf8(&hex_digest(secret)).unwrap_or_default());
    out
}

/// The lowercase hex SHA-256 of `secret`, on the stack: every heartbeat checks a secret,
/// and this keeps the check free of allocation.
fn hex_digest(secret: &str) -> [u8; 64] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hash = Sha256::digest(secret.as_bytes());
    let mut out = [0u8; 64];
    for (pair, b) in out.chunks_exact_mut(2).zip(hash) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 0x0f)];
    }
    out
}

/// Whether `presented` is the secret `stored` keeps (a digest, or a plain secret from
/// state written before digests).
pub fn matches(stored: &str, presented: &str) -> bool {
    match stored.strip_prefix(DIGEST_PREFIX) {
        Some(hex) => constant_time_eq(hex.as_bytes(), &hex_digest(presented)),
        None => constant_time_eq(stored.as_bytes(), presented.as_bytes()),
    }
}

/// The digest servers keep for `stored` (itself, or the digest of a plain legacy secret).
pub fn stored_digest(stored: &str) -> String {
    if stored.starts_with(DIGEST_PREFIX) {
        stored.to_string()
    } else {
        digest(stored)
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
        assert_eq!(stored_digest(&stored), stored);
        assert_eq!(stored_digest("legacy-plain"), digest("legacy-plain"));
    }

    #[test]
    fn the_digest_is_lowercase_hex_sha256() {
        assert_eq!(
            digest("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(matches(
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "abc"
        ));
        assert!(!matches(
            "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
            "abc"
        ));
    }
}
