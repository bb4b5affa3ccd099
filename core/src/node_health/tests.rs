//! One table per piece: every transition of the health table in DESIGN.md through one
//! scenario helper, then gauges, time left, restore, the heartbeat TTL and the expiry
//! decision.

use super::*;
use crate::fsm::{Command, apply};
use crate::mock;
use crate::state::StateStore;
use crate::types::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;
use std::time::Duration;

const T0: Timestamp = Timestamp(1_700_000_000_000);
const HEALTHY: NodeHealth = NodeHealth::Healthy;
const NEW: NodeHealth = NodeHealth::Suspended(SuspendReason::New);
const LOST: NodeHealth = NodeHealth::Suspended(SuspendReason::Lost);
const FLAKY: NodeHealth = NodeHealth::Suspended(SuspendReason::Flaky);
const OFFLINED: NodeHealth = NodeHealth::Offlined;

fn at(secs: u64) -> Timestamp {
    T0.saturating_add(Duration::from_secs(secs))
}

fn n(i: u64) -> NodeId {
    mock::node_id(i)
}

/// One event on the scenario's node.
#[derive(Clone, Copy, Debug)]
enum Ev {
    Register,
    Ready(Readiness),
    Heartbeat,
    Missed,
    Failure,
    Offline,
    Online,
    Tick,
}

use Ev::*;

fn set(from: Option<NodeHealth>, to: NodeHealth) -> HealthDecision {
    HealthDecision::SetHealth {
        node_id: n(1),
        from,
        to,
    }
}

fn reset() -> HealthDecision {
    HealthDecision::ResetSnapshot { node_id: n(1) }
}

fn delete() -> HealthDecision {
    HealthDecision::Delete { node_id: n(1) }
}

/// Node 1 registered at 0 s, checked at once and found ready at 0 s: healthy.
const READY_AT_0: [(u64, Ev); 3] = [(0, Register), (0, Tick), (0, Ready(Readiness::Ready))];

/// A healthy node flagged flaky by failures at 10, 20 and 30 s.
const FLAKY_AT_30: [(u64, Ev); 6] = [
    (0, Register),
    (0, Tick),
    (0, Ready(Readiness::Ready)),
    (10, Failure),
    (20, Failure),
    (30, Failure),
];

/// Runs `steps` (seconds after T0, event on node 1) against a default tracker. After every
/// step the tracker's invariants hold and the health its decisions wrote equals its own
/// view. Returns the tracker and the decisions and readiness checks of the last step.
fn run(steps: &[(u64, Ev)]) -> (NodeHealthTracker, Vec<HealthDecision>, Vec<NodeId>) {
    let mut t = NodeHealthTracker::default();
    let mut written: Option<NodeHealth> = None;
    let mut last = (Vec::new(), Vec::new());
    for &(secs, ev) in steps {
        let now = at(secs);
        let id = n(1);
        let (decisions, checks) = match ev {
            Register => (t.register(id, now), Vec::new()),
            Ready(r) => (t.readiness(id, r, now).unwrap(), Vec::new()),
            Heartbeat => (t.heartbeat(id, now).unwrap(), Vec::new()),
            Missed => (t.heartbeat_missed(id, now).unwrap(), Vec::new()),
            Failure => (t.infra_failure(id, now, "disk full").unwrap(), Vec::new()),
            Offline => (t.offline(id, now).unwrap(), Vec::new()),
            Online => (t.online(id, now).unwrap(), Vec::new()),
            Tick => {
                let tick = t.tick(now);
                (tick.decisions, tick.readiness_checks)
            }
        };
        for d in &decisions {
            match d {
                HealthDecision::SetHealth { from, to, .. } => {
                    assert_eq!(*from, written, "{ev:?} at {secs}s: from");
                    written = Some(*to);
                }
                HealthDecision::ResetSnapshot { .. } => assert!(written.is_some()),
                HealthDecision::Delete { .. } => written = None,
            }
        }
        t.check_invariants().unwrap();
        assert_eq!(
            t.health(&id),
            written,
            "{ev:?} at {secs}s: decisions != tracker"
        );
        last = (decisions, checks);
    }
    (t, last.0, last.1)
}

