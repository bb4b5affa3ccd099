//! drover's node agent and node simulator.
//!
//! The agent ([`Agent`]) registers this machine with the servers, heartbeats, watches the
//! node's allocations and runs their tasks (`raw_exec` as host processes, `exec` isolated in
//! namespaces and a chroot, both in cgroups with their limits: [`driver`], [`isolation`],
//! [`cgroups`]), reporting status changes in batches. Its state lives in the data
//! dir, so an agent killed at any moment and started again is the same node and re-attaches
//! to the tasks still running instead of starting duplicates.
//!
//! Modules, one idea each: [`config`] (flags and HCL file), [`fingerprint`] (the host),
//! [`network`] (its addresses, reserved ports and dynamic range for ports),
//! [`rpc`] (server connections with failover), [`heartbeat`] (registration, TTL, readiness),
//! [`state`] (durable records), [`driver`] (processes, logs, signals), [`runner`] (per
//! allocation and per task supervisors, restart policy), [`reporter`] (batched status
//! updates), [`checks`] (an allocation's service registrations and health checks),
//! [`supervisor`] (following the servers' allocation list), [`endpoint`] (the agent's own
//! gRPC endpoint: task logs and in-place restarts for operators, checked with a server).
//!
//! [`sim`] runs thousands of virtual nodes in one process for scale and failure tests.

mod agent;
pub mod beat_stream;
pub mod cgroups;
pub mod checks;
pub mod config;
pub mod driver;
pub mod endpoint;
mod error;
pub mod fingerprint;
pub mod heartbeat;
pub mod isolation;
pub mod layout;
pub mod network;
pub mod reporter;
pub mod rpc;
pub mod runner;
pub mod sim;
pub mod state;
pub mod supervisor;
pub mod users;

pub use agent::{Agent, readiness};
pub use config::AgentConfig;
pub use drover_core as core;
pub use error::AgentError;
