//! HCL2 variables in job files: values from defaults, `NOMAD_VAR_*`, var files and
//! `-var` (in that order of precedence), locals, functions, and exact errors.

use drover_core::jobspec::{Inputs, file_references, parse_hcl_with};
use drover_core::types::Job;

const JOB: &str = r#"variable "image_tag" {
  type    = string
  default = "1.0"
}

variable "count" {
  type = number
  validation {
    condition     = var.count > 0
    error_message = "count must be positive"
  }
}

variable "dcs" {
  type    = list(string)
  default = ["dc1"]
}

variable "labels" {
  type    = map(string)
  default = { team = "web" }
}

locals {
  name    = "${upper(var.labels["team"])}-${var.image_tag}"
  args    = concat(["-c"], [format("echo %s x%d", local.name, var.count)])
  motd    = trimspace(file("motd.txt"))
  expires = timeadd("2024-01-02T03:04:05Z", "36h")
}

job "web" {
  datacenters = var.dcs
  meta = {
    name    = local.name
    encoded = base64encode(local.motd)
    json    = jsonencode(var.labels)
    expires = local.expires
    keys    = join(",", keys(merge(var.labels, { extra = "1" })))
  }
  group "g" {
    count = var.count * 2
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = local.args
      }
      env {
        NODE = "${attr.unique.hostname}"
        TAG  = "v${var.image_tag} on ${node.class}"
      }
    }
  }
}
"#;

fn inputs(vars: &[(&str, &str)], env: &[(&str, &str)], files: &[(&str, &str)]) -> Inputs {
    let pairs = |items: &[(&str, &str)]| -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    Inputs {
        vars: pairs(vars),
        env: pairs(env),
        var_files: files
            .iter()
            .map(|(label, text)| (label.to_string(), text.to_string()))
            .collect(),
        files: [("motd.txt".to_string(), "  hello  \n".to_string())].into(),
        seed: 0,
    }
}

fn parse(src: &str, inputs: &Inputs) -> Result<Job, String> {
    parse_hcl_with(src, "t.hcl", inputs).map_err(|e| e.to_string())
}

#[test]
fn variables_locals_and_functions_make_the_job() {
    let job = parse(JOB, &inputs(&[("count", "3")], &[], &[])).expect("parses");
    insta::assert_debug_snapshot!(job);
}

