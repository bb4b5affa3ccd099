//! The leader engine played through whole scenarios: commands applied to a real state
//! store at increasing indexes, their events handed to the engine as the leader loop does,
//! the engine's writes applied in turn, and time moved by the test.

mod coalesce;
mod deployments;
mod drain;
mod purge;

use super::*;
use crate::fsm::{Command, apply};
use crate::mock;
use crate::node_health::Readiness;
use crate::state::StateStore;
use crate::types::*;
use std::sync::Arc;
use std::time::Duration;

const T0: Timestamp = Timestamp(1_700_000_000_000);
const SEC: Duration = Duration::from_secs(1);

/// One leader over one state store. Every write goes through [`Sim::write`], so the engine
/// sees the events of everything, its own decisions included.
struct Sim {
    store: StateStore,
    index: Index,
    engine: LeaderEngine<Plan>,
    now: Timestamp,
    established_at: Index,
    /// Every command the engine decided, in the order they were written.
    decided: Vec<Command>,
    /// When each node's heartbeat timer runs out, from the TTLs the engine handed out.
    expires: std::collections::BTreeMap<u64, Timestamp>,
    /// The most evals one job had pending or blocked in state after any write.
    peak_live: usize,
}

impl Sim {
    fn new() -> Self {
        Self::on(StateStore::new(), 0)
    }

    /// A new engine (not yet leading) over existing state, as after a failover.
    fn on(store: StateStore, index: Index) -> Self {
        Self {
            store,
            index,
            engine: LeaderEngine::new(LeaderConfig::default(), 7).unwrap(),
            now: T0,
            established_at: 0,
            decided: Vec::new(),
            expires: Default::default(),
            peak_live: 0,
        }
    }

    fn leading() -> Self {
        let mut sim = Self::new();
        sim.lead();
        sim
    }

    fn lead(&mut self) -> Established {
        self.established_at = self.index;
        let snap = self.store.snapshot();
        self.engine.establish(&snap, self.now)
    }

    /// Applies `cmd` as Raft would and hands its events to the engine.
    fn write(&mut self, cmd: Command) {
        self.index += 1;
        let kind = cmd.kind();
        let events = apply(&mut self.store, self.index, cmd)
            .unwrap_or_else(|e| panic!("{kind} refused: {e}"));
        let snap = self.store.snapshot();
        let mut live: std::collections::BTreeMap<JobKey, usize> = Default::default();
        for e in snap.evals() {
            if matches!(e.status, EvalStatus::Pending | EvalStatus::Blocked) {
                *live.entry(e.job_key()).or_default() += 1;
            }
        }
        self.peak_live = self.peak_live.max(live.into_values().max().unwrap_or(0));
        let step = self
            .engine
            .on_events(&events, self.established_at, &snap, self.now);
        self.run(step.actions);
    }