#[test]
fn every_transition_of_the_health_table() {
    let with = |prefix: &[(u64, Ev)], rest: &[(u64, Ev)]| [prefix, rest].concat();
    let cases: Vec<(
        &str,
        Vec<(u64, Ev)>,
        Option<NodeHealth>,
        Vec<HealthDecision>,
        Vec<NodeId>,
    )> = vec![
        (
            "register: suspended new",
            vec![(0, Register)],
            Some(NEW),
            vec![set(None, NEW)],
            vec![],
        ),
        (
            "registration asks for a readiness check at once",
            vec![(0, Register), (0, Tick)],
            Some(NEW),
            vec![],
            vec![n(1)],
        ),
        (
            "new -> healthy on readiness",
            READY_AT_0.to_vec(),
            Some(HEALTHY),
            vec![set(Some(NEW), HEALTHY)],
            vec![],
        ),
        (
            "healthy -> lost on a missed heartbeat",
            with(&READY_AT_0, &[(10, Missed)]),
            Some(LOST),
            vec![set(Some(HEALTHY), LOST)],
            vec![],
        ),
        (
            "a second miss changes nothing",
            with(&READY_AT_0, &[(10, Missed), (20, Missed)]),
            Some(LOST),
            vec![],
            vec![],
        ),
        (
            "lost -> healthy on a heartbeat within the grace",
            with(&READY_AT_0, &[(10, Missed), (69, Heartbeat)]),
            Some(HEALTHY),
            vec![set(Some(LOST), HEALTHY)],
            vec![],
        ),
        (
            "a heartbeat once the grace is over does not recover",
            with(&READY_AT_0, &[(10, Missed), (70, Heartbeat)]),
            Some(LOST),
            vec![],
            vec![],
        ),
        (
            "lost is kept until the grace ends",
            with(&READY_AT_0, &[(10, Missed), (69, Tick)]),
            Some(LOST),
            vec![],
            vec![],
        ),
        (
            "lost -> deleted when the grace ends",
            with(&READY_AT_0, &[(10, Missed), (70, Tick)]),
            None,
            vec![delete()],
            vec![],
        ),
        (
            "a lost new node that comes back is still new",
            vec![(0, Register), (0, Tick), (10, Missed), (20, Heartbeat)],
            Some(NEW),
            vec![set(Some(LOST), NEW)],
            vec![],
        ),
        (
            "an offlined node that misses heartbeats is not deleted",
            with(&READY_AT_0, &[(5, Offline), (10, Missed), (10_000, Tick)]),
            Some(OFFLINED),
            vec![],
            vec![],
        ),
        (
            "a lost node offlined is not deleted",
            with(&READY_AT_0, &[(10, Missed), (20, Offline), (10_000, Tick)]),
            Some(OFFLINED),
            vec![],
            vec![],
        ),
        (
            "two failures are not flaky",
            with(&READY_AT_0, &[(10, Failure), (20, Failure)]),
            Some(HEALTHY),
            vec![],
            vec![],
        ),
        (
            "healthy -> flaky on the threshold",
            FLAKY_AT_30.to_vec(),
            Some(FLAKY),
            vec![set(Some(HEALTHY), FLAKY)],
            vec![],
        ),
        (
            "failures out of the window do not count",
            with(&READY_AT_0, &[(0, Failure), (10, Failure), (600, Failure)]),
            Some(HEALTHY),
            vec![],
            vec![],
        ),
        (
            "flaky stays until the cool-down ends",
            with(&FLAKY_AT_30, &[(929, Tick)]),
            Some(FLAKY),
            vec![],
            vec![],
        ),
        (
            "the cool-down end asks for a readiness check",
            with(&FLAKY_AT_30, &[(930, Tick)]),
            Some(FLAKY),
            vec![],
            vec![n(1)],
        ),
        (
            "cool-down then readiness -> healthy, snapshot reset first",
            with(&FLAKY_AT_30, &[(930, Tick), (931, Ready(Readiness::Ready))]),
            Some(HEALTHY),
            vec![reset(), set(Some(FLAKY), HEALTHY)],
            vec![],
        ),
        (
            "cool-down then readiness not yet -> stays flaky",
            with(
                &FLAKY_AT_30,
                &[(930, Tick), (931, Ready(Readiness::NotYet))],
            ),
            Some(FLAKY),
            vec![],
            vec![],
        ),
        (
            "cool-down then readiness never -> stays flaky",
            with(
                &FLAKY_AT_30,
                &[(930, Tick), (931, Ready(Readiness::Never)), (99_999, Tick)],
            ),
            Some(FLAKY),
            vec![],
            vec![],
        ),
        (
            "readiness during the cool-down is stale",
            with(&FLAKY_AT_30, &[(40, Ready(Readiness::Ready))]),
            Some(FLAKY),
            vec![],
            vec![],
        ),
        (
            "a flaky node lost and back within the cool-down is flaky",
            with(&FLAKY_AT_30, &[(40, Missed), (50, Heartbeat)]),
            Some(FLAKY),
            vec![set(Some(LOST), FLAKY)],
            vec![],
        ),
        (
            "re-registering does not escape the cool-down",
            with(&FLAKY_AT_30, &[(40, Register)]),
            Some(FLAKY),
            vec![],
            vec![],
        ),
        (
            "offline",
            with(&READY_AT_0, &[(5, Offline)]),
            Some(OFFLINED),
            vec![set(Some(HEALTHY), OFFLINED)],
            vec![],
        ),
        (
            "offline is idempotent",
            with(&READY_AT_0, &[(5, Offline), (6, Offline)]),
            Some(OFFLINED),
            vec![],
            vec![],
        ),
        (
            "online of a node that is not offlined does nothing",
            with(&READY_AT_0, &[(5, Online)]),
            Some(HEALTHY),
            vec![],
            vec![],
        ),
        // The operator's override (issue 14, item 4): online of a suspended node that is
        // not offlined makes it healthy at once.
        (
            "online of a flaky node -> healthy at once",
            with(&FLAKY_AT_30, &[(40, Online)]),
            Some(HEALTHY),
            vec![set(Some(FLAKY), HEALTHY)],
            vec![],
        ),
        (
            "online of a lost node -> healthy at once",
            with(&READY_AT_0, &[(10, Missed), (20, Online)]),
            Some(HEALTHY),
            vec![set(Some(LOST), HEALTHY)],
            vec![],
        ),
        (
            "online of a new node -> healthy at once",
            vec![(0, Register), (1, Online)],
            Some(HEALTHY),
            vec![set(Some(NEW), HEALTHY)],
            vec![],
        ),
        (
            "online of a ready, heartbeating node -> healthy",
            with(&READY_AT_0, &[(5, Offline), (6, Online)]),
            Some(HEALTHY),
            vec![set(Some(OFFLINED), HEALTHY)],
            vec![],
        ),
        (
            "online is idempotent",
            with(&READY_AT_0, &[(5, Offline), (6, Online), (7, Online)]),
            Some(HEALTHY),
            vec![],
            vec![],
        ),
        (
            "online of a node not ready -> suspended new",
            vec![(0, Register), (1, Offline), (2, Online)],
            Some(NEW),
            vec![set(Some(OFFLINED), NEW)],
            vec![],
        ),
        (
            "online of a flaky node in its cool-down -> flaky",
            with(&FLAKY_AT_30, &[(40, Offline), (50, Online)]),
            Some(FLAKY),
            vec![set(Some(OFFLINED), FLAKY)],
            vec![],
        ),
        (
            "online of a silent node -> lost, the grace starting then",
            with(
                &READY_AT_0,
                &[(5, Offline), (10, Missed), (500, Online), (559, Tick)],
            ),
            Some(LOST),
            vec![],
            vec![],
        ),
        (
            "... and deleted when that grace ends",
            with(
                &READY_AT_0,
                &[(5, Offline), (10, Missed), (500, Online), (560, Tick)],
            ),
            None,
            vec![delete()],
            vec![],
        ),
        (
            "online re-arms a readiness check that gave up",
            vec![
                (0, Register),
                (0, Tick),
                (1, Ready(Readiness::Never)),
                (2, Offline),
                (3, Online),
                (3, Tick),
            ],
            Some(NEW),
            vec![],
            vec![n(1)],
        ),
        (
            "readiness never stops the re-checks",
            vec![
                (0, Register),
                (0, Tick),
                (1, Ready(Readiness::Never)),
                (10_000, Tick),
            ],
            Some(NEW),
            vec![],
            vec![],
        ),
        (
            "not yet: no re-check before the backoff",
            vec![
                (0, Register),
                (0, Tick),
                (1, Ready(Readiness::NotYet)),
                (5, Tick),
            ],
            Some(NEW),
            vec![],
            vec![],
        ),
        (
            "not yet: re-check when the backoff ends",
            vec![
                (0, Register),
                (0, Tick),
                (1, Ready(Readiness::NotYet)),
                (6, Tick),
            ],
            Some(NEW),
            vec![],
            vec![n(1)],
        ),
        (
            "an unanswered check is asked again after the backoff",
            vec![(0, Register), (0, Tick), (5, Tick)],
            Some(NEW),
            vec![],
            vec![n(1)],
        ),
        (
            "a readiness result for a ready node is stale",
            with(&READY_AT_0, &[(5, Ready(Readiness::NotYet))]),
            Some(HEALTHY),
            vec![],
            vec![],
        ),
        (
            "re-registering re-checks readiness",
            with(&READY_AT_0, &[(5, Register)]),
            Some(NEW),
            vec![set(Some(HEALTHY), NEW)],
            vec![],
        ),
        (
            "re-registering a lost node ends the loss",
            with(&READY_AT_0, &[(10, Missed), (20, Register)]),
            Some(NEW),
            vec![set(Some(LOST), NEW)],
            vec![],
        ),
        (
            "re-registering keeps an offline",
            with(&READY_AT_0, &[(5, Offline), (6, Register)]),
            Some(OFFLINED),
            vec![],
            vec![],
        ),
    ];
    for (name, steps, health, decisions, checks) in cases {
        let (t, got, got_checks) = run(&steps);
        assert_eq!(t.health(&n(1)), health, "{name}: health");
        assert_eq!(got, decisions, "{name}: decisions");
        assert_eq!(got_checks, checks, "{name}: readiness checks");
    }
}

