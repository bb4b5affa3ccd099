//! drover's server runtime around the pure core: Raft log, leader duties, workers, gRPC.
//! Filled by the server issue; today it only names the core it wraps.

pub use drover_core as core;
