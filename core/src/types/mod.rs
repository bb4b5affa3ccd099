//! The domain types: one module per concept.

mod alloc;
mod alloc_links;
mod constraint;
mod deployment;
mod eval;
mod group;
mod id_prefix;
mod ids;
mod job;
mod network;
mod node;
mod plan;
mod resources;
mod scheduler_config;
mod service;
mod task;
mod task_blocks;
mod task_states;

pub use alloc::*;
pub use alloc_links::{AllocLinks, Links};
pub use constraint::*;
pub use deployment::*;
pub use eval::*;
pub use group::*;
pub use id_prefix::{IdPrefix, IdPrefixError};
pub use ids::*;
pub use job::*;
pub use network::*;
pub use node::*;
pub use plan::*;
pub use resources::*;
pub use scheduler_config::*;
pub use service::*;
pub use task::*;
pub use task_blocks::*;
pub use task_states::TaskStates;