#[test]
fn next_deadline_follows_the_earliest_timer() {
    let cases: Vec<(&str, Vec<(u64, Ev)>, Option<Timestamp>)> = vec![
        (
            "registered: check due now",
            vec![(0, Register)],
            Some(at(0)),
        ),
        (
            "checked, no answer: again after the backoff",
            vec![(0, Register), (0, Tick)],
            Some(at(5)),
        ),
        (
            "not yet at 2 s: 7 s",
            vec![(0, Register), (0, Tick), (2, Ready(Readiness::NotYet))],
            Some(at(7)),
        ),
        ("healthy: nothing", READY_AT_0.to_vec(), None),
        (
            "lost at 10 s: grace ends at 70 s",
            [&READY_AT_0[..], &[(10, Missed)]].concat(),
            Some(at(70)),
        ),
        (
            "flaky at 30 s: cool-down ends at 930 s",
            FLAKY_AT_30.to_vec(),
            Some(at(930)),
        ),
        (
            "offlined and lost: nothing",
            [&READY_AT_0[..], &[(5, Offline), (10, Missed)]].concat(),
            None,
        ),
    ];
    for (name, steps, deadline) in cases {
        let (t, _, _) = run(&steps);
        assert_eq!(t.next_deadline(), deadline, "{name}");
    }
}

#[test]
fn time_left_counts_down_the_grace_and_the_cool_down() {
    let lost = [&READY_AT_0[..], &[(10, Missed)]].concat();
    let cooled = [&FLAKY_AT_30[..], &[(930, Tick)]].concat();
    let offlined_lost = [&READY_AT_0[..], &[(5, Offline), (10, Missed)]].concat();
    let cases: Vec<(&str, &[(u64, Ev)], u64, Option<Duration>)> = vec![
        (
            "lost at 10 s, asked at 30 s",
            &lost,
            30,
            Some(Duration::from_secs(40)),
        ),
        (
            "lost, asked when the grace ends",
            &lost,
            70,
            Some(Duration::ZERO),
        ),
        ("lost, asked late", &lost, 500, Some(Duration::ZERO)),
        (
            "flaky at 30 s, asked at 130 s",
            &FLAKY_AT_30,
            130,
            Some(Duration::from_secs(800)),
        ),
        (
            "flaky, cool-down over, awaiting readiness",
            &cooled,
            931,
            Some(Duration::ZERO),
        ),
        ("healthy", &READY_AT_0, 10, None),
        ("new", &[(0, Register)], 10, None),
        ("offlined and lost: never deleted", &offlined_lost, 20, None),
    ];
    for (name, steps, now, left) in cases {
        let (t, _, _) = run(steps);
        assert_eq!(t.time_left(&n(1), at(now)), left, "{name}");
    }
    let t = NodeHealthTracker::default();
    assert_eq!(t.time_left(&n(1), T0), None, "unknown node");
}

