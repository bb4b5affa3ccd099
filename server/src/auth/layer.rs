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
/// for an unknown or expired credential without calling the service.
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
        match self.auth.resolve(bearer, node_id, crate::clock::now()) {
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
