//! drover's server runtime around the pure core: Raft log, leader duties, workers, gRPC.
//!
//! - [`raft`]: the replicated, durable state: openraft over a redb log, with core's FSM as the
//!   state machine, O(1) read snapshots and the event hook.

pub use drover_core as core;

pub mod raft;
