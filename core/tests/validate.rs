//! Job validation: one case per rule, each starting from a valid job and breaking one thing,
//! plus the shape of the combined error an operator sees.

use drover_core::validate::{Limits, ValidationError, canonicalize, validate_job};
use drover_core::{
    Constraint, DelayFunction, DisconnectPolicy, GroupNetwork, Job, JobType, Operator,
    ParameterizedConfig, PeriodicConfig, PortAsk, ReschedulePolicy, RestartMode, Task, TaskGroup,
    UpdateStrategy,
};
use proptest::prelude::*;
use std::time::Duration;

/// A valid service job: group `web` of three `server` tasks.
fn valid_job() -> Job {
    let task = Task::raw_exec("server", "/usr/bin/server");
    Job::new(
        "web",
        JobType::Service,
        vec![TaskGroup::new("web", 3, vec![task])],
    )
}

fn group(job: &mut Job) -> &mut TaskGroup {
    &mut job.groups[0]
}

fn task(job: &mut Job) -> &mut Task {
    &mut job.groups[0].tasks[0]
}

/// Turns the base job into a valid job of `job_type` (policies that type allows).
fn retype(job: &mut Job, job_type: JobType) {
    job.job_type = job_type;
    match job_type {
        JobType::Service => {}
        JobType::Batch => group(job).reschedule = ReschedulePolicy::batch_default(),
        JobType::System | JobType::SysBatch => {
            group(job).count = 1;
            canonicalize(job);
        }
    }
}

