//! Nomad syntax decoding to the job it means.

use super::{Expect, check_all, job};
use drover_core::types::{JobType, Operator};

#[test]
fn nomad_syntax_decodes_to_the_job_it_means() {
    let cases: Vec<(String, Expect)> = vec![
        // Interpolations are left for the agent; `$${` is HCL's escape for a literal `${`.
        (
            job("", "      env {\n        DIR = \"${NOMAD_ALLOC_DIR}/data\"\n        RAW = \"$${HOME}\"\n      }\n"),
            Expect::Job(|j| {
                let env = &j.groups[0].tasks[0].env;
                assert_eq!(env["DIR"], "${NOMAD_ALLOC_DIR}/data");
                assert_eq!(env["RAW"], "${HOME}");
            }),
        ),
        // Constant expressions are computed; numbers and bools in maps become strings.
        (
            job("    meta = { version = 2, canary = false }\n", "      resources {\n        memory = 256 * 4\n        cpu    = (true ? 300 : 100)\n      }\n"),
            Expect::Job(|j| {
                let g = &j.groups[0];
                assert_eq!(g.tasks[0].resources.memory_mb, 1024);
                assert_eq!(g.tasks[0].resources.cpu_mhz, 300);
                assert_eq!(g.meta["version"], "2");
                assert_eq!(g.meta["canary"], "false");
            }),
        ),
        // Heredocs, with `<<-` stripping the common indentation.
        (
            job("", "      meta {\n        script = <<-EOT\n          echo one\n          echo two\n        EOT\n      }\n"),
            Expect::Job(|j| {
                assert_eq!(j.groups[0].tasks[0].meta["script"], "echo one\necho two\n");
            }),
        ),
        // Task constraints join the group's; operator shorthands become operators.
        (
            job(
                "    constraint {\n      distinct_hosts = true\n    }\n",
                "      constraint {\n        attribute = \"${attr.kernel.name}\"\n        regexp    = \"^lin\"\n      }\n",
            ),
            Expect::Job(|j| {
                let c = &j.groups[0].constraints;
                assert_eq!(c.len(), 2);
                assert_eq!(c[0].operator, Operator::DistinctHosts);
                assert_eq!((c[1].l_target.as_str(), c[1].operator, c[1].r_target.as_str()), ("${attr.kernel.name}", Operator::Regexp, "^lin"));
            }),
        ),
        // A constraint without an operator is an equality, as in Nomad.
        (
            "job \"t\" {\n  constraint {\n    attribute = \"${meta.rack}\"\n    value     = \"r1\"\n  }\n  group \"g\" {\n    task \"t\" {\n      driver = \"mock\"\n    }\n  }\n}\n".into(),
            Expect::Job(|j| assert_eq!(j.constraints[0].to_string(), "${meta.rack} = r1")),
        ),
        // Batch groups start from Nomad's batch policies; a job-level reschedule and update
        // apply to every group, which may override single fields.
        (
            "job \"t\" {\n  type = \"batch\"\n  reschedule {\n    attempts = 5\n    interval = \"2h\"\n  }\n  group \"g\" {\n    reschedule {\n      delay = \"10s\"\n    }\n    task \"t\" {\n      driver = \"mock\"\n    }\n  }\n}\n".into(),
            Expect::Job(|j| {
                assert_eq!(j.job_type, JobType::Batch);
                let g = &j.groups[0];
                assert_eq!((g.restart.attempts, g.restart.interval.as_secs()), (3, 24 * 3600));
                assert_eq!((g.reschedule.attempts, g.reschedule.interval.as_secs(), g.reschedule.delay.as_secs()), (5, 7200, 10));
            }),
        ),
        (
            job("    update {\n      stagger = \"5s\"\n    }\n", "").replace("job \"t\" {\n", "job \"t\" {\n  update {\n    max_parallel = 4\n  }\n"),
            Expect::Job(|j| {
                assert_eq!(j.update.max_parallel, 4);
                let own = j.groups[0].update.as_ref().expect("group update");
                assert_eq!((own.max_parallel, own.stagger.as_secs()), (4, 5));
            }),
        ),
        // Other drivers keep their settings in `extra`.
        (
            "job \"t\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"mock\"\n      config {\n        run_for = \"5s\"\n        exit_code = 3\n      }\n    }\n  }\n}\n".into(),
            Expect::Job(|j| {
                let extra = &j.groups[0].tasks[0].config.extra;
                assert_eq!((extra["run_for"].as_str(), extra["exit_code"].as_str()), ("5s", "3"));
            }),
        ),
        // The older stop_after_client_disconnect attribute.
        (
            job("    stop_after_client_disconnect = \"90s\"\n", ""),
            Expect::Job(|j| {
                assert_eq!(j.groups[0].stop_after_client_disconnect.map(|d| d.as_secs()), Some(90));
                assert_eq!(j.groups[0].disconnect, None);
            }),
        ),
    ];
    check_all(cases);
}
