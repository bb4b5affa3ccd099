//! A request body that is not a valid message is the caller's mistake: INVALID_ARGUMENT.
//! tonic's protobuf codec answers such a request with INTERNAL (as gRPC's guide suggests
//! for a server's own encoding faults); this layer rewrites exactly those answers, which
//! tonic sends trailers-only, status in the headers, before any handler runs.

use tonic::codegen::http::{HeaderValue, Response};

/// What tonic's codec says of a body it cannot decode, percent-encoded as on the wire.
const DECODE_FAILURE: &str = "failed%20to%20decode%20Protobuf%20message";

/// The response `res`, with a decode failure's INTERNAL turned into INVALID_ARGUMENT.
pub(crate) fn invalid_argument_for_decode_failures<B>(mut res: Response<B>) -> Response<B> {
    let headers = res.headers_mut();
    let is_decode_failure = headers.get("grpc-status").is_some_and(|s| s == "13")
        && headers
            .get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .is_some_and(|m| m.starts_with(DECODE_FAILURE));
    if is_decode_failure {
        headers.insert("grpc-status", HeaderValue::from_static("3"));
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_of(status: &str, message: &str) -> String {
        let res = Response::builder()
            .header("grpc-status", status)
            .header("grpc-message", message)
            .body(())
            .unwrap();
        invalid_argument_for_decode_failures(res).headers()["grpc-status"]
            .to_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn only_decode_failures_change() {
        let decode = "failed%20to%20decode%20Protobuf%20message%3A%20invalid%20wire%20type";
        assert_eq!(status_of("13", decode), "3");
        assert_eq!(status_of("13", "the%20disk%20is%20full"), "13");
        assert_eq!(status_of("5", decode), "5");
    }
}