/// Puts node `i` into `health` at T0 through the tracker's own transitions.
fn drive_to(t: &mut NodeHealthTracker, i: u64, health: NodeHealth) {
    let id = n(i);
    t.register(id, T0);
    if health == NEW {
        return;
    }
    t.tick(T0);
    t.readiness(id, Readiness::Ready, T0).unwrap();
    match health {
        LOST => {
            t.heartbeat_missed(id, T0).unwrap();
        }
        FLAKY => {
            for _ in 0..t.config().flaky_threshold {
                t.infra_failure(id, T0, "disk full").unwrap();
            }
        }
        OFFLINED => {
            t.offline(id, T0).unwrap();
        }
        _ => {}
    }
    assert_eq!(t.health(&id), Some(health));
}

#[test]
fn gauges_equal_a_recount() {
    let layout: [(u64, NodeHealth, bool); 9] = [
        (1, HEALTHY, true),
        (2, HEALTHY, false),
        (3, HEALTHY, true),
        (4, NEW, false),
        (5, LOST, true),
        (6, LOST, false),
        (7, FLAKY, true),
        (8, OFFLINED, true),
        (9, OFFLINED, false),
    ];
    let mut t = NodeHealthTracker::default();
    for (i, health, _) in layout {
        drive_to(&mut t, i, health);
    }
    let running: BTreeSet<NodeId> = layout.iter().filter(|l| l.2).map(|l| n(l.0)).collect();
    let g = t.gauges(|id| running.contains(id));
    let count = |h: NodeHealth| layout.iter().filter(|l| l.1 == h).count();
    let expected = HealthGauges {
        healthy: count(HEALTHY),
        free: 1,
        running: 2,
        suspended_new: count(NEW),
        suspended_lost: count(LOST),
        suspended_flaky: count(FLAKY),
        offlined: count(OFFLINED),
    };
    assert_eq!(g, expected);
    assert_eq!((g.suspended(), g.total()), (4, 9));

    // The same through the state store: node 1 runs an allocation, node 2's is complete.
    let mut store = StateStore::new();
    let job = mock::service_job("web", 2);
    let mut done = mock::alloc(2, &job, n(2), 1);
    done.client_status = ClientStatus::Complete;
    let cmds = [
        Command::NodeRegister {
            node: mock::node(1),
            now: T0,
        },
        Command::NodeRegister {
            node: mock::node(2),
            now: T0,
        },
        Command::JobRegister {
            job: job.clone(),
            eval: None,
            now: T0,
        },
        mock::place(
            mock::eval_id(1),
            vec![mock::alloc(1, &job, n(1), 0), done],
            T0,
        ),
    ];
    for (i, c) in cmds.iter().enumerate() {
        apply(&mut store, i as u64 + 1, c.clone()).unwrap();
    }
    let g = t.gauges_from_state(&store);
    assert_eq!((g.healthy, g.running, g.free), (3, 1, 2));
}

#[test]
fn restore_rebuilds_from_stored_health() {
    let mut nodes = Vec::new();
    for (i, health) in [(1, HEALTHY), (2, NEW), (3, LOST), (4, FLAKY), (5, OFFLINED)] {
        let mut node = mock::node(i);
        node.health = health;
        node.health_since = at(100);
        nodes.push(node);
    }
    let mut t = NodeHealthTracker::default();
    drive_to(&mut t, 9, HEALTHY);
    t.restore(&nodes, at(130));
    t.check_invariants().unwrap();
    assert_eq!(t.len(), 5, "restore replaces what was tracked");
    for node in &nodes {
        assert_eq!(t.health(&node.id), Some(node.health));
        assert_eq!(t.health_since(&node.id), Some(at(100)));
    }
    assert_eq!(
        t.time_left(&n(3), at(130)),
        Some(Duration::from_secs(30)),
        "grace from health_since"
    );
    assert_eq!(
        t.time_left(&n(4), at(130)),
        Some(Duration::from_secs(870)),
        "cool-down from health_since"
    );

    let tick = t.tick(at(130));
    let checks: BTreeSet<_> = tick.readiness_checks.into_iter().collect();
    assert_eq!(
        checks,
        BTreeSet::from([n(2), n(3), n(5)]),
        "new, lost and offlined are re-checked"
    );
    assert_eq!(tick.decisions, vec![]);
    let tick = t.tick(at(160));
    assert_eq!(
        tick.decisions,
        vec![HealthDecision::Delete { node_id: n(3) }]
    );
    assert_eq!(
        t.heartbeat(n(3), at(161)),
        Err(NodeHealthError::NotTracked(n(3)))
    );
}

#[test]
fn decisions_map_to_commands() {
    let id = n(1);
    let now = at(1);
    let cases: Vec<(HealthDecision, Command)> = vec![
        (
            HealthDecision::SetHealth {
                node_id: id,
                from: Some(FLAKY),
                to: HEALTHY,
            },
            Command::NodeHealth {
                node_id: id,
                health: HEALTHY,
                now,
                evals: vec![],
            },
        ),
        (
            HealthDecision::ResetSnapshot { node_id: id },
            Command::NodeSnapshot {
                node_id: id,
                snapshot: None,
                now,
            },
        ),
        (
            HealthDecision::Delete { node_id: id },
            Command::NodeDeregister {
                node_ids: vec![id],
                now,
            },
        ),
    ];
    for (decision, command) in cases {
        assert_eq!(decision.node_id(), id);
        assert_eq!(decision.command(now), command, "{decision:?}");
    }
}

#[test]
fn calls_on_unknown_nodes_are_refused() {
    let mut t = NodeHealthTracker::default();
    let id = n(7);
    let err = NodeHealthError::NotTracked(id);
    let calls: Vec<(&str, Result<Vec<HealthDecision>, NodeHealthError>)> = vec![
        ("readiness", t.readiness(id, Readiness::Ready, T0)),
        ("heartbeat", t.heartbeat(id, T0)),
        ("heartbeat_missed", t.heartbeat_missed(id, T0)),
        ("infra_failure", t.infra_failure(id, T0, "disk full")),
        ("offline", t.offline(id, T0)),
        ("online", t.online(id, T0)),
    ];
    for (name, result) in calls {
        assert_eq!(result, Err(err.clone()), "{name}");
    }
    assert!(!t.remove(&id));
    assert_eq!(
        err.to_string(),
        format!("node {id} is not tracked by the health tracker")
    );
}

