//! Nomad's HTTP API driven by a real Nomad client: `python-nomad` from PyPI, installed by
//! this test into a virtual environment under the target dir, runs the suites in
//! `tests/python/` against the `drover` binary (`drover dev` with ACLs off, `drover server
//! --acl` with them on). A venv or pip that cannot be made fails the test: it never skips.

mod cli_support;

use cli_support::{spawn, wait_for_line};
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

/// Runs suite `name` against `drover dev` (two simulated nodes beside its real agent).
fn suite_on_dev(name: &str) {
    let data_dir = tempfile::tempdir().expect("temp dir");
    let dir = data_dir.path().to_str().expect("utf-8 temp dir");
    let dev = spawn(
        "http://127.0.0.1:1",
        &[
            "dev",
            "--bind",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--nodes",
            "2",
            "--no-sample-job",
            "--data-dir",
            dir,
        ],
    );
    let line = wait_for_line(&dev, "the HTTP API in the banner", |l| {
        l.contains("HTTP API:")
    });
    suite(name, &address_after(&line, "http://"));
}

#[test]
fn python_nomad_drives_drover_dev() {
    suite_on_dev("dev_suite.py");
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
