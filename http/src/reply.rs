//! Answers: JSON bodies with Nomad's query headers, and errors with Nomad's status codes.
//!
//! Errors are plain text as Nomad writes them (its clients show the body as the message),
//! except 501, which is a JSON object naming the endpoint drover does not serve.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tonic::Code;

/// Nomad's text for a refused call, with or without a token (Nomad answers 403 for both).
pub const PERMISSION_DENIED: &str = "Permission denied";

/// Why an HTTP request failed, as an HTTP status and a message.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request itself is wrong: the message names the field or parameter.
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    /// An endpoint Nomad serves that drover does not (yet).
    #[error("{endpoint} is not served by drover: {reason}")]
    NotImplemented {
        endpoint: String,
        reason: &'static str,
    },
    /// What the gRPC API answered.
    #[error("{}", .0.message())]
    Grpc(tonic::Status),
}

impl From<tonic::Status> for ApiError {
    fn from(s: tonic::Status) -> Self {
        ApiError::Grpc(s)
    }
}

impl From<drover_proto::ConvertError> for ApiError {
    fn from(e: drover_proto::ConvertError) -> Self {
        ApiError::Grpc(tonic::Status::internal(format!(
            "the server sent an answer drover-http cannot read: {e}"
        )))
    }
}

/// The HTTP status Nomad answers for what a gRPC call answered.
pub fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::InvalidArgument | Code::OutOfRange | Code::FailedPrecondition => {
            StatusCode::BAD_REQUEST
        }
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::Unauthenticated | Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::BadRequest(m) => (StatusCode::BAD_REQUEST, m).into_response(),
            ApiError::NotFound(m) => (StatusCode::NOT_FOUND, m).into_response(),
            ApiError::NotImplemented { endpoint, reason } => {
                let body = serde_json::json!({
                    "Error": format!("{endpoint} is not served by drover: {reason}"),
                    "Endpoint": endpoint,
                });
                (StatusCode::NOT_IMPLEMENTED, axum::Json(body)).into_response()
            }
            ApiError::Grpc(s) => {
                let status = http_status(s.code());
                let text = if status == StatusCode::FORBIDDEN {
                    let why = s.message();
                    let why = why.strip_prefix("permission denied: ").unwrap_or(why);
                    format!("{PERMISSION_DENIED}: {why}")
                } else {
                    s.message().to_string()
                };
                (status, text).into_response()
            }
        }
    }
}

/// What a read's headers say: the state index it reflects and the leader's standing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Meta {
    pub index: u64,
    pub known_leader: bool,
    pub last_contact_ms: u64,
}

impl Meta {
    fn headers(&self, headers: &mut HeaderMap) {
        headers.insert("X-Nomad-Index", HeaderValue::from(self.index.max(1)));
        headers.insert(
            "X-Nomad-KnownLeader",
            HeaderValue::from_static(if self.known_leader { "true" } else { "false" }),
        );
        headers.insert(
            "X-Nomad-LastContact",
            HeaderValue::from(self.last_contact_ms),
        );
    }
}

/// A JSON answer with Nomad's query headers, and the next page's token when there is one.
pub fn json<T: Serialize>(meta: Meta, next_token: &str, body: &T) -> Response {
    json_sized(meta, next_token, body, 1024)
}

/// [`json`] written into a buffer of `capacity` bytes to start with: a long list's
/// answer is written without growing its buffer again and again.
pub fn json_sized<T: Serialize>(
    meta: Meta,
    next_token: &str,
    body: &T,
    capacity: usize,
) -> Response {
    let mut buf = Vec::with_capacity(capacity);
    let mut res = match serde_json::to_writer(&mut buf, body) {
        Ok(()) => (
            [(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            buf,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    };
    meta.headers(res.headers_mut());
    if !next_token.is_empty()
        && let Ok(v) = HeaderValue::from_str(next_token)
    {
        res.headers_mut().insert("X-Nomad-NextToken", v);
    }
    res
}

/// A write's JSON answer: Nomad sets the index header to the write's index.
pub fn written<T: Serialize>(meta: Meta, body: &T) -> Response {
    json(meta, "", body)
}
