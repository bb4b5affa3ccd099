//! Counts each connection's requests for [`super::connections`]: a request is in flight
//! from the moment the service is called until its response body ends (a stream counts
//! for its whole life) or is dropped, so a connection holding a node's watch is never
//! taken for idle.

use super::connections::Connections;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::body::Body;
use tonic::codegen::http;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

/// Wraps services in [`Activity`].
#[derive(Clone, Debug)]
pub struct ActivityLayer(pub Arc<Connections>);

impl<S> tower::Layer<S> for ActivityLayer {
    type Service = Activity<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Activity {
            inner,
            conns: self.0.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Activity<S> {
    inner: S,
    conns: Arc<Connections>,
}

/// Ends the request's count when dropped, whichever way the request ends.
#[derive(Debug)]
struct InFlight {
    conns: Arc<Connections>,
    peer: SocketAddr,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.conns.request_ended(self.peer);
    }
}

/// The peer a request came from, as tonic recorded it for its connection.
fn peer_of<B>(req: &http::Request<B>) -> Option<SocketAddr> {
    let ext = req.extensions();
    ext.get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .or_else(|| {
            ext.get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|t| t.get_ref().remote_addr())
        })
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for Activity<S>
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

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let guard = peer_of(&req).map(|peer| {
            self.conns.request_started(peer);
            InFlight {
                conns: self.conns.clone(),
                peer,
            }
        });
        let mut inner = crate::layers::take_ready(&mut self.inner);
        Box::pin(async move {
            let response = inner.call(req).await?;
            Ok(match guard {
                Some(guard) => response.map(|body| {
                    Body::new(Counted {
                        inner: body,
                        _guard: guard,
                    })
                }),
                None => response,
            })
        })
    }
}

/// A response body that holds its request's count until it ends.
struct Counted {
    inner: Body,
    _guard: InFlight,
}

impl HttpBody for Counted {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
