//! One test per rule of the blocked-eval tracker, table-driven where a rule has cases, and a
//! property test over random operation sequences.

use super::*;
use crate::{EvalId, Job, JobType, SchedulerType, TriggeredBy};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

const T0: Timestamp = Timestamp(1_000_000);

fn eval_id(n: u64) -> EvalId {
    EvalId::from_bytes(u128::from(n).to_be_bytes())
}

fn node(n: u8) -> NodeId {
    NodeId::from_bytes([n; 16])
}

/// A test eval: service, job-wide, created and computed at index `n` unless told otherwise.
#[derive(Clone, Debug)]
struct Ev(Evaluation);

impl Ev {
    fn new(n: u64, job: &str) -> Ev {
        let job = Job::new(job, JobType::Service, Vec::new());
        let mut e = Evaluation::new(eval_id(n), &job, TriggeredBy::JobRegister, T0);
        e.status = EvalStatus::Blocked;
        e.create_index = n;
        e.modify_index = n;
        e.snapshot_index = n;
        Ev(e)
    }
    fn snap(mut self, index: Index) -> Ev {
        self.0.snapshot_index = index;
        self
    }
    fn create(mut self, index: Index) -> Ev {
        self.0.create_index = index;
        self
    }
    fn elig(mut self, classes: &[(&str, bool)]) -> Ev {
        self.0.class_eligibility = classes.iter().map(|(c, ok)| (c.to_string(), *ok)).collect();
        self
    }
    fn escaped(mut self) -> Ev {
        self.0.escaped_computed_class = true;
        self
    }
    fn scheduler(mut self, scheduler: SchedulerType) -> Ev {
        self.0.scheduler = scheduler;
        self
    }
    fn on_node(mut self, scheduler: SchedulerType, n: u8) -> Ev {
        self.0.node_id = Some(node(n));
        self.scheduler(scheduler)
    }
    fn system(self, n: u8) -> Ev {
        self.on_node(SchedulerType::System, n)
    }
    fn trigger(mut self, t: TriggeredBy) -> Ev {
        self.0.triggered_by = t;
        self
    }
    fn status(mut self, s: EvalStatus) -> Ev {
        self.0.status = s;
        self
    }
    fn modified_at(mut self, t: Timestamp) -> Ev {
        self.0.modify_time = t;
        self
    }
    fn id(&self) -> EvalId {
        self.0.id
    }
    fn get(self) -> Evaluation {
        self.0
    }
}

fn tracker() -> BlockedEvals {
    let mut be = BlockedEvals::default();
    be.set_enabled(true);
    be
}

/// An enabled tracker holding `evals`, each of which must block.
fn tracker_with(evals: &[Ev]) -> BlockedEvals {
    let mut be = tracker();
    for e in evals {
        let out = be.block(e.clone().get(), T0);
        assert!(
            matches!(out, BlockOutcome::Blocked { .. }),
            "{:?} did not block: {out:?}",
            e.id()
        );
    }
    be
}

fn ids(released: &[Unblocked]) -> Vec<EvalId> {
    released.iter().map(|u| u.eval.id).collect()
}

fn blocked_ids(be: &BlockedEvals) -> Vec<EvalId> {
    be.blocked_list().iter().map(|i| i.eval_id).collect()
}

/// Structural invariants plus stats against a recount.
fn check(be: &BlockedEvals) {
    be.store.check_invariants();
    assert_eq!(be.stats().total_blocked, be.blocked_list().len());
    assert_eq!(be.stats().duplicates, be.duplicates.len());
}

