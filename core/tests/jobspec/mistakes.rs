//! The mistakes people make in job files, each reported at its exact position.

use super::{Expect, check_all, job};

#[test]
fn common_mistakes_are_reported_where_they_are() {
    let cases: Vec<(String, Expect)> = vec![
        // Unknown attribute, with the closest known name.
        (
            r#"job "t" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        cpus = 100
      }
    }
  }
}"#.into(),
            Expect::Err(r#"t.hcl:9:9: unknown attribute "cpus" in resources; did you mean "cpu"?"#),
        ),
        // Unknown block, with a hint.
        (
            r#"job "t" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      confg {
        command = "/bin/true"
      }
    }
  }
}"#.into(),
            Expect::Err(r#"t.hcl:5:7: unknown block "confg" in task "t"; did you mean "config"?"#),
        ),
        // Wrong type: a string where a number goes.
        (
            r#"job "t" {
  group "g" {
    count = "three"
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}"#.into(),
            Expect::Err(r#"t.hcl:3:13: count: expected a whole number, got string "three""#),
        ),
        // Wrong type: a single string where a list goes.
        (
            r#"job "t" {
  datacenters = "dc1"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}"#.into(),
            Expect::Err(r#"t.hcl:2:17: datacenters: expected a list of strings, got string "dc1""#),
        ),
        // Missing driver: reported at the task by validation.
        (
            r#"job "t" {
  group "g" {
    task "t" {
      config {
        command = "/bin/true"
      }
    }
  }
}"#.into(),
            Expect::Err(
                "t.hcl:3:5: groups[g].tasks[t].driver: driver must be set (known: raw_exec, exec, docker, mock)",
            ),
        ),
        // Bad duration.
        (
            r#"job "t" {
  group "g" {
    task "t" {
      driver       = "raw_exec"
      kill_timeout = "30 seconds"
      config {
        command = "/bin/true"
      }
    }
  }
}"#.into(),
            Expect::Err(
                r#"t.hcl:5:22: kill_timeout: invalid duration "30 seconds": unknown unit " seconds" (use h, m, s, ms, us or ns)"#,
            ),
        ),
        // A duration written as a bare number.
        (
            r#"job "t" {
  group "g" {
    task "t" {
      driver       = "raw_exec"
      kill_timeout = 30
      config {
        command = "/bin/true"
      }
    }
  }
}"#.into(),
            Expect::Err(
                r#"t.hcl:5:22: kill_timeout: expected a duration string like "30s" or "1h30m", got number 30"#,
            ),
        ),
        // Bad cron: found by validation, pointed at the value.
        (
            r#"job "t" {
  type = "batch"
  periodic {
    cron = "61 * * * *"
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}"#.into(),
            Expect::Err("t.hcl:4:12: periodic.cron: cron \"61 * * * *\" is invalid: component error: Number out of bounds"),
        ),
        // Duplicate block.
        (
            r#"job "t" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        cpu = 100
      }
      resources {
        memory = 64
      }
    }
  }
}"#.into(),
            Expect::Err(r#"t.hcl:11:7: duplicate block "resources" in task "t" (first set at 8:7)"#),
        ),
        // More mistakes, in a one-group job whose task body starts at line 6.
        (
            job("    cout = 2\n", ""),
            Expect::Err(r#"t.hcl:3:5: unknown attribute "cout" in group "g"; did you mean "count"?"#),
        ),
        (
            job("    count = true\n", ""),
            Expect::Err("t.hcl:3:13: count: expected a whole number, got bool true"),
        ),
        (
            job("    count = -1\n", ""),
            Expect::Err("t.hcl:3:13: count: -1 is invalid: it must not be negative"),
        ),
        (
            job("    count = 1.5\n", ""),
            Expect::Err("t.hcl:3:13: count: 1.5 is invalid: it must be a whole number"),
        ),
        (
            job("    volume \"data\" {\n      type = \"host\"\n    }\n", ""),
            Expect::Err(r#"t.hcl:3:5: "volume" in group "g" is a Nomad feature drover does not support"#),
        ),
        (
            job("    migrate {\n      health_check = \"task_state\"\n    }\n", ""),
            Expect::Err(r#"t.hcl:4:22: health_check: unknown value "task_state" (one of checks, task_states); did you mean "task_states"?"#),
        ),
        (
            job("    migrate {\n      max_parallel = 0\n    }\n", ""),
            Expect::Err("t.hcl:4:22: groups[g].migrate.max_parallel: max_parallel must be at least 1: a drain moves at least one allocation at a time"),
        ),
        // Deployments (`update`): each bad setting named at its attribute.
        (
            job("    update {\n      health_check = \"task_states\"\n      min_healthy_time = \"5m\"\n      healthy_deadline = \"1m\"\n    }\n", ""),
            Expect::Err("t.hcl:5:26: groups[g].update.min_healthy_time: min_healthy_time 5m must be shorter than healthy_deadline 1m"),
        ),
        (
            job("    update {\n      healthy_deadline = \"10m\"\n      progress_deadline = \"5m\"\n    }\n", ""),
            Expect::Err("t.hcl:4:26: groups[g].update.healthy_deadline: healthy_deadline 10m must be shorter than progress_deadline 5m"),
        ),
        (
            job("    update {\n      auto_promote = true\n    }\n", ""),
            Expect::Err("t.hcl:4:22: groups[g].update.auto_promote: auto_promote needs canaries to promote: set canary above 0"),
        ),
        (
            job("    update {\n      max_parallel = 0\n      canary = 2\n    }\n", ""),
            Expect::Err("t.hcl:4:22: groups[g].update.max_parallel: max_parallel 0 rolls out without a deployment, so its 2 canaries would never be placed: set max_parallel above 0"),
        ),
        (
            job("    update {\n      min_healthy_time = \"-5s\"\n    }\n", ""),
            Expect::Err(r#"t.hcl:4:26: min_healthy_time: invalid duration "-5s": it must not be negative"#),
        ),
        (
            job("", "      resources = { cpu = 100 }\n"),
            Expect::Err(r#"t.hcl:6:7: "resources" in task "t" is a block: write `resources { … }`, not `resources = …`"#),
        ),
        (
            job("    count = 1\n    count = 2\n", ""),
            Expect::Err("t.hcl:4:5: invalid hcl: invalid attribute; expected unique attribute key; found redefined attribute"),
        ),
        (
            job("", "      env = {\n        A = \"1\"\n        \"A\" = \"2\"\n      }\n"),
            Expect::Err(r#"t.hcl:8:9: duplicate key "A" in env (first set at 7:9)"#),
        ),
        (
            job("", "      env = { A = [\"x\"] }\n"),
            Expect::Err("t.hcl:6:19: env[A]: expected a string, got list"),
        ),
        (
            job("    disconnect {\n      lost_after = \"5m\"\n    }\n    max_client_disconnect = \"1m\"\n", ""),
            Expect::Err("t.hcl:6:5: max_client_disconnect cannot be used with a disconnect block (set disconnect { lost_after } instead)"),
        ),
        (
            job("    disconnect {\n      reconcile = \"keep_orignal\"\n    }\n", ""),
            Expect::Err(r#"t.hcl:4:19: reconcile: unknown value "keep_orignal" (one of best_score, keep_original, keep_replacement, longest_running); did you mean "keep_original"?"#),
        ),
        (
            job("", "      env { A = \"%{ if true }x%{ endif }\" }\n"),
            Expect::Err("t.hcl:6:18: template directives (%{ if }, %{ for }) are not supported"),
        ),
        (
            job("", "      env { A = var.region }\n"),
            Expect::Err(r#"t.hcl:6:17: cannot evaluate `var.region`: variable "region" is not declared (declare it in a variable "region" block)"#),
        ),
        (
            job("    cont = 1\n    count = \"x\"\n", ""),
            Expect::Err(concat!(
                "t.hcl:3:5: unknown attribute \"cont\" in group \"g\"; did you mean \"count\"?\n",
                "t.hcl:4:13: count: expected a whole number, got string \"x\"",
            )),
        ),
        ("job {\n}\n".into(), Expect::Err(r#"t.hcl:1:1: job block in the job file needs exactly one label, its name: job "…" { … }"#)),
        ("# nothing here\n".into(), Expect::Err("t.hcl: no job block found: a job file holds one `job \"<id>\" { … }`")),
        ("job \"t\" {\n  count = \n}\n".into(), Expect::Err(
                "t.hcl:2:11: invalid hcl: invalid expression; expected `\"`, `[`, `{`, `-`, `!`, `(`, `_`, `<`, letter or digit",
            )),
        (
            "job \"t\" {\n  type = \"servce\"\n}\n".into(),
            Expect::Err(r#"t.hcl:2:10: type: unknown value "servce" (one of service, batch, system, sysbatch); did you mean "service"?"#),
        ),
        (
            "job \"t\" {\n  region = \"eu\"\n}\n".into(),
            Expect::Err(r#"t.hcl:2:12: region "eu" is not supported: drover runs one region, "global""#),
        ),
        (
            "job \"t\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n      config {\n        command  = \"/bin/true\"\n        work_dir = \"/tmp\"\n      }\n    }\n  }\n}\n".into(),
            Expect::Err(r#"t.hcl:7:9: unknown attribute "work_dir" in config of the raw_exec driver"#),
        ),
        // Problems found by validation point at the field that set them.
        (
            "job \"t\" {\n  group \"g\" {\n    restart {\n      attempts = 3\n      interval = \"0s\"\n    }\n    task \"t\" {\n      driver = \"raw_exec\"\n      config { command = \"/bin/true\" }\n    }\n  }\n}\n".into(),
            Expect::Err("t.hcl:5:18: groups[g].restart.interval: interval must be positive when attempts is 3"),
        ),
        (
            job("", "").replace("  group \"g\" {", "  group \"g\" {\n    task \"x\" {\n      driver = \"mock\"\n    }\n  }\n  group \"g\" {"),
            Expect::Err("t.hcl:7:9: groups[1].name: group name \"g\" is already used by another group"),
        ),
        (
            job("", "      resources {\n        memory = 0\n      }\n"),
            Expect::Err("t.hcl:7:18: groups[g].tasks[t].resources.memory: memory 0 MB is below the minimum of 1 MB"),
        ),
    ];
    check_all(cases);
}