#[test]
fn remove_forgets_the_node_and_its_timers() {
    let (mut t, _, _) = run(&[
        (0, Register),
        (0, Tick),
        (0, Ready(Readiness::Ready)),
        (10, Missed),
    ]);
    assert!(t.remove(&n(1)));
    t.check_invariants().unwrap();
    assert_eq!((t.len(), t.next_deadline()), (0, None));
    assert_eq!(t.gauges(|_| false), HealthGauges::default());
}

#[test]
fn recent_failures_slide_with_the_window() {
    let (t, _, _) = run(&[&READY_AT_0[..], &[(10, Failure), (300, Failure)]].concat());
    let cases = [(300, 2), (609, 2), (610, 1), (900, 0)];
    for (secs, count) in cases {
        assert_eq!(
            t.recent_failures(&n(1), at(secs)),
            Some(count),
            "at {secs}s"
        );
    }
}

#[test]
fn invalid_configs_are_refused_with_the_value() {
    let base = HealthConfig::default();
    let cases: Vec<(HealthConfig, NodeHealthError, &str)> = vec![
        (
            HealthConfig {
                readiness_backoff: Duration::from_micros(10),
                ..base.clone()
            },
            NodeHealthError::ReadinessBackoffTooShort(Duration::from_micros(10)),
            "readiness backoff must be at least 1ms, got 10µs",
        ),
        (
            HealthConfig {
                flaky_threshold: 0,
                ..base.clone()
            },
            NodeHealthError::FlakyThresholdZero(0),
            "flaky threshold must be at least 1, got 0",
        ),
        (
            HealthConfig {
                flaky_window: Duration::ZERO,
                ..base.clone()
            },
            NodeHealthError::FlakyWindowTooShort(Duration::ZERO),
            "flaky window must be at least 1ms, got 0ns",
        ),
    ];
    for (config, err, message) in cases {
        assert_eq!(NodeHealthTracker::new(config).unwrap_err(), err);
        assert_eq!(err.to_string(), message);
    }
    assert!(NodeHealthTracker::new(base).is_ok());

    let hb = HeartbeatConfig::default();
    let cases: Vec<(HeartbeatConfig, &str)> = vec![
        (
            HeartbeatConfig {
                min_ttl: Duration::ZERO,
                ..hb.clone()
            },
            "minimum heartbeat ttl must be at least 1ms, got 0ns",
        ),
        (
            HeartbeatConfig {
                max_heartbeats_per_second: Some(0.0),
                ..hb.clone()
            },
            "max heartbeats per second must be positive and finite, got 0",
        ),
        (
            HeartbeatConfig {
                max_heartbeats_per_second: Some(f64::NAN),
                ..hb.clone()
            },
            "max heartbeats per second must be positive and finite, got NaN",
        ),
        (
            HeartbeatConfig {
                max_heartbeats_per_second: Some(f64::INFINITY),
                ..hb.clone()
            },
            "max heartbeats per second must be positive and finite, got inf",
        ),
        (
            HeartbeatConfig {
                cpu_share: 0.0,
                ..hb.clone()
            },
            "heartbeat cpu share must be above 0 and at most 1, got 0",
        ),
        (
            HeartbeatConfig {
                cpu_share: 1.5,
                ..hb.clone()
            },
            "heartbeat cpu share must be above 0 and at most 1, got 1.5",
        ),
    ];
    for (config, message) in cases {
        assert_eq!(
            HeartbeatTimers::new(config).unwrap_err().to_string(),
            message
        );
    }
}

#[test]
fn defaults_are_the_documented_ones() {
    let h = HealthConfig::default();
    assert_eq!(
        (
            h.readiness_backoff,
            h.lost_grace,
            h.flaky_threshold,
            h.flaky_window,
            h.flaky_cool_down
        ),
        (
            Duration::from_secs(5),
            Duration::from_secs(60),
            3,
            Duration::from_secs(600),
            Duration::from_secs(900)
        )
    );
    let b = HeartbeatConfig::default();
    assert_eq!(
        (
            b.min_ttl,
            b.max_heartbeats_per_second,
            b.cpu_share,
            b.grace,
            b.failover_ttl
        ),
        (
            Duration::from_secs(5),
            None,
            0.1,
            Duration::from_secs(5),
            Duration::from_secs(300)
        )
    );
}

/// Nomad's settings: a 10 s minimum TTL and grace, and a fixed cap of 50 a second.
fn nomad_heartbeats() -> HeartbeatConfig {
    HeartbeatConfig {
        min_ttl: Duration::from_secs(10),
        max_heartbeats_per_second: Some(50.0),
        grace: Duration::from_secs(10),
        ..HeartbeatConfig::default()
    }
}

