//! The tower layer that resolves every API call's credentials before its service runs.

use super::{Authenticator, NODE_ID_HEADER};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::body::Body;
use tonic::codegen::http;

/// Wraps services in [`Authenticate`].
#[derive(Clone, Debug)]
pub struct AuthLayer(pub Arc<Authenticator>);

impl<S> tower::Layer<S> for AuthLayer {
    type Service = Authenticate<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Authenticate {
            inner,
            auth: self.0.clone(),
        }
    }
}

/// Puts a [`super::Caller`] in each request's extensions, or answers UNAUTHENTICATED
/// without calling the service (so before the body is read or decoded) for an unknown or
/// expired credential, and, with ACLs on, for a call with no credential to any RPC but
/// the few that take none ([`takes_no_token`]).
#[derive(Clone, Debug)]
pub struct Authenticate<S> {
    inner: S,
    auth: Arc<Authenticator>,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for Authenticate<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let headers = req.headers();
        let bearer = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim);
        let node_id = headers.get(NODE_ID_HEADER).and_then(|v| v.to_str().ok());
        let resolved = match self.auth.resolve(bearer, node_id, crate::clock::now()) {
            Ok(super::Caller::Anonymous) if !takes_no_token(&req) => Err(super::missing_token()),
            other => other,
        };
        match resolved {
            Ok(caller) => {
                req.extensions_mut().insert(caller);
                let mut inner = crate::layers::take_ready(&mut self.inner);
                Box::pin(inner.call(req))
            }
            Err(status) => {
                tracing::debug!(
                    path = req.uri().path(),
                    reason = status.message(),
                    "call refused: bad credential"
                );
                Box::pin(std::future::ready(Ok(status.into_http())))
            }
        }
    }
}

/// The RPCs a caller may reach with no ACL token while ACLs are on: node calls whose
/// credential (the node's id and secret) travels in the message, the leader and peer
/// lookups agents use to find servers, the bootstrap that makes the first token, health
/// and reflection, and a node registration over a connection that presented a client
/// certificate (the certificate is the join credential). Everything else is refused before
/// its body is decoded, so an unauthenticated caller costs the server no more than it sent.
fn takes_no_token<B>(req: &http::Request<B>) -> bool {
    const ANY: &[&str] = &[
        "/drover.v1.NodeService/UpdateStatus",
        "/drover.v1.NodeService/Heartbeats",
        "/drover.v1.NodeService/WatchAllocations",
        "/drover.v1.NodeService/UpdateAllocations",
        "/drover.v1.StatusService/Leader",
        "/drover.v1.StatusService/Peers",
        "/drover.v1.AclService/Bootstrap",
    ];
    let path = req.uri().path();
    if ANY.contains(&path)
        || path.starts_with("/grpc.health.v1.")
        || path.starts_with("/grpc.reflection.")
    {
        return true;
    }
    path == "/drover.v1.NodeService/Register" && presented_certificate(req)
}

fn presented_certificate<B>(req: &http::Request<B>) -> bool {
    use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
    req.extensions()
        .get::<TlsConnectInfo<TcpConnectInfo>>()
        .and_then(TlsConnectInfo::peer_certs)
        .is_some_and(|chain| !chain.is_empty())
}
