//! JSON: drover's own format round-trips, Nomad's format decodes or is refused by name.

use super::parse_file;
use drover_core::jobspec::{parse_hcl, parse_json, parse_source};
use proptest::prelude::*;

/// Every example survives JSON: serialized by serde and read back by `parse_json`, it is
/// the same job.
#[test]
fn examples_round_trip_through_json() {
    insta::glob!("../../../examples", "*.hcl", |path| {
        let job = parse_file(path).unwrap_or_else(|e| panic!("{e}"));
        let text = serde_json::to_string_pretty(&job).expect("serialize");
        assert_eq!(parse_json(&text, "job.json").expect("parse back"), job);
    });
}

/// Nomad's JSON form of the raw_exec example is the same job as its HCL.
#[test]
fn nomad_json_matches_the_hcl_it_was_written_from() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let from_json = parse_file(&examples.join("nomad-raw-exec.json")).expect("json example");
    let from_hcl = parse_file(&examples.join("nomad-raw-exec.nomad.hcl")).expect("hcl example");
    assert_eq!(from_json, from_hcl);
}

/// A docker task's `ports` in Nomad's JSON are the labels HCL's `ports = [...]` gives.
#[test]
fn nomad_json_docker_ports_match_hcl() {
    let json = r#"{"Job": {"ID": "t", "TaskGroups": [{"Name": "g", "Networks": [{"Mode": "host", "DynamicPorts": [{"Label": "http", "Value": 0, "To": 8080}]}], "Tasks": [{"Name": "t", "Driver": "docker", "Config": {"image": "busybox:1", "ports": ["http"]}}]}]}}"#;
    let hcl = r#"job "t" {
  group "g" {
    network {
      port "http" {
        to = 8080
      }
    }
    task "t" {
      driver = "docker"
      config {
        image = "busybox:1"
        ports = ["http"]
      }
    }
  }
}
"#;
    let from_json = parse_json(json, "t.json").unwrap_or_else(|e| panic!("{e}"));
    let from_hcl = parse_hcl(hcl, "t.hcl").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(from_json.groups[0].tasks[0].config.ports, ["http"]);
    assert_eq!(from_json, from_hcl);
}

#[test]
fn nomad_json_refuses_what_it_cannot_honour() {
    let doc = |job: &str, group: &str| {
        format!(
            r#"{{"Job": {{"ID": "t", {job} "TaskGroups": [{{"Name": "g", {group} "Tasks": [{{"Name": "t", "Driver": "mock"}}]}}]}}}}"#
        )
    };
    for (job, group, want) in [
        (
            "",
            r#""Cuont": 2,"#,
            r#"j.json: Job.TaskGroups[0]: unknown key "Cuont"; did you mean "Count"?"#,
        ),
        (
            "",
            r#""Networks": [{"Mode": "bridge"}],"#,
            r#"j.json: Job.TaskGroups[0].Networks[0].Mode: network mode "bridge" is not supported: drover runs host networking only ("host")"#,
        ),
        (
            "",
            r#""Networks": [{"Mode": "host", "MBits": 0, "DynamicPorts": [{"Label": "http", "Value": 0, "To": 0, "HostNetwork": "default"}], "ReservedPorts": null}],"#,
            "ok",
        ),
        (
            "",
            r#""Count": "many","#,
            "j.json: Job.TaskGroups[0].Count: expected a whole number, got string",
        ),
        ("", r#""Count": 0, "Services": [],"#, "ok"),
        (
            "",
            r#""Services": [{"Name": "db", "Provider": "consul"}],"#,
            r#"j.json: Job.TaskGroups[0].Services[0].Provider: provider "consul" is not supported: drover has no consul, its own catalog is provider "nomad""#,
        ),
        (
            "",
            r#""Services": [{"Name": "db", "Checks": [{"Type": "tcp", "Interval": 500000000, "Timeout": 100000000}]}],"#,
            "j.json: groups[g].services[0].checks[0].interval: interval 500ms is below the minimum of 1s\nj.json: groups[g].services[0].checks[0].type: a tcp check reaches the service through its port: set the service's port",
        ),
        // What the server sets on register is ignored; what changes meaning is refused.
        (r#""Status": "running", "Version": 7,"#, "", "ok"),
        (
            r#""Stop": true,"#,
            "",
            "j.json: Job.Stop: a Nomad feature drover does not support",
        ),
    ] {
        let got = parse_json(&doc(job, group), "j.json")
            .map(|_| "ok".to_owned())
            .unwrap_or_else(|e| e.to_string());
        assert_eq!(got, want, "{job}{group}");
    }
}

#[test]
fn json_errors_carry_positions() {
    let err = parse_json("{\n  \"id\": 5\n}", "j.json").expect_err("not a job");
    assert_eq!(
        err.to_string(),
        "j.json:2:9: invalid json: invalid type: integer `5`, expected a string"
    );
}

/// Escapes text as an HCL quoted string, `${` and `%{` included.
fn hcl_quote(text: &str) -> String {
    let mut out = String::from("\"");
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

proptest! {
    /// Any argument and environment value written as an HCL string reads back exactly, and
    /// the parsed job survives a JSON round trip unchanged.
    #[test]
    fn strings_and_numbers_round_trip(
        args in proptest::collection::vec("\\PC{0,24}", 0..4),
        value in "[ -~]{0,24}",
        count in 1u32..500,
        cpu in 1u64..100_000,
        kill_secs in 0u64..3600,
    ) {
        let args_hcl: Vec<String> = args.iter().map(|a| hcl_quote(a)).collect();
        let src = format!(
            "job \"p\" {{\n  group \"g\" {{\n    count = {count}\n    task \"t\" {{\n      driver = \"raw_exec\"\n      kill_timeout = \"{kill_secs}s\"\n      config {{\n        command = \"/bin/echo\"\n        args = [{}]\n      }}\n      env {{\n        V = {}\n      }}\n      resources {{\n        cpu = {cpu}\n      }}\n    }}\n  }}\n}}\n",
            args_hcl.join(", "),
            hcl_quote(&value),
        );
        let job = parse_hcl(&src, "p.hcl").map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
        let group = &job.groups[0];
        let task = &group.tasks[0];
        prop_assert_eq!(&task.config.args, &args);
        prop_assert_eq!(&task.env["V"], &value);
        prop_assert_eq!(group.count, count);
        prop_assert_eq!(task.resources.cpu_mhz, cpu);
        prop_assert_eq!(task.kill_timeout.as_secs(), kill_secs);
        let text = serde_json::to_string(&job).expect("serialize");
        prop_assert_eq!(parse_json(&text, "p.json").expect("parse back"), job);
    }
}

/// A job file is JSON by its extension, else by its first character.
#[test]
fn parse_source_picks_the_format() {
    let hcl = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/batch.nomad.hcl"),
    )
    .expect("example");
    let want = parse_hcl(&hcl, "batch").expect("example parses");
    let json = serde_json::to_string(&want).expect("serialize");
    for (name, text) in [
        ("job.json", json.as_str()),
        ("job", json.as_str()),
        ("job.txt", hcl.as_str()),
        ("job.nomad", hcl.as_str()),
    ] {
        assert_eq!(parse_source(text, name).expect(name), want, "{name}");
    }
    let err = parse_source(&json, "job.hcl").expect_err("json named .hcl is read as hcl");
    assert!(err.to_string().starts_with("job.hcl:"), "{err}");
}
