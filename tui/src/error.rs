//! What can stop the console.

/// Why [`run`](crate::run) returned early. A lost connection is not one of these: the
/// console shows it and reconnects by itself.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("cannot use server address {address:?}: {source}")]
    Address {
        address: String,
        #[source]
        source: drover_proto::tls::EndpointError,
    },
    #[error("--token: {0}")]
    Token(String),
    #[error("terminal i/o failed")]
    Terminal(#[from] std::io::Error),
    /// Only from [`measure_initial_load`](crate::net::load::measure_initial_load): the
    /// console itself keeps retrying.
    #[error("loading the cluster failed: {0}")]
    Load(#[source] Box<tonic::Status>),
}
