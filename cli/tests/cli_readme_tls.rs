//! The README's TLS walkthrough, run as written: its block is read from README.md and
//! each command run in order in a temp dir with the `drover` binary on PATH. The only
//! changes are the ports (a free API port instead of 4647, metrics on a free port), so it
//! can run beside other tests. Commands ending in `&` run in the background for the rest
//! of the test; the others must succeed, each retried until the deadline as a person
//! would run it again once the server or agent is up; the last must print the task's line.

use drover_tests::DEADLINE;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The marker line before the walkthrough's code block.
const MARKER: &str = "<!-- tls-walkthrough:";

/// The block's commands: continued lines joined, a heredoc kept with its command.
fn steps(readme: &str) -> Vec<String> {
    let after = readme
        .split_once(MARKER)
        .expect("README has the TLS walkthrough")
        .1;
    let block = after
        .split_once("```sh\n")
        .expect("a sh block follows the marker")
        .1
        .split_once("\n```")
        .expect("the block ends")
        .0;
    let mut out = Vec::new();
    let mut lines = block.lines();
    while let Some(line) = lines.next() {
        let mut step = line.to_string();
        while step.ends_with('\\') {
            step.pop();
            step.push_str(lines.next().expect("a continued line"));
        }
        if let Some((_, tag)) = step.split_once("<<'") {
            let end = tag.split('\'').next().unwrap_or("EOF").to_string();
            for body in lines.by_ref() {
                step.push('\n');
                step.push_str(body);
                if body == end {
                    break;
                }
            }
        }
        out.push(step);
    }
    out
}

/// A port free on 127.0.0.1 whose next port is free too (the server's Raft listener takes
/// the API port plus one by default).
fn free_pair() -> u16 {
    for _ in 0..100 {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = a.local_addr().unwrap().port();
        if port < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
    panic!("no two free ports in a row");
}

/// Background processes, killed when the test ends.
struct Background(Vec<Child>);

impl Drop for Background {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn shell(step: &str, dir: &Path, path: &str, env: &BTreeMap<String, String>) -> Command {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", step])
        .current_dir(dir)
        .env("PATH", path)
        .envs(env)
        .env_remove("DROVER_TOKEN");
    cmd
}

/// `export A=1 B=2` as pairs.
fn exports(step: &str) -> Option<Vec<(String, String)>> {
    let rest = step.strip_prefix("export ")?;
    Some(
        rest.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

#[test]
fn the_readme_tls_walkthrough_works_as_written() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let steps = steps(&readme);
    assert!(steps.len() >= 10, "{steps:#?}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("examples")).unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/hello.nomad.hcl"),
        dir.path().join("examples/hello.nomad.hcl"),
    )
    .unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_drover")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let port = free_pair();
    let mut env = BTreeMap::new();
    let mut background = Background(Vec::new());
    let mut last = String::new();
    for step in &steps {
        let step = step.replace("127.0.0.1:4647", &format!("127.0.0.1:{port}"));
        if let Some(vars) = exports(&step) {
            env.extend(vars);
            continue;
        }
        let code = step.split(" #").next().unwrap_or(&step).trim_end();
        if let Some(bg) = code.strip_suffix('&') {
            let bg = if bg.trim_start().starts_with("drover server") {
                format!("{bg} --metrics-addr 127.0.0.1:0")
            } else {
                bg.to_string()
            };
            let child = shell(&format!("exec {bg}"), dir.path(), &path, &env)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("{bg}: {e}"));
            background.0.push(child);
            continue;
        }
        let until = Instant::now() + DEADLINE;
        loop {
            let out = shell(&step, dir.path(), &path, &env).output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            if out.status.success() && !(step.contains("alloc logs") && stdout.is_empty()) {
                last = stdout;
                break;
            }
            assert!(
                Instant::now() < until,
                "README step failed until the deadline: {step}\nstdout: {stdout}\nstderr: {stderr}"
            );
            std::thread::park_timeout(Duration::from_millis(250));
        }
    }
    assert!(
        last.starts_with("hello from "),
        "the walkthrough's last command prints the task's line: {last:?}"
    );
}
