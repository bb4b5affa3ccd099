//! Node-update evals of a system job coalesced per job (`leader/coalesce.rs`), played
//! through the `Sim`: storms of nodes joining while the job's eval waits, runs and
//! finishes; failovers between a node's entry and its eval's; a lost eval write.
//!
//! Every scenario ends by running the job's evals dry and checking that the last one
//! scheduled from state at or after the nodes' last change: no node's placement is lost.

use super::*;
use crate::broker::Dequeued;
use crate::state::Table;

/// One step of a scenario around the system job "agent".
#[derive(Clone, Copy, Debug)]
enum Do {
    /// `n` new nodes join at once: all register, report ready, then turn healthy.
    Join(u64),
    /// A worker takes the job's next eval.
    Dequeue,
    /// The worker finishes the eval it holds: writes it complete, scheduled from state at
    /// its wait index (the oldest state a worker may use), then acks it.
    Finish,
    /// The worker gives the eval it holds back.
    Nack,
}

/// What a scenario leaves in state before the evals are run dry.
#[derive(Debug, PartialEq)]
struct Left {
    /// The job's evals pending or blocked.
    live: usize,
    /// Node-update evals made for the job.
    made: usize,
}

/// The `Sim` with one system job and one worker.
struct Storm {
    sim: Sim,
    job: Job,
    next_node: u64,
    holding: Option<Dequeued>,
    /// The newest state any finished eval of the job was scheduled from.
    scheduled_from: Index,
}

impl Storm {
    fn new() -> Self {
        let mut sim = Sim::leading();
        // The new leader's pass over per-node jobs, before there are any.
        sim.advance(Duration::from_millis(1));
        let job = mock::system_job("agent");
        sim.register_job(&job, 1);
        Self {
            sim,
            job,
            next_node: 1,
            holding: None,
            scheduled_from: 0,
        }
    }

    fn run(&mut self, step: Do) {
        match step {
            Do::Join(n) => self.join(n),
            Do::Dequeue => {
                assert!(self.holding.is_none(), "the worker holds an eval");
                let d = self
                    .sim
                    .engine
                    .broker
                    .dequeue(
                        &[SchedulerType::System],
                        self.sim.now,
                        &mut self.sim.engine.rng,
                    )
                    .expect("an eval of the job is ready");
                self.holding = Some(d);
            }
            Do::Finish => {
                let d = self.holding.take().expect("the worker holds an eval");
                self.finish(d);
            }
            Do::Nack => {
                let d = self.holding.take().expect("the worker holds an eval");
                self.sim
                    .engine
                    .broker
                    .nack(d.eval.id, d.token, self.sim.now)
                    .unwrap();
            }
        }
    }

    fn join(&mut self, n: u64) {
        let nodes: Vec<u64> = (self.next_node..self.next_node + n).collect();
        self.next_node += n;
        for &i in &nodes {
            self.sim.register(i);
        }
        for &i in &nodes {
            self.sim.heartbeat(i);
        }
        self.sim.advance(SEC * 10);
        for &i in &nodes {
            self.sim.heartbeat(i);
            assert!(self.sim.node(i).is_schedulable(), "node {i} joined");
        }
    }

    fn finish(&mut self, d: Dequeued) {
        let mut done = (*d.eval).clone();
        done.status = EvalStatus::Complete;
        done.snapshot_index = d.wait_index;
        self.sim.write(Command::EvalUpsert { evals: vec![done] });
        self.sim
            .engine
            .broker
            .ack(d.eval.id, d.token, self.sim.now)
            .unwrap();
        self.scheduled_from = self.scheduled_from.max(d.wait_index);
    }

    fn left(&self) -> Left {
        let snap = self.sim.store.snapshot();
        let made = snap
            .evals_by_job(&self.job.key())
            .filter(|e| e.triggered_by == TriggeredBy::NodeUpdate)
            .count();
        Left {
            live: self.sim.live_evals("agent"),
            made,
        }
    }

