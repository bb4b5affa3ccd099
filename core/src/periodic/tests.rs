//! Periodic launches and dispatches, table-driven. Launcher scenarios run through one
//! helper, [`run`], which drives a real state store through the FSM exactly as the leader
//! would: register and track, tick and commit each launch, finish children, fail over.

use super::*;
use crate::fsm::{self, Command};
use crate::mock;
use crate::state::StateStore;
use crate::types::*;
use crate::validate::{Limits, validate_job};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

/// The day scenarios run on, a Friday; times are written `HH:MM:SS` on it, or in full
/// RFC 3339.
const DAY: &str = "2024-03-01";

fn at(s: &str) -> Timestamp {
    let full = if s.contains('T') {
        s.to_owned()
    } else {
        format!("{DAY}T{s}Z")
    };
    let t = chrono::DateTime::parse_from_rfc3339(&full).expect("test time parses");
    Timestamp::from_millis(u64::try_from(t.timestamp_millis()).expect("after 1970"))
}

/// A periodic batch job on `cron` (UTC).
fn periodic(id: &str, cron: &str, prohibit_overlap: bool) -> Job {
    let mut job = mock::batch_job(id, 1);
    job.periodic = Some(PeriodicConfig {
        cron: cron.into(),
        prohibit_overlap,
        time_zone: String::new(),
        enabled: true,
    });
    job.meta.insert("team".into(), "data".into());
    job
}

/// The id of the child `parent` launches at `slot`.
fn child(parent: &str, slot: &str) -> String {
    format!("{parent}/periodic-{}", at(slot).as_millis() / 1000)
}

// ---------------------------------------------------------------------------------------
// Next launch times

#[test]
fn schedule_next_and_latest_launch() {
    // (cron, time zone, now, next launch strictly after now, latest launch at or before now)
    let cases: &[(&str, &str, &str, Option<&str>, Option<&str>)] = &[
        (
            "* * * * *",
            "",
            "10:00:30",
            Some("10:01:00"),
            Some("10:00:00"),
        ),
        (
            "* * * * *",
            "",
            "10:00:00",
            Some("10:01:00"),
            Some("10:00:00"),
        ),
        (
            "* * * * *",
            "",
            "2024-03-01T10:00:59.999Z",
            Some("10:01:00"),
            Some("10:00:00"),
        ),
        (
            "0 */6 * * *",
            "",
            "05:59:59",
            Some("06:00:00"),
            Some("00:00:00"),
        ),
        (
            "0 */6 * * *",
            "",
            "06:00:00",
            Some("12:00:00"),
            Some("06:00:00"),
        ),
        (
            "0 */6 * * *",
            "",
            "23:00:00",
            Some("2024-03-02T00:00:00Z"),
            Some("18:00:00"),
        ),
        // Day of week: 2024-03-01 is a Friday.
        (
            "30 9 * * 1",
            "",
            "10:00:00",
            Some("2024-03-04T09:30:00Z"),
            Some("2024-02-26T09:30:00Z"),
        ),
        (
            "0 9 * * MON-FRI",
            "",
            "10:00:00",
            Some("2024-03-04T09:00:00Z"),
            Some("09:00:00"),
        ),
        (
            "0 9 * * 5",
            "",
            "08:59:59",
            Some("09:00:00"),
            Some("2024-02-23T09:00:00Z"),
        ),
        (
            "@daily",
            "",
            "10:00:00",
            Some("2024-03-02T00:00:00Z"),
            Some("00:00:00"),
        ),
        (
            "@hourly",
            "",
            "10:59:59",
            Some("11:00:00"),
            Some("10:00:00"),
        ),
        // Six fields: seconds first.
        (
            "*/15 * * * * *",
            "",
            "10:00:07",
            Some("10:00:15"),
            Some("10:00:00"),
        ),
        // Fixed-offset zones, with IANA's POSIX signs: Etc/GMT-2 is UTC+2.
        (
            "0 9 * * *",
            "Etc/GMT-2",
            "00:00:00",
            Some("07:00:00"),
            Some("2024-02-29T07:00:00Z"),
        ),
        (
            "0 9 * * *",
            "Etc/GMT+5",
            "00:00:00",
            Some("14:00:00"),
            Some("2024-02-29T14:00:00Z"),
        ),
        (
            "0 9 * * *",
            "UTC",
            "00:00:00",
            Some("09:00:00"),
            Some("2024-02-29T09:00:00Z"),
        ),
        (
            "0 9 * * *",
            "Etc/UTC",
            "09:00:01",
            Some("2024-03-02T09:00:00Z"),
            Some("09:00:00"),
        ),
        // Pinned to a past year (seven fields: seconds first, year last): no more launches.
        (
            "0 0 0 1 1 * 2020",
            "",
            "10:00:00",
            None,
            Some("2020-01-01T00:00:00Z"),
        ),
    ];
    for (cron, tz, now, next, latest) in cases {
        let config = PeriodicConfig {
            cron: (*cron).into(),
            prohibit_overlap: false,
            time_zone: (*tz).into(),
            enabled: true,
        };
        let schedule = Schedule::new(&config).unwrap_or_else(|e| panic!("{cron}: {e}"));
        assert_eq!(
            schedule.next_after(at(now)),
            next.map(at),
            "next launch of {cron:?} in {tz:?} after {now}"
        );
        assert_eq!(
            schedule.latest_at_or_before(at(now)),
            latest.map(at),
            "latest launch of {cron:?} in {tz:?} at {now}"
        );
    }
}