fn periodic(cron: &str) -> PeriodicConfig {
    PeriodicConfig {
        cron: cron.into(),
        prohibit_overlap: true,
        time_zone: String::new(),
        enabled: true,
    }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Applies `mutate` to a valid job and compares the problems found with `expected`, in
/// order: each path exactly, each reason by its start. Nothing more may be reported.
fn outcome(
    limits: &Limits,
    mutate: impl FnOnce(&mut Job),
    expected: &[(&str, &str)],
) -> Result<(), String> {
    let mut job = valid_job();
    mutate(&mut job);
    let errors = match validate_job(&job, limits) {
        Ok(()) => Vec::new(),
        Err(e) => e.errors,
    };
    let matches = errors.len() == expected.len()
        && errors
            .iter()
            .zip(expected)
            .all(|(e, (path, reason))| e.path == *path && e.reason.starts_with(reason));
    if matches {
        Ok(())
    } else {
        Err(format!("expected {expected:#?}\n     got {errors:#?}"))
    }
}

#[track_caller]
fn check(mutate: impl FnOnce(&mut Job), expected: &[(&str, &str)]) {
    if let Err(e) = outcome(&Limits::default(), mutate, expected) {
        panic!("{e}");
    }
}

type Case = (
    &'static str,
    fn(&mut Job),
    &'static [(&'static str, &'static str)],
);

/// Runs every case and reports all that failed, by name, rather than only the first.
#[track_caller]
fn run(cases: &[Case]) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(name, mutate, expected)| {
            outcome(&Limits::default(), mutate, expected)
                .err()
                .map(|e| format!("{name}: {e}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The tests live in a module named after the feature so that `cargo test validate` selects
/// them along with the unit tests of `drover_core::validate`.
mod validate {
    use super::*;

    #[test]
    fn identity() {
        run(&[
            (
                "empty id",
                |j| j.id = "".into(),
                &[("id", "id must not be empty")],
            ),
            (
                "id with whitespace",
                |j| j.id = "my job".into(),
                &[("id", "id \"my job\" contains whitespace")],
            ),
            (
                "id with NUL",
                |j| j.id = "a\0b".into(),
                &[("id", "id \"a\\0b\" contains a NUL")],
            ),
            (
                "id with a right-to-left override",
                |j| j.id = "web\u{202e}1".into(),
                &[(
                    "id",
                    "id \"web\\u{202e}1\" contains the invisible or text-direction character U+202E: two names could look the same",
                )],
            ),
            (
                "id with a zero-width space",
                |j| j.id = "w\u{200b}eb".into(),
                &[(
                    "id",
                    "id \"w\\u{200b}eb\" contains the invisible or text-direction character U+200B: two names could look the same",
                )],
            ),
            (
                "task name with a byte order mark",
                |j| task(j).name = "\u{feff}t".into(),
                &[(
                    "groups[web].tasks[0].name",
                    "task name \"\\u{feff}t\" contains the invisible or text-direction character U+FEFF: two names could look the same",
                )],
            ),
            (
                "id with control",
                |j| j.id = "a\u{7}".into(),
                &[("id", "id \"a\\u{7}\" contains a control character")],
            ),
            (
                "id too long",
                |j| j.id = "x".repeat(129).as_str().into(),
                &[("id", "id is 129 bytes long, above the limit of 128")],
            ),
            (
                "empty namespace",
                |j| j.namespace.clear(),
                &[("namespace", "namespace must not be empty")],
            ),
            (
                "bad namespace",
                |j| j.namespace = "team a".into(),
                &[(
                    "namespace",
                    "namespace \"team a\" must be 1 to 128 letters, digits or '-'",
                )],
            ),
            (
                "empty name",
                |j| j.name.clear(),
                &[("name", "name must not be empty")],
            ),
            (
                "priority 0",
                |j| j.priority = 0,
                &[("priority", "priority 0 is outside 1..=100")],
            ),
            (
                "priority 101",
                |j| j.priority = 101,
                &[("priority", "priority 101 is outside 1..=100")],
            ),
            ("priority bounds pass", |j| j.priority = 100, &[]),
        ]);
    }

    #[test]
    fn datacenters() {
        run(&[
            (
                "no datacenters",
                |j| j.datacenters.clear(),
                &[("datacenters", "at least one datacenter is required")],
            ),
            (
                "bad glob",
                |j| j.datacenters = vec!["dc[".into()],
                &[(
                    "datacenters[0]",
                    "datacenter \"dc[\" is not a valid glob: unclosed character class",
                )],
            ),
            (
                "empty datacenter",
                |j| j.datacenters = vec!["dc1".into(), "".into()],
                &[("datacenters[1]", "datacenter must not be empty")],
            ),
            (
                "globs pass",
                |j| j.datacenters = vec!["dc-*".into(), "us-{east,west}".into()],
                &[],
            ),
        ]);
    }

    #[test]
    fn groups_and_tasks_shape() {
        run(&[
            (
                "no groups",
                |j| j.groups.clear(),
                &[("groups", "at least one group is required")],
            ),
            (
                "empty group name",
                |j| group(j).name.clear(),
                &[("groups[0].name", "group name must not be empty")],
            ),
            (
                "duplicate group name",
                |j| j.groups.push(j.groups[0].clone()),
                &[(
                    "groups[1].name",
                    "group name \"web\" is already used by another group",
                )],
            ),
            (
                "group without tasks",
                |j| group(j).tasks.clear(),
                &[("groups[web].tasks", "at least one task is required")],
            ),
            (
                "empty task name",
                |j| task(j).name.clear(),
                &[("groups[web].tasks[0].name", "task name must not be empty")],
            ),
            (
                "duplicate task name",
                |j| {
                    let copy = task(j).clone();
                    group(j).tasks.push(copy);
                },
                &[(
                    "groups[web].tasks[1].name",
                    "task name \"server\" is already used in this group",
                )],
            ),
            (
                "task name with slash",
                |j| task(j).name = "a/b".into(),
                &[(
                    "groups[web].tasks[0].name",
                    "task name \"a/b\" contains '/'",
                )],
            ),
            (
                "same task name in two groups passes",
                |j| {
                    let mut other = j.groups[0].clone();
                    other.name = "api".into();
                    j.groups.push(other);
                },
                &[],
            ),
        ]);
    }

    #[test]
    fn counts() {
        run(&[
            (
                "count above limit",
                |j| group(j).count = 60_000,
                &[(
                    "groups[web].count",
                    "count 60000 is above the limit of 50000",
                )],
            ),
            ("count 0 passes", |j| group(j).count = 0, &[]),
            // One allocation per node: the count is documented as ignored (issue 14).
            (
                "system count 2 is ignored",
                |j| {
                    retype(j, JobType::System);
                    group(j).count = 2;
                },
                &[],
            ),
            (
                "sysbatch count above the limit is ignored",
                |j| {
                    retype(j, JobType::SysBatch);
                    group(j).count = 60_000;
                },
                &[],
            ),
        ]);
    }

    #[test]
    fn too_many_groups_tasks_and_constraints() {
        check(
            |j| {
                j.groups = (0..1001)
                    .map(|i| {
                        TaskGroup::new(format!("g{i}"), 1, vec![Task::raw_exec("t", "/bin/t")])
                    })
                    .collect();
            },
            &[("groups", "1001 groups are above the limit of 1000")],
        );
        check(
            |j| {
                group(j).tasks = (0..101)
                    .map(|i| Task::raw_exec(format!("t{i}"), "/bin/t"))
                    .collect();
            },
            &[("groups[web].tasks", "101 tasks are above the limit of 100")],
        );
        check(
            |j| j.constraints = vec![Constraint::new("${attr.a}", Operator::Equal, "b"); 101],
            &[("constraints", "101 constraints are above the limit of 100")],
        );
    }

    #[test]
    fn tasks() {
        run(&[
            (
                "cpu 0",
                |j| task(j).resources.cpu_mhz = 0,
                &[(
                    "groups[web].tasks[server].resources.cpu",
                    "cpu 0 MHz is below the minimum of 1 MHz",
                )],
            ),
            (
                "memory 0",
                |j| task(j).resources.memory_mb = 0,
                &[(
                    "groups[web].tasks[server].resources.memory",
                    "memory 0 MB is below the minimum of 1 MB",
                )],
            ),
            ("disk 0 passes", |j| task(j).resources.disk_mb = 0, &[]),
            (
                "unknown driver",
                |j| task(j).driver = "podman".into(),
                &[(
                    "groups[web].tasks[server].driver",
                    "driver \"podman\" is not supported (known: raw_exec, exec, docker, mock)",
                )],
            ),
            (
                "empty driver",
                |j| task(j).driver.clear(),
                &[(
                    "groups[web].tasks[server].driver",
                    "driver must be set (known: raw_exec, exec, docker, mock)",
                )],
            ),
            (
                "raw_exec without command",
                |j| task(j).config.command.clear(),
                &[(
                    "groups[web].tasks[server].config.command",
                    "command is required by the raw_exec driver",
                )],
            ),
            (
                "exec without command",
                |j| {
                    task(j).driver = "exec".into();
                    task(j).config.command.clear();
                },
                &[(
                    "groups[web].tasks[server].config.command",
                    "command is required by the exec driver",
                )],
            ),
            (
                "mock without command passes",
                |j| {
                    task(j).driver = "mock".into();
                    task(j).config.command.clear();
                },
                &[],
            ),
            (
                "command with NUL",
                |j| task(j).config.command = "/bin/a\0".into(),
                &[(
                    "groups[web].tasks[server].config.command",
                    "command \"/bin/a\\0\" contains a NUL character",
                )],
            ),
            (
                "argument with NUL",
                |j| task(j).config.args = vec!["-v".into(), "a\0".into()],
                &[(
                    "groups[web].tasks[server].config.args[1]",
                    "argument \"a\\0\" contains a NUL character",
                )],
            ),
            (
                "driver config value too long",
                |j| {
                    task(j)
                        .config
                        .extra
                        .insert("k".into(), "x".repeat(16 * 1024 + 1));
                },
                &[(
                    "groups[web].tasks[server].config[k]",
                    "value is 16385 bytes long, above the limit of 16384",
                )],
            ),
            (
                "snapshot set but empty",
                |j| task(j).snapshot = Some(String::new()),
                &[(
                    "groups[web].tasks[server].snapshot",
                    "snapshot must not be empty when set",
                )],
            ),
            (
                "snapshot passes",
                |j| task(j).snapshot = Some("build-1234".into()),
                &[],
            ),
            (
                "kill_timeout too long",
                |j| task(j).kill_timeout = secs(7200),
                &[(
                    "groups[web].tasks[server].kill_timeout",
                    "kill_timeout 2h is above the limit of 1h",
                )],
            ),
        ]);
    }

    #[test]
    fn env_and_meta() {
        run(&[
            (
                "env key with =",
                |j| {
                    task(j).env.insert("A=B".into(), "1".into());
                },
                &[("groups[web].tasks[server].env", "key \"A=B\" contains '='")],
            ),
            (
                "env key empty",
                |j| {
                    task(j).env.insert(String::new(), "1".into());
                },
                &[("groups[web].tasks[server].env", "key must not be empty")],
            ),
            (
                "env value with NUL",
                |j| {
                    task(j).env.insert("A".into(), "1\0".into());
                },
                &[(
                    "groups[web].tasks[server].env[A]",
                    "value \"1\\0\" contains a NUL character",
                )],
            ),
            (
                "env with dots and spaces in values passes",
                |j| {
                    task(j)
                        .env
                        .insert("JAVA_OPTS".into(), "-Xmx1g -Da.b=c".into());
                },
                &[],
            ),
            (
                "job meta key empty",
                |j| {
                    j.meta.insert(String::new(), "x".into());
                },
                &[("meta", "key must not be empty")],
            ),
            (
                "group meta key empty",
                |j| {
                    group(j).meta.insert(String::new(), "x".into());
                },
                &[("groups[web].meta", "key must not be empty")],
            ),
            (
                "task meta key empty",
                |j| {
                    task(j).meta.insert(String::new(), "x".into());
                },
                &[("groups[web].tasks[server].meta", "key must not be empty")],
            ),
            (
                "too many meta entries",
                |j| {
                    j.meta = (0..1025)
                        .map(|i| (format!("k{i}"), String::new()))
                        .collect();
                },
                &[("meta", "1025 entries are above the limit of 1024")],
            ),
            (
                "payload too large",
                |j| j.payload = vec![0; 16 * 1024 + 1],
                &[(
                    "payload",
                    "payload is 16385 bytes, above the limit of 16384",
                )],
            ),
        ]);
    }

    #[test]
    fn constraints() {
        fn on_job(j: &mut Job, l: &str, op: Operator, r: &str) {
            j.constraints.push(Constraint::new(l, op, r));
        }
        run(&[
            (
                "regexp does not compile",
                |j| on_job(j, "${attr.os.name}", Operator::Regexp, "("),
                &[(
                    "constraints[0].r_target",
                    "regexp \"(\" does not compile: unclosed group",
                )],
            ),
            (
                "regexp passes",
                |j| on_job(j, "${attr.os.name}", Operator::Regexp, "^(ubuntu|debian)$"),
                &[],
            ),
            (
                "version does not parse",
                |j| on_job(j, "${attr.nomad.version}", Operator::Version, ">= 1.2, <"),
                &[(
                    "constraints[0].r_target",
                    "version constraint \">= 1.2, <\" is invalid: clause \"<\" has no version",
                )],
            ),
            (
                "version passes",
                |j| {
                    on_job(
                        j,
                        "${attr.kernel.version}",
                        Operator::Version,
                        ">= 1.2, < 2",
                    )
                },
                &[],
            ),
            (
                "pessimistic version passes",
                |j| on_job(j, "${attr.kernel.version}", Operator::Version, "~> 5.15"),
                &[],
            ),
            (
                "semver rejects ~>",
                |j| on_job(j, "${attr.v}", Operator::Semver, "~> 1.2"),
                &[(
                    "constraints[0].r_target",
                    "semver constraint \"~> 1.2\" is invalid: operator \"~>\" is only supported by version",
                )],
            ),
            (
                "semver rejects leading zero",
                |j| on_job(j, "${attr.v}", Operator::Semver, "1.0.0-rc.01"),
                &[(
                    "constraints[0].r_target",
                    "semver constraint \"1.0.0-rc.01\" is invalid: \"1.0.0-rc.01\" is not a version: invalid leading zero",
                )],
            ),
            (
                "semver passes",
                |j| on_job(j, "${attr.v}", Operator::Semver, ">= 1.0.0, < 2.0.0-0"),
                &[],
            ),
            (
                "set_contains without r_target",
                |j| on_job(j, "${meta.tags}", Operator::SetContains, ""),
                &[(
                    "constraints[0].r_target",
                    "r_target is required by the set_contains operator",
                )],
            ),
            (
                "set_contains_any without r_target",
                |j| on_job(j, "${meta.tags}", Operator::SetContainsAny, ""),
                &[(
                    "constraints[0].r_target",
                    "r_target is required by the set_contains_any operator",
                )],
            ),
            (
                "< without r_target",
                |j| on_job(j, "${attr.cpu.numcores}", Operator::Less, ""),
                &[(
                    "constraints[0].r_target",
                    "r_target is required by the < operator",
                )],
            ),
            (
                "= without r_target",
                |j| on_job(j, "${attr.os.name}", Operator::Equal, ""),
                &[(
                    "constraints[0].r_target",
                    "r_target is required by the = operator",
                )],
            ),
            (
                "= without l_target",
                |j| on_job(j, "", Operator::Equal, "linux"),
                &[(
                    "constraints[0].l_target",
                    "l_target is required by the = operator",
                )],
            ),
            (
                "distinct_property without l_target",
                |j| on_job(j, "", Operator::DistinctProperty, ""),
                &[(
                    "constraints[0].l_target",
                    "l_target is required by the distinct_property operator",
                )],
            ),
            (
                "distinct_property count 0",
                |j| on_job(j, "${meta.rack}", Operator::DistinctProperty, "0"),
                &[(
                    "constraints[0].r_target",
                    "r_target of distinct_property must be a count of at least 1 (got \"0\")",
                )],
            ),
            (
                "distinct_property count passes",
                |j| on_job(j, "${meta.rack}", Operator::DistinctProperty, "2"),
                &[],
            ),
            (
                "distinct_hosts alone passes",
                |j| on_job(j, "", Operator::DistinctHosts, ""),
                &[],
            ),
            (
                "distinct_hosts odd value",
                |j| on_job(j, "", Operator::DistinctHosts, "maybe"),
                &[(
                    "constraints[0].r_target",
                    "r_target of distinct_hosts must be empty, true or false (got \"maybe\")",
                )],
            ),
            (
                "is_set without l_target",
                |j| on_job(j, "", Operator::IsSet, ""),
                &[(
                    "constraints[0].l_target",
                    "l_target is required by the is_set operator",
                )],
            ),
            (
                "is_not_set with r_target",
                |j| on_job(j, "${meta.gpu}", Operator::IsNotSet, "yes"),
                &[(
                    "constraints[0].r_target",
                    "the is_not_set operator takes no r_target (got \"yes\")",
                )],
            ),
            (
                "unterminated interpolation",
                |j| on_job(j, "${attr.kernel.name", Operator::Equal, "linux"),
                &[(
                    "constraints[0].l_target",
                    "unterminated \"${\" in \"${attr.kernel.name\"",
                )],
            ),
            (
                "unknown interpolation",
                |j| on_job(j, "${node.pool}", Operator::Equal, "x"),
                &[("constraints[0].l_target", "unknown target \"${node.pool}\"")],
            ),
            (
                "interpolated r_target checked",
                |j| on_job(j, "${attr.a}", Operator::Equal, "${meta.b"),
                &[(
                    "constraints[0].r_target",
                    "unterminated \"${\" in \"${meta.b\"",
                )],
            ),
            (
                "node targets pass",
                |j| {
                    on_job(
                        j,
                        "${node.class}",
                        Operator::NotEqual,
                        "${meta.avoid_class}",
                    );
                    on_job(j, "${node.unique.name}", Operator::Regexp, "^worker-");
                },
                &[],
            ),
            (
                "group constraint path",
                |j| {
                    group(j)
                        .constraints
                        .push(Constraint::new("${attr.a}", Operator::Regexp, "["))
                },
                &[(
                    "groups[web].constraints[0].r_target",
                    "regexp \"[\" does not compile",
                )],
            ),
            (
                "l_target too long",
                |j| on_job(j, &"x".repeat(16 * 1024 + 1), Operator::Equal, "y"),
                &[(
                    "constraints[0].l_target",
                    "l_target is 16385 bytes long, above the limit of 16384",
                )],
            ),
        ]);
    }

    #[test]
    fn periodic_and_parameterized() {
        run(&[
            (
                "invalid cron",
                |j| {
                    retype(j, JobType::Batch);
                    j.periodic = Some(periodic("61 * * * *"));
                },
                &[(
                    "periodic.cron",
                    "cron \"61 * * * *\" is invalid: component error",
                )],
            ),
            (
                "cron that never fires",
                |j| {
                    retype(j, JobType::Batch);
                    j.periodic = Some(periodic("0 0 30 2 *"));
                },
                &[("periodic.cron", "cron \"0 0 30 2 *\" never fires")],
            ),
            (
                "empty cron",
                |j| {
                    retype(j, JobType::Batch);
                    j.periodic = Some(periodic(""));
                },
                &[("periodic.cron", "cron must not be empty")],
            ),
            (
                "disabled periodic is still checked",
                |j| {
                    retype(j, JobType::Batch);
                    j.periodic = Some(PeriodicConfig {
                        enabled: false,
                        ..periodic("bogus")
                    });
                },
                &[("periodic.cron", "cron \"bogus\" is invalid")],
            ),
            (
                "time zone Local",
                |j| {
                    retype(j, JobType::Batch);
                    j.periodic = Some(PeriodicConfig {
                        time_zone: "Local".into(),
                        ..periodic("@daily")
                    });
                },
                &[(
                    "periodic.time_zone",
                    "time zone \"Local\" is not in the IANA time zone database (e.g. UTC, Europe/Berlin)",
                )],
            ),
            (
                "time zones of IANA shape pass",
                |j| {
                    retype(j, JobType::Batch);
                    j.periodic = Some(PeriodicConfig {
                        time_zone: "America/Argentina/Buenos_Aires".into(),
                        ..periodic("*/15 * * * *")
                    });
                },
                &[],
            ),
            (
                "time zone Etc/GMT+5 passes",
                |j| {
                    retype(j, JobType::Batch);
                    j.periodic = Some(PeriodicConfig {
                        time_zone: "Etc/GMT+5".into(),
                        ..periodic("@hourly")
                    });
                },
                &[],
            ),
            (
                "periodic on service",
                |j| j.periodic = Some(periodic("@daily")),
                &[(
                    "periodic",
                    "periodic is only allowed for batch and sysbatch jobs, not service",
                )],
            ),
            (
                "periodic on system",
                |j| {
                    retype(j, JobType::System);
                    j.periodic = Some(periodic("@daily"));
                },
                &[(
                    "periodic",
                    "periodic is only allowed for batch and sysbatch jobs, not system",
                )],
            ),
            (
                "periodic sysbatch passes",
                |j| {
                    retype(j, JobType::SysBatch);
                    j.periodic = Some(periodic("0 3 * * MON-FRI"));
                },
                &[],
            ),
            (
                "periodic and parameterized",
                |j| {
                    retype(j, JobType::Batch);
                    j.periodic = Some(periodic("@daily"));
                    j.parameterized = Some(ParameterizedConfig::default());
                },
                &[(
                    "periodic",
                    "a job cannot be both periodic and parameterized",
                )],
            ),
            (
                "parameterized on service",
                |j| j.parameterized = Some(ParameterizedConfig::default()),
                &[(
                    "parameterized",
                    "parameterized is only allowed for batch and sysbatch jobs, not service",
                )],
            ),
            (
                "meta required and optional overlap",
                |j| {
                    retype(j, JobType::Batch);
                    j.parameterized = Some(ParameterizedConfig {
                        meta_required: vec!["input".into(), "owner".into()],
                        meta_optional: vec!["owner".into()],
                        ..ParameterizedConfig::default()
                    });
                },
                &[(
                    "parameterized.meta_optional[0]",
                    "meta key \"owner\" is also in meta_required",
                )],
            ),
            (
                "meta key listed twice",
                |j| {
                    retype(j, JobType::Batch);
                    j.parameterized = Some(ParameterizedConfig {
                        meta_required: vec!["input".into(), "input".into()],
                        ..ParameterizedConfig::default()
                    });
                },
                &[(
                    "parameterized.meta_required[1]",
                    "meta key \"input\" is listed twice",
                )],
            ),
            (
                "empty meta key",
                |j| {
                    retype(j, JobType::Batch);
                    j.parameterized = Some(ParameterizedConfig {
                        meta_optional: vec![String::new()],
                        ..ParameterizedConfig::default()
                    });
                },
                &[(
                    "parameterized.meta_optional[0]",
                    "meta key must not be empty",
                )],
            ),
        ]);
    }

    #[test]
    fn migrate_strategy() {
        run(&[
            (
                "max_parallel 0",
                |j| group(j).migrate.max_parallel = 0,
                &[(
                    "groups[web].migrate.max_parallel",
                    "max_parallel must be at least 1: a drain moves at least one allocation at a time",
                )],
            ),
            (
                "min_healthy_time not under healthy_deadline",
                |j| {
                    group(j).migrate.min_healthy_time = secs(600);
                    group(j).migrate.healthy_deadline = secs(300);
                },
                &[(
                    "groups[web].migrate.min_healthy_time",
                    "min_healthy_time 10m must be shorter than healthy_deadline 5m",
                )],
            ),
            ("the defaults pass", |_| {}, &[]),
        ]);
    }

    #[test]
    fn update_strategy() {
        run(&[
            (
                "stagger above a year",
                |j| {
                    j.update = UpdateStrategy {
                        deployment: None,
                        max_parallel: 1,
                        stagger: secs(400 * 24 * 3600),
                    };
                },
                &[(
                    "update.stagger",
                    "stagger 9600h is above the limit of 8760h",
                )],
            ),
            (
                "max_parallel above count passes (as in Nomad)",
                |j| j.update.max_parallel = 10,
                &[],
            ),
            (
                "group update on batch",
                |j| {
                    retype(j, JobType::Batch);
                    group(j).update = Some(UpdateStrategy::default());
                },
                &[(
                    "groups[web].update",
                    "update is only allowed for service and system jobs, not batch",
                )],
            ),
            (
                "group update stagger bounded",
                |j| {
                    group(j).update = Some(UpdateStrategy {
                        deployment: None,
                        max_parallel: 2,
                        stagger: Duration::MAX,
                    });
                },
                &[(
                    "groups[web].update.stagger",
                    "stagger 18446744073709551615.999999999s is above the limit of 8760h",
                )],
            ),
        ]);
    }

    #[test]
    fn reschedule_policy() {
        fn limited(j: &mut Job, attempts: u32, interval: u64, delay: u64) {
            group(j).reschedule = ReschedulePolicy {
                attempts,
                interval: secs(interval),
                delay: secs(delay),
                delay_function: DelayFunction::Constant,
                max_delay: Duration::ZERO,
                unlimited: false,
            };
        }
        run(&[
            (
                "attempts without interval",
                |j| limited(j, 3, 0, 10),
                &[(
                    "groups[web].reschedule.interval",
                    "interval must be positive when attempts is 3",
                )],
            ),
            (
                "attempts do not fit the interval",
                |j| limited(j, 10, 60, 30),
                &[(
                    "groups[web].reschedule.interval",
                    "interval 1m cannot fit 10 attempts with delay 30s (constant); it needs at least 5m",
                )],
            ),
            ("attempts that fit pass", |j| limited(j, 10, 300, 30), &[]),
            (
                "delay below minimum",
                |j| limited(j, 1, 60, 1),
                &[(
                    "groups[web].reschedule.delay",
                    "delay 1s is below the minimum of 5s",
                )],
            ),
            (
                "exponential max_delay below delay",
                |j| {
                    group(j).reschedule.max_delay = secs(10);
                },
                &[(
                    "groups[web].reschedule.max_delay",
                    "max_delay 10s is below delay 30s (the exponential delay function needs a ceiling)",
                )],
            ),
            (
                "fibonacci too many attempts",
                |j| {
                    group(j).reschedule = ReschedulePolicy {
                        attempts: 9,
                        interval: secs(200),
                        delay: secs(10),
                        delay_function: DelayFunction::Fibonacci,
                        max_delay: secs(100),
                        unlimited: false,
                    };
                },
                &[(
                    "groups[web].reschedule.interval",
                    "interval 3m20s cannot fit 9 attempts with delay 10s (fibonacci); it needs at least 5m",
                )],
            ),
            (
                "unlimited with attempts",
                |j| group(j).reschedule.attempts = 3,
                &[(
                    "groups[web].reschedule.attempts",
                    "attempts 3 with unlimited = true is ambiguous",
                )],
            ),
            (
                "interval above a year",
                |j| limited(j, 1, 400 * 24 * 3600, 5),
                &[(
                    "groups[web].reschedule.interval",
                    "interval 9600h is above the limit of 8760h",
                )],
            ),
            (
                "rescheduling on system",
                |j| {
                    retype(j, JobType::System);
                    group(j).reschedule = ReschedulePolicy::service_default();
                },
                &[(
                    "groups[web].reschedule",
                    "rescheduling is not supported for system jobs",
                )],
            ),
            (
                "rescheduling on sysbatch",
                |j| {
                    retype(j, JobType::SysBatch);
                    group(j).reschedule = ReschedulePolicy::batch_default();
                },
                &[(
                    "groups[web].reschedule",
                    "rescheduling is not supported for sysbatch jobs",
                )],
            ),
            (
                "disabled rescheduling passes anything else",
                |j| {
                    group(j).reschedule = ReschedulePolicy {
                        delay: secs(1),
                        ..ReschedulePolicy::disabled()
                    };
                },
                &[],
            ),
        ]);
    }

    #[test]
    fn lower_reschedule_minimum_is_configurable() {
        let limits = Limits {
            min_reschedule_delay: Duration::ZERO,
            ..Limits::default()
        };
        let fast = |j: &mut Job| {
            group(j).reschedule = ReschedulePolicy {
                delay: secs(1),
                ..ReschedulePolicy::batch_default()
            };
        };
        assert_eq!(outcome(&limits, fast, &[]), Ok(()));
    }

    #[test]
    fn restart_policy() {
        run(&[
            (
                "attempts without interval",
                |j| group(j).restart.interval = Duration::ZERO,
                &[(
                    "groups[web].restart.interval",
                    "interval must be positive when attempts is 2",
                )],
            ),
            (
                "attempts do not fit the interval",
                |j| {
                    group(j).restart.attempts = 3;
                    group(j).restart.interval = secs(30);
                },
                &[(
                    "groups[web].restart.delay",
                    "3 attempts with delay 15s do not fit in interval 30s",
                )],
            ),
            (
                "delay mode without attempts",
                |j| {
                    group(j).restart.attempts = 0;
                    group(j).restart.mode = RestartMode::Delay;
                },
                &[(
                    "groups[web].restart.mode",
                    "mode \"delay\" with 0 attempts is ambiguous",
                )],
            ),
            (
                "no restarts pass",
                |j| {
                    group(j).restart.attempts = 0;
                    group(j).restart.interval = Duration::ZERO;
                },
                &[],
            ),
        ]);
    }

    #[test]
    fn disconnect() {
        fn lost_after(j: &mut Job, d: Duration) {
            group(j).disconnect = Some(DisconnectPolicy {
                lost_after: Some(d),
                ..Default::default()
            });
        }
        run(&[
            (
                "lost_after 0",
                |j| lost_after(j, Duration::ZERO),
                &[(
                    "groups[web].disconnect.lost_after",
                    "lost_after must be positive when set",
                )],
            ),
            ("lost_after passes", |j| lost_after(j, secs(3600)), &[]),
            (
                "lost_after above a year",
                |j| lost_after(j, secs(2 * 365 * 24 * 3600)),
                &[(
                    "groups[web].disconnect.lost_after",
                    "lost_after 17520h is above the limit of 8760h",
                )],
            ),
            (
                "lost_after and stop_on_client_after",
                |j| {
                    group(j).disconnect = Some(DisconnectPolicy {
                        lost_after: Some(secs(60)),
                        stop_on_client_after: Some(secs(60)),
                        ..Default::default()
                    });
                },
                &[(
                    "groups[web].disconnect",
                    "lost_after and stop_on_client_after cannot both be set",
                )],
            ),
            (
                "both stop settings",
                |j| {
                    group(j).stop_after_client_disconnect = Some(secs(60));
                    group(j).disconnect = Some(DisconnectPolicy {
                        stop_on_client_after: Some(secs(60)),
                        ..Default::default()
                    });
                },
                &[(
                    "groups[web].stop_after_client_disconnect",
                    "stop_after_client_disconnect and disconnect.stop_on_client_after cannot both be set",
                )],
            ),
            (
                "stop_after_client_disconnect and lost_after",
                |j| {
                    group(j).stop_after_client_disconnect = Some(secs(60));
                    lost_after(j, secs(60));
                },
                &[(
                    "groups[web].stop_after_client_disconnect",
                    "stop_after_client_disconnect and disconnect.lost_after cannot both be set",
                )],
            ),
            (
                "stop_after_client_disconnect alone passes",
                |j| {
                    group(j).stop_after_client_disconnect = Some(secs(60));
                },
                &[],
            ),
            (
                "stop_after_client_disconnect bounded",
                |j| {
                    group(j).stop_after_client_disconnect = Some(Duration::MAX);
                },
                &[(
                    "groups[web].stop_after_client_disconnect",
                    "stop_after_client_disconnect 18446744073709551615.999999999s is above the limit of 8760h",
                )],
            ),
        ]);
    }

    #[test]
    fn network() {
        fn ports(job: &mut Job, ports: Vec<PortAsk>) {
            group(job).network = Some(GroupNetwork { ports });
        }
        run(&[
            (
                "dynamic, static and mapped ports",
                |j| {
                    let mut admin = PortAsk::fixed("admin", 8080);
                    admin.to = Some(80);
                    ports(j, vec![PortAsk::dynamic("http"), admin]);
                },
                &[],
            ),
            (
                "static port 0",
                |j| ports(j, vec![PortAsk::fixed("http", 0)]),
                &[(
                    "groups[web].network.ports[0].static",
                    "static port 0 is not a port (1-65535): leave static out for a dynamic port",
                )],
            ),
            (
                "the same label twice",
                |j| {
                    ports(
                        j,
                        vec![PortAsk::dynamic("http"), PortAsk::fixed("http", 80)],
                    )
                },
                &[(
                    "groups[web].network.ports[1].label",
                    "port label \"http\" is already used by ports[0]",
                )],
            ),
            (
                "a label that cannot name a variable",
                |j| ports(j, vec![PortAsk::dynamic("my-port"), PortAsk::dynamic("2x")]),
                &[
                    (
                        "groups[web].network.ports[0].label",
                        "port label \"my-port\" cannot name an environment variable",
                    ),
                    (
                        "groups[web].network.ports[1].label",
                        "port label \"2x\" cannot name an environment variable",
                    ),
                ],
            ),
            (
                "an empty label",
                |j| ports(j, vec![PortAsk::dynamic("")]),
                &[(
                    "groups[web].network.ports[0].label",
                    "port label must not be empty",
                )],
            ),
            (
                "one static port asked twice",
                |j| ports(j, vec![PortAsk::fixed("a", 80), PortAsk::fixed("b", 80)]),
                &[(
                    "groups[web].network.ports[1].static",
                    "static port 80 is already asked for by port \"a\"",
                )],
            ),
            (
                "one static port on two host networks",
                |j| {
                    let mut b = PortAsk::fixed("b", 80);
                    b.host_network = "public".into();
                    ports(j, vec![PortAsk::fixed("a", 80), b]);
                },
                &[],
            ),
            (
                "mapped to port 0",
                |j| {
                    let mut p = PortAsk::dynamic("http");
                    p.to = Some(0);
                    ports(j, vec![p]);
                },
                &[("groups[web].network.ports[0].to", "to 0 is not a port")],
            ),
            (
                "more dynamic ports than the range holds",
                |j| {
                    let many = (0..12_002).map(|i| PortAsk::dynamic(format!("p{i}")));
                    ports(j, many.collect());
                },
                &[(
                    "groups[web].network.ports",
                    "12002 dynamic ports are more than a node's dynamic range (20000-32000) holds: 12001",
                )],
            ),
        ]);
    }

    #[test]
    fn a_valid_job_of_each_type_passes() {
        for job_type in JobType::ALL {
            let mut job = valid_job();
            retype(&mut job, job_type);
            assert_eq!(validate_job(&job, &Limits::default()), Ok(()), "{job_type}");
        }
        let mut dispatchable = valid_job();
        retype(&mut dispatchable, JobType::Batch);
        dispatchable.parameterized = Some(ParameterizedConfig {
            meta_required: vec!["input".into()],
            meta_optional: vec!["owner".into()],
            ..ParameterizedConfig::default()
        });
        assert_eq!(validate_job(&dispatchable, &Limits::default()), Ok(()));
    }

    /// Five problems in different places come back together, with their paths, in jobspec
    /// order.
    fn five_problems() -> Job {
        let mut job = valid_job();
        job.priority = 0;
        job.constraints.push(Constraint::new(
            "${attr.kernel.name",
            Operator::Equal,
            "linux",
        ));
        group(&mut job).count = 60_000;
        task(&mut job).driver = "podman".into();
        task(&mut job).resources.memory_mb = 0;
        job
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let err = validate_job(&five_problems(), &Limits::default()).unwrap_err();
        let paths: Vec<&str> = err.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "priority",
                "constraints[0].l_target",
                "groups[web].count",
                "groups[web].tasks[server].driver",
                "groups[web].tasks[server].resources.memory",
            ]
        );
        assert_eq!(err.len(), 5);
        assert_eq!(err.omitted, 0);
        assert_eq!(err.job_id, "web");
    }

    #[test]
    fn error_message_format_is_pinned() {
        let err = validate_job(&five_problems(), &Limits::default()).unwrap_err();
        insta::assert_snapshot!(err.to_string());
    }

    #[test]
    fn a_single_problem_reads_as_one() {
        let mut job = valid_job();
        job.priority = 0;
        let err = validate_job(&job, &Limits::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "job \"web\" is invalid: 1 problem: priority: priority 0 is outside 1..=100"
        );
    }

    #[test]
    fn problems_beyond_max_errors_are_counted_not_listed() {
        let limits = Limits {
            max_errors: 2,
            ..Limits::default()
        };
        let err: ValidationError = validate_job(&five_problems(), &limits).unwrap_err();
        assert_eq!(err.errors.len(), 2);
        assert_eq!(err.omitted, 3);
        assert_eq!(err.len(), 5);
        let msg = err.to_string();
        assert!(
            msg.starts_with("job \"web\" is invalid: 5 problems: priority: "),
            "{msg}"
        );
        assert!(msg.ends_with("; and 3 more"), "{msg}");
    }

    #[test]
    fn limits_are_configurable() {
        let limits = Limits {
            max_count: 10,
            max_groups: 1,
            ..Limits::default()
        };
        let grow = |j: &mut Job| {
            group(j).count = 11;
            let mut other = j.groups[0].clone();
            other.name = "api".into();
            other.count = 1;
            j.groups.push(other);
        };
        // The second group is beyond max_groups and not inspected further.
        let expected = [
            ("groups", "2 groups are above the limit of 1"),
            ("groups[web].count", "count 11 is above the limit of 10"),
        ];
        assert_eq!(outcome(&limits, grow, &expected), Ok(()));
    }

    #[test]
    fn an_invalid_group_name_is_addressed_by_index() {
        check(
            |j| {
                group(j).name = "a\u{1}".into();
                task(j).resources.cpu_mhz = 0;
            },
            &[
                (
                    "groups[0].name",
                    "group name \"a\\u{1}\" contains a control character",
                ),
                ("groups[0].tasks[server].resources.cpu", "cpu 0 MHz"),
            ],
        );
    }

    #[test]
    fn huge_values_are_not_echoed() {
        let mut job = valid_job();
        job.datacenters = vec!["[".repeat(100)];
        let err = validate_job(&job, &Limits::default()).unwrap_err();
        // Within the length limit, so it reaches the glob check, whose reason quotes it cut short.
        let reason = &err.errors[0].reason;
        assert!(reason.contains('…'), "{reason}");
        assert!(reason.len() < 200, "{reason}");
    }

    #[test]
    fn canonicalize_fills_nomad_defaults() {
        let mut job = valid_job();
        job.name.clear();
        job.namespace.clear();
        job.datacenters.clear();
        canonicalize(&mut job);
        assert_eq!(job.name, "web");
        assert_eq!(job.namespace, "default");
        assert_eq!(job.datacenters, ["*"]);
        assert_eq!(validate_job(&job, &Limits::default()), Ok(()));
    }

    #[test]
    fn canonicalize_disables_rescheduling_for_per_node_jobs_only() {
        for (job_type, enabled) in [
            (JobType::Service, true),
            (JobType::Batch, true),
            (JobType::System, false),
            (JobType::SysBatch, false),
        ] {
            let mut job = valid_job();
            job.job_type = job_type;
            canonicalize(&mut job);
            assert_eq!(job.groups[0].reschedule.enabled(), enabled, "{job_type}");
        }
    }

    #[test]
    fn canonicalize_keeps_what_the_operator_set() {
        let mut job = valid_job();
        job.name = "frontend".into();
        job.namespace = "team-a".into();
        job.datacenters = vec!["dc1".into()];
        let before = job.clone();
        canonicalize(&mut job);
        assert_eq!(job, before);
    }

    proptest! {
        /// Whatever an operator sends, validation answers (no panic) with reasons in house style:
        /// a non-empty path, a reason starting lowercase, no trailing period.
        #[test]
        fn reasons_keep_house_style(
            id in "\\PC{0,12}",
            dc in "\\PC{0,8}",
            cron in "[0-9*/,@a-zA-Z -]{0,20}",
            tz in "[A-Za-z/_+-]{0,16}",
            l_target in "[${}a-z.]{0,16}",
            r_target in "[\\[\\](){}<>=~!,.0-9a-z *+?^$-]{0,16}",
            op in 0usize..Operator::ALL.len(),
            key in "[A-Z=_\\x00]{0,4}",
        ) {
            let mut job = valid_job();
            job.id = id.as_str().into();
            job.datacenters = vec![dc];
            job.job_type = JobType::Batch;
            job.periodic = Some(PeriodicConfig { time_zone: tz, ..periodic(&cron) });
            job.constraints.push(Constraint::new(l_target, Operator::ALL[op].0, r_target));
            task(&mut job).env.insert(key, "v".into());
            if let Err(err) = validate_job(&job, &Limits::default()) {
                for e in &err.errors {
                    prop_assert!(!e.path.is_empty());
                    let first = e.reason.chars().next().unwrap_or('X');
                    prop_assert!(!first.is_uppercase(), "{}", e);
                    prop_assert!(!e.reason.ends_with('.'), "{}", e);
                }
            }
        }
    }
}
