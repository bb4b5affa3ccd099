//! Identifiers and the two scalar clocks of drover: Raft indexes and wall time.
//!
//! Node, allocation and evaluation ids are UUIDs held as 16 bytes (not strings) so that a
//! million allocations and their indexes stay small. Job ids are user-chosen strings shared
//! through an `Arc<str>`, so every allocation of a job points at one copy.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A Raft log index. Every object and table records the index of its last change.
pub type Index = u64;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
        pub struct $name(pub uuid::Uuid);

        // Ids are the keys of every big map and index, so comparing them is the inner loop of
        // most lookups. Compared as one big-endian `u128` they order exactly as the UUID's
        // bytes do (what a derive would give), without a `memcmp` call per comparison.
        impl Ord for $name {
            #[inline]
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.0.as_u128().cmp(&other.0.as_u128())
            }
        }

        impl PartialOrd for $name {
            #[inline]
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl $name {
            /// An id from 16 random bytes the caller drew (core never draws randomness itself).
            pub fn from_bytes(bytes: [u8; 16]) -> Self {
                Self(uuid::Builder::from_random_bytes(bytes).into_uuid())
            }

            /// A fresh random id; only for the runtime edges and tests, never inside the FSM.
            /// The one sanctioned use of ambient randomness in core: core itself never calls
            /// it (clippy's `disallowed_methods` would say so at any call).
            #[allow(clippy::disallowed_methods)]
            pub fn random() -> Self {
                Self(uuid::Uuid::new_v4())
            }

            /// The smallest id, a lower bound for range scans.
            pub const MIN: Self = Self(uuid::Uuid::nil());
            /// The largest id, an upper bound for range scans.
            pub const MAX: Self = Self(uuid::Uuid::max());

            /// The first eight hex digits, as operators read ids in tables.
            pub fn short(&self) -> String {
                let mut s = self.0.simple().to_string();
                s.truncate(8);
                s
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.short())
            }
        }

        impl std::str::FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                uuid::Uuid::parse_str(s).map(Self)
            }
        }
    };
}

uuid_id!(
    /// A node's id, chosen at first registration and kept by the agent across restarts.
    NodeId
);
uuid_id!(
    /// An allocation's id.
    AllocId
);
uuid_id!(
    /// An evaluation's id.
    EvalId
);
uuid_id!(
    /// A deployment's id.
    DeploymentId
);
uuid_id!(
    /// The public id of an ACL token: safe to list and log, it names the token without
    /// granting anything (the token's secret is what a client presents).
    AccessorId
);

/// A job's id within its namespace. Cheap to clone: every allocation of a job shares it.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JobId(pub Arc<str>);

impl JobId {
    pub fn new(s: impl AsRef<str>) -> Self {
        Self(Arc::from(s.as_ref()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobId({})", &self.0)
    }
}

impl From<&str> for JobId {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

/// Namespace plus job id: the key of the jobs table. Nomad keys jobs the same way.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Debug)]
pub struct JobKey {
    pub namespace: Arc<str>,
    pub id: JobId,
}

// Job keys lead the keys of the per-job indexes, so every insert into them compares job keys
// a dozen times. The allocations of one plan share their namespace and job id `Arc`s, so
// pointer equality settles most comparisons without reading the strings; otherwise the
// order is the derived one (namespace, then id, as strings).
impl Ord for JobKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        fn by_text(a: &Arc<str>, b: &Arc<str>) -> std::cmp::Ordering {
            if Arc::ptr_eq(a, b) {
                std::cmp::Ordering::Equal
            } else {
                a.cmp(b)
            }
        }
        by_text(&self.namespace, &other.namespace).then_with(|| by_text(&self.id.0, &other.id.0))
    }
}

impl PartialOrd for JobKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl JobKey {
    pub fn new(namespace: impl AsRef<str>, id: impl AsRef<str>) -> Self {
        Self {
            namespace: Arc::from(namespace.as_ref()),
            id: JobId::new(id),
        }
    }

    /// A job in the `default` namespace.
    pub fn default_ns(id: impl AsRef<str>) -> Self {
        Self::new(crate::DEFAULT_NAMESPACE, id)
    }
}

impl fmt::Display for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.id)
    }
}

/// Wall-clock time in milliseconds since the Unix epoch.
///
/// Core never reads a clock: the runtime passes `now` in, and stored times come from the
/// command that carried them, so applying the same log always gives the same state.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default, Debug,
)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub const ZERO: Self = Self(0);

    pub fn from_millis(ms: u64) -> Self {
        Self(ms)
    }

    pub fn as_millis(self) -> u64 {
        self.0
    }

    pub fn saturating_add(self, d: std::time::Duration) -> Self {
        Self(
            self.0
                .saturating_add(d.as_millis().min(u64::MAX as u128) as u64),
        )
    }

    pub fn saturating_sub(self, d: std::time::Duration) -> Self {
        Self(
            self.0
                .saturating_sub(d.as_millis().min(u64::MAX as u128) as u64),
        )
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> std::time::Duration {
        std::time::Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match chrono::DateTime::from_timestamp_millis(self.0 as i64) {
            Some(t) => write!(f, "{}", t.format("%Y-%m-%dT%H:%M:%S%.3fZ")),
            None => write!(f, "{}ms", self.0),
        }
    }
}

#[cfg(test)]
mod order_tests {
    use super::*;

    /// The hand-written `Ord` of job keys orders as (namespace, id) strings, shared or not.
    #[test]
    fn job_keys_order_as_their_strings() {
        let texts = ["", "a", "ab", "b", "default", "web", "web2", "\u{e9}"];
        let pairs: Vec<(&str, &str)> = texts
            .iter()
            .flat_map(|a| texts.iter().map(move |b| (*a, *b)))
            .collect();
        for &(ns1, id1) in &pairs {
            for &(ns2, id2) in &pairs {
                let (k1, k2) = (JobKey::new(ns1, id1), JobKey::new(ns2, id2));
                assert_eq!(k1.cmp(&k2), (ns1, id1).cmp(&(ns2, id2)), "{k1} vs {k2}");
                assert_eq!(k1.cmp(&k1.clone()), std::cmp::Ordering::Equal);
            }
        }
    }

    /// The hand-written `Ord` must order ids exactly as their bytes (the derived order).
    #[test]
    fn ids_order_as_their_bytes() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            let mut b = [0u8; 16];
            for byte in &mut b {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *byte = (x >> 24) as u8;
            }
            b
        };
        let mut pairs: Vec<([u8; 16], [u8; 16])> = (0..2000).map(|_| (next(), next())).collect();
        // Ids that share a prefix and differ only late, and equal ids.
        let same = next();
        let mut late = same;
        late[15] ^= 1;
        pairs.push((same, late));
        pairs.push((same, same));
        for (a, b) in pairs {
            let (ia, ib) = (
                AllocId(uuid::Uuid::from_bytes(a)),
                AllocId(uuid::Uuid::from_bytes(b)),
            );
            assert_eq!(ia.cmp(&ib), a.cmp(&b));
            assert_eq!(NodeId(ia.0).cmp(&NodeId(ib.0)), a.cmp(&b));
        }
    }
}