#[test]
fn captured_blocks_by_class() {
    struct Case {
        name: &'static str,
        eval: Ev,
        kind: BlockedKind,
        unblocked_by: &'static str,
    }
    let cases = [
        Case {
            name: "behaviour example: full class a, windows filtered",
            eval: Ev::new(1, "web").elig(&[("a", true), ("windows", false)]),
            kind: BlockedKind::Captured,
            unblocked_by: "a node of class a or any new class gains capacity",
        },
        Case {
            name: "no class seen",
            eval: Ev::new(1, "web"),
            kind: BlockedKind::Captured,
            unblocked_by: "a node of any new class gains capacity",
        },
        Case {
            name: "escaped",
            eval: Ev::new(1, "web").elig(&[("a", true)]).escaped(),
            kind: BlockedKind::Escaped,
            unblocked_by: "a node of any class gains capacity (constraints escape node classes)",
        },
        Case {
            name: "system eval on a node",
            eval: Ev::new(1, "agent").system(7),
            kind: BlockedKind::System { node: node(7) },
            unblocked_by: "node 07070707 gains capacity",
        },
        Case {
            name: "sysbatch eval on a node, escaped too",
            eval: Ev::new(1, "agent")
                .on_node(SchedulerType::SysBatch, 7)
                .escaped(),
            kind: BlockedKind::System { node: node(7) },
            unblocked_by: "node 07070707 gains capacity",
        },
        Case {
            name: "system eval on a node, with class eligibility",
            eval: Ev::new(1, "agent").elig(&[("a", true)]).system(7),
            kind: BlockedKind::System { node: node(7) },
            unblocked_by: "node 07070707 gains capacity",
        },
        Case {
            name: "system job-wide eval (no node) is captured",
            eval: Ev::new(1, "agent")
                .elig(&[("a", true)])
                .scheduler(SchedulerType::System),
            kind: BlockedKind::Captured,
            unblocked_by: "a node of class a or any new class gains capacity",
        },
        Case {
            name: "service eval with a node id is not per-node",
            eval: Ev::new(1, "web").on_node(SchedulerType::Service, 7),
            kind: BlockedKind::Captured,
            unblocked_by: "a node of any new class gains capacity",
        },
        Case {
            name: "out of plan attempts",
            eval: Ev::new(1, "web")
                .elig(&[("a", true)])
                .trigger(TriggeredBy::MaxPlanAttempts),
            kind: BlockedKind::Captured,
            unblocked_by: "a node of class a or any new class gains capacity; also retried by the \
                           failed-eval sweep",
        },
    ];
    for case in cases {
        let be = tracker_with(std::slice::from_ref(&case.eval));
        let list = be.blocked_list();
        assert_eq!(list.len(), 1, "{}", case.name);
        assert_eq!(list[0].eval_id, case.eval.id(), "{}", case.name);
        assert_eq!(list[0].kind, case.kind, "{}", case.name);
        assert_eq!(list[0].blocked_since, T0, "{}", case.name);
        assert_eq!(list[0].unblocked_by, case.unblocked_by, "{}", case.name);
        check(&be);
    }
}

/// One unblock-of-a-class case: does `class` release an eval with this eligibility?
struct ClassCase {
    name: &'static str,
    eval: Ev,
    class: &'static str,
    released: bool,
}

fn run_class_cases(cases: Vec<ClassCase>) {
    for case in cases {
        let mut be = tracker_with(std::slice::from_ref(&case.eval));
        let released = be.unblock_class(case.class, 100);
        let expect = if case.released {
            vec![case.eval.id()]
        } else {
            vec![]
        };
        assert_eq!(ids(&released), expect, "{}", case.name);
        assert_eq!(blocked_ids(&be).is_empty(), case.released, "{}", case.name);
        check(&be);
    }
}

#[test]
fn unblock_class_releases_eligible_and_unknown_classes() {
    let example = || Ev::new(1, "web").elig(&[("a", true), ("windows", false)]);
    run_class_cases(vec![
        ClassCase {
            name: "eligible class",
            eval: example(),
            class: "a",
            released: true,
        },
        ClassCase {
            name: "class never seen",
            eval: example(),
            class: "linux",
            released: true,
        },
        ClassCase {
            name: "no class seen at all",
            eval: Ev::new(1, "web"),
            class: "a",
            released: true,
        },
        ClassCase {
            name: "every seen class ineligible, unblock of a new one",
            eval: Ev::new(1, "web").elig(&[("windows", false)]),
            class: "default",
            released: true,
        },
    ]);

    // Several evals: one unblock releases all that may fit, in the order they blocked.
    let mut be = tracker_with(&[
        Ev::new(1, "a").elig(&[("a", true)]),
        Ev::new(2, "b").elig(&[("a", false)]),
        Ev::new(3, "c"),
        Ev::new(4, "d").escaped(),
    ]);
    assert_eq!(
        ids(&be.unblock_class("a", 10)),
        vec![eval_id(1), eval_id(3), eval_id(4)]
    );
    assert_eq!(blocked_ids(&be), vec![eval_id(2)]);
    check(&be);
}

