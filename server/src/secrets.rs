//! Secrets the server checks: compared in constant time, and kept only as digests.
//!
//! A node's secret is what proves an agent speaks for its node. State (the Raft log, its
//! snapshots, every event) keeps a SHA-256 digest of it, never the secret itself, so a
//! copy of the data dir or a snapshot sent to a follower lets nobody act as a node. The
//! arithmetic lives in `drover_proto::secret`, which the agent shares to check the
//! servers' grants.

pub use drover_proto::secret::{constant_time_eq, digest, matches};