    fn run(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Write(cmd, _) | Action::CoalescedEvals(cmd) => self.decided_write(cmd),
                Action::Sequence(cmds, _) => cmds.into_iter().for_each(|c| self.decided_write(c)),
                Action::FailEval {
                    command,
                    eval_id,
                    token,
                } => {
                    self.decided_write(command);
                    self.engine.broker.ack(eval_id, token, self.now).unwrap();
                }
            }
        }
    }

    fn decided_write(&mut self, cmd: Command) {
        self.decided.push(cmd.clone());
        self.write(cmd);
    }

    /// Moves the clock by `d`, firing every due time on the way in order, as the runtime's
    /// loop does.
    fn advance(&mut self, d: Duration) {
        let until = self.now.saturating_add(d);
        for _ in 0..100_000 {
            match self.engine.next_deadline().filter(|t| *t <= until) {
                Some(due) => {
                    self.now = due.max(self.now);
                    let snap = self.store.snapshot();
                    let step = self.engine.run_due(&snap, self.now);
                    self.run(step.actions);
                    if self.engine.next_deadline() == Some(due) {
                        // Still due at the same instant: time must move for it to change.
                        self.now = self.now.saturating_add(Duration::from_millis(1));
                    }
                }
                None => {
                    self.now = until;
                    return;
                }
            }
        }
        panic!("the engine kept falling due before {until}");
    }

    /// Moves the clock to `at` (never back).
    fn advance_to(&mut self, at: Timestamp) {
        self.advance(at.since(self.now));
    }

    /// When node `n`'s timer runs out: its last TTL plus the leader's grace.
    fn expiry(&self, n: u64) -> Timestamp {
        self.expires[&n]
    }

    fn timer_reset(&mut self, n: u64, ttl: Duration) {
        let grace = self.engine.config().heartbeat.grace;
        self.expires
            .insert(n, self.now.saturating_add(ttl).saturating_add(grace));
    }

    /// Registers node `n` as the handle does (initializing until a ready heartbeat).
    fn register(&mut self, n: u64) -> Duration {
        let mut node = mock::node(n);
        node.status = NodeStatus::Initializing;
        let (node, ttl) = self.engine.node_registered(node, self.now).unwrap();
        self.timer_reset(n, ttl);
        self.write(Command::NodeRegister {
            node,
            now: self.now,
        });
        ttl
    }

    /// A heartbeat of node `n` reporting ready, its writes applied.
    fn heartbeat(&mut self, n: u64) -> HeartbeatOutcome {
        let snap = self.store.snapshot();
        let node = snap.node(&mock::node_id(n)).unwrap().clone();
        let due_before = self.engine.next_deadline();
        let outcome = self
            .engine
            .node_heartbeat(&snap, &node, Readiness::Ready, self.now)
            .expect("leading")
            .unwrap();
        if !outcome.due_earlier {
            let due_after = self.engine.next_deadline();
            assert!(
                due_after.is_some_and(|after| due_before.is_some_and(|before| after >= before))
                    || due_after.is_none(),
                "node {n}: the heartbeat said no due time moved earlier, yet {due_before:?} became {due_after:?}"
            );
        }
        self.timer_reset(n, outcome.ttl);
        for c in outcome.commands.clone() {
            self.write(c);
        }
        outcome
    }

    /// Registers node `n` and heartbeats it until it is ready and healthy.
    fn healthy_node(&mut self, n: u64) {
        self.register(n);
        self.heartbeat(n);
        self.advance(SEC * 10);
        self.heartbeat(n);
        assert_eq!(self.node(n).status, NodeStatus::Ready);
        assert_eq!(self.node(n).health, NodeHealth::Healthy, "node {n} healthy");
    }

    fn node(&self, n: u64) -> Arc<Node> {
        self.store
            .snapshot()
            .node(&mock::node_id(n))
            .cloned()
            .unwrap()
    }

    fn register_job(&mut self, job: &Job, eval_n: u64) {
        self.write(Command::JobRegister {
            job: job.clone(),
            eval: Some(mock::eval(eval_n, job)),
            now: self.now,
        });
    }

    fn place(&mut self, job: &Job, alloc_n: u64, node_n: u64) {
        let job = self.store.snapshot().job(&job.key()).cloned().unwrap();
        let alloc = mock::alloc(alloc_n, &job, mock::node_id(node_n), 0);
        self.write(mock::place(mock::eval_id(0), vec![alloc], self.now));
    }

    /// The ids of the evals the broker hands out now, in order, each acked as a worker
    /// that finished it would.
    fn dequeue_all(&mut self) -> Vec<EvalId> {
        let mut out = Vec::new();
        let types = [
            SchedulerType::Service,
            SchedulerType::Batch,
            SchedulerType::System,
            SchedulerType::SysBatch,
        ];
        while let Some(d) = self
            .engine
            .broker
            .dequeue(&types, self.now, &mut self.engine.rng)
        {
            out.push(d.eval.id);
            self.engine
                .broker
                .ack(d.eval.id, d.token, self.now)
                .unwrap();
        }
        out
    }

    /// Hands out every eval the broker holds, acking each, until none is left; returns the
    /// highest wait index handed out per job id.
    fn deliveries(&mut self) -> std::collections::BTreeMap<String, Index> {
        let mut waits = std::collections::BTreeMap::new();
        while let Some(d) =
            self.engine
                .broker
                .dequeue(&SchedulerType::ALL, self.now, &mut self.engine.rng)
        {
            let wait: &mut Index = waits.entry(d.eval.job_id.to_string()).or_default();
            *wait = (*wait).max(d.wait_index);
            self.engine
                .broker
                .ack(d.eval.id, d.token, self.now)
                .unwrap();
        }
        waits
    }

    /// How many evals of job `job` are pending or blocked in state.
    fn live_evals(&self, job: &str) -> usize {
        self.store
            .snapshot()
            .evals_by_job(&JobKey::default_ns(job))
            .filter(|e| matches!(e.status, EvalStatus::Pending | EvalStatus::Blocked))
            .count()
    }

    /// The node-update evals the engine wrote for node `n`, by job id.
    fn node_update_jobs(&self, n: u64) -> Vec<String> {
        let id = mock::node_id(n);
        let mut jobs: Vec<String> = self
            .store
            .snapshot()
            .evals()
            .filter(|e| e.triggered_by == TriggeredBy::NodeUpdate && e.node_id == Some(id))
            .map(|e| e.job_id.to_string())
            .collect();
        jobs.sort();
        jobs
    }
}