#[test]
fn unblock_class_keeps_ineligible() {
    let example = || Ev::new(1, "web").elig(&[("a", true), ("windows", false)]);
    run_class_cases(vec![
        ClassCase {
            name: "ineligible class",
            eval: example(),
            class: "windows",
            released: false,
        },
        ClassCase {
            name: "only class, ineligible",
            eval: Ev::new(1, "web").elig(&[("a", false)]),
            class: "a",
            released: false,
        },
    ]);

    // BEHAVIOUR.md example end to end: windows does not release it, a does.
    let mut be = tracker_with(&[example()]);
    assert!(be.unblock_class("windows", 10).is_empty());
    assert_eq!(blocked_ids(&be), vec![eval_id(1)]);
    let released = be.unblock_class("a", 11);
    assert_eq!(ids(&released), vec![eval_id(1)]);
    assert_eq!(
        released[0].eval,
        example().get(),
        "released as it was blocked"
    );
    assert_eq!(released[0].token, None);
    check(&be);
}

#[test]
fn escaped_released_by_any_class() {
    let escaped = || {
        Ev::new(1, "web")
            .elig(&[("a", false), ("b", true)])
            .escaped()
    };
    run_class_cases(vec![
        ClassCase {
            name: "class it marked ineligible",
            eval: escaped(),
            class: "a",
            released: true,
        },
        ClassCase {
            name: "class it marked eligible",
            eval: escaped(),
            class: "b",
            released: true,
        },
        ClassCase {
            name: "class it never saw",
            eval: escaped(),
            class: "c",
            released: true,
        },
    ]);
    let mut be = tracker_with(&[escaped()]);
    assert_eq!(
        ids(&be.unblock_node(node(3), "a", 5)),
        vec![eval_id(1)],
        "node unblock"
    );
    check(&be);
}

#[test]
fn system_eval_released_by_its_node_only() {
    let mut be = tracker_with(&[
        Ev::new(1, "agent").system(1),
        Ev::new(2, "agent").system(2),
        Ev::new(3, "logs").on_node(SchedulerType::SysBatch, 1),
        Ev::new(4, "web").elig(&[("a", true)]),
    ]);
    // Per-node evals of one job do not displace each other.
    assert_eq!(be.stats().total_system, 3);
    assert!(be.take_duplicates(10).is_empty());

    assert!(
        ids(&be.unblock_class("a", 10)) == vec![eval_id(4)],
        "class unblock skips system"
    );
    assert!(be.unblock_node(node(9), "b", 11).is_empty(), "another node");
    assert_eq!(
        ids(&be.unblock_node(node(1), "b", 12)),
        vec![eval_id(1), eval_id(3)]
    );
    assert_eq!(blocked_ids(&be), vec![eval_id(2)]);
    check(&be);
}

