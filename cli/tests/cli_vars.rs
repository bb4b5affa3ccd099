//! Job file variables from the command line: `-var`, `-var-file` and `NOMAD_VAR_*` on
//! `job validate` (as on `job run` and `job plan`), and `file()` reading beside the CLI.

use std::process::Command;

const JOB: &str = r#"variable "count" {
  type = number
  validation {
    condition     = var.count < 10
    error_message = "at most 9 copies"
  }
}
variable "greeting" {
  default = "hi"
}
job "v" {
  meta = { motd = trimspace(file("motd.txt")), greeting = var.greeting }
  group "g" {
    count = var.count
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
"#;

#[test]
fn variables_come_from_flags_files_and_the_environment() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("job.hcl"), JOB).expect("job written");
    std::fs::write(dir.path().join("motd.txt"), "hello\n").expect("motd written");
    std::fs::write(dir.path().join("vars.hcl"), "count = 2\n").expect("var file written");
    std::fs::write(dir.path().join("bad.hcl"), "count = 2\ncolour = 1\n").expect("written");
    let table: &[(&[&str], &[(&str, &str)], i32, &str)] = &[
        (&["-var", "count=3"], &[], 0, "Job validation successful"),
        (
            &["-var-file", "vars.hcl"],
            &[],
            0,
            "Job validation successful",
        ),
        (
            &[],
            &[("NOMAD_VAR_count", "4")],
            0,
            "Job validation successful",
        ),
        (
            &["-var", "count=12"],
            &[("NOMAD_VAR_count", "4")],
            1,
            r#"job.hcl:4:21: variable "count": at most 9 copies"#,
        ),
        (&[], &[], 1, r#"job.hcl:1:1: variable "count" has no value"#),
        (
            &["-var-file", "bad.hcl"],
            &[],
            1,
            r#"bad.hcl:2:10: undeclared variable "colour""#,
        ),
        (
            &["-var", "count"],
            &[],
            1,
            "-var \"count\": expected NAME=VALUE",
        ),
    ];
    let mut failures = Vec::new();
    for (flags, env, code, says) in table {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_drover"));
        cmd.current_dir(dir.path())
            .args(["job", "validate"])
            .args(*flags)
            .arg("job.hcl");
        for (k, v) in *env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("drover runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.code() != Some(*code) || !text.contains(says) {
            failures.push(format!(
                "{flags:?} {env:?}: want exit {code} saying {says:?}, got {:?}:\n{text}",
                out.status.code()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
