//! drover's wire protocol: the `drover.v1` gRPC services, their generated tonic/prost code,
//! and the conversions between the messages and drover-core's types.
//!
//! - [`v1`]: messages, enums, and for each service a `*_client` module (e.g.
//!   `v1::job_service_client::JobServiceClient`) and a `*_server` module (the service trait
//!   and `v1::job_service_server::JobServiceServer`).
//! - [`convert`]: `From<&core>` for answers and `TryFrom<proto>` for what clients send;
//!   decoding never panics and names the offending field on refusal.
//! - [`FILE_DESCRIPTOR_SET`]: the compiled descriptors of every `.proto`, for the gRPC
//!   reflection service (so `grpcurl` works with no proto files at hand).
//!
//! The `.proto` files are compiled at build time by protox (pure Rust, no system `protoc`).

pub mod bearer;
pub mod codec;
pub mod convert;
pub mod decode_budget;
pub mod grant;
pub mod paging;
pub mod secret;
pub mod tls;

/// The generated code of package `drover.v1`.
///
/// Lints are relaxed here only: this is prost's and tonic's output, regenerated on every
/// build, and not ours to restyle.
#[allow(clippy::all, missing_docs, missing_debug_implementations, rustdoc::all)]
pub mod v1 {
    tonic::include_proto!("drover.v1");
}

pub use convert::{ConvertError, Problem, WireEnum};
pub use drover_core as core;

/// The encoded `google.protobuf.FileDescriptorSet` of every file under `proto/`, with
/// source info (so reflection shows the comments). Register it with
/// `tonic_reflection::server::Builder::register_encoded_file_descriptor_set`.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/drover_descriptor.bin"));

/// The fully qualified name of every service in [`FILE_DESCRIPTOR_SET`] that servers serve
/// (all but [`AGENT_SERVICE_NAME`]), for registering health statuses and for checks that
/// nothing was left out.
pub const SERVICE_NAMES: [&str; 14] = [
    v1::job_service_server::SERVICE_NAME,
    v1::eval_service_server::SERVICE_NAME,
    v1::node_service_server::SERVICE_NAME,
    v1::operator_service_server::SERVICE_NAME,
    v1::worker_service_server::SERVICE_NAME,
    v1::event_service_server::SERVICE_NAME,
    v1::status_service_server::SERVICE_NAME,
    v1::search_service_server::SERVICE_NAME,
    v1::raft_service_server::SERVICE_NAME,
    v1::acl_service_server::SERVICE_NAME,
    v1::alloc_service_server::SERVICE_NAME,
    v1::cluster_service_server::SERVICE_NAME,
    v1::service_service_server::SERVICE_NAME,
    v1::deployment_service_server::SERVICE_NAME,
];

/// The node attribute in which an agent registers the address of its own endpoint
/// (AgentService), where servers reach it for task logs and restarts.
pub const AGENT_ADDRESS_ATTRIBUTE: &str = "drover.agent.address";

/// The node attribute in which an agent lists its host's interface addresses
/// (comma-separated); servers refuse an agent address outside them.
pub const AGENT_INTERFACES_ATTRIBUTE: &str = "drover.agent.interfaces";

/// The service agents serve on their own endpoint (task logs, restarts); never a server's.
pub const AGENT_SERVICE_NAME: &str = v1::agent_service_server::SERVICE_NAME;