#[test]
fn missed_unblock_enqueues_immediately() {
    struct Case {
        name: &'static str,
        eval: Ev,
        enqueued: bool,
    }
    let cases = [
        Case {
            name: "eligible class unblocked after snapshot",
            eval: Ev::new(20, "web").snap(5).elig(&[("a", true)]),
            enqueued: true,
        },
        Case {
            name: "unseen class unblocked after snapshot",
            eval: Ev::new(20, "web").snap(5).elig(&[("b", true)]),
            enqueued: true,
        },
        Case {
            name: "only the ineligible class unblocked",
            eval: Ev::new(20, "web").snap(5).elig(&[("a", false)]),
            enqueued: false,
        },
        Case {
            name: "snapshot saw the unblock",
            eval: Ev::new(20, "web").snap(10).elig(&[("a", true)]),
            enqueued: false,
        },
        Case {
            name: "escaped, any unblock after snapshot",
            eval: Ev::new(20, "web").snap(9).escaped(),
            enqueued: true,
        },
        Case {
            name: "escaped, snapshot saw it",
            eval: Ev::new(20, "web").snap(10).escaped(),
            enqueued: false,
        },
        Case {
            name: "system eval of the unblocked node",
            eval: Ev::new(20, "agent").snap(5).system(1),
            enqueued: true,
        },
        Case {
            name: "system eval of another node",
            eval: Ev::new(20, "agent").snap(5).system(2),
            enqueued: false,
        },
    ];
    for case in cases {
        let mut be = tracker();
        assert!(be.unblock_node(node(1), "a", 10).is_empty());
        match be.block(case.eval.clone().get(), T0) {
            BlockOutcome::Enqueue(u) => {
                assert!(case.enqueued, "{}: enqueued", case.name);
                assert_eq!(
                    *u,
                    Unblocked {
                        eval: case.eval.get(),
                        token: None
                    },
                    "{}",
                    case.name
                );
                assert!(be.blocked_list().is_empty(), "{}", case.name);
            }
            BlockOutcome::Blocked { superseded: None } => {
                assert!(!case.enqueued, "{}: blocked", case.name);
                assert_eq!(blocked_ids(&be), vec![case.eval.id()], "{}", case.name);
            }
            other => panic!("{}: unexpected {other:?}", case.name),
        }
        check(&be);
    }
}

#[test]
fn missed_unblock_index_pruned_after_window() {
    let window = BlockedConfig::default().unblock_window;
    let stale = || Ev::new(20, "web").snap(5).elig(&[("a", true)]).get();
    let mut be = tracker();
    be.unblock_node(node(1), "a", 10);
    assert_eq!(be.prune(T0), 0, "first prune only stamps the unblock");

    let just_before = T0.saturating_add(window - Duration::from_millis(1));
    assert_eq!(be.prune(just_before), 0);
    assert!(
        matches!(be.block(stale(), just_before), BlockOutcome::Enqueue(_)),
        "still remembered"
    );

    // The class, the any-class mark and the node.
    assert_eq!(be.prune(T0.saturating_add(window)), 3);
    assert_eq!(
        be.block(stale(), T0),
        BlockOutcome::Blocked { superseded: None },
        "forgotten"
    );

    // An unblock recorded after the last prune lives a full window from the next prune.
    be.unblock_class("b", 30);
    let later = T0.saturating_add(window * 2);
    assert_eq!(be.prune(later), 0);
    assert_eq!(
        be.prune(later.saturating_add(window - Duration::from_millis(1))),
        0
    );
    assert_eq!(be.prune(later.saturating_add(window)), 2);
    check(&be);
}

#[test]
fn one_blocked_eval_per_job_newer_wins() {
    struct Case {
        name: &'static str,
        first: Ev,
        second: Ev,
        second_wins: bool,
    }
    let cases = [
        Case {
            name: "higher snapshot index",
            first: Ev::new(1, "web").snap(5),
            second: Ev::new(2, "web").create(2).snap(8),
            second_wins: true,
        },
        Case {
            name: "create index counts too",
            first: Ev::new(1, "web").create(10).snap(2),
            second: Ev::new(2, "web").create(3).snap(9),
            second_wins: false,
        },
        Case {
            name: "tie: the later arrival wins",
            first: Ev::new(1, "web").create(5).snap(5),
            second: Ev::new(2, "web").create(5).snap(5),
            second_wins: true,
        },
        Case {
            name: "kinds differ, same job",
            first: Ev::new(1, "web").elig(&[("a", true)]),
            second: Ev::new(2, "web").escaped(),
            second_wins: true,
        },
        Case {
            name: "same node of a system job",
            first: Ev::new(1, "agent").system(1),
            second: Ev::new(2, "agent").system(1),
            second_wins: true,
        },
    ];
    for case in cases {
        let mut be = tracker_with(std::slice::from_ref(&case.first));
        let out = be.block(case.second.clone().get(), T0);
        let (winner, loser) = if case.second_wins {
            assert_eq!(
                out,
                BlockOutcome::Blocked {
                    superseded: Some(case.first.id())
                },
                "{}",
                case.name
            );
            (case.second, case.first)
        } else {
            assert_eq!(
                out,
                BlockOutcome::Duplicate {
                    kept: case.first.id()
                },
                "{}",
                case.name
            );
            (case.first, case.second)
        };
        assert_eq!(blocked_ids(&be), vec![winner.id()], "{}", case.name);
        assert_eq!(be.take_duplicates(10), vec![loser.get()], "{}", case.name);
        check(&be);
    }

    // Other jobs and namespaces are other slots.
    let mut other_ns = Ev::new(3, "web");
    other_ns.0.namespace = "prod".into();
    let be = tracker_with(&[Ev::new(1, "web"), Ev::new(2, "api"), other_ns]);
    assert_eq!(be.stats().total_blocked, 3);
}

