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

/// What went wrong with a connection, as one sentence for an operator, when `error`'s
/// chain tells: a server speaking TLS to a client given no CA, a server certificate the CA
/// given did not sign, one that is not a drover server's (it does not name
/// [`SERVER_NAME`] for server use), a server that wants a client certificate or refuses the
/// one given, a server that does not speak TLS, a server that hung up (which is how a TLS
/// server may answer plaintext). `None` when nothing in the chain is one of these:
/// [`describe_connect_error`] then falls back on the innermost cause.
///
/// The CLI and the console both word connection failures with it. The TLS errors come
/// from rustls, a dependency of tonic's rather than this crate's, so they are read by the
/// names rustls prints for them (its error variants and alerts); the CLI's TLS tests run
/// each case against a real server, so a rustls that words them otherwise fails there.
pub fn explain_connect_error(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    explain(error, None)
}

/// [`explain_connect_error`] for a client that was given `tls`. A server that hangs up
/// without a word is then read by what the client lacks: to a client without a CA, a TLS
/// server hangs up on plaintext; to a TLS client without a certificate of its own, a
/// server that asks for one may hang up before its alert is read (TLS 1.3 checks the
/// client's certificate after the client is done with its handshake).
pub fn explain_connect_error_given(
    error: &(dyn std::error::Error + 'static),
    tls: &TlsFiles,
) -> Option<String> {
    explain(error, Some(tls))
}

fn explain(error: &(dyn std::error::Error + 'static), given: Option<&TlsFiles>) -> Option<String> {
    let texts = chain_texts(error);
    let has = |needle: &str| texts.iter().any(|t| t.contains(needle));
    // hyper words a connection the server dropped before the request left as "connection
    // was not ready": the same hang-up, reached by another race.
    let hung_up = has("kind: BrokenPipe")
        || has("kind: ConnectionReset")
        || has("\"connection closed\"")
        || has("connection was not ready");
    let sentence = if has("CertificateRequired") {
        NO_CLIENT_CERTIFICATE
    } else if [
        "BadCertificate",
        "UnknownCA",
        "CertificateUnknown",
        "DecryptError",
    ]
    .iter()
    .any(|alert| has(&format!("alert: {alert}")) || has(&format!("AlertReceived({alert})")))
    {
        "the server refused the client certificate: it is not signed by the server's CA"
    } else if has("UnknownIssuer") || has("BadSignature") {
        "the server's certificate is not trusted: the CA given (--ca-cert) did not sign it"
    } else if has("NotValidForName") || has("not valid for name") {
        "the server's certificate is not a drover server's: it does not name \
         server.global.drover"
    } else if has("InvalidPurpose") || has("extended key usage for server authentication") {
        "the server's certificate is not a drover server's: it is not for server use (make \
         one with `drover tls cert create -server`)"
    } else if has("invalid peer certificate") && has("Expired") {
        "the server's certificate has expired"
    } else if has("invalid peer certificate") && has("NotValidYet") {
        "the server's certificate is not valid yet (are the clocks right?)"
    } else if has("InvalidContentType") {
        "the server does not speak TLS: drop --ca-cert (DROVER_CACERT) or check the address"
    } else if has("FRAME_SIZE_ERROR") || has("frame with invalid size") {
        "the server speaks TLS and no CA certificate was given: give --ca-cert \
         (DROVER_CACERT)"
    } else if has("InvalidCertificate") {
        "the server's certificate is not trusted by the CA given (--ca-cert)"
    } else if hung_up {
        match given {
            Some(tls) if tls.enabled() && tls.cert_file.is_none() => {
                "the server closed the connection: if it asks for client certificates, give \
                 --client-cert and --client-key (DROVER_CLIENT_CERT, DROVER_CLIENT_KEY)"
            }
            Some(tls) if tls.enabled() => return None,
            // What a plaintext client sees of a TLS server when it writes after the server
            // hung up on its first bytes; also what a server that dies mid-call leaves.
            Some(_) => {
                "the server closed the connection: if it serves TLS, give its CA certificate \
                 (--ca-cert or DROVER_CACERT)"
            }
            None => {
                "the server closed the connection: if it serves TLS, give its CA certificate \
                 (--ca-cert); if it asks for client certificates, give --client-cert and \
                 --client-key"
            }
        }
    } else {
        return None;
    };
    Some(sentence.to_string())
}

const NO_CLIENT_CERTIFICATE: &str = "the server requires a client certificate: give \
    --client-cert and --client-key (DROVER_CLIENT_CERT, DROVER_CLIENT_KEY)";

/// [`explain_connect_error`]'s sentence, else the first line of the innermost cause in
/// `error`'s chain ("Connection refused (os error 111)"), which says more than the
/// generic "transport error" on top.
pub fn describe_connect_error(error: &(dyn std::error::Error + 'static)) -> String {
    explain(error, None).unwrap_or_else(|| innermost(error))
}

/// [`describe_connect_error`] for a client that was given `tls`
/// (see [`explain_connect_error_given`]).
pub fn describe_connect_error_given(
    error: &(dyn std::error::Error + 'static),
    tls: &TlsFiles,
) -> String {
    explain(error, Some(tls)).unwrap_or_else(|| innermost(error))
}

/// The first line of the innermost cause in `error`'s chain.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Every error in the chain as it prints and as it debugs, with what an I/O error wraps:
/// an I/O error's `source` skips the error it carries (rustls's), so it is read here.
fn chain_texts(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut texts = Vec::new();
    let mut cause = Some(error);
    while let Some(e) = cause {
        texts.push(e.to_string());
        texts.push(format!("{e:?}"));
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            texts.push(inner.to_string());
            texts.push(format!("{inner:?}"));
        }
        cause = e.source();
    }
    texts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error carrying `inner` the way tonic and hyper carry a connection's failure: an
    /// I/O error holding it, under a transport error.
    #[derive(Debug)]
    struct Transport(std::io::Error);

    impl std::fmt::Display for Transport {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("transport error")
        }
    }

    impl std::error::Error for Transport {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// How rustls and h2 word each failure (as observed against a real TLS server, see
    /// `cli/tests/cli_tls_errors.rs`), and the sentence each becomes.
    #[test]
    fn connection_failures_are_worded_for_the_operator() {
        let io = |kind, text: &str| Transport(std::io::Error::new(kind, text.to_string()));
        use std::io::ErrorKind::{BrokenPipe, ConnectionRefused, InvalidData, Other};
        let cases = [
            (
                io(InvalidData, "received fatal alert: CertificateRequired"),
                "the server requires a client certificate",
            ),
            (
                io(InvalidData, "invalid peer certificate: BadSignature"),
                "the server's certificate is not trusted",
            ),
            (
                io(InvalidData, "invalid peer certificate: UnknownIssuer"),
                "the server's certificate is not trusted",
            ),
            (
                io(
                    InvalidData,
                    "invalid peer certificate: certificate not valid for name \"x\"",
                ),
                "the server's certificate is not a drover server's: it does not name",
            ),
            (
                io(
                    InvalidData,
                    "invalid peer certificate: certificate does not allow extended key usage \
                     for server authentication, allows client authentication",
                ),
                "the server's certificate is not a drover server's: it is not for server use",
            ),
            (
                io(
                    InvalidData,
                    "received corrupt message of type InvalidContentType",
                ),
                "the server does not speak TLS",
            ),
            (
                io(
                    InvalidData,
                    "connection error detected: frame with invalid size",
                ),
                "the server speaks TLS and no CA certificate was given",
            ),
            (
                io(InvalidData, "received fatal alert: BadCertificate"),
                "the server refused the client certificate",
            ),
        ];
        for (error, want) in cases {
            let said = describe_connect_error(&error);
            assert!(said.starts_with(want), "{error:?}: {said}");
        }
        // A server that hangs up is read by what the client lacks.
        let hung_up = io(BrokenPipe, "stream closed because of a broken pipe");
        let with_ca = TlsFiles {
            ca_file: Some("ca.pem".into()),
            ..TlsFiles::default()
        };
        let with_certificate = TlsFiles {
            cert_file: Some("cli.pem".into()),
            key_file: Some("cli-key.pem".into()),
            ..with_ca.clone()
        };
        let plain = TlsFiles::default();
        let given = [
            (
                None,
                Some("--ca-cert); if it asks for client certificates, give"),
            ),
            (
                Some(&plain),
                Some("if it serves TLS, give its CA certificate"),
            ),
            (Some(&with_ca), Some("if it asks for client certificates")),
            (Some(&with_certificate), None),
        ];
        for (tls, want) in given {
            let said = match tls {
                Some(tls) => explain_connect_error_given(&hung_up, tls),
                None => explain_connect_error(&hung_up),
            };
            match (said, want) {
                (Some(said), Some(want)) => assert!(said.contains(want), "{said}"),
                (said, want) => assert_eq!(said.as_deref(), want),
            }
        }
        // The same hang-up when the connection dropped before the request was sent.
        let not_ready = io(Other, "connection was not ready");
        let said = explain_connect_error_given(&not_ready, &plain).unwrap_or_default();
        assert!(
            said.contains("if it serves TLS, give its CA certificate"),
            "{said}"
        );
        let refused = io(ConnectionRefused, "Connection refused (os error 111)");
        assert_eq!(explain_connect_error(&refused), None);
        assert_eq!(
            describe_connect_error(&refused),
            "Connection refused (os error 111)"
        );
    }

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
