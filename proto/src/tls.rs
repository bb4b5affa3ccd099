//! TLS on the client side of every drover connection (CLI, console, agents, servers
//! calling each other), from PEM files, over rustls (nothing to install).
//!
//! Servers' certificates name their role, [`SERVER_NAME`] (as Nomad's
//! `server.<region>.nomad`); with `verify_server_hostname` a client checks that name, so a
//! certificate issued to a client or the CLI by the same CA cannot pose as a server.
//! Without it, the client checks the host it dialed.

use rustls_pki_types::{CertificateDer, ServerName};
use std::path::{Path, PathBuf};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// The name every server certificate carries.
pub const SERVER_NAME: &str = "server.global.drover";
/// The name agents' certificates carry.
pub const CLIENT_NAME: &str = "client.global.drover";
/// The name operators' (CLI, console) certificates carry.
pub const CLI_NAME: &str = "cli.global.drover";

/// The name an agent's certificate carries for node `node_name`
/// (`<node name>.client.global.drover`), which servers require when they call the agent's
/// endpoint: the certificate binds the address a node registered to that node. Refused
/// when the node name is not a DNS label (letters, digits and `-`, at most 63).
pub fn agent_name(node_name: &str) -> Result<String, AgentNameError> {
    let label_ok = !node_name.is_empty()
        && node_name.len() <= 63
        && node_name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !node_name.starts_with('-')
        && !node_name.ends_with('-');
    if !label_ok {
        return Err(AgentNameError(node_name.to_string()));
    }
    Ok(format!("{}.{CLIENT_NAME}", node_name.to_ascii_lowercase()))
}

/// A node name no certificate can carry.
#[derive(Debug, thiserror::Error)]
#[error(
    "node name {0:?} is not a DNS label (letters, digits and '-', at most 63), so no agent certificate can name it"
)]
pub struct AgentNameError(pub String);

/// Whether the leaf certificate of `chain` is valid for the DNS name `name` (a role such
/// as [`SERVER_NAME`], or an agent's [`agent_name`]). The TLS handshake has already checked
/// that the chain leads to the cluster CA.
pub fn leaf_names(chain: &[CertificateDer<'_>], name: &str) -> bool {
    let Some(leaf) = chain.first() else {
        return false;
    };
    let Ok(cert) = webpki::EndEntityCert::try_from(leaf) else {
        return false;
    };
    let Ok(name) = ServerName::try_from(name) else {
        return false;
    };
    cert.verify_is_valid_for_subject_name(&name).is_ok()
}

/// Whether the caller of `req` presented a verified certificate naming `name`.
pub fn peer_has_name<T>(req: &tonic::Request<T>, name: &str) -> bool {
    req.peer_certs()
        .is_some_and(|chain| leaf_names(&chain, name))
}

/// Where a connection's TLS material lives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The cluster CA that signed the servers' certificates.
    pub ca_file: Option<PathBuf>,
    /// This side's certificate and key, for servers that verify incoming connections.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Check the server's certificate for [`SERVER_NAME`] rather than the dialed host.
    pub verify_server_hostname: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{given} needs {missing} as well")]
    Incomplete {
        given: &'static str,
        missing: &'static str,
    },
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

impl TlsFiles {
    /// Whether any TLS is configured (a CA is what turns it on).
    pub fn enabled(&self) -> bool {
        self.ca_file.is_some()
    }

    /// This side's certificate and key, if both are given; one without the other is an
    /// error naming the missing one.
    pub fn identity(&self) -> Result<Option<Identity>, TlsError> {
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => Ok(Some(Identity::from_pem(
                read("certificate", cert)?,
                read("key", key)?,
            ))),
            (Some(_), None) => Err(TlsError::Incomplete {
                given: "a certificate",
                missing: "its key",
            }),
            (None, Some(_)) => Err(TlsError::Incomplete {
                given: "a key",
                missing: "its certificate",
            }),
            (None, None) => Ok(None),
        }
    }

    /// The CA certificate, if given.
    pub fn ca(&self) -> Result<Option<Certificate>, TlsError> {
        self.ca_file
            .as_deref()
            .map(|p| read("CA certificate", p).map(Certificate::from_pem))
            .transpose()
    }

    /// The client side of a connection to a server at `host`; `None` without a CA.
    pub fn client(&self, host: &str) -> Result<Option<ClientTlsConfig>, TlsError> {
        let Some(ca) = self.ca()? else {
            if self.cert_file.is_some() || self.key_file.is_some() {
                return Err(TlsError::Incomplete {
                    given: "a client certificate",
                    missing: "the CA certificate (-ca-cert)",
                });
            }
            return Ok(None);
        };
        let domain = if self.verify_server_hostname {
            SERVER_NAME
        } else {
            host
        };
        let mut config = ClientTlsConfig::new()
            .ca_certificate(ca)
            .domain_name(domain.to_string());
        if let Some(identity) = self.identity()? {
            config = config.identity(identity);
        }
        Ok(Some(config))
    }
}

