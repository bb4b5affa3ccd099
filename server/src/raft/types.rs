//! The Raft type configuration: what drover's log carries and what applying it returns.

use drover_core::Index;
use drover_core::fsm::{ApplyError, Command};
use serde::{Deserialize, Serialize};
// `declare_raft_types!` names the snapshot data type without a path.

/// A Raft node id: one per server (named so to keep it apart from core's agent `NodeId`).
/// Stable for the life of a data dir (the log store records it).
pub type ServerId = u64;

/// What applying one log entry produced: the index it was applied at and the FSM's verdict.
///
/// A refused command (`Err`, typed so callers can match on why) is still a committed
/// entry: the store is unchanged and every server refuses it the same way.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ApplyResponse {
    pub index: Index,
    pub result: Result<(), ApplyError>,
}

openraft::declare_raft_types!(
    /// drover's Raft: the log carries core's [`Command`]s; nodes are addressed by a string.
    pub TypeConfig:
        D = Command,
        R = ApplyResponse,
        NodeId = ServerId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = super::snapshot_data::SnapshotData,
        AsyncRuntime = openraft::TokioRuntime,
);

/// The openraft types drover uses, named once.
pub type Raft = openraft::Raft<TypeConfig>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<ServerId>;
pub type Vote = openraft::Vote<ServerId>;
pub type Membership = openraft::Membership<ServerId, openraft::BasicNode>;
pub type StoredMembership = openraft::StoredMembership<ServerId, openraft::BasicNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<ServerId, openraft::BasicNode>;
pub type Snapshot = openraft::Snapshot<TypeConfig>;
pub type StorageError = openraft::StorageError<ServerId>;
pub type RaftMetrics = openraft::RaftMetrics<ServerId, openraft::BasicNode>;
