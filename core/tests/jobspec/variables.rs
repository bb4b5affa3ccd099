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
