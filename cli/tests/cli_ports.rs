//! Ports end to end, from the binary: `drover dev` runs the shipped example
//! `examples/ports.nomad.hcl` (three copies of `python3 -m http.server` on
//! `${NOMAD_PORT_http}`, a dynamic port) on its one real agent, and an HTTP GET reaches each
//! copy on the address `drover alloc status` prints for it.

use crate::cli_support;

use cli_support::printed_address;

use cli_support::{assert_code, drover_at, json, spawn, stdout};
use drover_tests::{DEADLINE, eventually};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

/// The interpreter the example's task runs; the test needs it on the machine.
const PYTHON: &str = "/usr/bin/python3";

/// A port nothing listens on right now (the OS's pick for port 0).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds port 0");
    listener.local_addr().expect("has an address").port()
}

/// `GET /` at `addr`: the status line of the answer, `None` while nothing answers.
fn status_line(addr: SocketAddr) -> Option<String> {
    let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        conn,
        "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    conn.read_to_string(&mut raw).ok()?;
    raw.lines().next().map(str::to_owned)
}

/// `drover dev` stopped with Ctrl-C when dropped, so a failing test leaves no HTTP server
/// behind: killed outright, dev would leave its agent's tasks running.
struct Dev(cli_support::Running);

impl Dev {
    fn interrupt(&self) {
        let pid = Pid::from_raw(i32::try_from(self.0.child.id()).expect("pid fits"));
        let _ = kill(pid, Signal::SIGINT);
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if matches!(self.0.child.try_wait(), Ok(None)) {
            self.interrupt();
            let until = std::time::Instant::now() + DEADLINE;
            while matches!(self.0.child.try_wait(), Ok(None)) && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn three_copies_of_an_http_server_answer_on_the_addresses_alloc_status_prints() {
    assert!(
        std::path::Path::new(PYTHON).exists(),
        "the example's task runs {PYTHON}, which this machine lacks"
    );
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/ports.nomad.hcl");
    let data_dir = tempfile::tempdir().expect("temp dir");
    let url = format!("http://127.0.0.1:{}", free_port());
    let bind = url.trim_start_matches("http://").to_string();
    let dir = data_dir
        .path()
        .to_str()
        .expect("utf-8 temp dir")
        .to_string();
    let mut dev = Dev(spawn(
        &url,
        &[
            "dev",
            "--nodes",
            "0",
            "--no-sample-job",
            "--no-metrics",
            "--bind",
            &bind,
            "--data-dir",
            &dir,
        ],
    ));
    eventually("the dev agent's node", DEADLINE, || async {
        let out = drover_at(&url, &["node", "status", "-json"]).await;
        let nodes: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        (nodes.as_array()?.len() == 1).then_some(())
    })
    .await;

    let run = drover_at(
        &url,
        &["job", "run", "-detach", example.to_str().expect("utf-8")],
    )
    .await;
    assert_code(&run, 0);
    let allocs: Vec<String> = eventually("the 3 copies to run", DEADLINE, || async {
        let job = json(&drover_at(&url, &["job", "status", "hello-http", "-json"]).await);
        let running: Vec<String> = job["allocations"]
            .as_array()?
            .iter()
            .filter(|a| a["client_status"] == "Running")
            .filter_map(|a| a["id"].as_str().map(str::to_owned))
            .collect();
        (running.len() == 3).then_some(running)
    })
    .await;

    let mut addresses = BTreeSet::new();
    for id in &allocs {
        let out = drover_at(&url, &["alloc", "status", id]).await;
        assert_code(&out, 0);
        let status = stdout(&out);
        let addr = printed_address(&status, "http")
            .unwrap_or_else(|| panic!("alloc status {id} prints no address for http:\n{status}"));
        assert!(
            addr.ip().is_loopback(),
            "drover dev offers ports on loopback: {addr}"
        );
        assert!(
            (20_000..=32_000).contains(&addr.port()),
            "a dynamic port in the default range: {addr}"
        );
        addresses.insert(addr);
        // The task may still be starting its server when the allocation reports running.
        let answer = eventually(&format!("{addr} to answer"), DEADLINE, || async move {
            tokio::task::spawn_blocking(move || status_line(addr))
                .await
                .expect("the request thread finishes")
        })
        .await;
        assert!(answer.contains(" 200 "), "GET / at {addr}: {answer}");
    }
    assert_eq!(
        addresses.len(),
        3,
        "three distinct addresses: {addresses:?}"
    );

    // Stopping the job stops the servers: their ports stop answering.
    let stop = drover_at(&url, &["job", "stop", "-detach", "hello-http"]).await;
    assert_code(&stop, 0);
    for addr in addresses {
        eventually(
            &format!("{addr} to stop answering"),
            DEADLINE,
            || async move {
                let answer = tokio::task::spawn_blocking(move || status_line(addr))
                    .await
                    .expect("the request thread finishes");
                answer.is_none().then_some(())
            },
        )
        .await;
    }

    dev.interrupt();
    let status = eventually("drover dev to exit after Ctrl-C", DEADLINE, || {
        let exited = dev.0.child.try_wait().expect("waits");
        async move { exited }
    })
    .await;
    assert!(status.success(), "drover dev exited with {status}");
}