#[test]
fn older_arrival_loses_to_existing_newer() {
    let newer = Ev::new(9, "web").elig(&[("a", true), ("c", false)]);
    let older = Ev::new(3, "web").elig(&[("b", true)]);
    let mut be = tracker_with(std::slice::from_ref(&newer));
    assert_eq!(
        be.block(older.clone().get(), T0),
        BlockOutcome::Duplicate { kept: newer.id() }
    );
    assert_eq!(blocked_ids(&be), vec![newer.id()]);
    assert_eq!(be.stats().by_class, BTreeMap::from([("a".to_string(), 1)]));
    assert_eq!(be.stats().duplicates, 1);
    check(&be);
    assert_eq!(be.take_duplicates(10), vec![older.get()]);

    // Even when the loser arrives late and misses an unblock, it is cancelled, not enqueued.
    be.unblock_class("c", 20);
    let stale = Ev::new(4, "web").snap(4);
    assert_eq!(
        be.block(stale.get(), T0),
        BlockOutcome::Duplicate { kept: newer.id() }
    );
    check(&be);
}

#[test]
fn duplicates_handed_out_in_batches() {
    let mut be = tracker();
    for n in 1..=7 {
        be.block(Ev::new(n, "web").get(), T0);
    }
    assert_eq!(be.stats().duplicates, 6);
    let batches: Vec<Vec<EvalId>> = [3, 3, 3, 3]
        .into_iter()
        .map(|max| be.take_duplicates(max).iter().map(|e| e.id).collect())
        .collect();
    let expect: Vec<Vec<EvalId>> = vec![
        (1..=3).map(eval_id).collect(),
        (4..=6).map(eval_id).collect(),
        vec![],
        vec![],
    ];
    assert_eq!(batches, expect, "oldest first, at most `max` at a time");
    assert_eq!(be.stats().duplicates, 0);
    assert_eq!(blocked_ids(&be), vec![eval_id(7)]);
    assert!(be.take_duplicates(0).is_empty());
    assert_eq!(be.config().duplicate_batch, DEFAULT_DUPLICATE_BATCH);
    check(&be);
}

#[test]
fn failed_max_plan_attempts_released_by_sweep() {
    let failed = TriggeredBy::MaxPlanAttempts;
    let mut be = tracker_with(&[
        Ev::new(1, "a").elig(&[("x", false)]).trigger(failed),
        Ev::new(2, "b").elig(&[("x", false)]),
        Ev::new(3, "c").escaped().trigger(failed),
        Ev::new(4, "d").system(1).trigger(failed),
    ]);
    assert_eq!(be.stats().total_failed, 3);
    assert_eq!(
        ids(&be.unblock_failed()),
        vec![eval_id(1), eval_id(3), eval_id(4)]
    );
    assert_eq!(blocked_ids(&be), vec![eval_id(2)]);
    assert!(be.unblock_failed().is_empty(), "nothing left to retry");
    assert_eq!(be.config().failed_sweep_interval, Duration::from_secs(60));
    check(&be);
}

#[test]
fn disable_drops_everything() {
    let mut be = tracker_with(&[
        Ev::new(1, "a"),
        Ev::new(2, "b").escaped(),
        Ev::new(3, "c").system(1),
    ]);
    be.block(Ev::new(4, "a").get(), T0);
    be.unblock_node(node(5), "z", 50);
    assert_eq!(be.stats().duplicates, 1);

    be.set_enabled(false);
    assert!(!be.is_enabled());
    assert_eq!(be.stats(), BlockedStats::default());
    assert!(be.blocked_list().is_empty());
    assert!(be.take_duplicates(10).is_empty());
    assert_eq!(be.block(Ev::new(5, "a").get(), T0), BlockOutcome::Disabled);
    assert!(be.unblock_class("z", 60).is_empty());
    assert!(be.restore([Ev::new(6, "a").get()]).is_empty());
    check(&be);

    // Enabled again, it remembers no unblock: a stale eval blocks.
    be.set_enabled(true);
    let stale = Ev::new(7, "a").snap(1);
    assert_eq!(
        be.block(stale.get(), T0),
        BlockOutcome::Blocked { superseded: None }
    );
    check(&be);
}

