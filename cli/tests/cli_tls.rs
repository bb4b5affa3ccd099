//! `drover tls` makes a CA and certificates; a `drover server` configured with them
//! answers only operators who present a certificate the CA signed.

mod cli_support;

use cli_support::{code, drover_at, spawn, stdout};
use drover_tests::{DEADLINE, eventually};

#[tokio::test(flavor = "multi_thread")]
async fn a_tls_server_answers_only_operators_with_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let ca = format!("{d}/drover-agent-ca.pem");
    let ca_key = format!("{d}/drover-agent-ca-key.pem");
    for args in [
        vec!["tls", "ca", "create", "--dir", &d],
        vec![
            "tls", "cert", "create", "--server", "--ca", &ca, "--key", &ca_key, "--dir", &d,
        ],
        vec![
            "tls", "cert", "create", "--cli", "--ca", &ca, "--key", &ca_key, "--dir", &d,
        ],
        vec![
            "tls", "cert", "create", "--client", "--ca", &ca, "--key", &ca_key, "--dir", &d,
        ],
    ] {
        let out = drover_at("unused:1", &args).await;
        assert_eq!(code(&out), 0, "{args:?}: {}", stdout(&out));
    }
    let again = drover_at("unused:1", &["tls", "ca", "create", "--dir", &d]).await;
    assert_ne!(code(&again), 0, "an existing CA is never overwritten");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let config = format!(
        r#"
data_dir  = "{d}/data"
bind_addr = "{address}"
raft_addr = "127.0.0.1:0"
tls {{
  ca_file   = "{ca}"
  cert_file = "{d}/global-server-drover.pem"
  key_file  = "{d}/global-server-drover-key.pem"
}}
"#
    );
    let config_file = dir.path().join("server.hcl");
    std::fs::write(&config_file, config).unwrap();
    let _server = spawn(
        &address,
        &[
            "server",
            "--config",
            config_file.to_str().unwrap(),
            "--no-metrics",
        ],
    );

    let cert = format!("{d}/global-cli-drover.pem");
    let key = format!("{d}/global-cli-drover-key.pem");
    // Any command, as an operator with the CLI certificate.
    let as_operator = |args: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        v.extend(
            [
                "--ca-cert",
                &ca,
                "--client-cert",
                &cert,
                "--client-key",
                &key,
            ]
            .map(String::from),
        );
        v
    };
    let with_cert = as_operator(&["server", "members"]);
    let with_cert: Vec<&str> = with_cert.iter().map(String::as_str).collect();
    eventually("members over TLS", DEADLINE, || async {
        let out = drover_at(&address, &with_cert).await;
        (code(&out) == 0 && stdout(&out).contains("leader")).then_some(())
    })
    .await;
    // A real agent joins over TLS with its client certificate.
    let agent_dir = format!("{d}/agent");
    let _agent = spawn(
        &address,
        &[
            "agent",
            "--raw-exec",
            "--servers",
            &address,
            "--data-dir",
            &agent_dir,
            "--ca-cert",
            &ca,
            "--client-cert",
            &format!("{d}/global-client-drover.pem"),
            "--client-key",
            &format!("{d}/global-client-drover-key.pem"),
        ],
    );
    let node_status = as_operator(&["node", "status", "-json"]);
    let node_status: Vec<&str> = node_status.iter().map(String::as_str).collect();
    eventually("the agent's node over TLS", DEADLINE, || async {
        let out = drover_at(&address, &node_status).await;
        let nodes: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
        (nodes.as_array()?.len() == 1).then_some(())
    })
    .await;
    for (case, args) in [
        ("plaintext", vec!["server", "members"]),
        (
            "no certificate",
            vec!["server", "members", "--ca-cert", &ca],
        ),
    ] {
        let out = drover_at(&address, &args).await;
        assert_ne!(code(&out), 0, "{case} is refused: {}", stdout(&out));
    }
}