#[test]
fn a_disabled_engine_decides_nothing() {
    let mut sim = Sim::new();
    assert!(sim.engine.node_registered(mock::node(1), T0).is_none());
    sim.write(Command::NodeRegister {
        node: mock::node(1),
        now: T0,
    });
    let snap = sim.store.snapshot();
    assert_eq!(sim.engine.run_due(&snap, T0), Step::default());
    assert_eq!(sim.engine.next_deadline(), None);
    assert!(sim.decided.is_empty());
}

#[test]
fn a_registered_node_becomes_healthy_on_ready_heartbeats() {
    let mut sim = Sim::leading();
    let ttl = sim.register(1);
    assert_eq!(
        ttl,
        HeartbeatConfig::default().min_ttl.max(ttl),
        "at least the minimum TTL"
    );
    assert_eq!(
        sim.node(1).health,
        NodeHealth::Suspended(SuspendReason::New)
    );
    sim.healthy_node(2);
}

#[test]
fn a_silent_node_goes_down_and_lost_with_evals_for_its_jobs() {
    let mut sim = Sim::leading();
    sim.healthy_node(1);
    sim.healthy_node(2);
    let web = mock::service_job("web", 1);
    let agent = mock::system_job("agent");
    sim.register_job(&web, 1);
    sim.register_job(&agent, 2);
    sim.place(&web, 1, 1);
    // Node 2 keeps heartbeating; node 1 falls silent.
    let down_at = sim.expiry(1);
    while sim.now.saturating_add(SEC * 5) < down_at {
        sim.advance(SEC * 5);
        sim.heartbeat(2);
    }
    assert_eq!(sim.node(1).status, NodeStatus::Ready, "inside TTL + grace");
    sim.advance_to(down_at);
    sim.heartbeat(2);
    let node = sim.node(1);
    assert_eq!(node.status, NodeStatus::Down);
    assert_eq!(node.health, NodeHealth::Suspended(SuspendReason::Lost));
    assert_eq!(sim.node(2).status, NodeStatus::Ready);
    assert_eq!(
        sim.node_update_jobs(1),
        ["web"],
        "its service job, in the node's own entry"
    );
    assert!(sim.node_update_jobs(2).is_empty());
    // The system job's eval was still waiting in the broker: the node's change joined it
    // instead of adding one, and it is scheduled from state where node 1 is down.
    assert_eq!(sim.live_evals("agent"), 1);
    let down = sim.node(1).modify_index;
    let waits = sim.deliveries();
    assert!(
        waits["agent"] >= down,
        "the system job's eval waits for index {}, the node went down at {down}",
        waits["agent"]
    );
}

