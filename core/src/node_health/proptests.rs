//! Property test: random sequences of node events keep the tracker's promises.
//!
//! After every step: the internal invariants hold (every node in exactly one set, timers
//! exactly those the nodes' facts call for); the health the decisions wrote, replayed on a
//! model of the FSM, equals the tracker's view (health and since); gauges equal a recount
//! of that model; time left is reported exactly for lost and flaky nodes and never exceeds
//! the grace or cool-down; and a restore from the model reproduces the same view.

use super::*;
use crate::mock;
use crate::{NodeHealth, NodeId, SuspendReason, Timestamp};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const NODES: u64 = 5;

#[derive(Clone, Debug)]
enum Op {
    Register(u64),
    Readiness(u64, Readiness),
    Heartbeat(u64),
    Missed(u64),
    Failure(u64),
    Offline(u64),
    Online(u64),
    Remove(u64),
    Tick,
    Advance(u64),
    Restore,
}

fn op() -> impl Strategy<Value = Op> {
    let node = 0..NODES;
    let readiness =
        prop::sample::select(vec![Readiness::Ready, Readiness::NotYet, Readiness::Never]);
    prop_oneof![
        3 => node.clone().prop_map(Op::Register),
        4 => (node.clone(), readiness).prop_map(|(n, r)| Op::Readiness(n, r)),
        3 => node.clone().prop_map(Op::Heartbeat),
        2 => node.clone().prop_map(Op::Missed),
        3 => node.clone().prop_map(Op::Failure),
        1 => node.clone().prop_map(Op::Offline),
        1 => node.clone().prop_map(Op::Online),
        1 => node.prop_map(Op::Remove),
        4 => Just(Op::Tick),
        4 => (0u64..25_000).prop_map(Op::Advance),
        1 => Just(Op::Restore),
    ]
}

/// Shrunk timings so that random sequences reach every transition.
fn config() -> HealthConfig {
    HealthConfig {
        readiness_backoff: Duration::from_secs(1),
        lost_grace: Duration::from_secs(10),
        flaky_threshold: 2,
        flaky_window: Duration::from_secs(30),
        flaky_cool_down: Duration::from_secs(20),
    }
}

/// Whether the test pretends node `id` runs allocations.
fn runs(id: &NodeId, running: &BTreeSet<NodeId>) -> bool {
    running.contains(id)
}

/// The FSM's view, rebuilt from decisions only: health and since per node.
type Model = BTreeMap<NodeId, (NodeHealth, Timestamp)>;

fn replay(
    model: &mut Model,
    decisions: &[HealthDecision],
    now: Timestamp,
) -> Result<(), TestCaseError> {
    for d in decisions {
        match d {
            HealthDecision::SetHealth { node_id, from, to } => {
                prop_assert_eq!(model.get(node_id).map(|e| e.0), *from, "from of {:?}", d);
                prop_assert_ne!(Some(*to), *from, "a decision changes something");
                model.insert(*node_id, (*to, now));
            }
            HealthDecision::ResetSnapshot { node_id } => {
                // A flaky node done with its cool-down, possibly lost or offlined meanwhile.
                let health = model.get(node_id).map(|e| e.0);
                prop_assert!(
                    matches!(
                        health,
                        Some(
                            NodeHealth::Suspended(SuspendReason::Flaky | SuspendReason::Lost)
                                | NodeHealth::Offlined
                        )
                    ),
                    "snapshot reset of a node that is {:?}",
                    health
                );
            }
            HealthDecision::Delete { node_id } => {
                prop_assert!(
                    model.remove(node_id).is_some(),
                    "deleted a node never written"
                );
            }
        }
    }
    Ok(())
}