    /// Runs the job's evals until none is left (waiting out back-offs); then the last one
    /// must have seen every node change.
    fn run_dry(&mut self) {
        if let Some(d) = self.holding.take() {
            self.finish(d);
        }
        for _ in 0..100 {
            while let Some(d) = self.sim.engine.broker.dequeue(
                &[SchedulerType::System],
                self.sim.now,
                &mut self.sim.engine.rng,
            ) {
                self.finish(d);
            }
            if self.sim.live_evals("agent") == 0 {
                break;
            }
            self.sim.advance(SEC);
        }
        assert_eq!(self.sim.live_evals("agent"), 0, "every eval ran");
        let nodes_changed = self.sim.store.snapshot().table_index(Table::Nodes);
        assert!(
            self.scheduled_from >= nodes_changed,
            "the job was last scheduled from index {}, nodes last changed at {nodes_changed}",
            self.scheduled_from
        );
    }
}

/// Plays `steps` around the system job and checks what is left, that the job never had
/// more than two evals pending in state, and that no node change went unseen.
fn check(steps: &[Do], want: Left) {
    let mut storm = Storm::new();
    for &step in steps {
        storm.run(step);
    }
    assert_eq!(storm.left(), want, "after {steps:?}");
    assert!(
        storm.sim.peak_live <= 2,
        "{steps:?}: the job had {} evals pending at once",
        storm.sim.peak_live
    );
    storm.run_dry();
}

#[test]
fn node_changes_join_the_waiting_eval_or_make_one_behind_the_running_one() {
    use Do::*;
    // A storm while the registration eval waits: it takes every node, nothing is written.
    check(&[Join(20)], Left { live: 1, made: 0 });
    // The same storm while the eval runs: exactly one more, waiting behind it.
    check(&[Dequeue, Join(20)], Left { live: 2, made: 1 });
    // The ack releases that one, which waits for state with every node.
    check(
        &[Dequeue, Join(20), Finish, Dequeue],
        Left { live: 1, made: 1 },
    );
    // A second storm while it runs: one more again.
    check(
        &[Dequeue, Join(10), Finish, Dequeue, Join(10)],
        Left { live: 2, made: 2 },
    );
    // Nodes trickling in while evals run: one per run, never more waiting.
    check(
        &[
            Dequeue,
            Join(1),
            Finish,
            Dequeue,
            Join(1),
            Finish,
            Dequeue,
            Join(1),
        ],
        Left { live: 2, made: 3 },
    );
    // An eval backing off after a nack runs again later: it takes the storm.
    check(&[Dequeue, Nack, Join(10)], Left { live: 1, made: 0 });
    // Nodes joining once everything ran: one eval.
    check(&[Dequeue, Finish, Join(10)], Left { live: 1, made: 1 });
    check(&[Dequeue, Finish], Left { live: 0, made: 0 });
}

#[test]
fn the_waiting_eval_is_handed_out_with_the_index_of_the_last_node_change() {
    let mut storm = Storm::new();
    storm.run(Do::Dequeue);
    storm.run(Do::Join(5));
    storm.run(Do::Finish);
    storm.run(Do::Dequeue);
    let d = storm.holding.as_ref().unwrap();
    let nodes_changed = storm.sim.store.snapshot().table_index(Table::Nodes);
    assert_eq!(d.eval.triggered_by, TriggeredBy::NodeUpdate);
    assert_eq!(d.eval.node_id, None, "it covers the whole job");
    assert!(d.wait_index >= nodes_changed);
}

#[test]
fn service_jobs_on_a_node_keep_their_eval_in_the_nodes_entry() {
    let mut sim = Sim::leading();
    sim.healthy_node(1);
    let web = mock::service_job("web", 1);
    let agent = mock::system_job("agent");
    sim.register_job(&web, 1);
    sim.register_job(&agent, 2);
    sim.place(&web, 1, 1);
    sim.place(&agent, 2, 1);
    let offline = sim
        .engine
        .node_offline(&sim.store.snapshot(), mock::node_id(1), true, sim.now)
        .unwrap()
        .unwrap();
    let evals: Vec<String> = offline
        .iter()
        .filter_map(|c| match c {
            Command::NodeOffline { evals, .. } => Some(evals),
            _ => None,
        })
        .flatten()
        .map(|e| e.job_id.to_string())
        .collect();
    assert_eq!(evals, ["web"], "the system job's eval is coalesced instead");
}

