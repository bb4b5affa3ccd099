//! Heartbeat TTLs and the leader's per-node heartbeat timers (Nomad's `heartbeat.go`).
//!
//! A node is told a TTL on every heartbeat and must heartbeat again within it. The TTL
//! scales with the cluster so the leader never absorbs more heartbeats than its rate
//! (fixed, or derived from the measured cost of one), and carries a random part so that
//! nodes registered together spread their heartbeats instead of arriving in waves. The
//! leader's own timer waits the TTL plus a grace before it declares the heartbeat missed.

use super::config::{ASSUMED_HEARTBEAT_COST, MIN_DERIVED_RATE};
use super::{HeartbeatConfig, NodeHealthError};
use crate::{NodeId, Timestamp};
use rand::Rng;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::time::Duration;

impl HeartbeatConfig {
    /// The heartbeats a second the leader takes: the fixed cap if one is set, otherwise
    /// [`cpu_share`](Self::cpu_share) of a core over `cost` (one heartbeat's measured
    /// cost; [`ASSUMED_HEARTBEAT_COST`] before any was measured), never below
    /// [`MIN_DERIVED_RATE`].
    pub fn rate(&self, cost: Option<Duration>) -> f64 {
        if let Some(fixed) = self.max_heartbeats_per_second {
            return fixed;
        }
        let cost = cost
            .unwrap_or(ASSUMED_HEARTBEAT_COST)
            .as_secs_f64()
            .max(1e-6);
        (self.cpu_share / cost).max(MIN_DERIVED_RATE)
    }

    /// The TTL before jitter: `max(min_ttl, nodes / rate)`.
    ///
    /// With the defaults and a heartbeat measured at 50 µs (2,000 a second on a tenth of
    /// a core), clusters up to 10,000 nodes get 5 s and 50,000 nodes get 25 s.
    pub fn base_ttl(&self, nodes: usize, cost: Option<Duration>) -> Duration {
        // `validate` guarantees a positive finite rate; the division is finite and >= 0.
        let scaled =
            Duration::try_from_secs_f64(nodes as f64 / self.rate(cost)).unwrap_or(Duration::MAX);
        let scaled = Duration::from_millis(scaled.as_millis().min(u64::MAX as u128) as u64);
        scaled.max(self.min_ttl)
    }

    /// The TTL told to a node: [`base_ttl`](Self::base_ttl) plus a uniform random part in
    /// `[0, base_ttl)`, in whole milliseconds, so the result lies in `[ttl, 2 x ttl)`.
    pub fn ttl(&self, nodes: usize, cost: Option<Duration>, rng: &mut impl Rng) -> Duration {
        let base = self.base_ttl(nodes, cost);
        let base_ms = base.as_millis().min(u64::MAX as u128) as u64;
        let jitter = if base_ms == 0 {
            0
        } else {
            rng.random_range(0..base_ms)
        };
        Duration::from_millis(base_ms.saturating_add(jitter))
    }
}

/// When each node's heartbeat is due at the latest, on the leader.
///
/// Held as due times the runtime polls ([`next_deadline`](Self::next_deadline), then
/// [`expired`](Self::expired)) rather than as one OS timer per node.
///
/// A steady heartbeat only moves its node's deadline later, and that is all it changes:
/// the node's entry in the ordered set stays where it was filed and is moved to the real
/// deadline only when it comes near the front (a heartbeat tidies the front, and
/// [`expired`](Self::expired) re-files what it meets). So the common heartbeat costs one
/// hash lookup instead of two ordered-set updates at 50,000 nodes.
///
/// Invariant: `by_node` and `due` name the same nodes, one entry each, and a node's entry
/// in `due` is at its [`Timer::filed`] time, never after its deadline. So the front of
/// `due` is never later than the earliest deadline.
#[derive(Debug)]
pub struct HeartbeatTimers {
    config: HeartbeatConfig,
    by_node: FxHashMap<NodeId, Timer>,
    due: BTreeSet<(Timestamp, NodeId)>,
    /// What one heartbeat costs the leader, as the runtime last measured it.
    cost: Option<Duration>,
}

/// One node's heartbeat deadline and where its entry in the ordered set is filed.
#[derive(Clone, Copy, Debug)]
struct Timer {
    deadline: Timestamp,
    /// `<= deadline`; equal once the entry was moved to the deadline.
    filed: Timestamp,
}

/// A heartbeat re-files stale entries due within this of its time, so the runtime is not
/// woken for a deadline that moved on.
const TIDY_HORIZON: Duration = Duration::from_secs(1);

/// At most this many entries re-filed by one heartbeat: more than one, so the tidying
/// keeps up with the heartbeats that make entries stale (one each at most).
const TIDY_BATCH: usize = 2;

impl HeartbeatTimers {
    pub fn new(config: HeartbeatConfig) -> Result<Self, NodeHealthError> {
        config.validate()?;
        Ok(Self {
            config,
            by_node: FxHashMap::default(),
            due: BTreeSet::new(),
            cost: None,
        })
    }

    pub fn config(&self) -> &HeartbeatConfig {
        &self.config
    }

    /// The runtime's latest measure of what handling one heartbeat costs (a smoothed
    /// average); the TTLs handed out from now on follow it.
    pub fn set_measured_cost(&mut self, cost: Duration) {
        self.cost = Some(cost);
    }

    /// The TTL before jitter that a node heartbeating now would get.
    pub fn base_ttl(&self) -> Duration {
        self.config.base_ttl(self.by_node.len(), self.cost)
    }

