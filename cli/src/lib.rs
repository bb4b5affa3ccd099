//! The `drover` command line as a library: `main.rs` parses the arguments and hands them
//! to one of these modules, which calls the server (or starts one) and prints the answer.
//!
//! The long-running commands (`dev`, `server`, `agent`, `console`) start the libraries in
//! process; the client commands talk gRPC to a server. Every command group is one module
//! holding its clap arguments, its gRPC calls and its output. Client answers are decoded into drover-core's types (through drover-proto's checked
//! conversions) before anything is printed, so the human tables and the `-json` output
//! show the same values and a malformed answer is an error, never a panic.

pub mod acl;
pub mod agent;
pub mod allocs;
pub mod argv;
pub mod bench;
pub mod child;
pub mod client;
pub mod conflict;
pub mod console;
pub mod deployments;
pub mod dev;
pub mod dev_servers;
pub mod error;
pub mod evals;
pub mod events;
pub mod jobs;
pub mod logging;
pub mod monitor;
pub mod nodes;
pub mod operator;
pub mod output;
pub mod raft;
pub mod resolve;
pub mod serve;
pub mod servers;
pub mod services;
pub mod signals;
pub mod tls;
pub mod workers;

pub use client::{Client, ClientArgs, DEFAULT_ADDRESS};
pub use error::{CliError, Exit};
