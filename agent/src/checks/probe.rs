//! One run of one check: an http request, a tcp connect or a script in the task's context,
//! each bounded by the check's timeout (a target that hangs costs the check its timeout,
//! nothing more: the request, the connection or the script's process group is dropped).

use drover_core::types::{CheckKind, ServiceHealth};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

/// Where and how a check reaches its service.
#[derive(Clone, Debug)]
pub struct Target {
    pub kind: CheckKind,
    /// The service's address and port; `None` for a script check (or a service without one).
    pub addr: Option<SocketAddr>,
    pub timeout: Duration,
    /// What a script check runs with: the task's environment and directory.
    pub env: BTreeMap<String, String>,
    pub dir: Option<PathBuf>,
}

/// What one run found, with a line operators can read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub health: ServiceHealth,
    pub output: String,
    /// The answer's status code, for an http check that got one.
    pub http_status: Option<u16>,
}

impl Outcome {
    fn critical(output: impl Into<String>) -> Self {
        Self {
            health: ServiceHealth::Critical,
            output: output.into(),
            http_status: None,
        }
    }
}

/// Runs the check once.
pub async fn probe(target: &Target, http: &reqwest::Client) -> Outcome {
    let run = async {
        match &target.kind {
            CheckKind::Tcp => tcp(target.addr).await,
            CheckKind::Http {
                path,
                method,
                headers,
                expected_status,
            } => http_check(http, target.addr, path, method, headers, *expected_status).await,
            CheckKind::Script { command, args } => script(target, command, args).await,
        }
    };
    match tokio::time::timeout(target.timeout, run).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::critical(format!("timed out after {:?}", target.timeout)),
    }
}

async fn tcp(addr: Option<SocketAddr>) -> Outcome {
    let Some(addr) = addr else {
        return Outcome::critical("the service has no address");
    };
    match tokio::net::TcpStream::connect(addr).await {
        Ok(_) => Outcome {
            health: ServiceHealth::Passing,
            output: format!("tcp connect {addr}: success"),
            http_status: None,
        },
        Err(e) => Outcome::critical(format!("tcp connect {addr}: {e}")),
    }
}

async fn http_check(
    client: &reqwest::Client,
    addr: Option<SocketAddr>,
    path: &str,
    method: &str,
    headers: &BTreeMap<String, Vec<String>>,
    expected: Option<u16>,
) -> Outcome {
    let Some(addr) = addr else {
        return Outcome::critical("the service has no address");
    };
    let url = format!("http://{addr}{path}");
    let Ok(method) = reqwest::Method::from_bytes(method.as_bytes()) else {
        return Outcome::critical(format!("{method:?} is not an http method"));
    };
    let mut req = client.request(method.clone(), &url);
    for (name, values) in headers {
        for v in values {
            req = req.header(name.as_str(), v.as_str());
        }
    }
    match req.send().await {
        Ok(resp) => {
            let code = resp.status().as_u16();
            let health = match expected {
                Some(want) if code == want => ServiceHealth::Passing,
                Some(_) => ServiceHealth::Critical,
                None if resp.status().is_success() => ServiceHealth::Passing,
                None if code == 429 => ServiceHealth::Warning,
                None => ServiceHealth::Critical,
            };
            Outcome {
                health,
                output: format!("{method} {url}: {code}"),
                http_status: Some(code),
            }
        }
        Err(e) => Outcome::critical(format!("{method} {url}: {e}")),
    }
}

/// Exit 0 passes, 1 warns, anything else (or a signal) is critical, as Nomad reads them.
async fn script(target: &Target, command: &str, args: &[String]) -> Outcome {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(&target.env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .process_group(0);
    if let Some(dir) = &target.dir {
        cmd.current_dir(dir);
    }
    match cmd.status().await {
        Ok(status) => {
            let health = match status.code() {
                Some(0) => ServiceHealth::Passing,
                Some(1) => ServiceHealth::Warning,
                _ => ServiceHealth::Critical,
            };
            Outcome {
                health,
                output: format!("{command}: {status}"),
                http_status: None,
            }
        }
        Err(e) => Outcome::critical(format!("{command}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(kind: CheckKind, addr: Option<SocketAddr>) -> Target {
        Target {
            kind,
            addr,
            timeout: Duration::from_secs(2),
            env: BTreeMap::from([("PATH".into(), "/usr/bin:/bin".into())]),
            dir: None,
        }
    }

    fn script_check(code: &str) -> CheckKind {
        CheckKind::Script {
            command: "/bin/sh".into(),
            args: vec!["-c".into(), format!("exit {code}")],
        }
    }

    #[tokio::test]
    async fn each_kind_of_check_reads_its_target() {
        let client = reqwest::Client::new();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let open = listener.local_addr().expect("addr");
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr")
        };
        // An http server answering every request with `status`.
        let http = |status: u16| async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = l.local_addr().expect("addr");
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                while let Ok((mut conn, _)) = l.accept().await {
                    let mut buf = [0u8; 1024];
                    let _ = conn.read(&mut buf).await;
                    let reply = format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    );
                    let _ = conn.write_all(reply.as_bytes()).await;
                }
            });
            addr
        };
        let get = |expected_status| CheckKind::Http {
            path: "/health".into(),
            method: "GET".into(),
            headers: BTreeMap::from([("X-Probe".to_owned(), vec!["1".to_owned()])]),
            expected_status,
        };
        let cases = [
            (
                target(get(None), Some(http(200).await)),
                ServiceHealth::Passing,
            ),
            (
                target(get(None), Some(http(429).await)),
                ServiceHealth::Warning,
            ),
            (
                target(get(None), Some(http(500).await)),
                ServiceHealth::Critical,
            ),
            (
                target(get(Some(204)), Some(http(204).await)),
                ServiceHealth::Passing,
            ),
            (
                target(get(Some(204)), Some(http(200).await)),
                ServiceHealth::Critical,
            ),
            (target(CheckKind::Tcp, Some(open)), ServiceHealth::Passing),
            (
                target(CheckKind::Tcp, Some(closed)),
                ServiceHealth::Critical,
            ),
            (target(script_check("0"), None), ServiceHealth::Passing),
            (target(script_check("1"), None), ServiceHealth::Warning),
            (target(script_check("2"), None), ServiceHealth::Critical),
        ];
        for (t, want) in cases {
            let got = probe(&t, &client).await;
            assert_eq!(got.health, want, "{t:?}: {}", got.output);
        }
    }

    #[tokio::test]
    async fn a_target_that_hangs_costs_the_timeout_only() {
        let client = reqwest::Client::new();
        // Accepts connections and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let http = CheckKind::Http {
            path: "/".into(),
            method: "GET".into(),
            headers: BTreeMap::new(),
            expected_status: None,
        };
        let hang = CheckKind::Script {
            command: "/bin/sleep".into(),
            args: vec!["30".into()],
        };
        for kind in [http, hang] {
            let mut t = target(kind, Some(addr));
            t.timeout = Duration::from_millis(300);
            let started = std::time::Instant::now();
            let got = probe(&t, &client).await;
            assert_eq!(got.health, ServiceHealth::Critical, "{}", got.output);
            assert!(got.output.contains("timed out"), "{}", got.output);
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{:?}",
                started.elapsed()
            );
        }
        drop(listener);
    }
}
