//! The README's "Using it" block, run top to bottom against a fresh `drover dev` as a
//! person would paste it. The block is read from README.md; each line's comment is dropped
//! and the ids it shows as examples (`06f9cab1`) become ids this cluster printed. Lines
//! that follow forever (`alloc logs -f`, `event stream`) must keep running without an
//! error until stopped, the logs printing at once; `drover console` needs a terminal and is
//! left to the console's own tests.

use crate::cli_support;

use cli_support::{drover_at, spawn, wait_for_line};
use drover_tests::{DEADLINE, eventually};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The heading whose first `sh` block is the walkthrough.
const HEADING: &str = "\n## Using it\n";

/// The example allocation id the README shows.
const EXAMPLE_ALLOC: &str = "06f9cab1";

/// How long a following command must keep running (and printing) to pass.
const FOLLOW_FOR: Duration = Duration::from_secs(3);

/// The block's commands, comments and the `alias` line dropped.
fn commands(readme: &str) -> Vec<String> {
    let section = readme
        .split_once(HEADING)
        .expect("README has a Using it section")
        .1;
    let block = section
        .split_once("```sh\n")
        .expect("a sh block in the section")
        .1
        .split_once("\n```")
        .expect("the block ends")
        .0;
    block
        .lines()
        .map(|l| l.split_once(" #").map_or(l, |(cmd, _)| cmd).trim())
        .filter(|l| !l.is_empty() && !l.starts_with("alias "))
        .map(|l| l.replace(" [TASK]", ""))
        .collect()
}

/// Runs `line` in `sh` with `bin` (holding `drover`) first on PATH.
fn sh(line: &str, bin: &Path, home: &Path, address: &str) -> Command {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", line])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .env("PATH", path)
        .env("HOME", home)
        .env("DROVER_ADDR", address)
        .stdin(Stdio::null());
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn the_using_it_block_runs_as_written() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let lines = commands(&readme);
    assert!(lines.len() > 10, "{lines:?}");

    let tmp = tempfile::tempdir().expect("temp dir");
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_drover"), bin.join("drover")).unwrap();
    let data = tmp.path().join("data");
    let dev = spawn(
        "http://127.0.0.1:1",
        &[
            "dev",
            "--bind",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--http-addr",
            "none",
            "--data-dir",
            data.to_str().unwrap(),
        ],
    );
    let export = wait_for_line(&dev, "the DROVER_ADDR line", |l| l.contains("DROVER_ADDR="));
    let address = export
        .split('=')
        .nth(1)
        .expect("a value")
        .trim()
        .to_string();
    // The sample job's allocations: the README's example id becomes one of them.
    let alloc = eventually("the sample job running", DEADLINE, || async {
        let out = drover_at(&address, &["job", "status", "web", "-json"]).await;
        let job: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let running = job["summary"]["groups"]["frontend"]["running"].as_u64()?;
        if running == 0 {
            return None;
        }
        job["allocations"]
            .as_array()?
            .iter()
            .find_map(|a| a["id"].as_str().map(|id| id[..8].to_string()))
    })
    .await;

    for line in &lines {
        let line = line.replace(EXAMPLE_ALLOC, &alloc);
        if line == "drover console" {
            continue;
        }
        let follows = line.contains(" -f ") || line.contains("event stream");
        if follows {
            // `exec`: stopping the shell must stop the command it runs.
            let mut cmd = sh(&format!("exec {line}"), &bin, tmp.path(), &address);
            let mut child = cmd
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("sh runs");
            let started = Instant::now();
            while started.elapsed() < FOLLOW_FOR {
                if let Some(status) = child.try_wait().expect("waits") {
                    let out = child.wait_with_output().expect("output");
                    panic!(
                        "{line:?} ended ({status}) instead of following: {}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            child.kill().expect("stopped");
            let out = child.wait_with_output().expect("output");
            assert!(
                out.stderr.is_empty(),
                "{line:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            // The stream shows events from now on (none may come in a quiet moment); the
            // logs print the task's last lines at once.
            assert!(
                line.contains("event stream") || !out.stdout.is_empty(),
                "{line:?} printed nothing in {FOLLOW_FOR:?}"
            );
            continue;
        }
        let out = sh(&line, &bin, tmp.path(), &address)
            .output()
            .expect("sh runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // `job plan` exits 1 when the plan would change something, as the README says.
        let ok =
            out.status.success() || (line.contains("job plan") && out.status.code() == Some(1));
        assert!(ok, "{line:?} failed ({}): {text}", out.status);
        assert!(!text.contains("Error"), "{line:?}: {text}");
    }
    assert!(
        tmp.path().join(".drover.bash").exists(),
        "the completion script was written"
    );
    // Ctrl-C, so that dev stops the sample job's processes as it does for a person.
    let mut dev = dev;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(dev.child.id()).unwrap()),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let status = eventually("drover dev to stop", DEADLINE, || {
        let exited = dev.child.try_wait().expect("waits");
        async move { exited }
    })
    .await;
    assert!(status.success(), "drover dev exited with {status}");
}
