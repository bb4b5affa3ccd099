//! Which role a caller's certificate gives it. The TLS handshake has already checked that
//! the certificate chains to the cluster CA; the role is the name the certificate is
//! valid for (`server.global.drover`, `client.global.drover`), as Nomad's
//! `server.<region>.nomad` convention.

pub use drover_proto::tls::leaf_names;

/// Whether the caller of `req` presented a verified certificate naming `role`.
pub fn peer_has_role<T>(req: &tonic::Request<T>, role: &str) -> bool {
    drover_proto::tls::peer_has_name(req, role)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::dev_certs::{Role, create_ca, create_cert};
    use drover_proto::tls::{CLIENT_NAME, SERVER_NAME};
    use rustls_pki_types::CertificateDer;

    fn der(pem: &str) -> CertificateDer<'static> {
        use rustls_pki_types::pem::PemObject;
        CertificateDer::from_pem_slice(pem.as_bytes()).expect("a pem certificate")
    }

    #[test]
    fn certificates_name_their_role_only() {
        let ca = create_ca(30).expect("ca");
        let rows = [
            (Role::Server, SERVER_NAME, true),
            (Role::Server, CLIENT_NAME, false),
            (Role::Client, CLIENT_NAME, true),
            (Role::Client, SERVER_NAME, false),
            (Role::Cli, SERVER_NAME, false),
            (Role::Cli, CLIENT_NAME, false),
        ];
        for (role, name, want) in rows {
            let cert = create_cert(&ca, role, &[], 30).expect("cert");
            assert_eq!(
                leaf_names(&[der(&cert.cert)], name),
                want,
                "{role:?} as {name}"
            );
        }
        assert!(!leaf_names(&[], SERVER_NAME), "no certificate, no role");
    }
}
