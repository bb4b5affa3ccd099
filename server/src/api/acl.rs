//! `drover.v1.AclService`: bootstrap, tokens and policies.

use super::Api;
use crate::auth::{authorize, caller, namespace_or_default};
use crate::handle::{CreatedToken, TokenRequest};
use drover_core::acl::{Acl, Area, Level, Need};
use drover_core::types::AccessorId;
use drover_proto::convert::parse_id;
use drover_proto::v1 as pb;
use drover_proto::v1::acl_service_server::AclService;
use std::time::Duration;
use tonic::{Request, Response, Status};

/// The AclService implementation.
#[derive(Clone, Debug)]
pub struct AclApi(pub(crate) Api);

fn with_secret(c: &CreatedToken) -> pb::AclToken {
    let mut t = pb::AclToken::from(&c.token);
    t.secret_id = c.secret.clone();
    t
}

fn level_text(l: Option<Level>) -> String {
    l.map(|l| l.as_str().to_string()).unwrap_or_default()
}

#[tonic::async_trait]
impl AclService for AclApi {
    async fn bootstrap(
        &self,
        _req: Request<pb::AclBootstrapRequest>,
    ) -> Result<Response<pb::AclBootstrapResponse>, Status> {
        // No token: there is none yet. The FSM lets exactly one bootstrap through.
        let c = self.0.handle.acl_bootstrap().await?;
        Ok(Response::new(pb::AclBootstrapResponse {
            token: Some(with_secret(&c)),
            index: c.index,
        }))
    }

    async fn token_self(
        &self,
        req: Request<pb::AclTokenSelfRequest>,
    ) -> Result<Response<pb::AclTokenSelfResponse>, Status> {
        let acl = caller(&req)?;
        let secret = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .unwrap_or_default()
            .to_string();
        let ns = namespace_or_default(&req.get_ref().namespace).to_string();
        let snap = self.0.handle.snapshot();
        let token = (!matches!(*acl, Acl::Disabled))
            .then(|| snap.acl_token_by_digest(&crate::secrets::digest(&secret)))
            .flatten()
            .map(|t| pb::AclToken::from(t.as_ref()));
        Ok(Response::new(pb::AclTokenSelfResponse {
            token,
            acl_enabled: !matches!(*acl, Acl::Disabled),
            management: acl.is_management(),
            namespace_capabilities: acl
                .namespace_capabilities(&ns)
                .into_iter()
                .map(|c| c.as_str().to_string())
                .collect(),
            node: level_text(acl.area_level(Area::Node)),
            operator: level_text(acl.area_level(Area::Operator)),
            agent: level_text(acl.area_level(Area::Agent)),
        }))
    }

    async fn token_create(
        &self,
        req: Request<pb::AclTokenCreateRequest>,
    ) -> Result<Response<pb::AclTokenCreateResponse>, Status> {
        authorize(&req, Need::Management)?;
        let r = req.into_inner();
        let c = self
            .0
            .handle
            .acl_token_create(TokenRequest {
                name: r.name,
                kind: r.r#type,
                policies: r.policies,
                ttl: (r.ttl_ms > 0).then(|| Duration::from_millis(r.ttl_ms)),
            })
            .await?;
        Ok(Response::new(pb::AclTokenCreateResponse {
            token: Some(with_secret(&c)),
            index: c.index,
        }))
    }

    async fn token_list(
        &self,
        req: Request<pb::AclTokenListRequest>,
    ) -> Result<Response<pb::AclTokenListResponse>, Status> {
        authorize(&req, Need::Management)?;
        let snap = self.0.read(req.get_ref().query.as_ref()).await?;
        Ok(Response::new(pb::AclTokenListResponse {
            tokens: snap.acl_tokens().map(|t| t.as_ref().into()).collect(),
            index: snap.latest_index(),
        }))
    }

    async fn token_get(
        &self,
        req: Request<pb::AclTokenGetRequest>,
    ) -> Result<Response<pb::AclTokenGetResponse>, Status> {
        authorize(&req, Need::Management)?;
        let id: AccessorId = parse_id("accessor_id", &req.get_ref().accessor_id)?;
        let snap = self.0.handle.snapshot();
        let token = snap
            .acl_token(id)
            .ok_or_else(|| Status::not_found(format!("acl token {id} not found")))?;
        Ok(Response::new(pb::AclTokenGetResponse {
            token: Some(token.as_ref().into()),
        }))
    }

    async fn token_delete(
        &self,
        req: Request<pb::AclTokenDeleteRequest>,
    ) -> Result<Response<pb::AclTokenDeleteResponse>, Status> {
        authorize(&req, Need::Management)?;
        let id: AccessorId = parse_id("accessor_id", &req.get_ref().accessor_id)?;
        let index = self.0.handle.acl_token_delete(id).await?;
        Ok(Response::new(pb::AclTokenDeleteResponse { index }))
    }

    async fn policy_apply(
        &self,
        req: Request<pb::AclPolicyApplyRequest>,
    ) -> Result<Response<pb::AclPolicyApplyResponse>, Status> {
        authorize(&req, Need::Management)?;
        let r = req.into_inner();
        let index = self
            .0
            .handle
            .acl_policy_apply(r.name, r.description, r.rules)
            .await?;
        Ok(Response::new(pb::AclPolicyApplyResponse { index }))
    }

    async fn policy_list(
        &self,
        req: Request<pb::AclPolicyListRequest>,
    ) -> Result<Response<pb::AclPolicyListResponse>, Status> {
        authorize(&req, Need::Management)?;
        let snap = self.0.read(req.get_ref().query.as_ref()).await?;
        Ok(Response::new(pb::AclPolicyListResponse {
            policies: snap.acl_policies().map(|p| p.as_ref().into()).collect(),
            index: snap.latest_index(),
        }))
    }

    async fn policy_get(
        &self,
        req: Request<pb::AclPolicyGetRequest>,
    ) -> Result<Response<pb::AclPolicyGetResponse>, Status> {
        authorize(&req, Need::Management)?;
        let name = &req.get_ref().name;
        let snap = self.0.handle.snapshot();
        let policy = snap
            .acl_policy(name)
            .ok_or_else(|| Status::not_found(format!("acl policy {name:?} not found")))?;
        Ok(Response::new(pb::AclPolicyGetResponse {
            policy: Some(policy.as_ref().into()),
        }))
    }

    async fn policy_delete(
        &self,
        req: Request<pb::AclPolicyDeleteRequest>,
    ) -> Result<Response<pb::AclPolicyDeleteResponse>, Status> {
        authorize(&req, Need::Management)?;
        let name = req.into_inner().name;
        let index = self.0.handle.acl_policy_delete(name).await?;
        Ok(Response::new(pb::AclPolicyDeleteResponse { index }))
    }
}