#[test]
fn schedule_refuses_what_it_cannot_run() {
    // (cron, time zone, error message)
    let cases: &[(&str, &str, &str)] = &[
        ("61 * * * *", "", "cron \"61 * * * *\" is invalid: "),
        (
            "* * * * *",
            "Etc/GMT+13",
            "time zone \"Etc/GMT+13\" is not in the IANA time zone database",
        ),
        (
            "* * * * *",
            "Etc/GMT-15",
            "time zone \"Etc/GMT-15\" is not in the IANA time zone database",
        ),
        (
            "* * * * *",
            "Mars/Olympus_Mons",
            "time zone \"Mars/Olympus_Mons\" is not in the IANA time zone database",
        ),
        (
            "* * * * *",
            "Local",
            "time zone \"Local\" is not in the IANA time zone database",
        ),
    ];
    for (cron, tz, message) in cases {
        let config = PeriodicConfig {
            cron: (*cron).into(),
            prohibit_overlap: false,
            time_zone: (*tz).into(),
            enabled: true,
        };
        let err = Schedule::new(&config).expect_err(cron).to_string();
        assert!(
            err.starts_with(message),
            "{cron:?} in {tz:?}: got {err:?}, want it to start with {message:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// The launcher, by scenario

/// One step of a launcher scenario. Times are [`at`] strings.
// A few dozen steps live briefly in a test: boxing the job would only add noise to the tables.
#[allow(clippy::large_enum_variant)]
enum Step {
    /// Commit a register of the job at this time, then tell the launcher.
    Register(Job, &'static str),
    /// Tick at this time, commit every launch; exactly these `(parent, slot)` children
    /// must have launched, in order.
    Tick(&'static str, &'static [(&'static str, &'static str)]),
    /// Complete the evals of this child job, which makes it dead.
    Finish(String),
    /// Commit `job stop` of the parent at this time; tell the launcher only if `true`.
    Stop(&'static str, &'static str, bool),
    /// Commit a purge of the parent; tell the launcher only if `true`.
    Purge(&'static str, bool),
    Untrack(&'static str),
    /// A new leader: a fresh launcher restored from state at this time.
    Failover(&'static str),
    /// The launcher's next deadline must be this.
    Deadline(Option<&'static str>),
}

/// The state store, the launcher and what drives them, as the leader holds them.
struct World {
    state: StateStore,
    index: Index,
    launcher: PeriodicLauncher,
    rng: ChaCha8Rng,
}

impl World {
    fn new() -> Self {
        Self {
            state: StateStore::new(),
            index: 0,
            launcher: PeriodicLauncher::default(),
            rng: ChaCha8Rng::seed_from_u64(7),
        }
    }

    fn apply(&mut self, cmd: Command) {
        self.index += 1;
        fsm::apply(&mut self.state, self.index, cmd).expect("command applies");
    }

    fn register(&mut self, job: Job, now: Timestamp) {
        let key = job.key();
        self.apply(Command::JobRegister {
            job,
            eval: None,
            now,
        });
        let stored = self.state.job(&key).expect("registered").clone();
        self.launcher.track(&stored, now).expect("trackable");
    }

    /// Ticks and commits every launch; returns them.
    fn tick(&mut self, now: Timestamp) -> Vec<Launch> {
        let snapshot = self.state.snapshot();
        let launches = self.launcher.tick(now, &snapshot, &mut self.rng);
        for l in &launches {
            self.apply(l.clone().into_command(now));
        }
        launches
    }

    fn finish(&mut self, child: &str) {
        let key = JobKey::default_ns(child);
        let evals: Vec<Evaluation> = self
            .state
            .evals_by_job(&key)
            .map(|e| {
                let mut e = (**e).clone();
                e.status = EvalStatus::Complete;
                e
            })
            .collect();
        assert!(!evals.is_empty(), "{child} has evals to complete");
        self.apply(Command::EvalUpsert { evals });
        let status = self.state.job(&key).expect("child exists").status;
        assert_eq!(
            status,
            JobStatus::Dead,
            "{child} is dead once its evals are done"
        );
    }

    fn failover(&mut self, now: Timestamp) {
        self.launcher = PeriodicLauncher::default();
        let errors = self.launcher.restore(&self.state.snapshot(), now);
        assert_eq!(errors, Vec::new(), "every job restores");
    }
}

/// Runs one scenario, naming it and the step in any failure.
fn run(name: &str, steps: Vec<Step>) {
    let mut w = World::new();
    for (i, step) in steps.into_iter().enumerate() {
        let ctx = format!("{name}, step {i}");
        match step {
            Step::Register(job, now) => w.register(job, at(now)),
            Step::Tick(now, want) => {
                let got: Vec<(String, Timestamp)> = w
                    .tick(at(now))
                    .iter()
                    .map(|l| (l.job.id.to_string(), l.launch_time))
                    .collect();
                let want: Vec<(String, Timestamp)> = want
                    .iter()
                    .map(|(parent, slot)| (child(parent, slot), at(slot)))
                    .collect();
                assert_eq!(got, want, "{ctx}: launches at {now}");
            }
            Step::Finish(child) => w.finish(&child),
            Step::Stop(parent, now, tell) => {
                w.apply(Command::JobDeregister {
                    job: JobKey::default_ns(parent),
                    purge: false,
                    eval: None,
                    now: at(now),
                });
                if tell {
                    let stored = w.state.job(&JobKey::default_ns(parent)).unwrap().clone();
                    assert_eq!(w.launcher.track(&stored, at(now)), Ok(None), "{ctx}");
                }
            }
            Step::Purge(parent, tell) => {
                w.apply(Command::JobDeregister {
                    job: JobKey::default_ns(parent),
                    purge: true,
                    eval: None,
                    now: Timestamp::ZERO,
                });
                if tell {
                    assert!(w.launcher.untrack(&JobKey::default_ns(parent)), "{ctx}");
                }
            }
            Step::Untrack(parent) => {
                assert!(w.launcher.untrack(&JobKey::default_ns(parent)), "{ctx}");
            }
            Step::Failover(now) => w.failover(at(now)),
            Step::Deadline(want) => {
                assert_eq!(w.launcher.next_deadline(), want.map(at), "{ctx}: deadline");
            }
        }
    }
}

fn disabled(mut job: Job) -> Job {
    job.periodic.as_mut().unwrap().enabled = false;
    job
}

fn stopped(mut job: Job) -> Job {
    job.stop = true;
    job
}

#[test]
fn launcher_scenarios() {
    use Step::*;
    let minutely = || periodic("minutely", "* * * * *", false);
    let exclusive = || periodic("exclusive", "* * * * *", true);
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "launches each slot once, next launch strictly after the tick",
            vec![
                Register(minutely(), "10:00:30"),
                Deadline(Some("10:01:00")),
                Tick("10:00:59", &[]),
                Tick("10:01:00", &[("minutely", "10:01:00")]),
                Deadline(Some("10:02:00")),
                Tick("10:01:00", &[]),
                Tick("10:01:30", &[]),
                Tick("10:02:00", &[("minutely", "10:02:00")]),
            ],
        ),
        (
            "a late tick launches the latest slot due, once",
            vec![
                Register(minutely(), "10:00:30"),
                Tick("10:03:10", &[("minutely", "10:03:00")]),
                Deadline(Some("10:04:00")),
            ],
        ),
        (
            "prohibit_overlap skips while a child runs and launches once it is dead",
            vec![
                Register(exclusive(), "10:00:30"),
                Tick("10:01:00", &[("exclusive", "10:01:00")]),
                Tick("10:02:00", &[]),
                Deadline(Some("10:03:00")),
                Finish(child("exclusive", "10:01:00")),
                Tick("10:03:00", &[("exclusive", "10:03:00")]),
                Tick("10:04:00", &[]),
            ],
        ),
        (
            "without prohibit_overlap a running child does not hold back the next",
            vec![
                Register(minutely(), "10:00:30"),
                Tick("10:01:00", &[("minutely", "10:01:00")]),
                Tick("10:02:00", &[("minutely", "10:02:00")]),
            ],
        ),
        (
            "a purged child no longer overlaps",
            vec![
                Register(exclusive(), "10:00:30"),
                Tick("10:01:00", &[("exclusive", "10:01:00")]),
                Purge(leak(child("exclusive", "10:01:00")), false),
                Tick("10:02:00", &[("exclusive", "10:02:00")]),
            ],
        ),
        (
            "an overlapping child from before the parent was tracked is found in state",
            vec![
                Register(exclusive(), "10:00:30"),
                Tick("10:01:00", &[("exclusive", "10:01:00")]),
                Untrack("exclusive"),
                Register(exclusive(), "10:01:30"),
                Tick("10:02:00", &[]),
                Finish(child("exclusive", "10:01:00")),
                Tick("10:03:00", &[("exclusive", "10:03:00")]),
            ],
        ),
        (
            "turning prohibit_overlap on seeds the running children from state",
            vec![
                Register(minutely(), "10:00:30"),
                Tick("10:01:00", &[("minutely", "10:01:00")]),
                Register(periodic("minutely", "* * * * *", true), "10:01:30"),
                Tick("10:02:00", &[]),
            ],
        ),
        (
            "a stopped parent is not launched",
            vec![
                Register(minutely(), "10:00:30"),
                Stop("minutely", "10:00:40", true),
                Deadline(None),
                Tick("10:01:00", &[]),
            ],
        ),
        (
            "a parent stopped in state but still tracked is not launched, and is dropped",
            vec![
                Register(minutely(), "10:00:30"),
                Stop("minutely", "10:00:40", false),
                Deadline(Some("10:01:00")),
                Tick("10:01:00", &[]),
                Deadline(None),
            ],
        ),
        (
            "a parent purged from state but still tracked is not launched",
            vec![
                Register(minutely(), "10:00:30"),
                Purge("minutely", false),
                Tick("10:01:00", &[]),
                Deadline(None),
            ],
        ),
        (
            "stopped or disabled parents are never tracked",
            vec![
                Register(stopped(minutely()), "10:00:30"),
                Register(disabled(exclusive()), "10:00:30"),
                Deadline(None),
                Tick("10:05:00", &[]),
            ],
        ),
        (
            "disabling a tracked parent stops its launches; enabling resumes them",
            vec![
                Register(minutely(), "10:00:30"),
                Register(disabled(minutely()), "10:00:40"),
                Deadline(None),
                Tick("10:01:00", &[]),
                Register(minutely(), "10:01:30"),
                Tick("10:02:00", &[("minutely", "10:02:00")]),
            ],
        ),
        (
            "untrack stops launches",
            vec![
                Register(minutely(), "10:00:30"),
                Tick("10:01:00", &[("minutely", "10:01:00")]),
                Untrack("minutely"),
                Deadline(None),
                Tick("10:02:00", &[]),
                Tick("11:00:00", &[]),
            ],
        ),
        (
            "re-registering an unchanged schedule keeps a slot that is due",
            vec![
                Register(minutely(), "10:00:30"),
                Register(minutely(), "2024-03-01T10:01:00.500Z"),
                Tick("10:01:01", &[("minutely", "10:01:00")]),
            ],
        ),
        (
            "a changed schedule starts over after the register",
            vec![
                Register(minutely(), "10:00:30"),
                Register(periodic("minutely", "*/5 * * * *", false), "10:00:40"),
                Deadline(Some("10:05:00")),
                Tick("10:01:00", &[]),
                Tick("10:05:00", &[("minutely", "10:05:00")]),
            ],
        ),
        (
            "restore with a missed launch launches exactly once",
            vec![
                Register(minutely(), "10:00:30"),
                Tick("10:01:00", &[("minutely", "10:01:00")]),
                Failover("10:05:30"),
                Deadline(Some("10:05:00")),
                Tick("10:05:30", &[("minutely", "10:05:00")]),
                Deadline(Some("10:06:00")),
                Tick("10:05:45", &[]),
                Failover("10:05:50"),
                Deadline(Some("10:06:00")),
                Tick("10:05:55", &[]),
                Tick("10:06:00", &[("minutely", "10:06:00")]),
            ],
        ),
        (
            "a new leader whose clock is behind does not launch the last slot again",
            vec![
                Register(minutely(), "10:00:30"),
                Tick("10:02:00", &[("minutely", "10:02:00")]),
                Failover("10:01:50"),
                Deadline(Some("10:03:00")),
                Tick("10:02:30", &[]),
                Tick("10:03:00", &[("minutely", "10:03:00")]),
            ],
        ),
        (
            "restore with nothing missed waits for the next slot",
            vec![
                Register(minutely(), "10:00:30"),
                Tick("10:01:00", &[("minutely", "10:01:00")]),
                Failover("10:01:30"),
                Deadline(Some("10:02:00")),
                Tick("10:01:30", &[]),
            ],
        ),
        (
            "restore does not launch slots from before the parent was registered",
            vec![
                Register(periodic("hourly", "0 * * * *", false), "10:30:00"),
                Failover("10:45:00"),
                Deadline(Some("11:00:00")),
            ],
        ),
        (
            "restore launches a parent that never launched before the failover",
            vec![
                Register(periodic("hourly", "0 * * * *", false), "10:30:00"),
                Failover("12:10:00"),
                Tick("12:10:00", &[("hourly", "12:00:00")]),
                Deadline(Some("13:00:00")),
            ],
        ),
        (
            "restore keeps prohibit_overlap: a live child blocks the missed launch",
            vec![
                Register(exclusive(), "10:00:30"),
                Tick("10:01:00", &[("exclusive", "10:01:00")]),
                Failover("10:05:30"),
                Tick("10:05:30", &[]),
                Finish(child("exclusive", "10:01:00")),
                Tick("10:06:00", &[("exclusive", "10:06:00")]),
            ],
        ),
        (
            "restore skips stopped and disabled parents",
            vec![
                Register(minutely(), "10:00:30"),
                Register(disabled(exclusive()), "10:00:30"),
                Stop("minutely", "10:00:40", true),
                Failover("10:05:00"),
                Deadline(None),
            ],
        ),
        (
            "next_deadline is always the earliest launch",
            vec![
                Register(periodic("six-hourly", "0 */6 * * *", false), "10:00:30"),
                Deadline(Some("12:00:00")),
                Register(periodic("five", "*/5 * * * *", false), "10:00:30"),
                Deadline(Some("10:05:00")),
                Register(minutely(), "10:00:30"),
                Deadline(Some("10:01:00")),
                Tick("10:01:00", &[("minutely", "10:01:00")]),
                Deadline(Some("10:02:00")),
                Untrack("minutely"),
                Deadline(Some("10:05:00")),
                Tick("10:05:00", &[("five", "10:05:00")]),
                Deadline(Some("10:10:00")),
                Untrack("five"),
                Deadline(Some("12:00:00")),
                Untrack("six-hourly"),
                Deadline(None),
            ],
        ),
        (
            "jobs due in one tick launch in order of due time, then id",
            vec![
                Register(periodic("b", "* * * * *", false), "10:00:30"),
                Register(periodic("a", "* * * * *", false), "10:00:30"),
                Register(periodic("c", "*/2 * * * *", false), "10:00:30"),
                Tick("10:01:00", &[("a", "10:01:00"), ("b", "10:01:00")]),
                Tick(
                    "10:02:00",
                    &[("a", "10:02:00"), ("b", "10:02:00"), ("c", "10:02:00")],
                ),
            ],
        ),
    ];
    for (name, steps) in cases {
        run(name, steps);
    }
}

/// Scenario steps name jobs with `&'static str`; a child id built at run time is leaked to
/// fit (a few bytes per test).
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

#[test]
fn launch_builds_the_child_and_its_eval() {
    // (job type, time zone, tick, expected slot)
    let cases: &[(JobType, &str, &str, &str)] = &[
        (JobType::Batch, "", "10:01:00", "10:01:00"),
        (
            JobType::SysBatch,
            "",
            "2024-03-01T10:01:00.250Z",
            "10:01:00",
        ),
        (JobType::Batch, "Etc/GMT-2", "10:01:05", "10:01:00"),
    ];
    for (job_type, tz, now, slot) in cases {
        let mut parent = mock::job_of("nightly", *job_type, 1);
        parent.priority = 70;
        parent.meta.insert("team".into(), "data".into());
        parent.periodic = Some(PeriodicConfig {
            cron: "* * * * *".into(),
            prohibit_overlap: false,
            time_zone: (*tz).into(),
            enabled: true,
        });
        let mut w = World::new();
        w.register(parent.clone(), at("10:00:30"));
        let launches = w.tick(at(now));
        assert_eq!(launches.len(), 1, "{job_type} {tz}");
        let Launch {
            parent: parent_key,
            launch_time,
            job,
            eval,
        } = &launches[0];
        let want_id = format!("nightly/periodic-{}", at(slot).as_millis() / 1000);
        assert_eq!(*parent_key, parent.key());
        assert_eq!(*launch_time, at(slot));
        assert_eq!(job.id.as_str(), want_id);
        assert_eq!(job.name, want_id);
        assert_eq!(periodic_launch_time(&job.id), Some(at(slot)));
        assert_eq!(job.parent_id, Some(parent.id.clone()));
        assert_eq!(job.periodic, None);
        assert!(!job.is_template(), "a child is placed");
        assert_eq!(job.submit_time, at(slot));
        assert_eq!(job.status, JobStatus::Pending);
        assert_eq!(
            (job.version, job.create_index, job.job_modify_index),
            (0, 0, 0)
        );
        // Everything the operator wrote is the parent's.
        assert_eq!(job.groups, parent.groups);
        assert_eq!(job.meta, parent.meta);
        assert_eq!((job.job_type, job.priority), (*job_type, 70));
        assert_eq!(job.namespace, parent.namespace);
        assert_eq!(validate_job(job, &Limits::default()), Ok(()));

        assert_eq!(eval.triggered_by, TriggeredBy::PeriodicJob);
        assert_eq!(eval.job_id, job.id);
        assert_eq!(eval.scheduler, SchedulerType::from(*job_type));
        assert_eq!(eval.priority, 70);
        assert_eq!(eval.status, EvalStatus::Pending);
        assert_eq!(eval.create_time, at(now));

        // Committed, the child and its eval are in state together.
        let stored = w.state.job(&job.key()).expect("child registered");
        assert_eq!(stored.parent_id, Some(parent.id.clone()));
        assert!(
            w.state.eval(&eval.id).is_some(),
            "eval registered with the child"
        );
    }
}

#[test]
fn launch_eval_ids_come_from_the_rng() {
    let run_once = |seed: u64| {
        let mut w = World::new();
        w.rng = ChaCha8Rng::seed_from_u64(seed);
        w.register(periodic("minutely", "* * * * *", false), at("10:00:30"));
        let mut ids = w.tick(at("10:01:00"));
        ids.extend(w.tick(at("10:02:00")));
        ids.into_iter().map(|l| l.eval.id).collect::<Vec<_>>()
    };
    let first = run_once(1);
    assert_eq!(first.len(), 2);
    assert_ne!(first[0], first[1]);
    assert_eq!(run_once(1), first, "same seed, same ids");
    assert_ne!(run_once(2), first, "another seed, other ids");
}

#[test]
fn track_reports_what_it_cannot_schedule() {
    let mut launcher = PeriodicLauncher::default();
    let mut job = periodic("mars", "0 9 * * *", false);
    job.periodic.as_mut().unwrap().time_zone = "Mars/Olympus_Mons".into();
    let err = launcher.track(&job, at("10:00:00")).unwrap_err();
    assert_eq!(err.job, job.key());
    assert_eq!(
        err.to_string(),
        "periodic job default/mars cannot be scheduled: time zone \"Mars/Olympus_Mons\" is not \
         in the IANA time zone database (e.g. UTC, Europe/Berlin)"
    );
    assert!(launcher.is_empty(), "an unschedulable job is not tracked");

    // A tracked job whose new spec cannot be scheduled stops being tracked.
    let ok = periodic("mars", "0 9 * * *", false);
    assert_eq!(
        launcher.track(&ok, at("10:00:00")),
        Ok(Some(at("2024-03-02T09:00:00Z")))
    );
    assert_eq!(launcher.len(), 1);
    assert!(launcher.track(&job, at("10:00:00")).is_err());
    assert_eq!((launcher.len(), launcher.next_deadline()), (0, None));

    // Restore reports it too, and tracks the rest.
    let mut state = StateStore::new();
    for (i, j) in [job.clone(), periodic("fine", "@hourly", false)]
        .into_iter()
        .enumerate()
    {
        let cmd = Command::JobRegister {
            job: j,
            eval: None,
            now: at("10:00:00"),
        };
        fsm::apply(&mut state, i as Index + 1, cmd).unwrap();
    }
    let errors = launcher.restore(&state.snapshot(), at("10:30:00"));
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].job, job.key());
    assert_eq!(launcher.len(), 1);
    assert_eq!(
        launcher.next_launch(&JobKey::default_ns("fine")),
        Some(at("11:00:00"))
    );

    // A spec that never fires again is simply not tracked.
    let past = periodic("past", "0 0 0 1 1 * 2020", false);
    assert_eq!(launcher.track(&past, at("10:00:00")), Ok(None));
    assert_eq!(launcher.next_launch(&past.key()), None);
}

// ---------------------------------------------------------------------------------------
// Child ids of long parent ids

#[test]
fn child_ids_stay_within_the_id_limit() {
    let limits = Limits::default();
    let max = limits.max_name_len;
    let ascii_long = "p".repeat(max);
    let multibyte_long = "é".repeat(max / 2);
    let near = "n".repeat(max - "/periodic-1709287260".len());
    // (parent id, whether its periodic child keeps Nomad's `<parent>/` form)
    let cases: &[(&str, bool)] = &[
        ("nightly", true),
        (&near, true),
        (&ascii_long, false),
        (&multibyte_long, false),
    ];
    for (parent_id, plain) in cases {
        let mut parent = periodic(parent_id, "* * * * *", false);
        assert_eq!(
            validate_job(&parent, &limits),
            Ok(()),
            "parent {parent_id} is valid"
        );
        let mut w = World::new();
        w.register(parent.clone(), at("10:00:30"));
        let launch = w.tick(at("10:01:00")).pop().expect("launched");
        let id = launch.job.id.as_str();
        assert!(id.len() <= max, "{id} is {} bytes", id.len());
        assert_eq!(id.starts_with(&format!("{parent_id}/")), *plain, "{id}");
        assert_eq!(
            periodic_launch_time(&launch.job.id),
            Some(at("10:01:00")),
            "{id}"
        );
        assert_eq!(launch.job.parent_id.as_ref(), Some(&parent.id));
        assert_eq!(validate_job(&launch.job, &limits), Ok(()), "{id}");

        parent.periodic = None;
        parent.parameterized = Some(ParameterizedConfig::default());
        let (child, _) = dispatch(
            &parent,
            BTreeMap::new(),
            Vec::new(),
            at("10:00:00"),
            &mut ChaCha8Rng::seed_from_u64(1),
            &limits,
        )
        .expect("dispatch");
        let id = child.id.as_str();
        assert!(id.len() <= max, "{id} is {} bytes", id.len());
        let fits = parent_id.len() + "/dispatch-1709287200-0123abcd".len() <= max;
        assert_eq!(id.starts_with(&format!("{parent_id}/")), fits, "{id}");
        assert_eq!(validate_job(&child, &limits), Ok(()), "{id}");
    }

    // Two long parents that differ only past the cut still get distinct children.
    let a = JobId::new(format!("{ascii_long}a"));
    let b = JobId::new(format!("{ascii_long}b"));
    let (ca, cb) = (
        child_id(&a, "periodic-1", max),
        child_id(&b, "periodic-1", max),
    );
    assert_ne!(ca, cb);
    assert_eq!(ca, child_id(&a, "periodic-1", max), "stable");
}

// ---------------------------------------------------------------------------------------
// Dispatch

/// `render`: a parameterized batch job needing `size`, allowing `quality`.
fn render() -> Job {
    let mut job = mock::batch_job("render", 1);
    job.meta.insert("team".into(), "gfx".into());
    job.meta.insert("size".into(), "default".into());
    job.parameterized = Some(ParameterizedConfig {
        payload: PayloadRequirement::Optional,
        meta_required: vec!["size".into()],
        meta_optional: vec!["quality".into()],
    });
    job
}

fn with_payload(requirement: PayloadRequirement) -> Job {
    let mut job = render();
    job.parameterized.as_mut().unwrap().payload = requirement;
    job
}

#[test]
fn dispatch_checks_the_request() {
    let limits = Limits::default();
    let big = "v".repeat(limits.max_string_len + 1);
    let not_parameterized = {
        let mut j = render();
        j.parameterized = None;
        j
    };
    let stopped_parent = stopped(render());
    let no_optional = {
        let mut j = render();
        j.parameterized.as_mut().unwrap().meta_optional.clear();
        j.parameterized.as_mut().unwrap().meta_required.clear();
        j
    };
    // (case, parent, meta, payload bytes, Ok or the error message)
    let cases: Vec<(&str, Job, Vec<(&str, &str)>, usize, Result<(), String>)> = vec![
        ("required meta only", render(), vec![("size", "4k")], 0, Ok(())),
        (
            "required and optional meta, payload",
            render(),
            vec![("size", "4k"), ("quality", "high")],
            10,
            Ok(()),
        ),
        (
            "required meta missing",
            render(),
            vec![("quality", "high")],
            0,
            Err(r#"meta key "size" is required by job "render" but missing"#.into()),
        ),
        (
            "unknown meta key",
            render(),
            vec![("size", "4k"), ("color", "red")],
            0,
            Err(r#"meta key "color" is not allowed by job "render" (allowed: size, quality)"#
                .into()),
        ),
        (
            "unknown meta keys, and no keys allowed",
            no_optional,
            vec![("b", "1"), ("a", "2")],
            0,
            Err(r#"meta keys "a", "b" are not allowed by job "render" (allowed: none)"#.into()),
        ),
        (
            "unknown keys are reported before missing ones",
            render(),
            vec![("color", "red")],
            0,
            Err(r#"meta key "color" is not allowed by job "render" (allowed: size, quality)"#
                .into()),
        ),
        (
            "payload required",
            with_payload(PayloadRequirement::Required),
            vec![("size", "4k")],
            0,
            Err(r#"payload is required by job "render""#.into()),
        ),
        (
            "payload required and given",
            with_payload(PayloadRequirement::Required),
            vec![("size", "4k")],
            1,
            Ok(()),
        ),
        (
            "payload forbidden",
            with_payload(PayloadRequirement::Forbidden),
            vec![("size", "4k")],
            1,
            Err(r#"payload is not allowed by job "render""#.into()),
        ),
        (
            "payload forbidden and absent",
            with_payload(PayloadRequirement::Forbidden),
            vec![("size", "4k")],
            0,
            Ok(()),
        ),
        (
            "payload at the limit",
            render(),
            vec![("size", "4k")],
            limits.max_payload_bytes,
            Ok(()),
        ),
        (
            "payload too large",
            render(),
            vec![("size", "4k")],
            limits.max_payload_bytes + 1,
            Err(r#"payload is 16385 bytes, above the limit of 16384 for job "render""#.into()),
        ),
        (
            "meta value too long",
            render(),
            vec![("size", &big)],
            0,
            Err(r#"meta value of key "size" for job "render" is 16385 bytes long, above the limit of 16384"#.into()),
        ),
        (
            "meta value with a NUL",
            render(),
            vec![("size", "4\0k")],
            0,
            Err(r#"meta value of key "size" for job "render" contains a NUL character"#.into()),
        ),
        (
            "non-parameterized parent",
            not_parameterized,
            vec![("size", "4k")],
            0,
            Err(r#"job "render" is not parameterized and cannot be dispatched"#.into()),
        ),
        (
            "stopped parent",
            stopped_parent,
            vec![("size", "4k")],
            0,
            Err(r#"job "render" is stopped and cannot be dispatched"#.into()),
        ),
    ];
    for (case, parent, meta, payload_len, want) in cases {
        let meta: BTreeMap<String, String> = meta
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let got = dispatch(
            &parent,
            meta,
            vec![7; payload_len],
            at("10:00:00"),
            &mut ChaCha8Rng::seed_from_u64(3),
            &limits,
        );
        match (got, want) {
            (Ok((child, _)), Ok(())) => {
                assert_eq!(validate_job(&child, &limits), Ok(()), "{case}");
            }
            (Err(e), Err(msg)) => assert_eq!(e.to_string(), msg, "{case}"),
            (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn dispatch_builds_the_child_and_its_eval() {
    let limits = Limits::default();
    let mut parent = render();
    parent.priority = 80;
    let mut sysbatch = render();
    sysbatch.job_type = JobType::SysBatch;
    let now = at("10:00:30");
    // (parent, payload)
    let cases: &[(&Job, &[u8])] = &[(&parent, b"frame-001"), (&sysbatch, b"")];
    for (parent, payload) in cases {
        let meta = BTreeMap::from([
            ("size".to_owned(), "4k".to_owned()),
            ("quality".to_owned(), "high".to_owned()),
        ]);
        let dispatch_with = |seed| {
            dispatch(
                parent,
                meta.clone(),
                payload.to_vec(),
                now,
                &mut ChaCha8Rng::seed_from_u64(seed),
                &limits,
            )
            .expect("dispatch succeeds")
        };
        let (job, eval) = dispatch_with(42);

        let id = job.id.as_str();
        let prefix = format!("render/dispatch-{}-", now.as_millis() / 1000);
        let hex = id.strip_prefix(&prefix).unwrap_or_else(|| panic!("{id}"));
        assert!(
            hex.len() == 8
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "{id}"
        );
        assert_eq!(
            dispatch_with(42),
            (job.clone(), eval.clone()),
            "seeded: deterministic"
        );
        assert_ne!(dispatch_with(43).0.id, job.id, "another seed, another id");

        assert_eq!(job.name, id);
        assert_eq!(job.parent_id, Some(parent.id.clone()));
        assert_eq!(job.parameterized, None);
        assert!(!job.is_template());
        assert_eq!(job.payload, payload.to_vec());
        // The parent's meta, overridden by the dispatch's.
        let want_meta = BTreeMap::from([
            ("team".to_owned(), "gfx".to_owned()),
            ("size".to_owned(), "4k".to_owned()),
            ("quality".to_owned(), "high".to_owned()),
        ]);
        assert_eq!(job.meta, want_meta);
        assert_eq!(job.groups, parent.groups);
        assert_eq!(
            (job.job_type, job.priority),
            (parent.job_type, parent.priority)
        );
        assert_eq!(job.submit_time, now);
        assert_eq!(
            (job.status, job.version, job.stop),
            (JobStatus::Pending, 0, false)
        );

        assert_eq!(eval.triggered_by, TriggeredBy::JobDispatch);
        assert_eq!(eval.job_id, job.id);
        assert_eq!(eval.scheduler, SchedulerType::from(parent.job_type));
        assert_eq!(eval.priority, parent.priority);
        assert_eq!(eval.status, EvalStatus::Pending);
        assert_eq!(eval.create_time, now);
        assert_eq!(&*eval.namespace, parent.namespace.as_str());
    }
}

#[test]
fn dispatch_error_messages_stay_short() {
    let mut parent = render();
    let allowed: Vec<String> = (0..12).map(|i| format!("k{i:02}")).collect();
    parent.parameterized.as_mut().unwrap().meta_optional = allowed;
    let meta: BTreeMap<String, String> = (0..12)
        .map(|i| (format!("{}{i:02}", "x".repeat(70)), String::new()))
        .collect();
    let err = dispatch(
        &parent,
        meta,
        Vec::new(),
        at("10:00:00"),
        &mut ChaCha8Rng::seed_from_u64(1),
        &Limits::default(),
    )
    .unwrap_err();
    let msg = err.to_string();
    let first = format!("{:?}…", "x".repeat(64));
    assert!(msg.starts_with(&format!("meta keys {first}, ")), "{msg}");
    assert!(
        msg.contains(", and 2 more are not allowed by job \"render\""),
        "{msg}"
    );
    assert!(
        msg.ends_with("(allowed: size, k00, k01, k02, k03, k04, k05, k06, k07, k08, and 3 more)"),
        "{msg}"
    );
    let DispatchError::MetaNotAllowed { keys, .. } = err else {
        panic!("{msg}");
    };
    assert_eq!(keys.len(), 12, "the error keeps every key");
}

// ---------------------------------------------------------------------------------------
// Properties

const SPECS: &[&str] = &[
    "* * * * *",
    "*/15 * * * * *",
    "*/7 * * * *",
    "0 */6 * * *",
    "30 9 * * 1",
    "0 9 * * MON-FRI",
    "@hourly",
    "0 0 1 * *",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// For any spec and `now`, the next launch is strictly after `now` and is a slot (the
    /// latest slot at or before it is itself); and a leader ticking at arbitrary times,
    /// failing over now and then to a server whose clock may be behind by up to 90 s,
    /// never launches one slot twice and never launches a slot before it is due.
    #[test]
    fn launches_are_after_now_and_never_repeat(
        spec in 0..SPECS.len(),
        start in 1_600_000_000_000u64..1_900_000_000_000,
        steps in proptest::collection::vec(
            (prop_oneof![0u64..120_000, 0u64..5_400_000], 0u8..6, 0u64..90_000),
            1..40,
        ),
    ) {
        let cron = SPECS[spec];
        let config = PeriodicConfig {
            cron: cron.into(),
            prohibit_overlap: false,
            time_zone: String::new(),
            enabled: true,
        };
        let schedule = Schedule::new(&config).unwrap();
        let start = Timestamp::from_millis(start);
        let next = schedule.next_after(start).expect("these specs always fire again");
        prop_assert!(next > start);
        prop_assert_eq!(schedule.latest_at_or_before(next), Some(next));
        prop_assert_eq!(next.as_millis() % 1000, 0);

        let mut w = World::new();
        w.register(periodic("job", cron, false), start);
        let mut now = start;
        let mut launched = BTreeSet::new();
        let mut last = None;
        for (delta, action, skew) in steps {
            now = now.saturating_add(std::time::Duration::from_millis(delta));
            if action == 0 {
                // The new leader's clock is `skew` behind, and stays so.
                now = now.saturating_sub(std::time::Duration::from_millis(skew));
                w.failover(now);
            }
            for l in w.tick(now) {
                prop_assert!(l.launch_time <= now, "{} launched before due", l.job.id);
                prop_assert!(l.launch_time > start, "{} predates the job", l.job.id);
                prop_assert!(Some(l.launch_time) > last, "slots move forward");
                prop_assert_eq!(schedule.latest_at_or_before(l.launch_time), Some(l.launch_time));
                prop_assert!(launched.insert(l.job.id.clone()), "{} launched twice", l.job.id);
                last = Some(l.launch_time);
            }
            let deadline = w.launcher.next_deadline().expect("still tracked");
            prop_assert!(deadline > now, "nothing left due after a tick");
            // Never at or before the job was submitted, whatever the leader's clock says.
            let after = now.max(last.unwrap_or(Timestamp::ZERO)).max(start);
            prop_assert_eq!(Some(deadline), schedule.next_after(after));
        }
    }
}

#[test]
fn named_zones_follow_daylight_saving_time() {
    let config = PeriodicConfig {
        cron: "0 9 * * *".into(),
        prohibit_overlap: false,
        time_zone: "Europe/Berlin".into(),
        enabled: true,
    };
    let schedule = Schedule::new(&config).unwrap();
    // 09:00 in Berlin is 08:00 UTC in winter (CET) and 07:00 UTC in summer (CEST).
    assert_eq!(
        schedule.next_after(at("2024-03-02T00:00:00Z")),
        Some(at("2024-03-02T08:00:00Z"))
    );
    assert_eq!(
        schedule.next_after(at("2024-07-01T00:00:00Z")),
        Some(at("2024-07-01T07:00:00Z"))
    );
}