#[test]
fn restore_from_state() {
    let since = Timestamp(42);
    let state = vec![
        Ev::new(5, "web").elig(&[("a", true)]).modified_at(since),
        Ev::new(3, "web").modified_at(since),
        Ev::new(4, "api").escaped().modified_at(since),
        Ev::new(6, "done").status(EvalStatus::Complete),
        Ev::new(7, "queued").status(EvalStatus::Pending),
        Ev::new(8, "agent").system(1).modified_at(since),
    ];
    let mut be = tracker();
    let enqueue = be.restore(state.into_iter().map(Ev::get));
    assert!(enqueue.is_empty(), "no unblock remembered yet");
    let list = be.blocked_list();
    let got: Vec<(EvalId, Timestamp)> = list.iter().map(|i| (i.eval_id, i.blocked_since)).collect();
    assert_eq!(
        got,
        vec![
            (eval_id(4), since),
            (eval_id(5), since),
            (eval_id(8), since)
        ]
    );
    assert_eq!(
        be.take_duplicates(10)
            .iter()
            .map(|e| e.id)
            .collect::<Vec<_>>(),
        vec![eval_id(3)]
    );
    check(&be);
}

#[test]
fn stats_match_recount() {
    let mut be = tracker_with(&[
        Ev::new(1, "a").elig(&[("x", true), ("y", true), ("z", false)]),
        Ev::new(2, "b")
            .elig(&[("x", true)])
            .trigger(TriggeredBy::MaxPlanAttempts),
        Ev::new(3, "c").escaped().elig(&[("y", true)]),
        Ev::new(4, "d").system(1).elig(&[("x", true)]),
    ]);
    be.block(Ev::new(9, "a").elig(&[("z", true)]).get(), T0);
    let expect = BlockedStats {
        total_blocked: 4,
        total_captured: 2,
        total_escaped: 1,
        total_system: 1,
        total_failed: 1,
        duplicates: 1,
        by_class: BTreeMap::from([("x".into(), 2), ("y".into(), 1), ("z".into(), 1)]),
    };
    assert_eq!(be.stats(), expect);
    check(&be);

    be.unblock_class("y", 20);
    check(&be);
    assert_eq!(
        be.stats().by_class,
        BTreeMap::from([("x".into(), 1)]),
        "zeroed classes vanish"
    );
    assert_eq!(be.untrack(&JobKey::default_ns("d")).len(), 1);
    check(&be);
    assert_eq!(be.stats().total_blocked, 0);
}

#[test]
fn reblock_keeps_token() {
    // Released by an unblock.
    let mut be = tracker();
    let e = Ev::new(1, "web").elig(&[("a", true)]);
    assert_eq!(
        be.reblock(e.clone().get(), "tok-1", T0),
        BlockOutcome::Blocked { superseded: None }
    );
    assert!(be.blocked_list()[0].outstanding);
    assert_eq!(
        be.unblock_class("a", 10),
        vec![Unblocked {
            eval: e.clone().get(),
            token: Some("tok-1".into())
        }]
    );

    // Released at once by a missed unblock.
    let stale = Ev::new(2, "web").snap(5);
    assert_eq!(
        be.reblock(stale.clone().get(), "tok-2", T0),
        BlockOutcome::Enqueue(Box::new(Unblocked {
            eval: stale.get(),
            token: Some("tok-2".into())
        }))
    );

    // Released by the failed sweep.
    let failed = Ev::new(30, "api").trigger(TriggeredBy::MaxPlanAttempts);
    be.reblock(failed.clone().get(), "tok-3", T0);
    assert_eq!(
        be.unblock_failed(),
        vec![Unblocked {
            eval: failed.get(),
            token: Some("tok-3".into())
        }]
    );

    // Reblocking an eval already tracked replaces it: not its own duplicate; it keeps the
    // time it first blocked and takes the new token.
    let again = Ev::new(40, "db");
    be.block(again.clone().get(), T0);
    let later = T0.saturating_add(Duration::from_secs(5));
    assert_eq!(
        be.reblock(again.clone().get(), "tok-4", later),
        BlockOutcome::Blocked { superseded: None }
    );
    assert!(be.take_duplicates(10).is_empty());
    let info = &be.blocked_list()[0];
    assert_eq!(
        (info.eval_id, info.blocked_since, info.outstanding),
        (again.id(), T0, true)
    );
    assert_eq!(be.untrack(&JobKey::default_ns("db")), vec![again.get()]);
    check(&be);
}

