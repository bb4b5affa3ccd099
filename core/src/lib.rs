//! drover's scheduling domain, pure and deterministic.
//!
//! Nothing here performs IO, reads a clock or draws randomness on its own: time comes in as
//! an argument, timers are due times the runtime polls, and randomness comes from a seeded
//! generator passed in. That is what lets the whole scheduler be tested by simulation.

pub mod acl;
pub mod blocked;
pub mod broker;
pub mod client_report;
pub mod fsm;
pub mod jobspec;
pub mod leader;
pub mod mock;
pub mod node_health;
pub mod periodic;
pub mod plan_check;
pub mod ports;
pub mod scheduler;
pub mod state;
pub mod template;
pub mod types;
pub mod validate;

pub use types::*;

/// The namespace jobs live in unless they say otherwise.
pub const DEFAULT_NAMESPACE: &str = "default";
