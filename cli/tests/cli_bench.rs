//! `drover bench` as an operator runs it: the real binary starts its own server and
//! simulated nodes, places every allocation and reports figures that add up; flags that
//! cannot work are refused before anything starts, naming the flag.

mod cli_support;

use cli_support::{code, json, stderr};
use std::process::Output;
use std::time::Duration;

/// Far above the few seconds a small run takes, so only a hang fails on it.
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// Runs `drover bench ARGS` with no server address in the environment, so it starts its own.
fn bench(args: &[&str]) -> Output {
    assert_cmd::Command::new(env!("CARGO_BIN_EXE_drover"))
        .env_remove("DROVER_ADDR")
        .arg("bench")
        .args(args)
        .timeout(RUN_LIMIT)
        .output()
        .expect("drover runs")
}

fn positive(report: &serde_json::Value, field: &str) -> f64 {
    let value = report[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} is a number in {report:#}"));
    assert!(value > 0.0, "{field} is {value}, want > 0 in {report:#}");
    value
}

#[test]
fn a_small_run_places_every_allocation_and_reports_its_timings() {
    let report = json(&bench(&[
        "--nodes", "20", "--jobs", "4", "--count", "5", "--json",
    ]));
    for (field, want) in [
        ("server_mode", serde_json::json!("in-process")),
        ("nodes", 20.into()),
        ("jobs", 4.into()),
        ("count_per_job", 5.into()),
        ("allocations", 20.into()),
        ("placed", 20.into()),
        ("running", serde_json::Value::Null),
    ] {
        assert_eq!(report[field], want, "{field} in {report:#}");
    }
    positive(&report, "node_registration_secs");
    let submit = positive(&report, "submit_secs");
    let placement = positive(&report, "placement_secs");
    assert!(
        placement >= submit,
        "placement ({placement}s) includes submission ({submit}s)"
    );
    let rate = positive(&report, "placements_per_sec");
    assert!(
        (rate * placement - 20.0).abs() < 0.01,
        "rate {rate}/s is the 20 placements over {placement}s"
    );
    // At least the 4 job registrations and one plan.
    assert!(
        report["raft_entries_applied"].as_u64() >= Some(5),
        "{report:#}"
    );
    positive(&report, "peak_rss_mib");
    // The same placements through core alone, and the ratio of the two rates.
    assert_eq!(report["core"]["placed"], 20, "{report:#}");
    let core = positive(&report["core"], "placements_per_sec");
    let ratio = positive(&report, "end_to_end_vs_core");
    assert!(
        (ratio * core - rate).abs() < 1e-6 * rate.max(1.0),
        "{report:#}"
    );
    assert!(
        report["server_address"]
            .as_str()
            .is_some_and(|a| a.starts_with("http://127.0.0.1:"))
    );
}

/// The latency scenario times each job from Register to its eval's COMPLETE event, and
/// its phases add up to the whole.
#[test]
fn the_latency_scenario_times_each_phase_of_a_job() {
    let report = json(&bench(&[
        "--scenario",
        "latency",
        "--nodes",
        "10",
        "--jobs",
        "5",
        "--count",
        "2",
        "--json",
    ]));
    assert_eq!(report["scenario"], "latency", "{report:#}");
    assert_eq!(report["samples"], 5, "{report:#}");
    assert_eq!(report["count_per_job"], 2, "{report:#}");
    let ms = |phase: &str, p: &str| {
        report[phase][p]
            .as_f64()
            .unwrap_or_else(|| panic!("{phase}.{p} in {report:#}"))
    };
    for phase in ["total", "commit", "schedule", "finish"] {
        assert!(
            ms(phase, "p50_ms") <= ms(phase, "p99_ms"),
            "{phase}: {report:#}"
        );
        assert!(
            ms(phase, "p99_ms") <= ms(phase, "max_ms"),
            "{phase}: {report:#}"
        );
    }
    assert!(ms("total", "p50_ms") > 0.0, "{report:#}");
    // No phase of a job outlasts the whole of the slowest one.
    for phase in ["commit", "schedule", "finish"] {
        assert!(
            ms(phase, "max_ms") <= ms("total", "max_ms") + 1e-6,
            "{phase}: {report:#}"
        );
    }
}

/// The storm scenario places every system job on every node that registered at once,
/// and counts the evaluations that took.
#[test]
fn the_storm_scenario_places_every_system_job_on_every_node() {
    let report = json(&bench(&[
        "--scenario",
        "storm",
        "--nodes",
        "12",
        "--jobs",
        "3",
        "--json",
    ]));
    assert_eq!(report["scenario"], "storm", "{report:#}");
    assert_eq!(report["allocations"], 36, "{report:#}");
    assert_eq!(report["placed"], 36, "{report:#}");
    positive(&report, "all_placed_secs");
    // At least the three registrations' evals, and at least one per (node, job) is not
    // required: a node's registration may cover several jobs.
    assert!(report["evals_created"].as_u64() >= Some(3), "{report:#}");
    assert!(
        report["max_outstanding_per_job"].as_u64().is_some(),
        "{report:#}"
    );
}

#[test]
fn until_running_waits_for_the_nodes_to_report_them_running() {
    let report = json(&bench(&[
        "--nodes", "5", "--jobs", "2", "--count", "3", "--until", "running", "-json",
    ]));
    assert_eq!(report["placed"], 6, "{report:#}");
    assert_eq!(report["running"], 6, "{report:#}");
    let placement = positive(&report, "placement_secs");
    let running = positive(&report, "running_secs");
    assert!(
        running >= placement,
        "running ({running}s) comes after placement ({placement}s)"
    );
    assert_eq!(report["settings"]["until"], "running");
}

#[test]
fn flags_that_cannot_work_are_refused_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--nodes", "0"], "--nodes"),
        (&["--jobs", "0"], "--jobs"),
        (&["--count", "0"], "--count"),
        (&["--in-flight", "0"], "--in-flight"),
        (&["--timeout", "0s"], "--timeout"),
        (&["--timeout", "soon"], "--timeout"),
        (&["--until", "done"], "--until"),
        // 10 MHz each on a 4,000 MHz node: 400 per node, so 401 cannot fit.
        (
            &["--nodes", "1", "--jobs", "1", "--count", "401"],
            "--nodes",
        ),
        (&["--cpu", "5000"], "--cpu"),
    ];
    for (args, flag) in cases {
        let out = bench(args);
        assert_eq!(code(&out), 1, "{args:?}: {}", stderr(&out));
        let message = stderr(&out);
        assert!(
            message.contains(flag),
            "{args:?}: the error names {flag}: {message}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}
