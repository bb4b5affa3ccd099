//! The gRPC API, called in process. The server hands the adapter its API router as one
//! tower service ([`GrpcService`]): the same services behind the same layers as the gRPC
//! listener (timing, auth, request limits, forwarding to the leader). Every HTTP route is
//! a tonic client call on it, so every ACL check, forwarding rule and validation the gRPC
//! API runs, an HTTP request meets too, without a socket between them.

use drover_proto::v1 as pb;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::metadata::MetadataValue;

/// What a layer of the in-process stack may fail with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why an in-process call failed below gRPC (a layer's error; the API's own services
/// answer every failure as a gRPC status). A named type rather than a boxed error, which
/// keeps the handlers' futures `Send` for the compiler.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InProcessError(BoxError);

type Boxed = tower::util::BoxCloneSyncService<http::Request<Body>, http::Response<Body>, BoxError>;

/// The gRPC API as one cloneable service: a request in, the gRPC response out.
#[derive(Clone)]
pub struct GrpcService(Boxed);

impl std::fmt::Debug for GrpcService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GrpcService")
    }
}

impl tower::Service<http::Request<Body>> for GrpcService {
    type Response = http::Response<Body>;
    type Error = InProcessError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, InProcessError>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), InProcessError>> {
        self.0.poll_ready(cx).map_err(InProcessError)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let fut = self.0.call(req);
        Box::pin(async move { fut.await.map_err(InProcessError) })
    }
}

/// Builds a [`GrpcService`] from any service of the API's shape.
pub fn from_service<S>(service: S) -> GrpcService
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    use tower::ServiceExt;
    GrpcService(tower::util::BoxCloneSyncService::new(
        service.map_err(Into::into),
    ))
}

/// The answers in-process calls may decode: above the server's own message limit, which
/// bounds what it encodes.
const MAX_DECODED: usize = 256 << 20;

/// One HTTP request's credentials and read mode, carried onto each gRPC call it makes.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    /// The ACL secret from `X-Nomad-Token` or `Authorization: Bearer`.
    pub token: Option<String>,
    /// Nomad's `?consistent`: the read is answered by the leader.
    pub consistent: bool,
}

impl Credentials {
    /// `message` as a gRPC request carrying these credentials.
    pub fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(message);
        if let Some(token) = &self.token
            && let Ok(mut v) = MetadataValue::try_from(format!("Bearer {token}"))
        {
            v.set_sensitive(true);
            req.metadata_mut().insert("authorization", v);
        }
        if self.consistent {
            req.metadata_mut().insert(
                "drover-consistency",
                MetadataValue::from_static("consistent"),
            );
        }
        req
    }
}

macro_rules! clients {
    ($($name:ident => $client:ty),* $(,)?) => {
        /// Typed clients over the in-process service.
        #[derive(Clone, Debug)]
        pub struct Grpc(GrpcService);

        impl Grpc {
            pub fn new(service: GrpcService) -> Self {
                Self(service)
            }
            $(
                pub fn $name(&self) -> $client {
                    <$client>::new(self.0.clone())
                        .max_decoding_message_size(MAX_DECODED)
                        .max_encoding_message_size(MAX_DECODED)
                }
            )*
        }
    };
}

clients! {
    jobs => pb::job_service_client::JobServiceClient<GrpcService>,
    evals => pb::eval_service_client::EvalServiceClient<GrpcService>,
    operator => pb::operator_service_client::OperatorServiceClient<GrpcService>,
    events => pb::event_service_client::EventServiceClient<GrpcService>,
    status => pb::status_service_client::StatusServiceClient<GrpcService>,
    search => pb::search_service_client::SearchServiceClient<GrpcService>,
    acl => pb::acl_service_client::AclServiceClient<GrpcService>,
    allocs => pb::alloc_service_client::AllocServiceClient<GrpcService>,
    services => pb::service_service_client::ServiceServiceClient<GrpcService>,
    deployments => pb::deployment_service_client::DeploymentServiceClient<GrpcService>,
    cluster => pb::cluster_service_client::ClusterServiceClient<GrpcService>,
}
