//! drover's operator console. Filled by the console issue.

pub use drover_core as core;
