//! The console over TLS, against stand-in servers with the certificates in `fixtures/`
//! (made by `drover tls` to last a century; the CA's key is not kept): the footer names
//! the server with the scheme it is really dialed with, and a misconfigured connection
//! says what is wrong, as the CLI says it, instead of "transport error".

mod support {
    #[allow(dead_code)]
    pub mod console;
    #[allow(dead_code)]
    pub mod fake_cluster;
    #[allow(dead_code)]
    pub mod fake_servers;
    #[allow(dead_code)]
    pub mod screen;
}

use drover_proto::tls::TlsFiles;
use drover_tui::app::Connection;
use drover_tui::ui::Theme;
use std::path::PathBuf;
use support::console::{Console, DEADLINE};
use support::fake_servers::{FakeServers, FakeTls};
use support::screen::screen;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).expect("a fixture")
}

/// A server's TLS, asking clients for a certificate when `verify` says.
fn server_tls(verify: bool) -> FakeTls {
    FakeTls {
        cert: read("global-server-drover.pem"),
        key: read("global-server-drover-key.pem"),
        client_ca: verify.then(|| read("drover-agent-ca.pem")),
    }
}

/// The client side: trusting `ca` (a fixture), checking the server's role name.
fn trusting(ca: Option<&str>) -> TlsFiles {
    TlsFiles {
        ca_file: ca.map(fixture),
        verify_server_hostname: true,
        ..TlsFiles::default()
    }
}

/// Typed `http://` or with no scheme, a TLS connection is https, and the footer says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_footer_names_a_tls_server_by_https() {
    let cluster = FakeServers::start_with(1, Some(server_tls(false)));
    let port = cluster.urls[0]
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_owned();
    for typed in [cluster.urls[0].clone(), format!("127.0.0.1:{port}")] {
        let mut console = Console::start_with(&typed, &trusting(Some("drover-agent-ca.pem")));
        console
            .until("a load over TLS", DEADLINE, |app| {
                app.connection == Connection::Connected
            })
            .await;
        let text = screen(&mut console.app, Theme { color: false });
        let footer = text.lines().last().unwrap_or_default();
        let want = format!(" ● https://127.0.0.1:{port} │");
        assert!(footer.starts_with(&want), "{typed}: {footer}");
    }
}

/// Each way of getting TLS wrong reads as what is wrong, in the footer and the header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_mistakes_are_named() {
    let plain = FakeServers::start(1);
    let tls = FakeServers::start_with(1, Some(server_tls(false)));
    let verifying = FakeServers::start_with(1, Some(server_tls(true)));
    // (server, client's CA, what the reason says: with no CA, the server's answer to
    // plaintext or its hanging up, either of which says to give the CA)
    let cases = [
        (&tls, None, "--ca-cert"),
        (
            &tls,
            Some("other-ca.pem"),
            "the server's certificate is not trusted",
        ),
        (
            &plain,
            Some("drover-agent-ca.pem"),
            "the server does not speak TLS",
        ),
        // The server's alert or its hanging up, whichever the console reads first: either
        // way it is told what to give.
        (
            &verifying,
            Some("drover-agent-ca.pem"),
            "give --client-cert and --client-key",
        ),
    ];
    for (server, ca, want) in cases {
        let mut console = Console::start_with(&server.address(), &trusting(ca));
        console
            .until("the connection refused", DEADLINE, |app| {
                matches!(app.connection, Connection::Lost { .. })
            })
            .await;
        let reason = console.lost.first().cloned().unwrap_or_default();
        assert!(reason.contains(want), "{ca:?}: {reason}");
        assert!(!reason.contains("transport error"), "{reason}");
        // The header names the server as dialed, and begins the reason (as wide as it is).
        let text = screen(&mut console.app, Theme { color: false });
        let first = text.lines().next().unwrap_or_default();
        let scheme = if ca.is_some() { "https" } else { "http" };
        let begins: String = reason.chars().take(30).collect();
        assert!(
            first.contains(&format!("cannot connect to {scheme}://")) && first.contains(&begins),
            "{ca:?}: {first}"
        );
    }
}
