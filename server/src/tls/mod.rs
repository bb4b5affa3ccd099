//! TLS on the server's listeners (the client API and the Raft listener) and on its calls
//! to the other servers, from the config's `tls { ... }` block, over rustls.
//!
//! With `verify_incoming`, a listener accepts only peers whose certificate the cluster CA
//! signed (mutual TLS): a client without one is refused during the handshake. Servers
//! call each other with their own certificate, so the Raft listener can always verify.
//! The cluster secret is checked on the Raft listener with or without TLS.

pub mod dev_certs;
pub mod roles;

use drover_proto::tls::{TlsError, TlsFiles};
use std::path::PathBuf;
use tonic::transport::ServerTlsConfig;

/// The `tls { ... }` block of a server's config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerTls {
    pub ca_file: PathBuf,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// Refuse client connections without a certificate the CA signed.
    pub verify_incoming: bool,
    /// When calling other servers, check their certificate names the server role.
    pub verify_server_hostname: bool,
}

impl ServerTls {
    pub fn files(&self) -> TlsFiles {
        TlsFiles {
            ca_file: Some(self.ca_file.clone()),
            cert_file: Some(self.cert_file.clone()),
            key_file: Some(self.key_file.clone()),
            verify_server_hostname: self.verify_server_hostname,
        }
    }

    /// What the client API's listener serves with.
    pub fn api_listener(&self) -> Result<ServerTlsConfig, TlsError> {
        self.listener(self.verify_incoming)
    }

    /// What the Raft listener serves with: servers always present their certificate.
    pub fn raft_listener(&self) -> Result<ServerTlsConfig, TlsError> {
        self.listener(true)
    }

    fn listener(&self, verify: bool) -> Result<ServerTlsConfig, TlsError> {
        let files = self.files();
        let identity = files.identity()?.ok_or(TlsError::Incomplete {
            given: "tls",
            missing: "cert_file and key_file",
        })?;
        let mut config = ServerTlsConfig::new().identity(identity);
        if verify && let Some(ca) = files.ca()? {
            config = config.client_ca_root(ca);
        }
        Ok(config)
    }

    /// The client side of this server's calls to a peer at `host`.
    pub fn peer_client(&self, host: &str) -> Result<tonic::transport::ClientTlsConfig, TlsError> {
        Ok(self
            .files()
            .client(host)?
            .expect("a server's TLS always has a CA"))
    }
}
