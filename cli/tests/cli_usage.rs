//! The `drover` binary's command line with no server involved: help, Nomad-style flags,
//! usage errors and the error line for an unreachable server.

use assert_cmd::Command;

fn drover(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_drover"))
        .env_remove("DROVER_ADDR")
        .args(args)
        .output()
        .expect("drover runs")
}

#[test]
fn exit_codes_and_messages() {
    // (arguments, exit code, text that must appear on stdout or stderr)
    let cases: &[(&[&str], i32, &str)] = &[
        (&["--help"], 0, "dev"),
        (&["job", "--help"], 0, "dispatch"),
        (&["operator", "workers", "--help"], 0, "pause"),
        (&["--version"], 0, env!("CARGO_PKG_VERSION")),
        (
            &["version"],
            0,
            concat!("drover ", env!("CARGO_PKG_VERSION")),
        ),
        (&["completion", "bash"], 0, "complete -F _drover"),
        (&["completion", "zsh"], 0, "#compdef drover"),
        (&["completion", "fish"], 0, "complete -c drover"),
        (&["completion", "tcsh-ish"], 1, "tcsh-ish"),
        (&["server", "--help"], 0, "members"),
        // A job file is checked without a server.
        (
            &[
                "job",
                "validate",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/batch.nomad.hcl"),
            ],
            0,
            "Job validation successful",
        ),
        (
            &["job", "validate", "/no/such/job.hcl"],
            1,
            "/no/such/job.hcl",
        ),
        (&["job", "frobnicate"], 1, "frobnicate"),
        (&["node", "drain"], 1, "<NODE_ID>"),
        // Naming neither one worker nor all names both ways.
        (&["operator", "workers", "pause"], 1, "--all"),
        // `job plan` keeps 1 for "would change": its usage errors exit 255 as its help says.
        (&["job", "plan", "-json"], 255, "--json"),
        (&["job", "plan"], 255, "<FILE>"),
        // Single-dash long flags are Nomad's; an unreachable server is one line naming it.
        (
            &["job", "status", "-json", "-address=http://127.0.0.1:1"],
            1,
            "cannot reach drover at http://127.0.0.1:1",
        ),
        (
            &["node", "status", "--address", "127.0.0.1:1"],
            1,
            "cannot reach drover at http://127.0.0.1:1",
        ),
        // Several addresses: each is tried, and each failure is named.
        (
            &["node", "status", "--address", "127.0.0.1:1, 127.0.0.1:2"],
            1,
            "no server answers: http://127.0.0.1:1 (",
        ),
        (
            &["node", "status", "--address", " , "],
            1,
            "no server address given",
        ),
    ];
    for (args, want_code, want_text) in cases {
        let out = drover(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(*want_code), "{args:?}: {text}");
        assert!(
            text.contains(want_text),
            "{args:?} should print {want_text:?}: {text}"
        );
    }
}

#[test]
fn server_errors_are_a_single_line() {
    let out = drover(&["eval", "list", "--address", "http://127.0.0.1:1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("Error: "), "{stderr}");
}
