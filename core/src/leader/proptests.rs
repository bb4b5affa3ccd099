//! Property tests of the coalescing of node-update evals (`coalesce.rs`) under random
//! interleavings of node changes, Raft commits, dequeues, acks, nacks, failed eval writes,
//! the passage of time and failovers.
//!
//! The model is a leader over a Raft log whose entries commit when the test says so, in
//! order, each applied to a real state store with its events handed to the engine as the
//! leader loop does. Workers schedule an eval from state at exactly its wait index, the
//! oldest state a worker may use. A run places (its plan is accepted) only while its
//! delivery is current; the worker then writes the eval complete and acks it once that
//! write commits.
//!
//! Promises checked:
//! - no lost placement: once everything has run, every system job was last scheduled from
//!   state at or after the last node change that committed;
//! - without failovers or failed evals: no job ever has more than two evals pending in
//!   state (one handed out, one waiting).

use super::{Action, LeaderConfig, LeaderEngine};
use crate::broker::{BrokerConfig, Dequeued, Token};
use crate::fsm::{Command, apply};
use crate::mock;
use crate::state::StateStore;
use crate::types::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

const JOBS: [&str; 2] = ["agent", "logs"];
const WORKERS: usize = 2;

#[derive(Clone, Debug)]
enum Op {
    /// A new node registers, reports ready and turns healthy: three entries, appended.
    NodeJoins,
    /// A joined node reports itself initializing again or ready again.
    NodeFlaps {
        node: u8,
        ready: bool,
    },
    /// The first `n` entries of the log commit.
    Commit(u8),
    Dequeue(u8),
    /// The worker writes its eval complete; the ack follows the write's commit.
    Finish(u8),
    Nack(u8),
    /// The first coalesced eval write still in the log is lost: the runtime reports it.
    LoseEvalWrite,
    Advance(u16),
    /// Leadership moves: the uncommitted entries survive (`keep`) or are lost.
    Failover {
        keep: bool,
    },
}

fn op(failovers: bool) -> impl Strategy<Value = Op> {
    let failover = if failovers { 1 } else { 0 };
    prop_oneof![
        4 => Just(Op::NodeJoins),
        1 => (any::<u8>(), any::<bool>()).prop_map(|(node, ready)| Op::NodeFlaps { node, ready }),
        6 => (1u8..6).prop_map(Op::Commit),
        4 => (0..WORKERS as u8).prop_map(Op::Dequeue),
        4 => (0..WORKERS as u8).prop_map(Op::Finish),
        1 => (0..WORKERS as u8).prop_map(Op::Nack),
        1 => Just(Op::LoseEvalWrite),
        2 => (0u16..3000).prop_map(Op::Advance),
        failover => any::<bool>().prop_map(|keep| Op::Failover { keep }),
    ]
}

/// What to do once an entry commits.
#[derive(Debug)]
enum Then {
    Nothing,
    /// A worker's or the leader's eval write: ack the delivery (refused if it went stale).
    Ack(EvalId, Token),
}

struct Entry {
    cmd: Command,
    then: Then,
    /// Made by the engine as coalesced evals (a write that can be lost).
    coalesced: bool,
}

struct Model {
    store: StateStore,
    index: Index,
    engine: LeaderEngine<Plan>,
    now: Timestamp,
    established_at: Index,
    log: VecDeque<Entry>,
    workers: [Option<Dequeued>; WORKERS],
    /// Nodes made so far, and those whose registration committed.
    nodes: u64,
    registered: Vec<u64>,
    /// Per job, the newest state a run that placed scheduled it from.
    scheduled_from: BTreeMap<String, Index>,
    /// The last committed entry that changed a node's status or health.
    node_changed: Index,
    /// Whether the "two evals per job" bound is still promised.
    bounded: bool,
}

impl Model {
    fn new(delivery_limit: u32) -> Self {
        let config = LeaderConfig {
            broker: BrokerConfig {
                delivery_limit,
                ..BrokerConfig::default()
            },
            ..LeaderConfig::default()
        };
        let mut m = Self {
            store: StateStore::new(),
            index: 0,
            engine: LeaderEngine::new(config, 3).unwrap(),
            now: Timestamp(1_700_000_000_000),
            established_at: 0,
            log: VecDeque::new(),
            workers: Default::default(),
            nodes: 0,
            registered: Vec::new(),
            scheduled_from: BTreeMap::new(),
            node_changed: 0,
            bounded: true,
        };
        m.engine.establish(&m.store.snapshot(), m.now);
        for (n, name) in JOBS.iter().enumerate() {
            let job = mock::system_job(name);
            m.append(
                Command::JobRegister {
                    eval: Some(mock::eval(n as u64 + 1, &job)),
                    job,
                    now: m.now,
                },
                Then::Nothing,
            );
        }
        m.commit(JOBS.len());
        m
    }