/// The old leader wrote a node change and stopped before its loop saw the entry: no eval
/// covers the node. The new leader's pass makes one.
#[test]
fn a_new_leader_evaluates_system_jobs_that_missed_a_node_change() {
    let mut old = Sim::leading();
    let agent = mock::system_job("agent");
    old.register_job(&agent, 1);
    let d = old
        .engine
        .broker
        .dequeue(&[SchedulerType::System], old.now, &mut old.engine.rng)
        .unwrap();
    let mut done = (*d.eval).clone();
    done.status = EvalStatus::Complete;
    done.snapshot_index = d.wait_index;
    old.write(Command::EvalUpsert { evals: vec![done] });
    // The node's entries are applied, the old leader never hears of them.
    let mut node = mock::node(1);
    node.status = NodeStatus::Ready;
    node.health = NodeHealth::Healthy;
    old.index += 1;
    apply(
        &mut old.store,
        old.index,
        Command::NodeRegister { node, now: old.now },
    )
    .unwrap();
    assert_eq!(old.live_evals("agent"), 0, "the gap: nothing covers node 1");

    let mut new = Sim::on(old.store.clone(), old.index);
    new.lead();
    new.advance(Duration::from_millis(1));
    assert_eq!(new.live_evals("agent"), 1, "the pass made one");
    let waits = new.deliveries();
    assert!(waits["agent"] >= old.index);
}

#[test]
fn a_new_leader_leaves_up_to_date_jobs_alone_and_raises_waiting_evals() {
    let mut old = Sim::leading();
    old.healthy_node(1);
    let done_job = mock::system_job("done");
    let waiting_job = mock::system_job("waiting");
    old.register_job(&done_job, 1);
    let d = old
        .engine
        .broker
        .dequeue(&[SchedulerType::System], old.now, &mut old.engine.rng)
        .unwrap();
    assert_eq!(d.eval.job_id.as_str(), "done");
    let mut done = (*d.eval).clone();
    done.status = EvalStatus::Complete;
    done.snapshot_index = old.index;
    old.write(Command::EvalUpsert { evals: vec![done] });
    old.register_job(&waiting_job, 2);
    old.heartbeat(1);

    let mut new = Sim::on(old.store.clone(), old.index);
    new.lead();
    let before = new.store.snapshot().eval_count();
    let at_lead = new.store.snapshot().latest_index();
    new.advance(Duration::from_millis(1));
    assert_eq!(
        new.store.snapshot().eval_count(),
        before,
        "no eval made: one job saw every node, the other has one waiting"
    );
    let waits = new.deliveries();
    assert!(!waits.contains_key("done"));
    assert!(waits["waiting"] >= at_lead);
}

#[test]
fn a_lost_eval_write_is_made_again() {
    let mut sim = Sim::leading();
    sim.advance(Duration::from_millis(1));
    let agent = mock::system_job("agent");
    sim.register_job(&agent, 1);
    let d = sim
        .engine
        .broker
        .dequeue(&[SchedulerType::System], sim.now, &mut sim.engine.rng)
        .unwrap();
    // A node change whose coalesced eval write fails.
    sim.register(1);
    let snap = sim.store.snapshot();
    let node = snap.node(&mock::node_id(1)).unwrap().clone();
    let outcome = sim
        .engine
        .node_heartbeat(&snap, &node, Readiness::Ready, sim.now)
        .unwrap()
        .unwrap();
    let mut actions = Vec::new();
    for cmd in outcome.commands {
        sim.index += 1;
        let events = apply(&mut sim.store, sim.index, cmd).unwrap();
        let snap = sim.store.snapshot();
        let step = sim
            .engine
            .on_events(&events, sim.established_at, &snap, sim.now);
        actions.extend(step.actions);
    }
    let [Action::CoalescedEvals(lost)] = &actions[..] else {
        panic!("one coalesced write: {actions:?}")
    };
    assert_eq!(sim.engine.coalescer.writing(), 1);
    sim.engine.coalesced_evals_lost(lost, sim.now);
    assert_eq!(sim.engine.coalescer.writing(), 0);
    assert_eq!(sim.live_evals("agent"), 1, "only the one in flight");

    sim.advance(crate::leader::coalesce::RETRY_AFTER);
    assert_eq!(sim.live_evals("agent"), 2, "made again");
    let mut done = (*d.eval).clone();
    done.status = EvalStatus::Complete;
    sim.write(Command::EvalUpsert { evals: vec![done] });
    sim.engine.broker.ack(d.eval.id, d.token, sim.now).unwrap();
    let waits = sim.deliveries();
    assert!(waits["agent"] >= sim.store.snapshot().table_index(Table::Nodes));
}
