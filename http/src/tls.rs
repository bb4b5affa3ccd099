//! HTTPS with the files of the server's `tls { ... }` block: the same certificate as the
//! gRPC API, and with `verify_incoming` the same demand for a client certificate the
//! cluster CA signed.

use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::PathBuf;
use std::sync::Arc;

/// The listener's certificate and, to verify clients, the CA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpTls {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub ca_file: Option<PathBuf>,
    /// Refuse clients without a certificate the CA signed.
    pub verify_incoming: bool,
}

impl HttpTls {
    /// The rustls acceptor these files describe.
    pub(crate) fn acceptor(&self) -> Result<tokio_rustls::TlsAcceptor, String> {
        let read = |p: &PathBuf| format!("{}", p.display());
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert_file)
            .and_then(|it| it.collect::<Result<_, _>>())
            .map_err(|e| format!("cert_file {}: {e}", read(&self.cert_file)))?;
        let key = PrivateKeyDer::from_pem_file(&self.key_file)
            .map_err(|e| format!("key_file {}: {e}", read(&self.key_file)))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = match (&self.ca_file, self.verify_incoming) {
            (Some(ca), true) => {
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(ca)
                    .map_err(|e| format!("ca_file {}: {e}", read(ca)))?
                {
                    let cert = cert.map_err(|e| format!("ca_file {}: {e}", read(ca)))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("ca_file {}: {e}", read(ca)))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| e.to_string())?;
                builder.with_client_cert_verifier(verifier)
            }
            _ => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(certs, key)
            .map_err(|e| format!("cert_file {}: {e}", read(&self.cert_file)))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}