    fn append(&mut self, cmd: Command, then: Then) {
        self.log.push_back(Entry {
            cmd,
            then,
            coalesced: false,
        });
    }

    fn run(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Write(cmd, _) => self.append(cmd, Then::Nothing),
                Action::Sequence(cmds, _) => {
                    cmds.into_iter().for_each(|c| self.append(c, Then::Nothing))
                }
                Action::CoalescedEvals(cmd) => self.log.push_back(Entry {
                    cmd,
                    then: Then::Nothing,
                    coalesced: true,
                }),
                Action::FailEval {
                    command,
                    eval_id,
                    token,
                } => {
                    // An eval reached the delivery limit; its follow-up is a third eval of
                    // the job, which the bound does not cover.
                    self.bounded = false;
                    self.append(command, Then::Ack(eval_id, token));
                }
            }
        }
    }

    /// Commits the first `n` entries; their events reach the engine as one batch (the
    /// runtime hands them over entry by entry, but the engine must not depend on it).
    fn commit(&mut self, n: usize) {
        let mut events = Vec::new();
        let mut acks = Vec::new();
        for _ in 0..n {
            let Some(entry) = self.log.pop_front() else {
                break;
            };
            self.index += 1;
            let evs = apply(&mut self.store, self.index, entry.cmd.clone())
                .unwrap_or_else(|e| panic!("{} refused: {e}", entry.cmd.kind()));
            match &entry.cmd {
                Command::NodeRegister { node, .. } => {
                    let n = (1..=self.nodes).find(|&n| mock::node_id(n) == node.id);
                    self.registered.extend(n);
                }
                Command::NodeStatus { .. } | Command::NodeHealth { .. } if !evs.is_empty() => {
                    self.node_changed = self.index
                }
                _ => {}
            }
            events.extend(evs);
            if let Then::Ack(eval_id, token) = entry.then {
                acks.push((eval_id, token));
            }
            self.check_bound();
        }
        let snap = self.store.snapshot();
        let step = self
            .engine
            .on_events(&events, self.established_at, &snap, self.now);
        self.run(step.actions);
        for (eval_id, token) in acks {
            if self.engine.broker.ack(eval_id, token, self.now).is_ok() {
                let cancel = self.engine.cancel_superseded_after_ack(self.now);
                self.run(cancel.into_iter().collect());
            }
        }
        self.check_bound();
    }

    fn node_write(&mut self, n: u64, cmd: impl FnOnce(NodeId, Timestamp) -> Command) {
        let now = self.now;
        self.append(cmd(mock::node_id(n), now), Then::Nothing);
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::NodeJoins => {
                self.nodes += 1;
                let n = self.nodes;
                let mut node = mock::node(n);
                node.status = NodeStatus::Initializing;
                node.health = NodeHealth::Suspended(SuspendReason::New);
                let now = self.now;
                self.append(Command::NodeRegister { node, now }, Then::Nothing);
                self.node_write(n, |node_id, now| Command::NodeStatus {
                    node_id,
                    status: NodeStatus::Ready,
                    description: "heartbeat received".into(),
                    now,
                    evals: Vec::new(),
                });
                self.node_write(n, |node_id, now| Command::NodeHealth {
                    node_id,
                    health: NodeHealth::Healthy,
                    now,
                    evals: Vec::new(),
                });
            }
            Op::NodeFlaps { node, ready } if !self.registered.is_empty() => {
                let n = self.registered[usize::from(node) % self.registered.len()];
                let status = if ready {
                    NodeStatus::Ready
                } else {
                    NodeStatus::Initializing
                };
                self.node_write(n, |node_id, now| Command::NodeStatus {
                    node_id,
                    status,
                    description: format!("now {}", status.as_str()),
                    now,
                    evals: Vec::new(),
                });
            }
            Op::NodeFlaps { .. } => {}
            Op::Commit(n) => self.commit(n.into()),
            Op::Dequeue(w) => {
                let w = usize::from(w);
                if self.workers[w].is_none() {
                    self.workers[w] = self.dequeue();
                }
            }
            Op::Finish(w) => {
                let w = usize::from(w);
                // A worker waits for its wait index before it schedules.
                if self.workers[w]
                    .as_ref()
                    .is_some_and(|d| d.wait_index <= self.index)
                {
                    let d = self.workers[w].take().unwrap();
                    self.finish(d);
                }
            }
            Op::Nack(w) => {
                if let Some(d) = self.workers[usize::from(w)].take() {
                    let _ = self.engine.broker.nack(d.eval.id, d.token, self.now);
                }
            }
            Op::LoseEvalWrite => {
                if let Some(at) = self.log.iter().position(|e| e.coalesced) {
                    let lost = self.log.remove(at).unwrap();
                    self.engine.coalesced_evals_lost(&lost.cmd, self.now);
                }
            }
            Op::Advance(ms) => {
                self.now = self.now.saturating_add(Duration::from_millis(ms.into()));
                let snap = self.store.snapshot();
                let step = self.engine.run_due(&snap, self.now);
                self.run(step.actions);
            }
            Op::Failover { keep } => {
                self.bounded = false;
                self.engine.revoke();
                if !keep {
                    // The old leader's uncommitted entries are lost with it; node writes
                    // among them were never acknowledged, so nothing is owed to them.
                    self.log.clear();
                }
                self.established_at = self.index;
                self.engine.establish(&self.store.snapshot(), self.now);
            }
        }
        self.check_bound();
    }

    fn check_bound(&self) {
        if !self.bounded {
            return;
        }
        let snap = self.store.snapshot();
        for name in JOBS {
            let live = snap
                .evals_by_job(&JobKey::default_ns(name))
                .filter(|e| matches!(e.status, EvalStatus::Pending | EvalStatus::Blocked))
                .count();
            assert!(live <= 2, "job {name} has {live} evals pending in state");
        }
    }

    /// Commits everything, runs every eval, waits out back-offs and retries, until nothing
    /// is left (in the log, in state or in the broker); then every job must have been
    /// scheduled from state with every node change.
    fn quiesce(&mut self) {
        for _ in 0..200 {
            self.commit(self.log.len());
            for w in 0..WORKERS {
                if let Some(d) = self.workers[w].take() {
                    self.finish(d);
                }
            }
            while let Some(d) = self.dequeue() {
                self.finish(d);
                self.commit(self.log.len());
            }
            let snap = self.store.snapshot();
            let live = snap
                .evals()
                .filter(|e| matches!(e.status, EvalStatus::Pending | EvalStatus::Blocked))
                .count();
            // Nothing left means nothing in the broker either: an eval can wait there (backing
            // off after a nack, its wait index raised by node changes) while a stale write
            // from before a failover has already marked it complete in state.
            if self.log.is_empty()
                && live == 0
                && self.engine.coalescer.next_deadline().is_none()
                && self.engine.broker.stats().total.tracked() == 0
            {
                break;
            }
            self.apply(Op::Advance(3000));
        }
        assert!(self.log.is_empty(), "the log drained");
        for name in JOBS {
            let from = self.scheduled_from.get(name).copied().unwrap_or(0);
            assert!(
                from >= self.node_changed,
                "job {name} was last scheduled from index {from}; a node changed at {}",
                self.node_changed
            );
        }
    }

    fn dequeue(&mut self) -> Option<Dequeued> {
        let engine = &mut self.engine;
        engine
            .broker
            .dequeue(&[SchedulerType::System], self.now, &mut engine.rng)
    }

    /// A worker's run of `d`, from state at its wait index: it places only if the delivery
    /// is still current (a stale one's plan is refused, and the worker gives up).
    fn finish(&mut self, d: Dequeued) {
        if self.engine.broker.outstanding(d.eval.id) != Some(d.token) {
            return;
        }
        let from = self
            .scheduled_from
            .entry(d.eval.job_id.to_string())
            .or_default();
        *from = (*from).max(d.wait_index);
        let mut done = (*d.eval).clone();
        done.status = EvalStatus::Complete;
        done.snapshot_index = d.wait_index;
        self.append(
            Command::EvalUpsert { evals: vec![done] },
            Then::Ack(d.eval.id, d.token),
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// One leader throughout, evals never failing: at most two evals per job in state at
    /// any moment, and no node change missed.
    #[test]
    fn node_changes_keep_two_evals_per_job_and_lose_no_placement(
        ops in prop::collection::vec(op(false), 1..150)
    ) {
        let mut model = Model::new(100);
        for op in ops {
            model.apply(op);
        }
        prop_assert!(model.bounded);
        model.quiesce();
    }

    /// Failovers (with the old leader's entries kept or lost), failed evals and lost eval
    /// writes: no node change missed.
    #[test]
    fn node_changes_lose_no_placement_across_failovers(
        ops in prop::collection::vec(op(true), 1..150)
    ) {
        let mut model = Model::new(2);
        for op in ops {
            model.apply(op);
        }
        model.quiesce();
    }
}
