//! The outermost API layer: how long each call takes, per gRPC method, into
//! `drover_rpc_seconds`. It measures until the answer's headers: a unary call's whole
//! work, a streaming call's start.
//!
//! The method label is the call's path only when the API serves that path (from the
//! descriptor sets it registers for reflection); anything else is `other`, so a client
//! sending made-up paths cannot grow the metric without bound.

use crate::metrics::Metrics;
use prost::Message;
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::Instant;
use tonic::codegen::http;

/// The label of every path the API does not serve.
pub const OTHER: &str = "other";

/// Every `/package.Service/Method` path the API serves.
static METHODS: LazyLock<HashSet<String>> = LazyLock::new(|| {
    let mut methods = HashSet::new();
    for set in [
        drover_proto::FILE_DESCRIPTOR_SET,
        tonic_health::pb::FILE_DESCRIPTOR_SET,
    ] {
        let Ok(set) = prost_types::FileDescriptorSet::decode(set) else {
            continue;
        };
        for file in set.file {
            for service in &file.service {
                for method in &service.method {
                    methods.insert(format!(
                        "/{}.{}/{}",
                        file.package(),
                        service.name(),
                        method.name()
                    ));
                }
            }
        }
    }
    methods
});

/// The method label of a call to `path`: the path when served, else [`OTHER`].
pub fn method_label(path: &str) -> &'static str {
    METHODS.get(path).map_or(OTHER, String::as_str)
}

/// Wraps services in [`Timed`].
#[derive(Clone, Debug)]
pub struct TimingLayer(pub Arc<Metrics>);

impl<S> tower::Layer<S> for TimingLayer {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Timed {
            inner,
            metrics: self.0.clone(),
        }
    }
}

/// Records each call's latency under its method.
#[derive(Clone, Debug)]
pub struct Timed<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B, R> tower::Service<http::Request<B>> for Timed<S>
where
    S: tower::Service<http::Request<B>, Response = R> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
    R: Send + 'static,
{
    type Response = R;
    type Error = S::Error;
    type Future = BoxFuture<R, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = method_label(req.uri().path());
        let metrics = self.metrics.clone();
        let mut inner = crate::layers::take_ready(&mut self.inner);
        let started = Instant::now();
        Box::pin(async move {
            let answer = inner.call(req).await;
            metrics.rpc(method, started.elapsed());
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_served_paths_are_labels() {
        let cases = [
            (
                "/drover.v1.JobService/Register",
                "/drover.v1.JobService/Register",
            ),
            (
                "/drover.v1.NodeService/UpdateStatus",
                "/drover.v1.NodeService/UpdateStatus",
            ),
            (
                "/grpc.health.v1.Health/Check",
                "/grpc.health.v1.Health/Check",
            ),
            ("/drover.v1.JobService/NoSuchMethod", OTHER),
            ("/made.up/Path", OTHER),
            ("", OTHER),
        ];
        for (path, want) in cases {
            assert_eq!(method_label(path), want, "{path}");
        }
    }
}
