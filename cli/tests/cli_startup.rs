//! A long-running command that cannot start: the port conflict said once with its hint,
//! and the logs before it plain (no colour codes into a pipe), filtered by `--log-level`,
//! as JSON with `--log-json`, and without openraft's state dumps.

use crate::cli_support;

use cli_support::{assert_code, drover_at, stderr};

/// How the logs written before the failure must look.
#[derive(Clone, Copy, Debug)]
enum Logs {
    /// Text lines at info and above, openraft's info lines left out.
    Text,
    /// Every line a JSON object with a level.
    Json,
    /// Nothing below warn.
    WarnOnly,
    /// No logs: the failure comes before anything starts.
    None,
}

#[tokio::test(flavor = "multi_thread")]
async fn a_taken_port_is_one_line_with_a_hint_and_logs_follow_the_flags() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("binds port 0");
    let addr = taken.local_addr().expect("has an address").to_string();
    let cases: &[(&str, &[&str], &str, Logs)] = &[
        ("api", &["--bind", &addr], "--bind", Logs::Text),
        (
            "raft",
            &["--bind", "127.0.0.1:0", "--raft-addr", &addr],
            "--raft-addr",
            Logs::None,
        ),
        (
            "metrics as json",
            &[
                "--bind",
                "127.0.0.1:0",
                "--metrics-addr",
                &addr,
                "--log-json",
            ],
            "--metrics-addr",
            Logs::Json,
        ),
        (
            "api at warn",
            &["--bind", &addr, "--log-level", "warn"],
            "--bind",
            Logs::WarnOnly,
        ),
    ];
    for (name, flags, flag, logs) in cases {
        let data_dir = tempfile::tempdir().expect("temp dir");
        let dir = data_dir.path().to_str().expect("utf-8 temp dir");
        let mut args = vec!["server", "--data-dir", dir];
        if !flags.contains(&"--raft-addr") {
            args.extend(["--raft-addr", "127.0.0.1:0"]);
        }
        if !flags.contains(&"--metrics-addr") {
            args.extend(["--metrics-addr", "127.0.0.1:0"]);
        }
        args.extend_from_slice(flags);
        let out = drover_at("http://127.0.0.1:1", &args).await;
        assert_code(&out, 1);
        let err = stderr(&out);
        assert!(
            !err.contains('\x1b'),
            "{name}: colour codes in a pipe:\n{err}"
        );
        let (error_lines, log_lines): (Vec<&str>, Vec<&str>) =
            err.lines().partition(|l| l.starts_with("Error: "));
        assert_eq!(
            error_lines,
            vec![format!(
                "Error: address {addr} ({flag}) is already in use: another drover or another \
                 program listens there; pick a free one, e.g. {flag} 127.0.0.1:0{}",
                if *flag == "--metrics-addr" {
                    ", or turn metrics off with --no-metrics"
                } else {
                    ""
                }
            )],
            "{name}:\n{err}"
        );
        assert!(
            !log_lines.iter().any(|l| l.contains("openraft")),
            "{name}: openraft's info lines at the default level:\n{err}"
        );
        match logs {
            Logs::Text => assert!(
                log_lines.iter().any(|l| l.contains(" INFO ")),
                "{name}: no info logs:\n{err}"
            ),
            Logs::Json => {
                assert!(!log_lines.is_empty(), "{name}: no logs:\n{err}");
                for line in &log_lines {
                    let v: serde_json::Value = serde_json::from_str(line)
                        .unwrap_or_else(|e| panic!("{name}: not json ({e}): {line}"));
                    assert!(v["level"].is_string(), "{name}: no level: {line}");
                }
            }
            Logs::WarnOnly => assert!(
                !log_lines
                    .iter()
                    .any(|l| l.contains(" INFO ") || l.contains(" DEBUG ")),
                "{name}: logs below warn:\n{err}"
            ),
            Logs::None => assert!(log_lines.is_empty(), "{name}: logs:\n{err}"),
        }
    }
    drop(taken);
}
