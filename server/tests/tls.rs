//! TLS with a generated cluster CA: the API refuses clients without a certificate when
//! `verify_incoming` is set, serves those with one, and servers form a cluster over TLS.

use crate::common;

use common::{DEADLINE, cluster_configs, init_tracing, register_on_leader, start_with};
use drover_proto::tls::{TlsFiles, endpoint};
use drover_proto::v1 as pb;
use drover_proto::v1::status_service_client::StatusServiceClient;
use drover_server::tls::ServerTls;
use drover_server::tls::dev_certs::{Pem, Role, create_ca, create_cert};
use drover_server::{Server, ServerConfig};
use std::path::{Path, PathBuf};

struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    fn new() -> Certs {
        let dir = tempfile::tempdir().unwrap();
        let ca = create_ca(1).unwrap();
        write(dir.path(), "ca", &ca);
        for (name, role) in [("server", Role::Server), ("cli", Role::Cli)] {
            write(dir.path(), name, &create_cert(&ca, role, &[], 1).unwrap());
        }
        Certs { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn server(&self) -> ServerTls {
        ServerTls {
            ca_file: self.path("ca.pem"),
            cert_file: self.path("server.pem"),
            key_file: self.path("server-key.pem"),
            verify_incoming: true,
            verify_server_hostname: true,
        }
    }

    fn client(&self, with_cert: bool) -> TlsFiles {
        TlsFiles {
            ca_file: Some(self.path("ca.pem")),
            cert_file: with_cert.then(|| self.path("cli.pem")),
            key_file: with_cert.then(|| self.path("cli-key.pem")),
            verify_server_hostname: true,
        }
    }
}

fn write(dir: &Path, name: &str, pem: &Pem) {
    std::fs::write(dir.join(format!("{name}.pem")), &pem.cert).unwrap();
    std::fs::write(dir.join(format!("{name}-key.pem")), &pem.key).unwrap();
}

async fn leader_of(addr: &str, tls: &TlsFiles) -> Result<String, String> {
    let channel = endpoint(addr, tls)
        .map_err(|e| e.to_string())?
        .connect_timeout(std::time::Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    StatusServiceClient::new(channel)
        .leader(pb::LeaderRequest::default())
        .await
        .map(|r| r.into_inner().leader_id)
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_incoming_refuses_clients_without_a_certificate() {
    let certs = Certs::new();
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::for_tests(dir.path());
    config.bind_addr = "127.0.0.1:0".into();
    config.tls = Some(certs.server());
    let (server, _h) = start_with(config).await;
    let api = server.serve(Default::default()).await.unwrap();
    let addr = api.local_addr().to_string();

    assert_eq!(
        leader_of(&addr, &certs.client(true)).await,
        Ok("1".to_string()),
        "with a certificate"
    );
    assert!(
        leader_of(&addr, &certs.client(false)).await.is_err(),
        "no certificate"
    );
    assert!(
        leader_of(&addr, &TlsFiles::default()).await.is_err(),
        "plaintext"
    );
    api.shutdown().await.unwrap();
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_form_a_cluster_over_tls() {
    init_tracing();
    let certs = Certs::new();
    let (configs, _dirs) = cluster_configs(3, "a-secret-for-three-servers");
    let mut servers = Vec::new();
    for mut config in configs {
        config.tls = Some(certs.server());
        servers.push(Server::start(config).await.expect("server starts"));
    }
    // An election may still move the leadership while the TLS connections come up.
    let reg = register_on_leader(&servers).await;
    for s in &servers {
        let snap = s
            .handle()
            .wait_for_index(reg.index, DEADLINE)
            .await
            .unwrap();
        assert!(snap.node(&reg.node_id).is_some());
    }
    for s in servers {
        s.shutdown().await.unwrap();
    }
}