#[test]
fn later_sources_win_over_earlier_ones() {
    let tag = |i: &Inputs| {
        let job = parse(JOB, i).unwrap_or_else(|e| panic!("{e}"));
        job.groups[0].tasks[0].env["TAG"].clone()
    };
    let table: &[(&str, Inputs, &str)] = &[
        (
            "default",
            inputs(&[("count", "1")], &[], &[]),
            "v1.0 on ${node.class}",
        ),
        (
            "environment over default",
            inputs(&[("count", "1")], &[("image_tag", "2.0")], &[]),
            "v2.0 on ${node.class}",
        ),
        (
            "var file over environment",
            inputs(
                &[("count", "1")],
                &[("image_tag", "2.0")],
                &[("a.hcl", "image_tag = \"3.0\"\n")],
            ),
            "v3.0 on ${node.class}",
        ),
        (
            "the last var file",
            inputs(
                &[("count", "1")],
                &[],
                &[
                    ("a.hcl", "image_tag = \"3.0\"\n"),
                    ("b.hcl", "image_tag = \"3.1\"\n"),
                ],
            ),
            "v3.1 on ${node.class}",
        ),
        (
            "-var over everything",
            inputs(
                &[("count", "1"), ("image_tag", "4.0")],
                &[("image_tag", "2.0")],
                &[("a.hcl", "image_tag = \"3.0\"\n")],
            ),
            "v4.0 on ${node.class}",
        ),
    ];
    for (name, i, want) in table {
        assert_eq!(tag(i), *want, "{name}");
    }
    let lists = parse(
        JOB,
        &inputs(&[("count", "1"), ("dcs", r#"["a", "b"]"#)], &[], &[]),
    )
    .expect("a list from -var");
    assert_eq!(lists.datacenters, ["a", "b"]);
}

#[test]
fn bad_variables_are_reported_where_they_are() {
    let file_job = "job \"j\" {\n  meta = { a = file(\"missing.txt\") }\n}\n";
    let table: Vec<(&str, Inputs, &str)> = vec![
        (
            JOB,
            inputs(&[], &[], &[]),
            r#"t.hcl:6:1: variable "count" has no value: give it a default, -var count=..., a -var-file, or NOMAD_VAR_count"#,
        ),
        (
            JOB,
            inputs(&[("count", "0")], &[], &[]),
            r#"t.hcl:9:21: variable "count": count must be positive"#,
        ),
        (
            JOB,
            inputs(&[("count", "1"), ("nope", "x")], &[], &[]),
            r#"t.hcl: -var nope: undeclared variable "nope""#,
        ),
        (
            JOB,
            inputs(
                &[("count", "1")],
                &[],
                &[("vars.hcl", "image_tag = \"2\"\ncolour = \"red\"\n")],
            ),
            r#"t.hcl: vars.hcl:2:10: undeclared variable "colour""#,
        ),
        (
            JOB,
            inputs(&[("count", "many")], &[], &[]),
            "t.hcl: -var count: undefined variable `many`",
        ),
        (
            "variable \"n\" {\n  type    = number\n  default = \"abc\"\n}\njob \"j\" {}\n",
            inputs(&[], &[], &[]),
            r#"t.hcl:3:13: variable "n": default: expected number, got string "abc""#,
        ),
        (
            "variable \"n\" {\n  type = strng\n}\njob \"j\" {}\n",
            inputs(&[], &[], &[]),
            concat!(
                "t.hcl:1:1: variable \"n\" has no value: give it a default, -var n=..., a -var-file, or NOMAD_VAR_n\n",
                "t.hcl:2:10: variable \"n\": type: unknown type \"strng\"",
            ),
        ),
        (
            "variable \"n\" {\n  defualt = 1\n}\njob \"j\" {}\n",
            inputs(&[], &[], &[]),
            concat!(
                "t.hcl:1:1: variable \"n\" has no value: give it a default, -var n=..., a -var-file, or NOMAD_VAR_n\n",
                "t.hcl:2:3: unknown attribute \"defualt\" in variable \"n\"; did you mean \"default\"?",
            ),
        ),
        (
            "locals {\n  a = local.b\n  b = local.a\n}\njob \"j\" {}\n",
            inputs(&[], &[], &[]),
            concat!(
                "t.hcl:2:7: local \"a\": no such key: `b`\n",
                "t.hcl:3:7: local \"b\": no such key: `a`",
            ),
        ),
        (
            file_job,
            inputs(&[], &[], &[]),
            "t.hcl:2:16: cannot evaluate `file(\"missing.txt\")`: file(\"missing.txt\"): not read; drover reads the files a job names with a literal path, relative to the working directory",
        ),
    ];
    let mut failures = Vec::new();
    for (src, i, want) in table {
        match parse(src, &i) {
            Err(got) if got == want => {}
            Err(got) => failures.push(format!("{src}\n  got:  {got}\n  want: {want}")),
            Ok(_) => failures.push(format!("{src}\n  parsed, want: {want}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_files_a_job_reads_are_named_for_the_caller() {
    assert_eq!(file_references(JOB), ["motd.txt"]);
    assert!(file_references("job \"j\" {}").is_empty());
}

/// The common CI idioms of Nomad's HCL2: `can(regex(...))` in a validation, `try` for an
/// optional setting, and the hash, YAML, date, UUID and network functions in locals.
const IDIOMS: &str = r#"variable "version" {
  type = string
  validation {
    condition     = can(regex("^[0-9]+\\.[0-9]+$", var.version))
    error_message = "version must be MAJOR.MINOR"
  }
}

variable "settings" {
  type    = map(string)
  default = { region = "eu" }
}

locals {
  port    = try(var.settings["port"], "8080")
  region  = try(var.settings["region"], "us")
  subnets = cidrsubnets("10.20.0.0/16", 8, 8)
  config  = yamlencode({ region = local.region, subnets = local.subnets })
  ports   = [for p in ["80", "x", "443"] : try(tonumber(p), 0)]
  label   = "web-${try(var.settings["tier"], "standard")}"
}

job "web" {
  meta = {
    port    = local.port
    region  = local.region
    gateway = cidrhost(local.subnets[0], 1)
    netmask = cidrnetmask(local.subnets[1])
    config  = local.config
    ports   = jsonencode(local.ports)
    id      = uuidv5("dns", "web-${var.version}.example")
    digest  = sha256(local.config)
    built   = formatdate("EEE, DD MMM YYYY", "2024-01-02T03:04:05Z")
    lines   = join(";", formatlist("%s=%s", ["region", "port"], [local.region, local.port]))
    label   = local.label
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
"#;

#[test]
fn can_and_try_catch_what_they_are_given() {
    let job = parse(IDIOMS, &inputs(&[("version", "1.2")], &[], &[])).expect("parses");
    insta::assert_debug_snapshot!(job.meta);

    let table: &[(&str, &str)] = &[
        (
            "1.x",
            r#"t.hcl:4:21: variable "version": version must be MAJOR.MINOR"#,
        ),
        (
            "",
            r#"t.hcl:4:21: variable "version": version must be MAJOR.MINOR"#,
        ),
    ];
    let mut failures = Vec::new();
    for (version, want) in table {
        match parse(IDIOMS, &inputs(&[("version", version)], &[], &[])) {
            Err(got) if got == *want => {}
            other => failures.push(format!("version {version:?}: want {want}, got {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `uuid()` draws from the caller's seed (core draws no randomness): fresh ids within a
/// read, the same ids for the same seed, others for another.
#[test]
fn uuids_come_from_the_callers_seed() {
    let src = "job \"j\" {\n  meta = { a = uuid(), b = uuidv4() }\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n      config { command = \"/bin/true\" }\n    }\n  }\n}\n";
    let ids = |seed: u64| {
        let i = Inputs {
            seed,
            ..Inputs::default()
        };
        let job = parse(src, &i).unwrap_or_else(|e| panic!("{e}"));
        (job.meta["a"].clone(), job.meta["b"].clone())
    };
    let (a, b) = ids(1);
    for id in [&a, &b] {
        let parsed = uuid::Uuid::parse_str(id).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(parsed.get_version_num(), 4, "{id}");
    }
    assert_ne!(a, b, "two calls, two ids");
    assert_eq!(ids(1), (a.clone(), b), "the same seed, the same ids");
    assert_ne!(ids(2).0, a, "another seed, other ids");
    let err = parse(
        "job \"j\" {\n  meta = { a = uuid(1) }\n}\n",
        &Inputs::default(),
    )
    .expect_err("uuid takes no argument");
    assert!(err.contains("uuid: takes no arguments, got 1"), "{err}");
}