fn check(
    t: &NodeHealthTracker,
    model: &Model,
    running: &BTreeSet<NodeId>,
    now: Timestamp,
) -> Result<(), TestCaseError> {
    t.check_invariants().map_err(TestCaseError::fail)?;
    prop_assert_eq!(t.len(), model.len());
    for (id, (health, since)) in model {
        prop_assert_eq!(t.health(id), Some(*health));
        prop_assert_eq!(t.health_since(id), Some(*since));
        let left = t.time_left(id, now);
        match health {
            NodeHealth::Suspended(SuspendReason::Lost) => {
                prop_assert!(left.is_some_and(|l| l <= config().lost_grace));
            }
            NodeHealth::Suspended(SuspendReason::Flaky) => {
                prop_assert!(left.is_some_and(|l| l <= config().flaky_cool_down));
            }
            _ => prop_assert_eq!(left, None),
        }
    }
    let count = |h: NodeHealth| model.values().filter(|e| e.0 == h).count();
    let healthy_running = model
        .iter()
        .filter(|(id, e)| e.0 == NodeHealth::Healthy && runs(id, running))
        .count();
    let recount = HealthGauges {
        healthy: count(NodeHealth::Healthy),
        free: count(NodeHealth::Healthy) - healthy_running,
        running: healthy_running,
        suspended_new: count(NodeHealth::Suspended(SuspendReason::New)),
        suspended_lost: count(NodeHealth::Suspended(SuspendReason::Lost)),
        suspended_flaky: count(NodeHealth::Suspended(SuspendReason::Flaky)),
        offlined: count(NodeHealth::Offlined),
    };
    prop_assert_eq!(t.gauges(|id| runs(id, running)), recount);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_events_keep_sets_disjoint_and_gauges_exact(
        ops in prop::collection::vec(op(), 1..120),
        running_mask in 0u8..32,
    ) {
        let mut t = NodeHealthTracker::new(config()).unwrap();
        let mut model = Model::new();
        let mut now = Timestamp(1_700_000_000_000);
        let running: BTreeSet<NodeId> = (0..NODES)
            .filter(|i| running_mask & (1 << i) != 0)
            .map(mock::node_id)
            .collect();
        for op in ops {
            let id = |i: u64| mock::node_id(i);
            let event = |r: Result<Vec<HealthDecision>, NodeHealthError>, i: u64, model: &Model| {
                let tracked = model.contains_key(&id(i));
                match r {
                    Ok(d) => {
                        prop_assert!(tracked, "{:?} accepted for an untracked node", op);
                        Ok(d)
                    }
                    Err(e) => {
                        prop_assert!(!tracked, "{:?} refused for a tracked node: {}", op, e);
                        prop_assert_eq!(e, NodeHealthError::NotTracked(id(i)));
                        Ok(Vec::new())
                    }
                }
            };
            let decisions = match op {
                Op::Register(i) => t.register(id(i), now),
                Op::Readiness(i, r) => event(t.readiness(id(i), r, now), i, &model)?,
                Op::Heartbeat(i) => event(t.heartbeat(id(i), now), i, &model)?,
                Op::Missed(i) => event(t.heartbeat_missed(id(i), now), i, &model)?,
                Op::Failure(i) => event(t.infra_failure(id(i), now, "fork failed"), i, &model)?,
                Op::Offline(i) => event(t.offline(id(i), now), i, &model)?,
                Op::Online(i) => event(t.online(id(i), now), i, &model)?,
                Op::Remove(i) => {
                    prop_assert_eq!(t.remove(&id(i)), model.remove(&id(i)).is_some());
                    Vec::new()
                }
                Op::Tick => {
                    let tick = t.tick(now);
                    let checks: BTreeSet<_> = tick.readiness_checks.iter().collect();
                    prop_assert_eq!(
                        checks.len(),
                        tick.readiness_checks.len(),
                        "a node checked twice in one tick"
                    );
                    prop_assert!(tick.readiness_checks.iter().all(|c| t.health(c).is_some()));
                    prop_assert!(t.next_deadline().is_none_or(|d| d > now), "tick left due timers");
                    tick.decisions
                }
                Op::Advance(ms) => {
                    now = now.saturating_add(Duration::from_millis(ms));
                    Vec::new()
                }
                Op::Restore => {
                    let nodes: Vec<_> = model
                        .iter()
                        .map(|(id, (health, since))| {
                            let mut node = mock::node(0);
                            node.id = *id;
                            node.health = *health;
                            node.health_since = *since;
                            node
                        })
                        .collect();
                    t.restore(&nodes, now);
                    Vec::new()
                }
            };
            replay(&mut model, &decisions, now)?;
            check(&t, &model, &running, now)?;
        }
    }
}
