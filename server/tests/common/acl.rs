//! A server with ACLs on, for the tests that act as operators, agents and attackers.

use super::api::Api;
use drover_proto::bearer::BearerChannel;
use drover_proto::v1 as pb;
use drover_proto::v1::acl_service_client::AclServiceClient;

/// A server with ACLs on, bootstrapped: its management token and a way to make others.
pub struct Acl {
    pub api: Api,
    pub raw: tonic::transport::Channel,
    pub management: String,
}

impl Acl {
    pub async fn start() -> Acl {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut drover_server::ServerConfig)) -> Acl {
        let api = Api::start(|c| {
            c.acl_enabled = true;
            tweak(c);
        })
        .await;
        let raw = Api::endpoint(&api.api).connect().await.expect("connect");
        let boot = AclServiceClient::new(BearerChannel::plain(raw.clone()))
            .bootstrap(pb::AclBootstrapRequest {})
            .await
            .expect("bootstrap")
            .into_inner();
        let management = boot.token.expect("token").secret_id;
        Acl {
            api,
            raw,
            management,
        }
    }

    pub fn channel(&self, token: Option<&str>) -> BearerChannel {
        BearerChannel::new(self.raw.clone(), token).expect("token header")
    }

    pub fn admin(&self) -> AclServiceClient<BearerChannel> {
        AclServiceClient::new(self.channel(Some(&self.management)))
    }

    /// A client token holding one policy with `rules`.
    pub async fn token(&self, name: &str, rules: &str) -> String {
        self.admin()
            .policy_apply(pb::AclPolicyApplyRequest {
                name: name.into(),
                description: String::new(),
                rules: rules.into(),
            })
            .await
            .unwrap_or_else(|e| panic!("policy {name}: {e}"));
        self.admin()
            .token_create(pb::AclTokenCreateRequest {
                name: name.into(),
                r#type: "client".into(),
                policies: vec![name.into()],
                ttl_ms: 0,
            })
            .await
            .expect("token")
            .into_inner()
            .token
            .expect("token")
            .secret_id
    }
}