#[test]
fn a_node_with_a_disconnect_window_is_disconnected_then_down() {
    let mut sim = Sim::leading();
    sim.healthy_node(1);
    let mut web = mock::service_job("web", 1);
    web.groups[0].disconnect = Some(DisconnectPolicy {
        lost_after: Some(SEC * 300),
        ..Default::default()
    });
    sim.register_job(&web, 1);
    sim.place(&web, 1, 1);
    let expiry = sim.expiry(1);
    sim.advance_to(expiry);
    assert_eq!(
        sim.node(1).status,
        NodeStatus::Disconnected,
        "past TTL + grace"
    );
    sim.advance(SEC * 299);
    assert_eq!(
        sim.node(1).status,
        NodeStatus::Disconnected,
        "inside the window"
    );
    sim.advance(SEC);
    assert_eq!(sim.node(1).status, NodeStatus::Down, "the window ended");
    // The lost grace ran from the window's end, not from the disconnect: the node was kept
    // while its allocations could still reconnect.
    sim.advance(HealthConfig::default().lost_grace - SEC);
    assert_eq!(
        sim.node(1).health,
        NodeHealth::Suspended(SuspendReason::Lost)
    );
    sim.advance(SEC);
    assert!(
        sim.store.snapshot().node(&mock::node_id(1)).is_none(),
        "deleted"
    );
}

#[test]
fn a_steady_heartbeat_moves_no_due_time_earlier() {
    let mut sim = Sim::leading();
    sim.healthy_node(1);
    // Heartbeats at least the minimum TTL apart: each new timer (at least two minimum TTLs
    // out, the grace included) lies past the one it replaces.
    for _ in 0..20 {
        sim.advance(HeartbeatConfig::default().min_ttl);
        let outcome = sim.heartbeat(1);
        assert!(outcome.commands.is_empty(), "steady: nothing to write");
        assert!(!outcome.due_earlier, "its own timer only moved later");
    }
    // Another timer falls due first: a heartbeat does not come before it.
    for _ in 0..20 {
        let soon = sim.now.saturating_add(SEC);
        sim.engine.heartbeats.expire_at(mock::node_id(2), soon);
        let outcome = sim.heartbeat(1);
        assert!(!outcome.due_earlier, "node 2's timer stays the first due");
        sim.advance(SEC / 2);
    }
}

#[test]
fn a_heartbeat_that_starts_a_timer_moves_the_due_time_earlier() {
    let mut sim = Sim::leading();
    sim.healthy_node(1);
    // Node 1 is down, its heartbeat timer gone; node 2 has a timer far off.
    sim.advance_to(sim.expiry(1));
    assert_eq!(sim.node(1).status, NodeStatus::Down);
    sim.healthy_node(2);
    sim.engine
        .heartbeats
        .expire_at(mock::node_id(2), sim.now.saturating_add(SEC * 3600));
    let due_before = sim.engine.next_deadline().expect("timers");
    let outcome = sim.heartbeat(1);
    assert!(
        outcome.due_earlier,
        "node 1's new timer falls due before {due_before}"
    );
}

#[test]
fn a_heartbeat_inside_the_lost_grace_brings_the_node_back() {
    let mut sim = Sim::leading();
    sim.healthy_node(1);
    let expiry = sim.expiry(1);
    sim.advance_to(expiry);
    assert_eq!(sim.node(1).status, NodeStatus::Down);
    assert_eq!(
        sim.node(1).health,
        NodeHealth::Suspended(SuspendReason::Lost)
    );
    sim.advance(HealthConfig::default().lost_grace - SEC);
    sim.heartbeat(1);
    sim.advance(SEC * 10);
    sim.heartbeat(1);
    let node = sim.node(1);
    assert_eq!(
        (node.status, node.health),
        (NodeStatus::Ready, NodeHealth::Healthy)
    );
}

#[test]
fn a_lost_node_past_its_grace_is_deleted() {
    let mut sim = Sim::leading();
    sim.healthy_node(1);
    let expiry = sim.expiry(1);
    sim.advance_to(expiry);
    assert!(
        sim.store.snapshot().node(&mock::node_id(1)).is_some(),
        "lost, kept"
    );
    sim.advance(HealthConfig::default().lost_grace);
    assert!(sim.store.snapshot().node(&mock::node_id(1)).is_none());
}

#[test]
fn registered_evals_reach_the_broker_once() {
    let mut sim = Sim::leading();
    let web = mock::service_job("web", 2);
    sim.register_job(&web, 1);
    assert_eq!(sim.dequeue_all(), [mock::eval_id(1)]);
    assert!(sim.dequeue_all().is_empty(), "delivered once");
}

