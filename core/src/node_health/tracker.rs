//! The leader's node-health state machine (Scoot's cluster state).
//!
//! Each node's health is derived from a few independent facts rather than stored as a
//! free-standing state, so that no event sequence can leave it inconsistent:
//!
//! | fact | set by | cleared by |
//! |---|---|---|
//! | offlined | `offline` | `online` |
//! | lost since `t` | `heartbeat_missed` | `heartbeat` within the grace, `register` |
//! | flaky since `t` | failures passing the threshold | readiness passing after the cool-down |
//! | readiness | `register` (checking), results | `Ready` passes, `Never` gives up |
//!
//! and the health is the first that applies: offlined, else suspended(lost), else
//! suspended(flaky), else suspended(new) while readiness has not passed, else healthy.
//! After every event the tracker re-derives the node's health, moves it between the sets
//! and reports the change as a [`HealthDecision`] for the runtime to write.

use super::{HealthConfig, NodeHealthError};
use crate::fsm::Command;
use crate::state::StateStore;
use crate::{Node, NodeHealth, NodeId, SuspendReason, Timestamp};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// The outcome of one readiness check the runtime ran.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Readiness {
    Ready,
    /// Not ready yet: check again after the backoff.
    NotYet,
    /// Will never be ready (e.g. a platform drover cannot run on): stop checking. The node
    /// stays suspended until it registers again or an operator onlines it.
    Never,
}

/// A change the runtime must write to the Raft log; each maps to one command
/// ([`HealthDecision::command`]).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum HealthDecision {
    /// The node's health changed. `from` is `None` for a node seen for the first time, whose
    /// health goes into its `NodeRegister` command rather than a separate write.
    SetHealth {
        node_id: NodeId,
        from: Option<NodeHealth>,
        to: NodeHealth,
    },
    /// Forget the snapshot the node last ran: a flaky node rejoining is not trusted to hold
    /// it intact. Always reported before the `SetHealth` that lets the node rejoin, so no
    /// placement sees a healthy node with a stale association. (Entering flaky needs no
    /// such decision: the FSM clears the snapshot itself.)
    ResetSnapshot { node_id: NodeId },
    /// Delete the node entirely: it stayed lost past the grace. The tracker has already
    /// forgotten it; the runtime also drops its heartbeat timer.
    Delete { node_id: NodeId },
}

impl HealthDecision {
    pub fn node_id(&self) -> NodeId {
        match self {
            HealthDecision::SetHealth { node_id, .. }
            | HealthDecision::ResetSnapshot { node_id }
            | HealthDecision::Delete { node_id } => *node_id,
        }
    }

    /// The command that carries this decision, with no evals attached (the runtime adds the
    /// evals a node joining or leaving the pool calls for).
    pub fn command(&self, now: Timestamp) -> Command {
        match self {
            HealthDecision::SetHealth { node_id, to, .. } => Command::NodeHealth {
                node_id: *node_id,
                health: *to,
                now,
                evals: Vec::new(),
            },
            HealthDecision::ResetSnapshot { node_id } => Command::NodeSnapshot {
                node_id: *node_id,
                snapshot: None,
                now,
            },
            HealthDecision::Delete { node_id } => Command::NodeDeregister {
                node_ids: vec![*node_id],
                now,
            },
        }
    }
}

/// What [`NodeHealthTracker::tick`] found due.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct HealthTick {
    /// Deletions of lost nodes past the grace, and changes from cool-downs ending.
    pub decisions: Vec<HealthDecision>,
    /// Nodes whose readiness the runtime should check now, reporting each result through
    /// [`NodeHealthTracker::readiness`]. A node whose result never comes back is asked for
    /// again after the backoff.
    pub readiness_checks: Vec<NodeId>,
}

/// Node counts per health set, for the console and metrics. `healthy = free + running`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct HealthGauges {
    pub healthy: usize,
    /// Healthy nodes with no allocation still using resources.
    pub free: usize,
    /// Healthy nodes running at least one allocation.
    pub running: usize,
    pub suspended_new: usize,
    pub suspended_lost: usize,
    pub suspended_flaky: usize,
    pub offlined: usize,
}

