//! A channel that presents a credential on every call: an ACL token as
//! `authorization: Bearer <secret>`, or a node's secret with the `drover-node-id` header
//! (what an agent reads its jobs with). Clients wrap their [`Channel`] in it once and
//! every typed client built on it carries the credential.

use std::task::{Context, Poll};
use tonic::body::Body;
use tonic::codegen::http::{self, HeaderValue};
use tonic::transport::Channel;

/// The metadata header naming the node whose secret a call carries as its bearer.
pub const NODE_ID_HEADER: &str = "drover-node-id";

/// A [`Channel`] that adds the credential headers to each request.
#[derive(Clone, Debug)]
pub struct BearerChannel {
    inner: Channel,
    authorization: Option<HeaderValue>,
    node_id: Option<HeaderValue>,
}

/// Why a credential cannot travel as a header.
#[derive(Debug, thiserror::Error)]
#[error("{what} holds characters that cannot be sent in a header")]
pub struct BadCredential {
    what: &'static str,
}

fn bearer(secret: &str, what: &'static str) -> Result<HeaderValue, BadCredential> {
    let mut v = HeaderValue::from_str(&format!("Bearer {}", secret.trim()))
        .map_err(|_| BadCredential { what })?;
    v.set_sensitive(true);
    Ok(v)
}

impl BearerChannel {
    /// `channel` presenting the ACL token `token` (none: calls go without a token).
    pub fn new(channel: Channel, token: Option<&str>) -> Result<Self, BadCredential> {
        let authorization = token
            .filter(|t| !t.trim().is_empty())
            .map(|t| bearer(t, "the acl token"))
            .transpose()?;
        Ok(Self {
            inner: channel,
            authorization,
            node_id: None,
        })
    }

    /// `channel` presenting a node's identity.
    pub fn for_node(channel: Channel, node_id: &str, secret: &str) -> Result<Self, BadCredential> {
        Ok(Self {
            inner: channel,
            authorization: Some(bearer(secret, "the node secret")?),
            node_id: Some(HeaderValue::from_str(node_id).map_err(|_| BadCredential {
                what: "the node id",
            })?),
        })
    }

    /// Without any credential.
    pub fn plain(channel: Channel) -> Self {
        Self {
            inner: channel,
            authorization: None,
            node_id: None,
        }
    }
}

impl tonic::codegen::Service<http::Request<Body>> for BearerChannel {
    type Response = http::Response<Body>;
    type Error = tonic::transport::Error;
    type Future = <Channel as tonic::codegen::Service<http::Request<Body>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tonic::codegen::Service::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, mut req: http::Request<Body>) -> Self::Future {
        let headers = req.headers_mut();
        if let Some(v) = &self.authorization {
            headers.insert(http::header::AUTHORIZATION, v.clone());
        }
        if let Some(v) = &self.node_id {
            headers.insert(NODE_ID_HEADER, v.clone());
        }
        tonic::codegen::Service::call(&mut self.inner, req)
    }
}
