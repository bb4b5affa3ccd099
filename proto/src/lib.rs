//! drover's wire protocol (`drover.v1`). The gRPC services arrive with the server; until then
//! this crate only re-exports the domain it will translate to and from.

pub use drover_core as core;