impl HealthGauges {
    pub fn suspended(&self) -> usize {
        self.suspended_new + self.suspended_lost + self.suspended_flaky
    }

    pub fn total(&self) -> usize {
        self.healthy + self.suspended() + self.offlined
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum TimerKind {
    Readiness,
    LostGrace,
    CoolDown,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ReadinessState {
    /// A check is wanted at `due` (and again every backoff until a result comes).
    Checking {
        due: Timestamp,
    },
    /// The last check said never; no more checks until registration or online.
    GaveUp,
    Passed,
}

#[derive(Clone, PartialEq, Eq, Debug)]
struct Flaky {
    since: Timestamp,
    /// The cool-down is over; the node waits for a readiness check to pass.
    cooled: bool,
    /// Why: the failures that made it flaky, as operators read it.
    reason: String,
}

#[derive(Clone, Debug)]
struct NodeState {
    /// Cached [`NodeState::derived`]: always equal to it between calls.
    health: NodeHealth,
    since: Timestamp,
    offlined: bool,
    lost_since: Option<Timestamp>,
    /// While lost: the grace starts no earlier than this (the end of the node's disconnect
    /// windows, during which its allocations may still reconnect).
    lost_held_until: Option<Timestamp>,
    flaky: Option<Flaky>,
    readiness: ReadinessState,
    /// Infrastructure failures in the window with their reasons, oldest first; empty while
    /// flaky.
    failures: VecDeque<(Timestamp, String)>,
    /// The entries this node has in the tracker's timer set.
    timers: Vec<(Timestamp, TimerKind)>,
}

impl NodeState {
    fn new(now: Timestamp) -> Self {
        Self {
            health: NodeHealth::Suspended(SuspendReason::New),
            since: now,
            offlined: false,
            lost_since: None,
            lost_held_until: None,
            flaky: None,
            readiness: ReadinessState::Checking { due: now },
            failures: VecDeque::new(),
            timers: Vec::new(),
        }
    }

    fn derived(&self) -> NodeHealth {
        if self.offlined {
            NodeHealth::Offlined
        } else if self.lost_since.is_some() {
            NodeHealth::Suspended(SuspendReason::Lost)
        } else if self.flaky.is_some() {
            NodeHealth::Suspended(SuspendReason::Flaky)
        } else if self.readiness != ReadinessState::Passed {
            NodeHealth::Suspended(SuspendReason::New)
        } else {
            NodeHealth::Healthy
        }
    }

    fn lost_deadline(&self, config: &HealthConfig) -> Option<Timestamp> {
        match (self.offlined, self.lost_since) {
            (false, Some(t)) => Some(
                t.max(self.lost_held_until.unwrap_or(t))
                    .saturating_add(config.lost_grace),
            ),
            _ => None,
        }
    }

    fn cool_down_end(&self, config: &HealthConfig) -> Option<Timestamp> {
        match self.flaky {
            Some(Flaky {
                since,
                cooled: false,
                ..
            }) => Some(since.saturating_add(config.flaky_cool_down)),
            _ => None,
        }
    }

    /// The timers the node's facts call for: a pending readiness check, the end of the lost
    /// grace (never for an offlined node: the lost sweep spares it), the end of the
    /// cool-down.
    fn wanted_timers(&self, config: &HealthConfig) -> Vec<(Timestamp, TimerKind)> {
        let mut out = Vec::with_capacity(3);
        if let ReadinessState::Checking { due } = self.readiness {
            out.push((due, TimerKind::Readiness));
        }
        if let Some(at) = self.lost_deadline(config) {
            out.push((at, TimerKind::LostGrace));
        }
        if let Some(at) = self.cool_down_end(config) {
            out.push((at, TimerKind::CoolDown));
        }
        out
    }
}

/// Scoot's cluster state for drover's leader: every node in exactly one of healthy,
/// suspended (new, lost, flaky) and offlined.
///
/// Pure: time comes in as `now`, timers are due times the runtime polls through
/// [`next_deadline`](Self::next_deadline) and [`tick`](Self::tick), and every change is
/// returned as [`HealthDecision`]s for the runtime to write; the tracker assumes they are
/// written. A new leader rebuilds it from state with [`restore`](Self::restore).
///
/// Invariants: each tracked node is in exactly the set of its derived health; the timer
/// set holds exactly the timers the nodes' facts call for; the per-set counts behind
/// [`gauges`](Self::gauges) are the set sizes.
#[derive(Debug)]
pub struct NodeHealthTracker {
    config: HealthConfig,
    nodes: FxHashMap<NodeId, NodeState>,
    sets: BTreeMap<NodeHealth, BTreeSet<NodeId>>,
    timers: BTreeSet<(Timestamp, NodeId, TimerKind)>,
}

impl Default for NodeHealthTracker {
    fn default() -> Self {
        Self::with_valid_config(HealthConfig::default())
    }
}

impl NodeHealthTracker {
    pub fn new(config: HealthConfig) -> Result<Self, NodeHealthError> {
        config.validate()?;
        Ok(Self::with_valid_config(config))
    }

    fn with_valid_config(config: HealthConfig) -> Self {
        Self {
            config,
            nodes: FxHashMap::default(),
            sets: BTreeMap::new(),
            timers: BTreeSet::new(),
        }
    }

    pub fn config(&self) -> &HealthConfig {
        &self.config
    }

    /// A node registered (first time or again, e.g. after an agent restart).
    ///
    /// A new node is suspended(new) with a readiness check due now. A known node is heard
    /// from, so it is no longer lost, and its readiness is checked again (the agent may
    /// come back changed); an operator's offline and a running flaky cool-down survive
    /// re-registration, so restarting the agent escapes neither. The runtime puts
    /// [`health`](Self::health) into the node it registers: the FSM takes it from there.
    pub fn register(&mut self, node_id: NodeId, now: Timestamp) -> Vec<HealthDecision> {
        let mut out = Vec::new();
        match self.nodes.get_mut(&node_id) {
            Some(st) => {
                st.lost_since = None;
                st.readiness = ReadinessState::Checking { due: now };
                self.settle(node_id, now, &mut out);
            }
            None => {
                let st = NodeState::new(now);
                let health = st.derived();
                self.sets.entry(health).or_default().insert(node_id);
                self.nodes.insert(node_id, st);
                out.push(HealthDecision::SetHealth {
                    node_id,
                    from: None,
                    to: health,
                });
                self.settle(node_id, now, &mut out);
            }
        }
        out
    }

    /// The result of a readiness check. Counts only while a check is wanted; a result for
    /// a node that already passed or gave up is stale and ignored.
    ///
    /// `Ready` lets a new node join; a flaky node whose cool-down is over rejoins, with its
    /// snapshot association reset first. `NotYet` asks again after the backoff. `Never`
    /// stops checking.
    pub fn readiness(
        &mut self,
        node_id: NodeId,
        result: Readiness,
        now: Timestamp,
    ) -> Result<Vec<HealthDecision>, NodeHealthError> {
        let backoff = self.config.readiness_backoff;
        let st = self.state_mut(node_id)?;
        if !matches!(st.readiness, ReadinessState::Checking { .. }) {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        match result {
            Readiness::Ready => {
                st.readiness = ReadinessState::Passed;
                if st.flaky.as_ref().is_some_and(|f| f.cooled) {
                    st.flaky = None;
                    out.push(HealthDecision::ResetSnapshot { node_id });
                }
            }
            Readiness::NotYet => {
                st.readiness = ReadinessState::Checking {
                    due: now.saturating_add(backoff),
                };
            }
            Readiness::Never => st.readiness = ReadinessState::GaveUp,
        }
        self.settle(node_id, now, &mut out);
        Ok(out)
    }

    /// A heartbeat arrived. A lost node recovers if this is within the lost grace; once the
    /// grace is over it stays lost and the next [`tick`](Self::tick) deletes it (the agent
    /// then registers afresh). An offlined node is never past its grace.
    pub fn heartbeat(
        &mut self,
        node_id: NodeId,
        now: Timestamp,
    ) -> Result<Vec<HealthDecision>, NodeHealthError> {
        let config = self.config.clone();
        let st = self.state_mut(node_id)?;
        if st.lost_since.is_none() {
            return Ok(Vec::new());
        }
        if st.lost_deadline(&config).is_some_and(|end| end <= now) {
            return Ok(Vec::new());
        }
        st.lost_since = None;
        let mut out = Vec::new();
        self.settle(node_id, now, &mut out);
        Ok(out)
    }

    /// The node's heartbeat timer fired: it is lost, and deleted unless it heartbeats within
    /// the grace. An offlined node stays offlined and is not deleted; it is marked lost so
    /// that onlining it without a heartbeat starts the grace then.
    pub fn heartbeat_missed(
        &mut self,
        node_id: NodeId,
        now: Timestamp,
    ) -> Result<Vec<HealthDecision>, NodeHealthError> {
        let st = self.state_mut(node_id)?;
        if st.lost_since.is_some() {
            return Ok(Vec::new());
        }
        st.lost_since = Some(now);
        st.lost_held_until = None;
        let mut out = Vec::new();
        self.settle(node_id, now, &mut out);
        Ok(out)
    }

    /// A lost node that went `disconnected`: its allocations may reconnect until `until`
    /// (the end of its disconnect windows), so its lost grace starts then, not now.
    /// Deleting it earlier would lose the allocations the windows promise to keep. No-op
    /// for a node that is not lost.
    pub fn hold_lost_until(
        &mut self,
        node_id: NodeId,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<(), NodeHealthError> {
        let st = self.state_mut(node_id)?;
        if st.lost_since.is_none() {
            return Ok(());
        }
        st.lost_held_until = Some(until);
        let mut out = Vec::new();
        self.settle(node_id, now, &mut out);
        debug_assert!(out.is_empty(), "a hold changes no health");
        Ok(())
    }

    /// An infrastructure failure was attributed to the node: the agent could not start a
    /// process it should have (fork failed, disk full, driver unhealthy), never a job's own
    /// mistake (the agent does not report those as infrastructure). Failures are counted
    /// with their `reason` over the sliding window; reaching the threshold makes the node
    /// flaky for the cool-down, with the reasons kept for operators, and clears the count
    /// so it comes back with a clean slate. Failures while already flaky are not counted.
    pub fn infra_failure(
        &mut self,
        node_id: NodeId,
        now: Timestamp,
        reason: &str,
    ) -> Result<Vec<HealthDecision>, NodeHealthError> {
        let (threshold, window) = (self.config.flaky_threshold, self.config.flaky_window);
        let st = self.state_mut(node_id)?;
        if st.flaky.is_some() {
            return Ok(Vec::new());
        }
        st.failures.push_back((now, reason.to_string()));
        prune_failures(&mut st.failures, window, now);
        let mut out = Vec::new();
        if st.failures.len() >= threshold as usize {
            let reasons: Vec<&str> = st.failures.iter().map(|(_, r)| r.as_str()).collect();
            let reason = format!(
                "{} infrastructure failures in {}: {}",
                st.failures.len(),
                crate::validate::fmt_duration(window),
                reasons.join("; ")
            );
            st.failures.clear();
            st.flaky = Some(Flaky {
                since: now,
                cooled: false,
                reason,
            });
            self.settle(node_id, now, &mut out);
        }
        Ok(out)
    }

    /// Why the node is flaky, while it is.
    pub fn flaky_reason(&self, node_id: &NodeId) -> Option<&str> {
        self.nodes
            .get(node_id)?
            .flaky
            .as_ref()
            .map(|f| f.reason.as_str())
    }

    /// Operator offline: no new placements, and the lost sweep spares the node. Idempotent.
    /// Readiness checks and the flaky cool-down carry on underneath, so that `online` knows
    /// where the node stands.
    pub fn offline(
        &mut self,
        node_id: NodeId,
        now: Timestamp,
    ) -> Result<Vec<HealthDecision>, NodeHealthError> {
        let st = self.state_mut(node_id)?;
        let mut out = Vec::new();
        if !st.offlined {
            st.offlined = true;
            self.settle(node_id, now, &mut out);
        }
        Ok(out)
    }

    /// Operator online. Idempotent. The node is healthy if its readiness passed and it is
    /// heartbeating, suspended(flaky) if its cool-down is not over, suspended(new) if not
    /// ready (a readiness check that gave up is re-armed: the operator presumably fixed
    /// something), and suspended(lost) if it missed a heartbeat while offlined, with the
    /// grace starting now: a silent node must stay sweepable, or it would sit suspended
    /// forever with no heartbeat timer left to notice it.
    pub fn online(
        &mut self,
        node_id: NodeId,
        now: Timestamp,
    ) -> Result<Vec<HealthDecision>, NodeHealthError> {
        let st = self.state_mut(node_id)?;
        let mut out = Vec::new();
        if st.offlined {
            st.offlined = false;
            if st.lost_since.is_some() {
                st.lost_since = Some(now);
            }
            if st.readiness == ReadinessState::GaveUp {
                st.readiness = ReadinessState::Checking { due: now };
            }
            self.settle(node_id, now, &mut out);
        } else if st.health != NodeHealth::Healthy {
            // The operator's override of a suspension (Scoot's): healthy at once, whatever
            // the grace, the cool-down or the readiness check would have said.
            st.lost_since = None;
            st.flaky = None;
            st.failures.clear();
            st.readiness = ReadinessState::Passed;
            self.settle(node_id, now, &mut out);
        }
        Ok(out)
    }

    /// Stops tracking a node deleted by other means (operator deregister, garbage
    /// collection). Returns whether it was tracked.
    pub fn remove(&mut self, node_id: &NodeId) -> bool {
        let Some(st) = self.nodes.remove(node_id) else {
            return false;
        };
        if let Some(set) = self.sets.get_mut(&st.health) {
            set.remove(node_id);
        }
        for (at, kind) in st.timers {
            self.timers.remove(&(at, *node_id, kind));
        }
        true
    }

    /// Rebuilds the tracker from the nodes in state, as a new leader does. Health and
    /// `health_since` come from each node; what state does not record is assumed:
    /// a lost or offlined node's readiness is checked again (one cheap check rather than
    /// trusting an unknown), a flaky node's cool-down runs from `health_since`, and
    /// infrastructure failure counts start from zero. Nothing needs writing: the derived
    /// health equals the stored one. Lost nodes already past the grace are deleted by the
    /// next tick.
    pub fn restore<'a>(&mut self, nodes: impl IntoIterator<Item = &'a Node>, now: Timestamp) {
        self.nodes.clear();
        self.sets.clear();
        self.timers.clear();
        for node in nodes {
            let mut st = NodeState::new(now);
            st.health = node.health;
            st.since = node.health_since;
            match node.health {
                NodeHealth::Healthy => st.readiness = ReadinessState::Passed,
                NodeHealth::Suspended(SuspendReason::New) => {}
                NodeHealth::Suspended(SuspendReason::Lost) => {
                    st.lost_since = Some(node.health_since);
                }
                NodeHealth::Suspended(SuspendReason::Flaky) => {
                    st.readiness = ReadinessState::Passed;
                    // The reasons were written with the health; a new leader does not know them.
                    st.flaky = Some(Flaky {
                        since: node.health_since,
                        cooled: false,
                        reason: "infrastructure failures (recorded before this leader)".into(),
                    });
                }
                NodeHealth::Offlined => st.offlined = true,
            }
            debug_assert_eq!(st.derived(), st.health);
            st.timers = st.wanted_timers(&self.config);
            for &(at, kind) in &st.timers {
                self.timers.insert((at, node.id, kind));
            }
            self.sets.entry(st.health).or_default().insert(node.id);
            self.nodes.insert(node.id, st);
        }
    }

    /// Fires every timer due at `now`: readiness checks to run, lost nodes past the grace
    /// (deleted), cool-downs that ended (the node's readiness is checked again, in this
    /// same tick). Call it when [`next_deadline`](Self::next_deadline) is reached.
    pub fn tick(&mut self, now: Timestamp) -> HealthTick {
        let mut tick = HealthTick::default();
        while let Some(&(at, node_id, kind)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            let Some(st) = self.nodes.get_mut(&node_id) else {
                continue;
            };
            st.timers.retain(|t| *t != (at, kind));
            match kind {
                TimerKind::Readiness => {
                    // Asked again after the backoff should the result never come back.
                    st.readiness = ReadinessState::Checking {
                        due: now.saturating_add(self.config.readiness_backoff),
                    };
                    tick.readiness_checks.push(node_id);
                }
                TimerKind::LostGrace => {
                    self.remove(&node_id);
                    // A check fired earlier in this tick is moot for a deleted node.
                    tick.readiness_checks.retain(|id| *id != node_id);
                    tick.decisions.push(HealthDecision::Delete { node_id });
                    continue;
                }
                TimerKind::CoolDown => {
                    if let Some(flaky) = &mut st.flaky {
                        flaky.cooled = true;
                    }
                    // A check already pending (the node was still new) stays as it is.
                    if !matches!(st.readiness, ReadinessState::Checking { .. }) {
                        st.readiness = ReadinessState::Checking { due: now };
                    }
                }
            }
            self.settle(node_id, now, &mut tick.decisions);
        }
        tick
    }

    /// When [`tick`](Self::tick) next has something to do.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.timers.first().map(|(at, _, _)| *at)
    }

    /// Time left before a lost node is deleted, or before a flaky node's cool-down ends
    /// (zero once it is over and the node awaits its readiness check). `None` for other
    /// health, offlined included.
    pub fn time_left(&self, node_id: &NodeId, now: Timestamp) -> Option<Duration> {
        let st = self.nodes.get(node_id)?;
        match st.health {
            NodeHealth::Suspended(SuspendReason::Lost) => {
                st.lost_deadline(&self.config).map(|end| end.since(now))
            }
            NodeHealth::Suspended(SuspendReason::Flaky) => Some(
                st.cool_down_end(&self.config)
                    .map_or(Duration::ZERO, |end| end.since(now)),
            ),
            _ => None,
        }
    }

    pub fn health(&self, node_id: &NodeId) -> Option<NodeHealth> {
        self.nodes.get(node_id).map(|st| st.health)
    }

    /// The write that brings the health stored in state (`stored`) back to the tracker's
    /// view, if they differ.
    ///
    /// The leader writes health decisions as separate Raft entries, each in its own task,
    /// so two of them can commit out of order: a heartbeat's recovery (lost → healthy)
    /// committed before the expiry's "lost" left state saying lost while the tracker, the
    /// authority, had moved on, and nothing would ever write again (the node stayed
    /// `suspended:lost`, heartbeating, neither recovered nor deleted). Every heartbeat asks
    /// this, so state converges to the tracker within one heartbeat whatever the order.
    pub fn stored_mismatch(&self, node_id: &NodeId, stored: NodeHealth) -> Option<HealthDecision> {
        let st = self.nodes.get(node_id)?;
        (st.health != stored).then_some(HealthDecision::SetHealth {
            node_id: *node_id,
            from: Some(stored),
            to: st.health,
        })
    }

    /// When the node entered its current health.
    pub fn health_since(&self, node_id: &NodeId) -> Option<Timestamp> {
        self.nodes.get(node_id).map(|st| st.since)
    }

    /// Infrastructure failures counted against the node in the window ending at `now`.
    pub fn recent_failures(&self, node_id: &NodeId, now: Timestamp) -> Option<usize> {
        let st = self.nodes.get(node_id)?;
        let window = self.config.flaky_window;
        Some(
            st.failures
                .iter()
                .filter(|(t, _)| t.saturating_add(window) > now)
                .count(),
        )
    }

    /// The nodes in one health set, in id order.
    pub fn nodes_with(&self, health: NodeHealth) -> impl Iterator<Item = NodeId> + '_ {
        self.sets.get(&health).into_iter().flatten().copied()
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The gauges. Set sizes are kept as the sets change; splitting healthy nodes into free
    /// and running asks `is_running` about each healthy node, so it costs one call per
    /// healthy node.
    pub fn gauges(&self, mut is_running: impl FnMut(&NodeId) -> bool) -> HealthGauges {
        let count = |h: NodeHealth| self.sets.get(&h).map_or(0, BTreeSet::len);
        let running = self
            .nodes_with(NodeHealth::Healthy)
            .filter(|id| is_running(id))
            .count();
        let healthy = count(NodeHealth::Healthy);
        HealthGauges {
            healthy,
            free: healthy - running,
            running,
            suspended_new: count(NodeHealth::Suspended(SuspendReason::New)),
            suspended_lost: count(NodeHealth::Suspended(SuspendReason::Lost)),
            suspended_flaky: count(NodeHealth::Suspended(SuspendReason::Flaky)),
            offlined: count(NodeHealth::Offlined),
        }
    }

    /// The gauges, with a node running when it holds an allocation that still uses
    /// resources in `state`.
    pub fn gauges_from_state(&self, state: &StateStore) -> HealthGauges {
        self.gauges(|id| state.allocs_by_node(id).any(|a| a.uses_resources()))
    }

    fn state_mut(&mut self, node_id: NodeId) -> Result<&mut NodeState, NodeHealthError> {
        self.nodes
            .get_mut(&node_id)
            .ok_or(NodeHealthError::NotTracked(node_id))
    }

    /// Re-derives the node's health after its facts changed: moves it between sets,
    /// reports the change, and replaces its timers with the ones its facts now call for.
    fn settle(&mut self, node_id: NodeId, now: Timestamp, out: &mut Vec<HealthDecision>) {
        let Some(st) = self.nodes.get_mut(&node_id) else {
            return;
        };
        let to = st.derived();
        if to != st.health {
            let from = st.health;
            if let Some(set) = self.sets.get_mut(&from) {
                set.remove(&node_id);
            }
            self.sets.entry(to).or_default().insert(node_id);
            st.health = to;
            st.since = now;
            out.push(HealthDecision::SetHealth {
                node_id,
                from: Some(from),
                to,
            });
        }
        for (at, kind) in st.timers.drain(..) {
            self.timers.remove(&(at, node_id, kind));
        }
        st.timers = st.wanted_timers(&self.config);
        for &(at, kind) in &st.timers {
            self.timers.insert((at, node_id, kind));
        }
    }

    /// Checks every invariant from scratch; for tests.
    #[cfg(test)]
    pub(super) fn check_invariants(&self) -> Result<(), String> {
        let mut timers = BTreeSet::new();
        for (id, st) in &self.nodes {
            if st.health != st.derived() {
                return Err(format!(
                    "node {id} cached {:?} != derived {:?}",
                    st.health,
                    st.derived()
                ));
            }
            let holders: Vec<_> = self
                .sets
                .iter()
                .filter(|(_, s)| s.contains(id))
                .map(|(h, _)| *h)
                .collect();
            if holders != [st.health] {
                return Err(format!(
                    "node {id} with health {:?} is in sets {holders:?}",
                    st.health
                ));
            }
            if st.timers != st.wanted_timers(&self.config) {
                return Err(format!(
                    "node {id} timers {:?} are not the wanted ones",
                    st.timers
                ));
            }
            if st.flaky.is_some() && !st.failures.is_empty() {
                return Err(format!("flaky node {id} still counts failures"));
            }
            timers.extend(st.timers.iter().map(|&(at, kind)| (at, *id, kind)));
        }
        let members: usize = self.sets.values().map(BTreeSet::len).sum();
        if members != self.nodes.len() {
            return Err(format!(
                "{members} set members for {} nodes",
                self.nodes.len()
            ));
        }
        if timers != self.timers {
            return Err("timer set differs from the nodes' timers".into());
        }
        Ok(())
    }
}

/// Drops failures that fell out of the window ending at `now`.
fn prune_failures(failures: &mut VecDeque<(Timestamp, String)>, window: Duration, now: Timestamp) {
    while failures
        .front()
        .is_some_and(|(t, _)| t.saturating_add(window) <= now)
    {
        failures.pop_front();
    }
}