#[test]
fn untrack_drops_job_wide_and_per_node_evals() {
    let mut be = tracker_with(&[
        Ev::new(1, "agent").system(1),
        Ev::new(2, "agent").system(2),
        Ev::new(3, "agent"),
        Ev::new(4, "web"),
    ]);
    let dropped: Vec<EvalId> = be
        .untrack(&JobKey::default_ns("agent"))
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(dropped, vec![eval_id(1), eval_id(2), eval_id(3)]);
    assert_eq!(blocked_ids(&be), vec![eval_id(4)]);
    assert!(be.untrack(&JobKey::default_ns("missing")).is_empty());
    assert!(be.take_duplicates(10).is_empty());
    check(&be);
}

mod property {
    use super::*;
    use proptest::prelude::*;

    const CLASSES: [&str; 3] = ["a", "b", "c"];
    const JOBS: [&str; 3] = ["j0", "j1", "j2"];

    #[derive(Clone, Debug)]
    enum Op {
        Block {
            job: usize,
            create: Index,
            snap: Index,
            elig: Vec<(usize, bool)>,
            escaped: bool,
            node: Option<u8>,
            failed: bool,
            token: bool,
        },
        UnblockClass {
            class: usize,
            index: Index,
        },
        UnblockNode {
            node: u8,
            class: usize,
            index: Index,
        },
        Untrack {
            job: usize,
        },
        UnblockFailed,
        TakeDuplicates {
            max: usize,
        },
        Prune {
            advance_secs: u64,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        let block = (
            0..JOBS.len(),
            0..30u64,
            0..30u64,
            prop::collection::vec((0..CLASSES.len(), any::<bool>()), 0..3),
            any::<bool>(),
            prop::option::weighted(0.3, 0..3u8),
            prop::bool::weighted(0.2),
            any::<bool>(),
        )
            .prop_map(|(job, create, snap, elig, escaped, node, failed, token)| {
                Op::Block {
                    job,
                    create,
                    snap,
                    elig,
                    escaped,
                    node,
                    failed,
                    token,
                }
            });
        prop_oneof![
            6 => block,
            2 => (0..CLASSES.len(), 0..30u64).prop_map(|(class, index)| Op::UnblockClass { class, index }),
            2 => (0..3u8, 0..CLASSES.len(), 0..30u64)
                .prop_map(|(node, class, index)| Op::UnblockNode { node, class, index }),
            1 => (0..JOBS.len()).prop_map(|job| Op::Untrack { job }),
            1 => Just(Op::UnblockFailed),
            1 => (0..4usize).prop_map(|max| Op::TakeDuplicates { max }),
            1 => (0..400u64).prop_map(|advance_secs| Op::Prune { advance_secs }),
        ]
    }

    /// Checks what must hold after every operation.
    struct Model {
        submitted: HashSet<EvalId>,
        /// Evals that left the tracker (released, enqueued, untracked, taken as duplicates).
        gone: HashSet<EvalId>,
    }

    impl Model {
        fn left(&mut self, id: EvalId) {
            assert!(self.submitted.contains(&id), "{id} was never blocked");
            assert!(self.gone.insert(id), "{id} left the tracker twice");
        }

