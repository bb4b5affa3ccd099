//! Property test: the heartbeat timers, whose entries are filed lazily, expire exactly what
//! a plain map of deadlines says, in deadline order, and never ask to be polled after the
//! earliest deadline.

use super::{HeartbeatConfig, HeartbeatTimers};
use crate::{NodeId, Timestamp, mock};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::time::Duration;

const NODES: u64 = 6;

#[derive(Clone, Debug)]
enum Op {
    Heartbeat(u64),
    ExpireAt(u64, u64),
    Failover,
    ExtendAll(u64),
    Remove(u64),
    Advance(u64),
    Expired,
}

fn op() -> impl Strategy<Value = Op> {
    let node = 0..NODES;
    prop_oneof![
        6 => node.clone().prop_map(Op::Heartbeat),
        2 => (node.clone(), 0u64..40_000).prop_map(|(n, ms)| Op::ExpireAt(n, ms)),
        1 => Just(Op::Failover),
        1 => (0u64..40_000).prop_map(Op::ExtendAll),
        1 => node.prop_map(Op::Remove),
        4 => (0u64..8_000).prop_map(Op::Advance),
        4 => Just(Op::Expired),
    ]
}

fn config() -> HeartbeatConfig {
    HeartbeatConfig {
        min_ttl: Duration::from_secs(2),
        max_heartbeats_per_second: Some(1_000.0),
        grace: Duration::from_secs(1),
        failover_ttl: Duration::from_secs(20),
        ..HeartbeatConfig::default()
    }
}

fn ms(t: Timestamp, ms: u64) -> Timestamp {
    t.saturating_add(Duration::from_millis(ms))
}

proptest! {
    #[test]
    fn lazy_timers_expire_as_a_map_of_deadlines(ops in prop::collection::vec(op(), 1..120)) {
        let mut timers = HeartbeatTimers::new(config()).unwrap();
        let mut model: BTreeMap<NodeId, Timestamp> = BTreeMap::new();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut now = Timestamp(1_700_000_000_000);
        for op in ops {
            match op {
                Op::Heartbeat(i) => {
                    let ttl = timers.reset(mock::node_id(i), now, &mut rng);
                    model.insert(mock::node_id(i), now.saturating_add(ttl + config().grace));
                }
                Op::ExpireAt(i, after) => {
                    timers.expire_at(mock::node_id(i), ms(now, after));
                    model.insert(mock::node_id(i), ms(now, after));
                }
                Op::Failover => {
                    let ids: Vec<NodeId> = (0..NODES).map(mock::node_id).collect();
                    timers.initialize_failover(ids.clone(), now);
                    for id in ids {
                        model.insert(id, now.saturating_add(config().failover_ttl));
                    }
                }
                Op::ExtendAll(after) => {
                    timers.extend_all_to(ms(now, after));
                    for deadline in model.values_mut() {
                        *deadline = (*deadline).max(ms(now, after));
                    }
                }
                Op::Remove(i) => {
                    let had = model.remove(&mock::node_id(i)).is_some();
                    prop_assert_eq!(timers.remove(&mock::node_id(i)), had);
                }
                Op::Advance(by) => now = ms(now, by),
                Op::Expired => {
                    let mut due: Vec<(Timestamp, NodeId)> = model
                        .iter()
                        .filter(|(_, at)| **at <= now)
                        .map(|(id, at)| (*at, *id))
                        .collect();
                    due.sort();
                    let want: Vec<NodeId> = due.into_iter().map(|(_, id)| id).collect();
                    for id in &want {
                        model.remove(id);
                    }
                    prop_assert_eq!(timers.expired(now), want);
                }
            }
            prop_assert_eq!(timers.len(), model.len());
            for (id, at) in &model {
                prop_assert_eq!(timers.deadline(id), Some(*at));
            }
            let earliest = model.values().min().copied();
            match (timers.next_deadline(), earliest) {
                (Some(poll), Some(earliest)) => prop_assert!(poll <= earliest),
                (poll, earliest) => prop_assert_eq!(poll, earliest),
            }
        }
    }
}