/// Why an endpoint could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("not a valid address ({0})")]
    Address(String),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("tls: {0}")]
    Config(String),
}

/// The URL for `address`: `host:port` is read as http, or https when `tls` is on (which
/// also upgrades an explicit `http://`).
pub fn url(address: &str, tls: &TlsFiles) -> String {
    let address = address.trim();
    let rest = address
        .strip_prefix("http://")
        .or_else(|| address.strip_prefix("https://"))
        .unwrap_or(address);
    if address.contains("://") && !address.starts_with("http") {
        return address.to_string();
    }
    let scheme = if tls.enabled() || address.starts_with("https://") {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{rest}")
}

/// An endpoint for `address` with `tls` applied (see [`url`]).
pub fn endpoint(address: &str, tls: &TlsFiles) -> Result<Endpoint, EndpointError> {
    let url = url(address, tls);
    let endpoint =
        Endpoint::from_shared(url.clone()).map_err(|e| EndpointError::Address(e.to_string()))?;
    match tls.client(host_of(&url))? {
        Some(config) => endpoint
            .tls_config(config)
            .map_err(|e| EndpointError::Config(e.to_string())),
        None => Ok(endpoint),
    }
}

/// The host part of `addr` (`https://host:port`, `host:port`, `[::1]:port`).
pub fn host_of(addr: &str) -> &str {
    let rest = addr.split_once("://").map_or(addr, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_from_every_address_form() {
        for (addr, host) in [
            ("https://127.0.0.1:4647", "127.0.0.1"),
            ("localhost:4647", "localhost"),
            ("http://[::1]:4647/x", "::1"),
            ("server.example", "server.example"),
        ] {
            assert_eq!(host_of(addr), host, "{addr}");
        }
    }

    #[test]
    fn tls_turns_addresses_to_https() {
        let on = TlsFiles {
            ca_file: Some("ca.pem".into()),
            ..TlsFiles::default()
        };
        let off = TlsFiles::default();
        for (addr, files, want) in [
            ("127.0.0.1:4647", &off, "http://127.0.0.1:4647"),
            ("http://h:1", &off, "http://h:1"),
            ("https://h:1", &off, "https://h:1"),
            ("127.0.0.1:4647", &on, "https://127.0.0.1:4647"),
            ("http://h:1", &on, "https://h:1"),
        ] {
            assert_eq!(url(addr, files), want, "{addr}");
        }
    }

    #[test]
    fn half_an_identity_names_what_is_missing() {
        let files = TlsFiles {
            cert_file: Some("c.pem".into()),
            ..TlsFiles::default()
        };
        assert_eq!(
            files.identity().unwrap_err().to_string(),
            "a certificate needs its key as well"
        );
        assert!(files.client("h").is_err(), "a certificate without a CA");
        assert!(TlsFiles::default().client("h").unwrap().is_none());
    }
}