#[test]
fn a_blocked_eval_is_unblocked_by_a_node_that_becomes_ready() {
    let mut sim = Sim::leading();
    let web = mock::service_job("web", 1);
    sim.register_job(&web, 1);
    let mut blocked = mock::eval(2, &web);
    blocked.status = EvalStatus::Blocked;
    blocked
        .class_eligibility
        .insert(mock::node(1).class_key().to_string(), true);
    sim.write(Command::EvalUpsert {
        evals: vec![blocked],
    });
    assert_eq!(sim.engine.blocked.stats().total_blocked, 1);
    assert_eq!(sim.dequeue_all(), [mock::eval_id(1)]);
    sim.healthy_node(1);
    assert_eq!(sim.engine.blocked.stats().total_blocked, 0);
    assert!(
        sim.dequeue_all().contains(&mock::eval_id(2)),
        "unblocked into the broker"
    );
}

#[test]
fn a_periodic_job_launches_its_child_when_due() {
    let mut sim = Sim::leading();
    let mut job = mock::batch_job("report", 1);
    job.periodic = Some(PeriodicConfig {
        cron: "* * * * *".into(),
        prohibit_overlap: false,
        time_zone: String::new(),
        enabled: true,
    });
    sim.write(Command::JobRegister {
        job,
        eval: None,
        now: sim.now,
    });
    sim.advance(SEC * 61);
    let children: Vec<_> = sim
        .store
        .snapshot()
        .jobs()
        .filter(|j| j.parent_id.as_ref().is_some_and(|p| p.as_str() == "report"))
        .map(|j| j.id.to_string())
        .collect();
    assert_eq!(children.len(), 1, "one launch per minute: {children:?}");
    assert!(children[0].starts_with("report/periodic-"), "{children:?}");
}

#[test]
fn garbage_older_than_the_threshold_is_deleted() {
    let mut sim = Sim::leading();
    let web = mock::batch_job("web", 1);
    sim.register_job(&web, 1);
    sim.write(Command::EvalUpsert {
        evals: vec![{
            let mut e = mock::eval(1, &web);
            e.status = EvalStatus::Complete;
            e.modify_time = sim.now;
            e
        }],
    });
    let gc = GcConfig::default();
    sim.advance(gc.threshold - gc.interval);
    assert!(
        sim.store.snapshot().eval(&mock::eval_id(1)).is_some(),
        "not old enough yet"
    );
    sim.advance(gc.interval * 2);
    assert!(sim.store.snapshot().eval(&mock::eval_id(1)).is_none());
    assert!(sim.decided.iter().any(
        |c| matches!(c, Command::EvalDelete { eval_ids, .. } if eval_ids == &[mock::eval_id(1)])
    ));
}

/// An old, finished eval stays while any allocation it placed is kept, and goes with the
/// last of them.
#[test]
fn an_eval_is_collected_only_with_its_allocations() {
    let mut sim = Sim::leading();
    sim.healthy_node(1);
    let web = mock::batch_job("web", 1);
    sim.register_job(&web, 1);
    let mut eval = mock::eval(0, &web);
    eval.status = EvalStatus::Complete;
    eval.modify_time = sim.now;
    sim.write(Command::EvalUpsert { evals: vec![eval] });
    sim.place(&web, 1, 1);
    // (the alloc is still stored, its eval is still stored)
    let kept = |sim: &Sim| {
        let snap = sim.store.snapshot();
        (
            snap.alloc(&mock::alloc_id(1)).is_some(),
            snap.eval(&mock::eval_id(0)).is_some(),
        )
    };
    let gc = GcConfig::default();
    sim.advance(gc.threshold + gc.interval * 2);
    assert_eq!(
        kept(&sim),
        (true, true),
        "a running alloc stays, and so does its eval"
    );
    let snap = sim.store.snapshot();
    let mut stopped = (**snap.alloc(&mock::alloc_id(1)).unwrap()).clone();
    stopped.desired_status = DesiredStatus::Stop;
    sim.write(mock::place(mock::eval_id(0), vec![stopped], sim.now));
    // The node went quiet over the wait; back, it reports the allocation done.
    sim.healthy_node(1);
    sim.write(Command::AllocClientUpdate {
        node_id: mock::node_id(1),
        updates: vec![crate::fsm::AllocClientUpdate {
            deployment_health: None,
            alloc_id: mock::alloc_id(1),
            client_status: ClientStatus::Complete,
            client_description: "All tasks have completed".into(),
            task_states: Default::default(),
        }],
        evals: Vec::new(),
        now: sim.now,
    });
    sim.advance(gc.threshold + gc.interval * 2);
    assert_eq!(
        kept(&sim),
        (false, false),
        "the finished alloc went, and its eval with it"
    );
}

