//! Nomad's HTTP API driven by a real Nomad client: `python-nomad` from PyPI, installed by
//! this test into a virtual environment under the target dir, runs the suites in
//! `tests/python/` against the `drover` binary (`drover dev` with ACLs off, `drover server
//! --acl` with them on), and the README's python-nomad block runs as a reader pastes it.
//! A venv or pip that cannot be made fails the test: it never skips.

use crate::cli_support;

use cli_support::{Running, spawn, wait_for_line};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The python-nomad release the suites are written against.
const PYTHON_NOMAD: &str = "python-nomad==2.1.0";
/// The longest one suite may run.
const SUITE_DEADLINE: Duration = Duration::from_secs(240);

/// One venv for the test binary: the two tests would otherwise build it at once.
static VENV: Mutex<Option<PathBuf>> = Mutex::new(None);

fn run(what: &str, cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The venv's python, with python-nomad installed (made once, then reused).
fn python() -> PathBuf {
    let mut venv = VENV.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(python) = &*venv {
        return python.clone();
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-nomad-venv");
    let python = dir.join("bin").join("python");
    let installed = python.exists()
        && Command::new(&python)
            .args(["-c", "import nomad"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if !installed {
        run(
            "making the virtual environment (python3 -m venv)",
            Command::new("python3")
                .args(["-m", "venv", "--clear"])
                .arg(&dir),
        );
        run(
            "installing python-nomad from PyPI",
            Command::new(dir.join("bin").join("pip")).args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                PYTHON_NOMAD,
            ]),
        );
    }
    *venv = Some(python.clone());
    python
}

/// Runs suite `name` (a file in `tests/python/`) against the API at `addr`; fails the
/// test with its output unless every check passed.
fn suite(name: &str, addr: &str) {
    let python = python();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("python");
    let mut child = Command::new(python)
        .arg(dir.join(name))
        .current_dir(&dir)
        .env("NOMAD_ADDR", format!("http://{addr}"))
        .env_remove("NOMAD_TOKEN")
        .env_remove("NOMAD_NAMESPACE")
        .env_remove("NOMAD_REGION")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the suite starts");
    let until = Instant::now() + SUITE_DEADLINE;
    while child.try_wait().expect("waits").is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("the suite's output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains(" passed, 0 failed"),
        "{name} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `host:port` after `marker` in a banner line.
fn address_after(line: &str, marker: &str) -> String {
    line.split(marker)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(|a| a.trim_end_matches(')').to_string())
        .unwrap_or_else(|| panic!("no address after {marker:?} in {line:?}"))
}

/// A `drover dev` on free ports with its HTTP API, and that API's address from its banner.
struct Dev {
    http: String,
    _running: Running,
    _data_dir: tempfile::TempDir,
}

/// Starts `drover dev` with `extra` flags beside the free-port ones.
fn dev_with_http(extra: &[&str]) -> Dev {
    let data_dir = tempfile::tempdir().expect("temp dir");
    let dir = data_dir.path().to_str().expect("utf-8 temp dir");
    let mut args = vec![
        "dev",
        "--bind",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
        "--metrics-addr",
        "127.0.0.1:0",
        "--data-dir",
        dir,
    ];
    args.extend_from_slice(extra);
    let running = spawn("http://127.0.0.1:1", &args);
    let line = wait_for_line(&running, "the HTTP API in the banner", |l| {
        l.contains("HTTP API:")
    });
    Dev {
        http: address_after(&line, "http://"),
        _running: running,
        _data_dir: data_dir,
    }
}

/// Runs suite `name` against `drover dev` (two simulated nodes beside its real agent).
fn suite_on_dev(name: &str) {
    let dev = dev_with_http(&["--nodes", "2", "--no-sample-job"]);
    suite(name, &dev.http);
}

#[test]
fn python_nomad_drives_drover_dev() {
    suite_on_dev("dev_suite.py");
}

#[test]
fn python_nomad_drives_the_job_calls_and_cluster_reads_on_drover_dev() {
    suite_on_dev("jobs_suite.py");
}

#[test]
fn python_nomad_follows_deployments_and_services_on_drover_dev() {
    suite_on_dev("deploy_suite.py");
}

#[test]
fn python_nomad_meets_the_acls_of_drover_server() {
    let data_dir = tempfile::tempdir().expect("temp dir");
    let dir = data_dir.path().to_str().expect("utf-8 temp dir");
    let server = spawn(
        "http://127.0.0.1:1",
        &[
            "server",
            "--acl",
            "--bind",
            "127.0.0.1:0",
            "--raft-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--no-metrics",
            "--data-dir",
            dir,
        ],
    );
    let line = wait_for_line(&server, "the HTTP API in the banner", |l| {
        l.contains("Nomad's HTTP API on")
    });
    suite("acl_suite.py", &address_after(&line, "http://"));
}

/// The heading of the README section whose first `sh` block points Nomad's tools at drover.
const README_HEADING: &str = "\n### Nomad's HTTP API\n";
/// The HTTP address the README's block names (`drover dev`'s default).
const README_HTTP: &str = "http://127.0.0.1:4646";
/// Where the README's block makes its virtual environment.
const README_VENV: &str = "/tmp/nomad";

/// The README's block for Nomad's HTTP API, with the address of the `drover dev` at `addr`
/// and this test's virtual environment (python-nomad already in it) put in its place.
fn readme_block(addr: &str, venv: &Path) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md reads");
    let section = readme
        .split_once(README_HEADING)
        .expect("README has a section on Nomad's HTTP API")
        .1;
    let block = section
        .split_once("```sh\n")
        .expect("a sh block in the section")
        .1
        .split_once("\n```")
        .expect("the block ends")
        .0;
    assert!(
        block.contains(README_HTTP) && block.contains(README_VENV),
        "the README's block no longer names {README_HTTP} and {README_VENV}: {block}"
    );
    block
        .replace(README_HTTP, &format!("http://{addr}"))
        .replace(README_VENV, venv.to_str().expect("utf-8 venv path"))
}

/// A GET's raw answer (head and body) from `addr`, or an empty string if none came.
fn raw_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut conn) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let sent = write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut raw = String::new();
    if sent.is_ok() {
        let _ = conn.read_to_string(&mut raw);
    }
    raw
}

/// Polls `ready` until it holds, failing the test past the deadline.
fn wait_until(what: &str, ready: impl Fn() -> bool) {
    let until = Instant::now() + SUITE_DEADLINE;
    while !ready() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_readmes_python_nomad_block_runs_against_drover_dev() {
    let python = python();
    let venv = python
        .parent()
        .and_then(Path::parent)
        .expect("the venv holds bin/python")
        .to_path_buf();
    // With its sample job `web`, whose task `server` the block reads the logs of.
    let dev = dev_with_http(&["--nodes", "0"]);
    let addr = dev.http.clone();
    wait_until("every allocation of the sample job to run and log", || {
        let raw = raw_get(&addr, "/v1/job/web/allocations");
        let ids: Vec<&str> = raw
            .split(r#""ID":""#)
            .skip(1)
            .filter_map(|rest| rest.split_once('"').map(|(id, _)| id))
            .collect();
        raw.contains(r#""ClientStatus":"running""#)
            && !raw.contains(r#""ClientStatus":"pending""#)
            && ids.iter().all(|id| {
                let logs = format!("/v1/client/fs/logs/{id}?task=server&type=stdout&plain=true");
                raw_get(&addr, &logs).contains("serving from")
            })
    });
    let out = Command::new("sh")
        .args(["-c", &readme_block(&addr, &venv)])
        .env_remove("NOMAD_TOKEN")
        .env_remove("NOMAD_NAMESPACE")
        .env_remove("NOMAD_REGION")
        .stdin(Stdio::null())
        .output()
        .expect("sh runs the block");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the block failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.starts_with('[') && stdout.contains(r#""ID":"web""#),
        "curl lists the jobs: {stdout}"
    );
    let running = stdout.lines().filter(|l| l.contains(" running ")).count();
    assert!(running >= 1, "the allocations are printed: {stdout}");
    assert!(
        stdout.contains("serving from"),
        "the task's stdout is printed: {stdout}"
    );
}
