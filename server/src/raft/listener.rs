//! The server-to-server listener: Raft's RPCs on their own port (`raft_addr`), accepted
//! only from servers that present the cluster secret.
//!
//! The Raft transport is not a public API: a forged `AppendEntries` carrying a membership
//! entry can demote a healthy server for good. So it is served apart from the client API
//! (firewalls can split the two), and every call must carry the cluster's shared secret
//! in the [`CLUSTER_SECRET_HEADER`] metadata, compared in constant time; anything else is
//! refused with UNAUTHENTICATED before the request is decoded. A single server with no
//! secret configured gets a random one, so nobody can call its Raft service at all.

use super::grpc::RaftGrpcService;
use crate::log_limit::LogLimit;
use crate::serving::Serving;
use crate::serving::activity::ActivityLayer;
use crate::serving::connections::{ConnectionLimits, Connections};
use rand::RngCore;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Status};

/// The metadata key server-to-server calls carry the cluster secret in.
pub const CLUSTER_SECRET_HEADER: &str = "x-drover-cluster-secret";

/// The shortest secret a server accepts: guessing it must be out of reach.
pub const MIN_SECRET_LEN: usize = 16;

/// The key every server of one cluster shares. Never logged (its `Debug` hides it).
#[derive(Clone)]
pub struct ClusterSecret(Arc<str>, Arc<LogLimit>);

impl PartialEq for ClusterSecret {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for ClusterSecret {}

/// Refused calls are logged at most this often (each line counts the ones left out): an
/// outsider calling in a loop must not fill the disk through the log.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(1);

fn refusal_log() -> Arc<LogLimit> {
    Arc::new(LogLimit::new(REFUSAL_LOG_EVERY))
}

impl fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

/// Why a configured secret is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("cluster_secret is {len} characters: at least {MIN_SECRET_LEN} are required")]
    TooShort { len: usize },
    #[error("cluster_secret must be printable ASCII (it travels as gRPC metadata)")]
    NotAscii,
}

impl ClusterSecret {
    pub fn new(secret: &str) -> Result<Self, SecretError> {
        if secret.len() < MIN_SECRET_LEN {
            return Err(SecretError::TooShort { len: secret.len() });
        }
        if !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(SecretError::NotAscii);
        }
        Ok(Self(secret.into(), refusal_log()))
    }

    /// A secret nobody else knows: for a server without peers.
    pub fn random() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self(
            bytes
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
                .into(),
            refusal_log(),
        )
    }

    /// Puts the secret on an outgoing call.
    pub fn attach<T>(&self, req: &mut Request<T>) {
        if let Ok(v) = MetadataValue::try_from(&*self.0) {
            req.metadata_mut().insert(CLUSTER_SECRET_HEADER, v);
        }
    }

    /// Lets a call through only if it carries this secret.
    pub fn check(&self, req: Request<()>) -> Result<Request<()>, Status> {
        let given = req
            .metadata()
            .get(CLUSTER_SECRET_HEADER)
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        if crate::secrets::constant_time_eq(given, self.0.as_bytes()) {
            Ok(req)
        } else {
            if let Some(not_logged) = self.1.allow() {
                tracing::warn!(
                    remote = ?req.remote_addr(),
                    refused_since_last_line = not_logged,
                    "refused a Raft call without the cluster secret"
                );
            }
            Err(Status::unauthenticated(
                "server-to-server calls need the cluster secret",
            ))
        }
    }
}

/// The running server-to-server listener; stopped by [`RaftListener::shutdown`] or on drop.
#[derive(Debug)]
pub struct RaftListener(Serving<Result<(), tonic::transport::Error>>);

impl RaftListener {
    /// Serves `service` on `listener`, refusing calls without `secret` (and, with `tls`,
    /// connections without a certificate the cluster CA signed).
    pub fn serve(
        listener: TcpListener,
        service: RaftGrpcService,
        secret: ClusterSecret,
        max_message_bytes: usize,
        tls: Option<tonic::transport::ServerTlsConfig>,
        limits: ConnectionLimits,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let no_certificate_log = refusal_log();
        // With TLS, the handshake proves the caller holds a certificate of the cluster CA;
        // only one made for the server role may speak Raft (a client's or the CLI's may not).
        let require_server_cert = tls.is_some();
        let svc = InterceptedService::new(service.into_server(max_message_bytes), move |req| {
            if require_server_cert
                && !crate::tls::roles::peer_has_role(&req, drover_proto::tls::SERVER_NAME)
            {
                if let Some(not_logged) = no_certificate_log.allow() {
                    tracing::warn!(
                        remote = ?req.remote_addr(),
                        refused_since_last_line = not_logged,
                        "refused a Raft call without a server certificate"
                    );
                }
                return Err(Status::unauthenticated(format!(
                    "server-to-server calls need a certificate for {}",
                    drover_proto::tls::SERVER_NAME
                )));
            }
            secret.check(req)
        });
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            builder = builder
                .tls_config(tls)
                .map_err(|e| std::io::Error::other(format!("tls: {e}")))?;
        }
        let conns = Connections::new("raft", limits);
        let incoming = conns.clone().accept(listener);
        let router = builder.layer(ActivityLayer(conns)).add_service(svc);
        let serving = Serving::spawn(addr, |stopped| {
            router.serve_with_incoming_shutdown(incoming, stopped)
        });
        tracing::info!(%addr, "Raft listening (server-to-server)");
        Ok(Self(serving))
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.0.local_addr()
    }

    pub async fn shutdown(self) {
        self.0.shutdown(Duration::from_secs(2)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_checked_whole() {
        let s = ClusterSecret::new("0123456789abcdef").unwrap();
        let call = |v: Option<&str>| {
            let mut req = Request::new(());
            if let Some(v) = v {
                req.metadata_mut()
                    .insert(CLUSTER_SECRET_HEADER, v.parse().unwrap());
            }
            s.check(req).map(|_| ()).map_err(|e| e.code())
        };
        assert_eq!(call(Some("0123456789abcdef")), Ok(()));
        for bad in [
            None,
            Some(""),
            Some("0123456789abcdeF"),
            Some("0123456789abcdef0"),
        ] {
            assert_eq!(call(bad), Err(tonic::Code::Unauthenticated), "{bad:?}");
        }
        assert_eq!(
            ClusterSecret::new("short"),
            Err(SecretError::TooShort { len: 5 })
        );
        assert_ne!(ClusterSecret::random(), ClusterSecret::random());
        assert_eq!(format!("{s:?}"), "ClusterSecret(..)");
    }
}
