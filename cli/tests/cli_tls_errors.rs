//! Every way of getting a TLS connection wrong is named by the CLI (and, through the same
//! `drover_proto::tls` wording, by the console), never "transport error": no CA given to
//! talk to a TLS server, a CA that did not sign the server's certificate, no client
//! certificate for a server that verifies clients, a server certificate that is not a
//! server's, TLS to a server that does not speak it. Real `drover server` processes,
//! certificates from `drover tls`.

use crate::cli_support;

use cli_support::{Running, code, drover_at, free_ports, make_certs, spawn, stderr, stdout};
use drover_tests::{DEADLINE, eventually};
use std::path::Path;

/// Starts a server on `port` from a config whose `tls { }` block is `tls` (none: plain).
fn server(dir: &Path, name: &str, port: u16, tls: Option<(&str, bool)>) -> Running {
    let d = dir.display();
    let block = match tls {
        Some((cert, verify)) => format!(
            "tls {{\n  ca_file = \"{d}/drover-agent-ca.pem\"\n  cert_file = \"{d}/{cert}.pem\"\n  \
             key_file = \"{d}/{cert}-key.pem\"\n  verify_incoming = {verify}\n}}\n"
        ),
        None => String::new(),
    };
    let config = format!(
        "data_dir = \"{d}/{name}-data\"\nbind_addr = \"127.0.0.1:{port}\"\nraft_addr = \"127.0.0.1:0\"\n{block}"
    );
    let file = dir.join(format!("{name}.hcl"));
    std::fs::write(&file, config).unwrap();
    let address = format!("127.0.0.1:{port}");
    spawn(
        &address,
        &["server", "--config", file.to_str().unwrap(), "--no-metrics"],
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_mistakes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let ca = format!("{d}/drover-agent-ca.pem");
    make_certs(&d, &[&["--server"], &["--cli"], &["--client"]]).await;
    make_certs(other.to_str().unwrap(), &[]).await;
    let ports = free_ports(3);
    let verifying = format!("127.0.0.1:{}", ports[0]);
    let posing = format!("127.0.0.1:{}", ports[1]);
    let plain = format!("127.0.0.1:{}", ports[2]);
    let _servers = [
        server(
            dir.path(),
            "verifying",
            ports[0],
            Some(("global-server-drover", true)),
        ),
        // A client's certificate where a server's should be.
        server(
            dir.path(),
            "posing",
            ports[1],
            Some(("global-client-drover", false)),
        ),
        server(dir.path(), "plain", ports[2], None),
    ];
    let cli_cert = format!("{d}/global-cli-drover.pem");
    let cli_key = format!("{d}/global-cli-drover-key.pem");
    let other_ca = other.join("drover-agent-ca.pem");
    let other_ca = other_ca.to_str().unwrap();
    let identity = ["--client-cert", &cli_cert, "--client-key", &cli_key];
    let members = |extra: &[&str]| -> Vec<String> {
        ["server", "members"]
            .iter()
            .chain(extra)
            .map(|a| a.to_string())
            .collect()
    };
    // Every server is up before the mistakes are made.
    let mut good = members(&["--ca-cert", &ca]);
    good.extend(identity.map(String::from));
    for (address, args) in [(&verifying, good.clone()), (&plain, members(&[]))] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        eventually("the server to answer", DEADLINE, || async {
            (code(&drover_at(address, &args).await) == 0).then_some(())
        })
        .await;
    }
    // (server, extra arguments, what stderr must say)
    let mut untrusted = vec!["--ca-cert", other_ca];
    untrusted.extend(identity);
    let cases: Vec<(&String, Vec<&str>, &str)> = vec![
        (&verifying, vec![], "--ca-cert"),
        (
            &verifying,
            vec!["--ca-cert", &ca],
            "give --client-cert and --client-key",
        ),
        (
            &verifying,
            untrusted,
            "the server's certificate is not trusted",
        ),
        (
            &posing,
            vec!["--ca-cert", &ca],
            "the server's certificate is not a drover server's",
        ),
        (
            &plain,
            vec!["--ca-cert", &ca],
            "the server does not speak TLS",
        ),
    ];
    for (address, extra, want) in cases {
        let args = members(&extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = drover_at(address, &args).await;
        let err = stderr(&out);
        assert_ne!(code(&out), 0, "{extra:?}: {}", stdout(&out));
        assert!(err.contains(want), "{address} {extra:?}: {err}");
        assert!(
            !err.contains("transport error"),
            "{address} {extra:?}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    }
}