#[test]
fn tokens_expired_longer_than_the_threshold_are_deleted() {
    let mut sim = Sim::leading();
    let gc = GcConfig::default();
    let token = |n: u8, expiry: Option<Timestamp>| crate::acl::AclToken {
        accessor_id: AccessorId::from_bytes([n; 16]),
        secret_digest: format!("sha256:{n:02x}"),
        name: format!("t{n}"),
        kind: crate::acl::TokenKind::Management,
        policies: Vec::new(),
        create_time: sim.now,
        expiry,
        create_index: 0,
        modify_index: 0,
    };
    let soon = sim.now.saturating_add(SEC * 60);
    let later = sim.now.saturating_add(gc.threshold * 3);
    sim.write(Command::AclTokenUpsert {
        tokens: vec![token(1, Some(soon)), token(2, Some(later)), token(3, None)],
    });
    let present = |sim: &Sim, n: u8| {
        sim.store
            .acl_token(AccessorId::from_bytes([n; 16]))
            .is_some()
    };
    // Expired, but not for longer than the threshold: kept, so a list shows why.
    sim.advance(SEC * 60 + gc.threshold - gc.interval);
    assert!(present(&sim, 1) && present(&sim, 2) && present(&sim, 3));
    sim.advance(gc.interval * 2);
    assert!(!present(&sim, 1), "expired past the threshold");
    assert!(
        present(&sim, 2) && present(&sim, 3),
        "unexpired and everlasting stay"
    );
}

/// A new leader restores everything from state and gives every node the failover TTL: no
/// node is marked down because leadership moved.
#[test]
fn a_new_leader_restores_from_state_and_waits_out_the_failover_ttl() {
    let mut old = Sim::leading();
    old.healthy_node(1);
    old.healthy_node(2);
    let web = mock::service_job("web", 1);
    old.register_job(&web, 1);
    let batch = mock::batch_job("batch", 1);
    old.register_job(&batch, 2);
    let mut blocked = mock::eval(3, &batch);
    blocked.status = EvalStatus::Blocked;
    blocked
        .class_eligibility
        .insert("no-such-class".into(), true);
    old.write(Command::EvalUpsert {
        evals: vec![blocked],
    });
    let mut job = mock::batch_job("report", 1);
    job.periodic = Some(PeriodicConfig {
        cron: "0 * * * *".into(),
        prohibit_overlap: false,
        time_zone: String::new(),
        enabled: true,
    });
    old.write(Command::JobRegister {
        job,
        eval: None,
        now: old.now,
    });

    let mut new = Sim::on(old.store.clone(), old.index);
    new.now = old.now.saturating_add(SEC * 30);
    let restored = new.lead();
    assert_eq!(
        restored,
        Established {
            ready: 2,
            pending: 0,
            blocked: 1,
            nodes: 2,
            periodic: 1
        }
    );
    let mut ready = new.dequeue_all();
    ready.sort();
    assert_eq!(ready, [mock::eval_id(1), mock::eval_id(2)]);
    // Well past a normal TTL, inside the failover TTL: nobody is down.
    new.advance(SEC * 60);
    assert_eq!(new.node(1).status, NodeStatus::Ready);
    assert_eq!(new.node(2).status, NodeStatus::Ready);
    new.heartbeat(1);
    let failover_ends = new
        .now
        .saturating_add(HeartbeatConfig::default().failover_ttl - SEC * 60);
    new.advance_to(failover_ends.saturating_sub(SEC));
    assert_eq!(
        new.node(2).status,
        NodeStatus::Ready,
        "inside the failover TTL"
    );
    new.advance(SEC);
    assert_eq!(
        new.node(2).status,
        NodeStatus::Down,
        "silent past the failover TTL"
    );
}

