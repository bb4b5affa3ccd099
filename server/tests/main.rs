//! The server's integration tests, one module per area, linked into one test binary.
//! Each `tests/*.rs` file used to be a binary of its own, about 125 MB linked against the
//! whole server; one binary links once and keeps a clean build's target dir several GB
//! smaller. `raft_priority.rs` stays a binary of its own: it needs a process in which no
//! other test has started the FSM's index helper.

mod acl;
mod api;
mod attacks;
mod client_updates;
mod common;
mod controls;
mod follower_workers;
mod forwarding;
mod fuzz_decoders;
mod heartbeat_stream;
mod http_api;
mod leader_duties;
mod nodes;
mod raft_transport;
mod resets;
mod scheduling;
mod services;
mod sim_cluster;
mod sim_partition;
mod snapshot_cadence;
mod storm;
mod tls;
mod versions;
mod workers;
