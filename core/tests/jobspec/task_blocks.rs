//! Issue 32's task and group blocks: `lifecycle`, `user`, `kill_signal`, a task's own
//! `restart`, group `ephemeral_disk`, and the resources settings still refused by name.

use super::{Expect, check_all, job};
use drover_core::types::{Job, LifecycleHook};

fn only_task(job: &Job) -> &drover_core::types::Task {
    &job.groups[0].tasks[0]
}

#[test]
fn task_blocks_parse_and_their_mistakes_are_named_where_they_are() {
    let two_tasks = |extra: &str| {
        format!(
            "job \"t\" {{\n  group \"g\" {{\n    task \"main\" {{\n      driver = \"raw_exec\"\n      config {{ command = \"/bin/true\" }}\n    }}\n    task \"t\" {{\n      driver = \"raw_exec\"\n      config {{ command = \"/bin/true\" }}\n{extra}    }}\n  }}\n}}\n"
        )
    };
    let cases: Vec<(String, Expect)> = vec![
        (
            job(
                "    ephemeral_disk {\n      size = 500\n    }\n",
                "      user = \"nobody\"\n      kill_signal = \"SIGINT\"\n      restart {\n        attempts = 1\n      }\n",
            ),
            Expect::Job(|j| {
                let t = only_task(j);
                assert_eq!(t.user.as_deref(), Some("nobody"));
                assert_eq!(t.kill_signal.as_deref(), Some("SIGINT"));
                let restart = t.restart.as_ref().expect("task restart");
                assert_eq!(restart.attempts, 1);
                assert_eq!(
                    restart.delay, j.groups[0].restart.delay,
                    "the type's default"
                );
                let g = &j.groups[0];
                assert_eq!(g.ephemeral_disk.map(|d| d.size_mb), Some(500));
                assert_eq!(g.resources().disk_mb, t.resources.disk_mb + 500);
            }),
        ),
        (
            two_tasks(
                "      lifecycle {\n        hook    = \"prestart\"\n        sidecar = true\n      }\n",
            ),
            Expect::Job(|j| {
                let l = j.groups[0].tasks[1].lifecycle.as_ref().expect("lifecycle");
                assert_eq!((l.hook, l.sidecar), (LifecycleHook::Prestart, true));
                assert!(j.groups[0].tasks[0].lifecycle.is_none());
            }),
        ),
        (
            two_tasks("      lifecycle {\n        sidecar = true\n      }\n"),
            Expect::Err("t.hcl:10:7: lifecycle needs a hook (prestart, poststart or poststop)"),
        ),
        (
            two_tasks("      lifecycle {\n        hook = \"prestrat\"\n      }\n"),
            Expect::Err(
                "t.hcl:11:16: hook: unknown value \"prestrat\" (one of prestart, poststart, poststop); did you mean \"prestart\"?",
            ),
        ),
        (
            job(
                "",
                "      lifecycle {\n        hook = \"prestart\"\n      }\n",
            ),
            Expect::Err(
                "t.hcl:2:3: groups[g].tasks: at least one main task (without a lifecycle block) is required",
            ),
        ),
        (
            two_tasks(
                "      lifecycle {\n        hook    = \"poststop\"\n        sidecar = true\n      }\n",
            ),
            Expect::Err(
                "t.hcl:12:19: groups[g].tasks[t].lifecycle.sidecar: a poststop task cannot be a sidecar (it runs after the main tasks end)",
            ),
        ),
        (
            job("", "      kill_signal = \"SIGNOPE\"\n"),
            Expect::Err(
                "t.hcl:6:21: groups[g].tasks[t].kill_signal: kill_signal \"SIGNOPE\" is not a signal name (e.g. SIGINT)",
            ),
        ),
        (
            job("    ephemeral_disk {\n      sticky = true\n    }\n", ""),
            Expect::Err(
                "t.hcl:4:7: \"sticky\" in ephemeral_disk is a Nomad feature drover does not support",
            ),
        ),
        (
            job("", "      resources {\n        memory_max = 512\n      }\n"),
            Expect::Err(
                "t.hcl:7:9: \"memory_max\" in resources is a Nomad feature drover does not support",
            ),
        ),
    ];
    check_all(cases);
}