#[test]
fn revoking_drops_waiting_plans_and_disables_the_engine() {
    let mut sim = Sim::leading();
    sim.engine
        .plans
        .push(Plan::new(mock::eval_id(1), 50, None, sim.index));
    let dropped = sim.engine.revoke();
    assert_eq!(dropped.len(), 1);
    assert!(!sim.engine.is_enabled());
    assert_eq!(sim.engine.next_deadline(), None);
}

/// A lapsed lease suspends the engine: it acknowledges no node, fires no timer and hands
/// out no eval, but keeps its broker and timers; on resume every node has at least the
/// failover TTL, so none is marked down for the heartbeats it was refused meanwhile.
#[test]
fn a_suspended_leader_answers_nothing_keeps_its_work_and_downs_no_node_on_resume() {
    let mut sim = Sim::leading();
    sim.healthy_node(1);
    sim.register_job(&mock::service_job("web", 1), 1);
    let ready = sim.engine.broker.stats().total.ready;
    assert_eq!(ready, 1);

    sim.engine.suspend();
    assert!(sim.engine.is_enabled() && !sim.engine.is_answering());
    assert_eq!(sim.engine.next_deadline(), None);
    let snap = sim.store.snapshot();
    let node = snap.node(&mock::node_id(1)).cloned().unwrap();
    assert!(
        sim.engine
            .node_heartbeat(&snap, &node, Readiness::Ready, sim.now)
            .is_none()
    );
    assert!(sim.engine.node_registered(mock::node(2), sim.now).is_none());
    sim.advance(SEC * 600);
    assert_eq!(sim.node(1).status, NodeStatus::Ready, "no timer fires");
    assert_eq!(sim.engine.broker.stats().total.ready, ready, "work kept");

    sim.engine.resume(sim.now);
    assert!(sim.engine.is_answering());
    let failover = HeartbeatConfig::default().failover_ttl;
    sim.advance(failover - SEC);
    assert_eq!(
        sim.node(1).status,
        NodeStatus::Ready,
        "inside the failover TTL"
    );
    sim.advance(SEC * 2);
    assert_eq!(sim.node(1).status, NodeStatus::Down, "silent past it");
    assert_eq!(sim.dequeue_all(), [mock::eval_id(1)]);
}

#[test]
fn the_same_seed_makes_the_same_decisions() {
    let run = || {
        let mut sim = Sim::leading();
        sim.healthy_node(1);
        sim.register_job(&mock::system_job("agent"), 1);
        sim.advance(SEC * 30);
        sim.decided
    };
    assert_eq!(run(), run());
}

/// An eval that completes with everything placed leaves its job's blocked eval nothing to
/// wait for: the leader cancels it, so no eval stays blocked in state for good.
#[test]
fn a_blocked_eval_made_obsolete_by_a_complete_eval_is_canceled() {
    let mut sim = Sim::leading();
    let web = mock::service_job("web", 1);
    sim.register_job(&web, 1);
    let mut blocked = mock::eval(2, &web);
    blocked.status = EvalStatus::Blocked;
    sim.write(Command::EvalUpsert {
        evals: vec![blocked],
    });
    assert_eq!(sim.engine.blocked.stats().total_blocked, 1);
    let mut done = mock::eval(3, &web);
    done.status = EvalStatus::Complete;
    sim.write(Command::EvalUpsert { evals: vec![done] });
    assert_eq!(sim.engine.blocked.stats().total_blocked, 0);
    let e = sim
        .store
        .snapshot()
        .eval(&mock::eval_id(2))
        .cloned()
        .unwrap();
    assert_eq!(e.status, EvalStatus::Canceled);
    assert_eq!(e.status_description, crate::blocked::OBSOLETE_CANCEL_REASON);
}
