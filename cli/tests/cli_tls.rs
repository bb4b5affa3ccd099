//! `drover tls` makes a CA and certificates; a `drover server` configured with them
//! answers only operators who present a certificate the CA signed, lets an agent register
//! only under the node name its certificate carries, and reaches that agent for task logs
//! over mutual TLS.

use crate::cli_support;

use cli_support::{code, drover_at, make_certs, spawn, stdout};
use drover_tests::{DEADLINE, eventually};

#[tokio::test(flavor = "multi_thread")]
async fn a_tls_server_answers_only_operators_with_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let ca = format!("{d}/drover-agent-ca.pem");
    make_certs(
        &d,
        &[
            &["--server"],
            &["--cli"],
            &["--client"],
            &["--client", "--node", "tls-agent"],
        ],
    )
    .await;
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
    // An agent whose certificate names no node cannot register: the certificate is what
    // binds the name (and the agent's endpoint) to the node.
    let unnamed = drover_at(
        &address,
        &[
            "agent",
            "--servers",
            &address,
            "--name",
            "tls-agent",
            "--data-dir",
            &format!("{d}/unnamed-agent"),
            "--ca-cert",
            &ca,
            "--client-cert",
            &format!("{d}/global-client-drover.pem"),
            "--client-key",
            &format!("{d}/global-client-drover-key.pem"),
        ],
    )
    .await;
    assert_ne!(code(&unnamed), 0, "an unnamed agent certificate registers");
    assert!(
        cli_support::stderr(&unnamed).contains("does not name node \"tls-agent\""),
        "{}",
        cli_support::stderr(&unnamed)
    );
    // A real agent joins over TLS with a certificate naming its node.
    let agent_dir = format!("{d}/agent");
    let _agent = spawn(
        &address,
        &[
            "agent",
            "--raw-exec",
            "--servers",
            &address,
            "--name",
            "tls-agent",
            "--data-dir",
            &agent_dir,
            "--ca-cert",
            &ca,
            "--client-cert",
            &format!("{d}/tls-agent-client-drover.pem"),
            "--client-key",
            &format!("{d}/tls-agent-client-drover-key.pem"),
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
    // A task on it, and its logs read over mutual TLS: server to agent, the agent's
    // certificate checked for the node's name, the server's for the server role.
    let job = format!("{d}/hello.nomad.hcl");
    std::fs::write(&job, HELLO_JOB).unwrap();
    let run = as_operator(&["job", "run", "-detach", &job]);
    let run: Vec<&str> = run.iter().map(String::as_str).collect();
    let out = drover_at(&address, &run).await;
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let status = as_operator(&["job", "status", "-json", "hello"]);
    let status: Vec<&str> = status.iter().map(String::as_str).collect();
    let alloc = eventually("the hello allocation", DEADLINE, || async {
        let out = drover_at(&address, &status).await;
        let view: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
        view["allocations"].as_array()?.first()?["id"]
            .as_str()
            .map(str::to_string)
    })
    .await;
    let logs = as_operator(&["alloc", "logs", &alloc]);
    let logs: Vec<&str> = logs.iter().map(String::as_str).collect();
    eventually("logs over mutual TLS", DEADLINE, || async {
        let out = drover_at(&address, &logs).await;
        (code(&out) == 0 && stdout(&out).contains("hello over tls")).then_some(())
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

/// A task that prints one line and then waits, so its logs can be read.
const HELLO_JOB: &str = r#"job "hello" {
  datacenters = ["dc1"]
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo hello over tls; sleep 60"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
"#;
