//! drover's server runtime around the pure core: Raft log, leader duties, workers, gRPC.
//!
//! - [`raft`]: the replicated, durable state: openraft over an append-only log, with core's FSM as the
//!   state machine, O(1) read snapshots and the event hook.
//! - [`leader`]: the duties run while this server leads: eval broker, blocked evals, plan
//!   applier, heartbeat timers, node health, reapers, periodic launches, GC.
//! - [`worker`]: the scheduler workers every server runs.
//! - [`api`]: the gRPC services over [`ServerHandle`], and [`Server::serve`]'s listener.
//! - [`forward`]: a follower sends what only the leader can answer to the leader's API.
//! - [`server`]: the lifecycle, [`Server::start`], [`Server::serve`], [`Server::shutdown`].
//! - [`handle`]: the [`ServerHandle`] the gRPC services call, one module per API area.
//! - [`events`]: the retained event buffer the event stream replays from.
//! - [`metrics`]: the Prometheus registry; [`scrape`]: the `/metrics` listener over it.
//! - [`clock`]: the one clock the runtime reads.
//! - [`write`]: the write path through Raft; [`config`] and [`error`]: settings and errors.

pub use drover_core as core;

mod admission;
pub mod agent_link;
pub mod api;
pub mod auth;
pub mod client_updates;
pub mod clock;
pub mod config;
pub mod discovery;
pub mod error;
pub mod events;
pub mod forward;
pub mod handle;
mod http_api;
mod layers;
pub mod leader;
pub mod leader_link;
mod log_limit;
pub mod membership;
pub mod metrics;
pub mod raft;
pub mod scrape;
pub mod secrets;
pub mod server;
pub mod serving;
pub mod tls;
pub mod versions;
pub mod worker;
pub mod write;

pub use config::ServerConfig;
pub use error::{ServerError, StartError};
pub use handle::ServerHandle;
pub use handle::{HeartbeatAck, JobDeregistered, JobDispatched, JobRegistered, NodeRegistered};
pub use server::Server;
