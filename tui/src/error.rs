//! What can stop the console.

/// Why [`run`](crate::run) returned early. A lost connection is not one of these: the
/// console shows it and reconnects by itself.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("invalid server address {address:?}")]
    Address {
        address: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("terminal i/o failed")]
    Terminal(#[from] std::io::Error),
}