        fn check(&self, be: &BlockedEvals) {
            check(be);
            let mut per_slot: HashMap<(JobKey, Option<NodeId>), usize> = HashMap::new();
            for info in be.blocked_list() {
                let node = match info.kind {
                    BlockedKind::System { node } => Some(node),
                    BlockedKind::Captured | BlockedKind::Escaped => None,
                };
                let n = per_slot.entry((info.job, node)).or_default();
                *n += 1;
                assert_eq!(
                    *n, 1,
                    "two blocked evals for one job (or one job on one node)"
                );
            }
            // Every eval is in exactly one place.
            let blocked: HashSet<EvalId> = blocked_ids(be).into_iter().collect();
            let dups: HashSet<EvalId> = be.duplicates.iter().map(|e| e.id).collect();
            assert_eq!(dups.len(), be.duplicates.len(), "a duplicate queued twice");
            assert!(blocked.is_disjoint(&dups) && blocked.is_disjoint(&self.gone));
            assert!(dups.is_disjoint(&self.gone));
            let all: HashSet<EvalId> = blocked
                .iter()
                .chain(&dups)
                .chain(&self.gone)
                .copied()
                .collect();
            assert_eq!(all, self.submitted);
        }
    }

    proptest! {
        #[test]
        fn random_sequences_keep_one_blocked_eval_per_job_and_exact_stats(
            ops in prop::collection::vec(op(), 1..60)
        ) {
            let mut be = tracker();
            let mut model = Model { submitted: HashSet::new(), gone: HashSet::new() };
            let mut now = T0;
            for (n, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Block { job, create, snap, elig, escaped, node, failed, token } => {
                        let classes: Vec<(&str, bool)> =
                            elig.iter().map(|(c, ok)| (CLASSES[*c], *ok)).collect();
                        let mut e = Ev::new(n as u64, JOBS[job]).create(create).snap(snap).elig(&classes);
                        if escaped {
                            e = e.escaped();
                        }
                        if let Some(node) = node {
                            e = e.system(node);
                        }
                        if failed {
                            e = e.trigger(TriggeredBy::MaxPlanAttempts);
                        }
                        model.submitted.insert(e.id());
                        let out = if token { be.reblock(e.get(), "t", now) } else { be.block(e.get(), now) };
                        if let BlockOutcome::Enqueue(u) = out {
                            model.left(u.eval.id);
                        }
                    }
                    Op::UnblockClass { class, index } => {
                        let class = CLASSES[class];
                        for u in be.unblock_class(class, index) {
                            let kind = BlockedKind::of(&u.eval);
                            prop_assert!(kind.released_by_class(&u.eval, class));
                            model.left(u.eval.id);
                        }
                        for info in be.blocked_list() {
                            match info.kind {
                                BlockedKind::Captured => {
                                    prop_assert_eq!(info.class_eligibility.get(class), Some(&false))
                                }
                                BlockedKind::Escaped => prop_assert!(false, "escaped eval kept"),
                                BlockedKind::System { .. } => {}
                            }
                        }
                    }
                    Op::UnblockNode { node: n, class, index } => {
                        for u in be.unblock_node(node(n), CLASSES[class], index) {
                            model.left(u.eval.id);
                        }
                        let on_node = BlockedKind::System { node: node(n) };
                        prop_assert!(be.blocked_list().iter().all(|i| i.kind != on_node));
                    }
                    Op::Untrack { job } => {
                        for e in be.untrack(&JobKey::default_ns(JOBS[job])) {
                            model.left(e.id);
                        }
                        prop_assert!(be.blocked_list().iter().all(|i| i.job.id.as_str() != JOBS[job]));
                    }
                    Op::UnblockFailed => {
                        for u in be.unblock_failed() {
                            model.left(u.eval.id);
                        }
                        prop_assert_eq!(be.stats().total_failed, 0);
                    }
                    Op::TakeDuplicates { max } => {
                        let before = be.stats().duplicates;
                        let taken = be.take_duplicates(max);
                        prop_assert_eq!(taken.len(), max.min(before));
                        for e in taken {
                            model.left(e.id);
                        }
                    }
                    Op::Prune { advance_secs } => {
                        now = now.saturating_add(Duration::from_secs(advance_secs));
                        be.prune(now);
                    }
                }
                model.check(&be);
            }
        }
    }
}