    /// Records a heartbeat (or a registration) of `node_id` at `now` and returns the TTL to
    /// tell the node. The leader's deadline is `now + ttl + grace`. The TTL scales with the
    /// number of nodes that have a timer, this one included.
    pub fn reset(&mut self, node_id: NodeId, now: Timestamp, rng: &mut impl Rng) -> Duration {
        let nodes = self.by_node.len() + usize::from(!self.by_node.contains_key(&node_id));
        let ttl = self.config.ttl(nodes, self.cost, rng);
        self.set(
            node_id,
            now.saturating_add(ttl).saturating_add(self.config.grace),
        );
        self.tidy(now.saturating_add(TIDY_HORIZON));
        ttl
    }

    /// Gives each node a one-off deadline of `now + failover_ttl`, as a new leader does for
    /// every node it inherits (the runtime passes the nodes that are not `down`). Like
    /// Nomad, no grace is added: the failover TTL is already generous. A node that
    /// heartbeats afterwards goes back to the normal TTL through [`reset`](Self::reset).
    pub fn initialize_failover(
        &mut self,
        node_ids: impl IntoIterator<Item = NodeId>,
        now: Timestamp,
    ) {
        let at = now.saturating_add(self.config.failover_ttl);
        for id in node_ids {
            self.file(id, at);
        }
    }

    /// Moves every deadline earlier than `at` to `at`: after a pause in which nodes could
    /// not reach the leader, none is counted missing for it.
    pub fn extend_all_to(&mut self, at: Timestamp) {
        let early: Vec<NodeId> = self
            .due
            .iter()
            .take_while(|(filed, _)| *filed < at)
            .map(|(_, id)| *id)
            .collect();
        for id in early {
            let deadline = self.deadline(&id).map_or(at, |d| d.max(at));
            self.file(id, deadline);
        }
    }

    /// Makes `node_id` expire again at `at` unless it heartbeats first: a node that went
    /// `disconnected` is looked at once more when its disconnect windows end, and goes
    /// `down` then (Nomad's disconnect: the node does not stay disconnected for ever).
    pub fn expire_at(&mut self, node_id: NodeId, at: Timestamp) {
        self.file(node_id, at);
    }

    /// Removes and returns the nodes whose deadline is at or before `now`, earliest first.
    /// Each is reported once: its timer is gone until the next heartbeat resets it.
    pub fn expired(&mut self, now: Timestamp) -> Vec<NodeId> {
        let mut out = Vec::new();
        while let Some(&(at, id)) = self.due.first() {
            if at > now {
                break;
            }
            // Moved on since it was filed: met again in deadline order, if that too has
            // passed.
            if self.refile_if_stale(at, id) {
                continue;
            }
            self.due.pop_first();
            if self.by_node.remove(&id).is_some() {
                out.push(id);
            } else {
                debug_assert!(false, "an entry without a timer: {id}");
            }
        }
        out
    }

    /// When the runtime should next call [`expired`](Self::expired), if any node has a
    /// timer: the earliest deadline, or earlier when the front entry's node heartbeated
    /// since it was filed and no heartbeat has tidied it yet (`expired` then re-files it
    /// and reports nothing). Only heartbeats leave entries stale.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.due.first().map(|(at, _)| *at)
    }

    /// Stops tracking a node (deregistered, deleted by the lost sweep, or down). Returns
    /// whether it had a timer.
    pub fn remove(&mut self, node_id: &NodeId) -> bool {
        match self.by_node.remove(node_id) {
            Some(timer) => {
                self.due.remove(&(timer.filed, *node_id));
                true
            }
            None => false,
        }
    }

    /// Drops every timer (leadership lost).
    pub fn clear(&mut self) {
        self.by_node.clear();
        self.due.clear();
    }

    /// The node's current deadline, if it has a timer.
    pub fn deadline(&self, node_id: &NodeId) -> Option<Timestamp> {
        self.by_node.get(node_id).map(|t| t.deadline)
    }

    /// How many nodes have a timer.
    pub fn len(&self) -> usize {
        self.by_node.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty()
    }

    /// Gives `node_id` the deadline `at` as a heartbeat does: only a deadline earlier than
    /// where the node's entry is filed moves the entry.
    fn set(&mut self, node_id: NodeId, at: Timestamp) {
        match self.by_node.get_mut(&node_id) {
            Some(timer) if at >= timer.filed => timer.deadline = at,
            _ => self.file(node_id, at),
        }
    }

    /// Gives `node_id` the deadline `at` and files its entry there: the rarer changes
    /// (failover, a disconnect's end, a pause) leave no stale entry behind.
    fn file(&mut self, node_id: NodeId, at: Timestamp) {
        let timer = Timer {
            deadline: at,
            filed: at,
        };
        if let Some(old) = self.by_node.insert(node_id, timer) {
            self.due.remove(&(old.filed, node_id));
        }
        self.due.insert((at, node_id));
    }

    /// Re-files up to [`TIDY_BATCH`] front entries filed at or before `horizon` whose
    /// node's deadline moved on, so the front is a deadline and not a stale filing.
    fn tidy(&mut self, horizon: Timestamp) {
        for _ in 0..TIDY_BATCH {
            let front = self.due.first().copied();
            match front {
                Some((at, id)) if at <= horizon && self.refile_if_stale(at, id) => {}
                _ => return,
            }
        }
    }

    /// Moves the front entry `(at, id)` to its node's deadline if the node heartbeated
    /// since it was filed; whether it did.
    fn refile_if_stale(&mut self, at: Timestamp, id: NodeId) -> bool {
        match self.by_node.get_mut(&id) {
            Some(timer) if timer.deadline > at => {
                let popped = self.due.pop_first();
                debug_assert_eq!(popped, Some((at, id)), "called on the front entry");
                timer.filed = timer.deadline;
                self.due.insert((timer.deadline, id));
                true
            }
            _ => false,
        }
    }
}