#[test]
fn base_ttl_is_the_minimum_for_small_clusters_and_scales_with_large_ones() {
    let us = Duration::from_micros;
    let (nomad, derived) = (nomad_heartbeats(), HeartbeatConfig::default());
    let cases: &[(&HeartbeatConfig, Option<Duration>, usize, Duration)] = &[
        // A fixed cap ignores the measured cost.
        (&nomad, Some(us(50)), 0, Duration::from_secs(10)),
        (&nomad, None, 1, Duration::from_secs(10)),
        (&nomad, Some(us(50)), 500, Duration::from_secs(10)),
        (&nomad, None, 501, Duration::from_millis(10_020)),
        (&nomad, Some(us(1)), 1_000, Duration::from_secs(20)),
        (&nomad, None, 10_000, Duration::from_secs(200)),
        // Derived: a tenth of a core at 50 µs is 2,000 a second.
        (&derived, Some(us(50)), 1, Duration::from_secs(5)),
        (&derived, Some(us(50)), 10_000, Duration::from_secs(5)),
        (&derived, Some(us(50)), 50_000, Duration::from_secs(25)),
        // Cheaper heartbeats, shorter TTLs; dearer ones, longer.
        (&derived, Some(us(10)), 50_000, Duration::from_secs(5)),
        (&derived, Some(us(500)), 10_000, Duration::from_secs(50)),
        // Unmeasured: 200 µs assumed, 500 a second.
        (&derived, None, 10_000, Duration::from_secs(20)),
        // A stall never makes it slower than Nomad's 50 a second.
        (
            &derived,
            Some(Duration::from_millis(10)),
            10_000,
            Duration::from_secs(200),
        ),
    ];
    for (config, cost, nodes, ttl) in cases {
        assert_eq!(
            config.base_ttl(*nodes, *cost),
            *ttl,
            "{nodes} nodes at {cost:?} with {config:?}"
        );
    }
}

