//! A cluster CA and role certificates for `drover tls`, as `nomad tls` makes them: a CA,
//! then server certificates naming [`SERVER_NAME`] (plus `localhost` and loopback, so a
//! local cluster works out of the box), client certificates for agents and CLI ones for
//! operators. Meant for development and small clusters; a real PKI can issue the same
//! names.

use drover_proto::tls::{CLI_NAME, CLIENT_NAME, SERVER_NAME};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use time::{Duration, OffsetDateTime};

/// Which role a certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Server,
    Client,
    Cli,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Server => SERVER_NAME,
            Role::Client => CLIENT_NAME,
            Role::Cli => CLI_NAME,
        }
    }
}

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct Pem {
    pub cert: String,
    pub key: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot make the certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// A new CA, valid for `days`.
pub fn create_ca(days: i64) -> Result<Pem, CertError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "drover cluster CA");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut params, days);
    let cert = params.self_signed(&key)?;
    Ok(Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A certificate for `role`, signed by `ca`, valid for `days`, naming the role and any
/// `extra_names` (hosts or IP addresses). An agent's certificate also names its node with
/// `drover_proto::tls::agent_name` (pass it in `extra_names`; `drover tls cert create
/// -client -node NAME` does), which servers require before they call its endpoint.
pub fn create_cert(
    ca: &Pem,
    role: Role,
    extra_names: &[String],
    days: i64,
) -> Result<Pem, CertError> {
    let ca_key = KeyPair::from_pem(&ca.key)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert, ca_key)?;
    let key = KeyPair::generate()?;
    let mut names = vec![role.name().to_string()];
    if role == Role::Server {
        names.push("localhost".into());
    }
    names.extend(
        extra_names
            .iter()
            .filter(|n| n.parse::<IpAddr>().is_err())
            .cloned(),
    );
    let mut params = CertificateParams::new(names)?;
    params
        .distinguished_name
        .push(DnType::CommonName, role.name());
    if role == Role::Server {
        for ip in [
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ] {
            params.subject_alt_names.push(SanType::IpAddress(ip));
        }
    }
    for ip in extra_names.iter().filter_map(|n| n.parse::<IpAddr>().ok()) {
        params.subject_alt_names.push(SanType::IpAddress(ip));
    }
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    // Servers also call each other, and agents both call servers and serve their own
    // endpoint (task logs, restarts) to them, so both certificates serve either way.
    params.extended_key_usages = match role {
        Role::Server | Role::Client => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        Role::Cli => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    validity(&mut params, days);
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

fn validity(params: &mut CertificateParams, days: i64) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::hours(1);
    params.not_after = now + Duration::days(days.max(1));
}
