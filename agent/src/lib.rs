//! drover's node agent and node simulator. Filled by the agent issue.

pub use drover_core as core;