#[test]
fn measured_cost_moves_the_ttls_handed_out() {
    let mut timers = HeartbeatTimers::new(HeartbeatConfig::default()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for i in 0..19_999 {
        timers.reset(n(i), T0, &mut rng);
    }
    timers.set_measured_cost(Duration::from_micros(50));
    let ttl = timers.reset(n(20_000), T0, &mut rng);
    assert_eq!(timers.base_ttl(), Duration::from_secs(10));
    assert!(
        ttl >= Duration::from_secs(10) && ttl < Duration::from_secs(20),
        "{ttl:?}"
    );
    timers.set_measured_cost(Duration::from_micros(500));
    let ttl = timers.reset(n(20_000), T0, &mut rng);
    assert_eq!(timers.base_ttl(), Duration::from_secs(100));
    assert!(
        ttl >= Duration::from_secs(100) && ttl < Duration::from_secs(200),
        "{ttl:?}"
    );
}

#[test]
fn ttl_jitter_stays_in_ttl_to_twice_ttl() {
    let c = nomad_heartbeats();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for nodes in [1usize, 2_000] {
        let base = c.base_ttl(nodes, None);
        let ttls: Vec<Duration> = (0..2_000).map(|_| c.ttl(nodes, None, &mut rng)).collect();
        assert!(
            ttls.iter().all(|t| *t >= base && *t < base * 2),
            "{nodes} nodes"
        );
        let spread = ttls
            .iter()
            .max()
            .unwrap()
            .saturating_sub(*ttls.iter().min().unwrap());
        assert!(
            spread > base / 2,
            "{nodes} nodes: jitter spreads heartbeats, got {spread:?}"
        );
    }
    let mut a = ChaCha8Rng::seed_from_u64(1);
    let mut b = ChaCha8Rng::seed_from_u64(1);
    assert_eq!(
        c.ttl(10, None, &mut a),
        c.ttl(10, None, &mut b),
        "same seed, same ttl"
    );
}

#[test]
fn heartbeat_timers_add_the_grace_and_expire_once() {
    let mut timers = HeartbeatTimers::new(nomad_heartbeats()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let ttl = timers.reset(n(1), T0, &mut rng);
    assert!(ttl >= Duration::from_secs(10) && ttl < Duration::from_secs(20));
    let deadline = T0.saturating_add(ttl + Duration::from_secs(10));
    assert_eq!(timers.deadline(&n(1)), Some(deadline), "ttl plus the grace");
    assert_eq!(timers.next_deadline(), Some(deadline));

    let ttl2 = timers.reset(n(2), T0, &mut rng);
    let second = T0.saturating_add(ttl2 + Duration::from_secs(10));
    let (first, last) = if deadline <= second {
        (n(1), n(2))
    } else {
        (n(2), n(1))
    };
    let early = deadline.min(second);
    assert_eq!(timers.expired(Timestamp(early.0 - 1)), vec![]);
    assert_eq!(timers.expired(early), vec![first]);
    assert_eq!(timers.expired(early), vec![], "reported once");
    assert_eq!(timers.len(), 1);

    // A heartbeat pushes the deadline out; remove drops it.
    timers.reset(last, at(100), &mut rng);
    assert!(timers.deadline(&last).unwrap() >= at(120));
    assert_eq!(timers.expired(at(119)), vec![]);
    assert!(timers.remove(&last));
    assert!(!timers.remove(&last));
    assert!(timers.is_empty() && timers.next_deadline().is_none());
}

#[test]
fn a_steady_heartbeat_leaves_its_entry_until_it_nears_the_front() {
    let mut timers = HeartbeatTimers::new(nomad_heartbeats()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    timers.reset(n(1), T0, &mut rng);
    let filed = timers.deadline(&n(1)).unwrap();
    timers.reset(n(2), T0, &mut rng);
    timers.expire_at(n(2), at(3600));

    // Far from the front: the deadline moves, the entry stays, so the runtime is asked
    // to look earlier than needed (never later).
    timers.reset(n(1), at(5), &mut rng);
    let moved = timers.deadline(&n(1)).unwrap();
    assert!(moved > filed);
    assert_eq!(timers.next_deadline(), Some(filed));
    assert_eq!(
        timers.expired(filed),
        vec![],
        "looked at early, nothing expires"
    );
    assert_eq!(
        timers.next_deadline(),
        Some(moved),
        "re-filed at its deadline"
    );

    // Within a second of the front: the heartbeat itself re-files it.
    let before_front = Timestamp(moved.0 - 500);
    timers.reset(n(1), before_front, &mut rng);
    assert_eq!(timers.next_deadline(), timers.deadline(&n(1)));
    assert_eq!(timers.len(), 2);
}

#[test]
fn ttl_scales_with_the_number_of_timers() {
    let config = HeartbeatConfig {
        max_heartbeats_per_second: Some(1.0),
        ..nomad_heartbeats()
    };
    let mut timers = HeartbeatTimers::new(config).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for i in 0..30 {
        timers.reset(n(i), T0, &mut rng);
    }
    // 31 nodes at 1 per second: base 31 s.
    let ttl = timers.reset(n(99), T0, &mut rng);
    assert!(
        ttl >= Duration::from_secs(31) && ttl < Duration::from_secs(62),
        "{ttl:?}"
    );
    // A node already counted is not counted twice.
    let ttl = timers.reset(n(99), T0, &mut rng);
    assert!(
        ttl >= Duration::from_secs(31) && ttl < Duration::from_secs(62),
        "{ttl:?}"
    );
}

#[test]
fn failover_gives_every_node_the_failover_ttl_without_grace() {
    let mut timers = HeartbeatTimers::new(HeartbeatConfig::default()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    timers.reset(n(1), T0, &mut rng);
    timers.initialize_failover([n(1), n(2), n(3)], at(1));
    let deadline = at(301);
    for i in 1..=3 {
        assert_eq!(timers.deadline(&n(i)), Some(deadline), "node {i}");
    }
    assert_eq!(
        timers.expired(at(300)),
        vec![],
        "the old timer of node 1 is replaced"
    );
    timers.reset(n(3), at(2), &mut rng);
    assert!(
        timers.deadline(&n(3)).unwrap() < at(32),
        "a heartbeat returns to the normal ttl"
    );
    assert_eq!(timers.expired(deadline), vec![n(3), n(1), n(2)]);
    timers.clear();
    assert!(timers.is_empty());
}

// ---- expiry ---------------------------------------------------------------------------

/// A job `id` with one group `web` whose disconnect tolerance is given.
fn job_with(id: &str, lost_after: Option<u64>, stop_after: Option<u64>) -> Job {
    let mut job = mock::service_job(id, 1);
    job.groups[0].disconnect = lost_after.map(|s| DisconnectPolicy {
        lost_after: Some(Duration::from_secs(s)),
        ..DisconnectPolicy::default()
    });
    job.groups[0].stop_after_client_disconnect = stop_after.map(Duration::from_secs);
    job
}

/// How an allocation of a job sits on node 1.
#[derive(Clone, Copy, Debug)]
enum A {
    Running,
    Complete,
    Stopping,
    /// Unknown since the given second.
    UnknownSince(u64),
}

/// Node 1 in `status` (since T0), the jobs registered (a second spec registers a new
/// version), and one allocation per (job index, how) on node 1.
fn expiry_state(status: NodeStatus, jobs: &[Job], allocs: &[(usize, A)]) -> StateStore {
    let mut store = StateStore::new();
    let mut node = mock::node(1);
    node.status = status;
    let mut cmds = vec![Command::NodeRegister { node, now: T0 }];
    for job in jobs {
        cmds.push(Command::JobRegister {
            job: job.clone(),
            eval: None,
            now: T0,
        });
    }
    let mut placed = Vec::new();
    for (i, &(job, how)) in allocs.iter().enumerate() {
        let mut a = mock::alloc(i as u64, &jobs[job], n(1), i as u32);
        a.job_version = 0;
        match how {
            A::Running => {}
            A::Complete => a.client_status = ClientStatus::Complete,
            A::Stopping => a.desired_status = DesiredStatus::Stop,
            A::UnknownSince(s) => a.record_client_status(ClientStatus::Unknown, at(s)),
        }
        placed.push(a);
    }
    cmds.push(mock::place(mock::eval_id(1), placed, T0));
    for (i, c) in cmds.iter().enumerate() {
        apply(&mut store, i as u64 + 1, c.clone()).unwrap();
    }
    store
}

#[test]
fn expiry_decides_down_or_disconnected() {
    let plain = job_with("plain", None, None);
    let tolerant = job_with("tolerant", Some(300), None);
    let stop_after = job_with("stop-after", None, Some(120));
    let both = job_with("both", Some(60), Some(120));
    let no_window = {
        let mut j = job_with("no-window", None, None);
        j.groups[0].disconnect = Some(DisconnectPolicy::default());
        j
    };
    // Version 0 tolerates disconnects; version 1 (current) does not.
    let versioned = [job_with("versioned", Some(300), None), {
        let mut j = job_with("versioned", None, None);
        j.meta.insert("v".into(), "1".into());
        j
    }];
    let key = |j: &Job| j.key();
    let ready = NodeStatus::Ready;
    let disc = NodeStatus::Disconnected;
    let down = ExpiryStatus::Down;
    let until = |s: u64| ExpiryStatus::Disconnected { until: at(s) };
    let cases: Vec<(
        &str,
        NodeStatus,
        Vec<Job>,
        Vec<(usize, A)>,
        u64,
        ExpiryStatus,
        Vec<JobKey>,
    )> = vec![
        ("no allocations", ready, vec![], vec![], 10, down, vec![]),
        (
            "a group without tolerance",
            ready,
            vec![plain.clone()],
            vec![(0, A::Running)],
            10,
            down,
            vec![key(&plain)],
        ),
        (
            "disconnect.lost_after",
            ready,
            vec![tolerant.clone()],
            vec![(0, A::Running)],
            10,
            until(310),
            vec![key(&tolerant)],
        ),
        (
            "stop_after_client_disconnect",
            ready,
            vec![stop_after.clone()],
            vec![(0, A::Running)],
            10,
            until(130),
            vec![key(&stop_after)],
        ),
        (
            "both: the longer",
            ready,
            vec![both.clone()],
            vec![(0, A::Running)],
            10,
            until(130),
            vec![key(&both)],
        ),
        (
            "a disconnect block without lost_after",
            ready,
            vec![no_window.clone()],
            vec![(0, A::Running)],
            10,
            down,
            vec![key(&no_window)],
        ),
        (
            "one tolerant allocation is enough",
            ready,
            vec![plain.clone(), tolerant.clone()],
            vec![(0, A::Running), (1, A::Running)],
            10,
            until(310),
            vec![key(&plain), key(&tolerant)],
        ),
        (
            "complete allocations are ignored",
            ready,
            vec![tolerant.clone()],
            vec![(0, A::Complete)],
            10,
            down,
            vec![],
        ),
        (
            "stopping allocations do not disconnect but get an eval",
            ready,
            vec![tolerant.clone()],
            vec![(0, A::Stopping)],
            10,
            down,
            vec![key(&tolerant)],
        ),
        (
            "the placed version's group decides",
            ready,
            versioned.to_vec(),
            vec![(0, A::Running)],
            10,
            until(310),
            vec![key(&versioned[0])],
        ),
        (
            "already disconnected, inside the window",
            disc,
            vec![tolerant.clone()],
            vec![(0, A::UnknownSince(0))],
            240,
            until(300),
            vec![key(&tolerant)],
        ),
        (
            "already disconnected, window elapsed",
            disc,
            vec![tolerant.clone()],
            vec![(0, A::UnknownSince(0))],
            300,
            down,
            vec![key(&tolerant)],
        ),
        (
            "window from the node's disconnect when not yet unknown",
            disc,
            vec![tolerant.clone()],
            vec![(0, A::Running)],
            301,
            down,
            vec![key(&tolerant)],
        ),
        (
            "a down node stays down",
            NodeStatus::Down,
            vec![tolerant.clone()],
            vec![(0, A::Running)],
            10,
            down,
            vec![key(&tolerant)],
        ),
        (
            "an initializing node goes down",
            NodeStatus::Initializing,
            vec![tolerant.clone()],
            vec![(0, A::Running)],
            10,
            down,
            vec![key(&tolerant)],
        ),
    ];
    for (name, status, jobs, allocs, now, expected, job_keys) in cases {
        let store = expiry_state(status, &jobs, &allocs);
        let d = on_heartbeat_expiry(&store, n(1), at(now)).unwrap();
        assert_eq!(d.node_id, n(1), "{name}");
        assert_eq!(d.status, expected, "{name}");
        assert_eq!(
            d.jobs,
            job_keys.into_iter().collect::<BTreeSet<_>>(),
            "{name}"
        );
        let node_status = match expected {
            ExpiryStatus::Down => NodeStatus::Down,
            ExpiryStatus::Disconnected { .. } => NodeStatus::Disconnected,
        };
        assert_eq!(d.node_status(), node_status, "{name}");
    }
}

#[test]
fn expiry_falls_back_to_the_current_job_when_the_version_is_gone() {
    let job = job_with("tolerant", Some(300), None);
    let mut store = expiry_state(NodeStatus::Ready, std::slice::from_ref(&job), &[]);
    let mut a = mock::alloc(1, &job, n(1), 0);
    a.job_version = 42;
    apply(&mut store, 10, mock::place(mock::eval_id(2), vec![a], T0)).unwrap();
    let d = on_heartbeat_expiry(&store, n(1), at(10)).unwrap();
    assert_eq!(d.status, ExpiryStatus::Disconnected { until: at(310) });
}

#[test]
fn expiry_of_a_node_not_in_state_is_refused() {
    let store = StateStore::new();
    let err = on_heartbeat_expiry(&store, n(4), T0).unwrap_err();
    assert_eq!(err, NodeHealthError::NodeNotFound(n(4)));
    assert_eq!(err.to_string(), format!("node {} not found in state", n(4)));
}

/// Item 3 of issue 14: the expiry's "lost" and the heartbeat's recovery are separate
/// writes; when they commit in the wrong order state says lost while the tracker says
/// healthy. The next heartbeat finds the mismatch and writes the tracker's view, so a
/// node that heartbeats inside the grace always ends healthy in state, whatever it runs.
#[test]
fn a_heartbeat_repairs_health_that_state_got_out_of_order() {
    let steps = [&READY_AT_0[..], &[(10, Missed), (12, Heartbeat)]].concat();
    let (mut t, _, _) = run(&steps);
    assert_eq!(t.health(&n(1)), Some(HEALTHY));
    // (health stored in state, what the next heartbeat must write)
    let cases = [
        (LOST, Some(set(Some(LOST), HEALTHY))),
        (NEW, Some(set(Some(NEW), HEALTHY))),
        (HEALTHY, None),
    ];
    for (stored, want) in cases {
        assert!(t.heartbeat(n(1), at(22)).expect("tracked").is_empty());
        assert_eq!(t.stored_mismatch(&n(1), stored), want, "stored {stored:?}");
    }
    assert_eq!(
        t.stored_mismatch(&n(9), LOST),
        None,
        "an unknown node has no view"
    );
}

/// A node made flaky keeps the reasons of the failures that did it, for its health event.
#[test]
fn flaky_keeps_the_reasons_of_its_failures() {
    let mut t = NodeHealthTracker::default();
    t.register(n(1), at(0));
    t.readiness(n(1), Readiness::Ready, at(0)).expect("tracked");
    for (s, why) in [(10, "disk full"), (20, "fork failed"), (30, "disk full")] {
        t.infra_failure(n(1), at(s), why).expect("tracked");
    }
    assert_eq!(t.health(&n(1)), Some(FLAKY));
    assert_eq!(
        t.flaky_reason(&n(1)),
        Some("3 infrastructure failures in 10m: disk full; fork failed; disk full")
    );
    t.online(n(1), at(40)).expect("tracked");
    assert_eq!(t.health(&n(1)), Some(HEALTHY));
    assert_eq!(t.flaky_reason(&n(1)), None);
}
