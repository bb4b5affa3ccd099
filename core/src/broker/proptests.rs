//! Property tests: random sequences of broker calls keep the broker's promises.
//!
//! After every step: the internal structures and counters are consistent (recounted from
//! scratch), at most one eval per job is handed out, every token is new, and the broker
//! tracks exactly the evals the test enqueued and has not seen finish (acked, taken as
//! cancelable, or dropped by a disable), and a job whose waiting eval took a raised index
//! waits for it at its next delivery. At the end, draining the broker finishes every
//! eval it still held: nothing is lost or stuck.

use super::*;
use crate::{Job, JobKey, JobType, TriggeredBy};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

#[derive(Clone, Debug)]
enum Op {
    /// A new eval of job `job` (whose scheduler type follows from it).
    Enqueue {
        job: u8,
        priority: u8,
        wait_ms: Option<u16>,
    },
    /// Enqueue again an eval made earlier (tracked or finished).
    EnqueueAgain(usize),
    /// Dequeue for the scheduler types whose bits are set.
    Dequeue(u8),
    /// Calls on a delivery handed out earlier (possibly stale).
    Ack(usize),
    Nack(usize),
    Reset(usize),
    Pause(usize),
    Resume(usize),
    /// `enqueue_all` a newer copy of a delivered eval under its delivery's token.
    Requeue(usize),
    Advance(u32),
    TakeFailed,
    TakeCancelable(u8),
    SetEnabled(bool),
    /// A node change asks to join job `job`'s waiting eval at state index `index`.
    Raise {
        job: u8,
        index: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..5, prop::sample::select(vec![30u8, 50, 70]), prop::option::weighted(0.2, 0u16..3000))
            .prop_map(|(job, priority, wait_ms)| Op::Enqueue { job, priority, wait_ms }),
        1 => any::<usize>().prop_map(Op::EnqueueAgain),
        5 => (0u8..32).prop_map(Op::Dequeue),
        4 => any::<usize>().prop_map(Op::Ack),
        2 => any::<usize>().prop_map(Op::Nack),
        1 => any::<usize>().prop_map(Op::Reset),
        1 => any::<usize>().prop_map(Op::Pause),
        1 => any::<usize>().prop_map(Op::Resume),
        1 => any::<usize>().prop_map(Op::Requeue),
        3 => (0u32..15_000).prop_map(Op::Advance),
        2 => Just(Op::TakeFailed),
        2 => (0u8..4).prop_map(Op::TakeCancelable),
        1 => any::<bool>().prop_map(Op::SetEnabled),
        2 => (0u8..5, 0u16..3000).prop_map(|(job, index)| Op::Raise { job, index }),
    ]
}

/// The broker under test and what the test knows it should hold.
struct Model {
    broker: EvalBroker,
    rng: ChaCha8Rng,
    now: Timestamp,
    made: Vec<Evaluation>,
    deliveries: Vec<Dequeued>,
    tokens: HashSet<Token>,
    /// Evals the broker must track.
    live: HashSet<EvalId>,
    /// Requeues the broker accepted, by eval, with the delivery they wait on.
    requeued: HashMap<EvalId, Token>,
    /// Per job, the index its next delivery must wait for: the highest one a
    /// [`EvalBroker::raise_waiting`] accepted since its last delivery.
    raised: HashMap<JobKey, Index>,
}

impl Model {
    fn new() -> Self {
        // Short timers and a low limit, so that time-outs, back-offs and failures happen
        // within a few dozen steps.
        let config = BrokerConfig {
            nack_timeout: Duration::from_secs(10),
            delivery_limit: 2,
            initial_nack_delay: Duration::from_secs(1),
            subsequent_nack_delay: Duration::from_secs(5),
            ..BrokerConfig::default()
        };
        let mut broker = EvalBroker::new(config);
        broker.set_enabled(true);
        Self {
            broker,
            rng: ChaCha8Rng::seed_from_u64(11),
            now: Timestamp::from_millis(1_000_000),
            made: Vec::new(),
            deliveries: Vec::new(),
            tokens: HashSet::new(),
            live: HashSet::new(),
            requeued: HashMap::new(),
            raised: HashMap::new(),
        }
    }

    /// A delivery handed out earlier: for even `i` one of the last three (likely still
    /// current), for odd `i` any (likely stale).
    fn delivery(&self, i: usize) -> Option<Dequeued> {
        let len = self.deliveries.len();
        let at = match i % 2 {
            0 => len.checked_sub(1 + (i / 2) % len.clamp(1, 3))?,
            _ => i.checked_rem(len)?,
        };
        Some(self.deliveries[at].clone())
    }

    fn handed_out(&mut self, d: Dequeued) {
        assert!(
            self.tokens.insert(d.token),
            "token {} handed out twice",
            d.token
        );
        assert!(d.wait_index >= d.eval.modify_index);
        if let Some(floor) = self.raised.remove(&d.eval.job_key()) {
            assert!(
                d.wait_index >= floor,
                "{} delivered waiting for {}, below the raise to {floor}",
                d.eval.id,
                d.wait_index
            );
        }
        self.deliveries.push(d);
    }

    fn enqueued(&mut self, id: EvalId) {
        if self.broker.is_enabled() {
            self.live.insert(id);
        }
    }

    fn acked(&mut self, d: &Dequeued) {
        // A requeue held for this delivery puts the eval straight back.
        if self.requeued.remove(&d.eval.id) != Some(d.token) {
            self.live.remove(&d.eval.id);
        }
    }

    fn apply(&mut self, op: Op) {
        let now = self.now;
        match op {
            Op::Enqueue {
                job,
                priority,
                wait_ms,
            } => {
                let n = self.made.len() as u64 + 1;
                let job_spec = Job::new(format!("job-{job}"), JobType::Service, Vec::new());
                let id = EvalId::from_bytes((u128::from(n) << 96).to_be_bytes());
                let mut eval = Evaluation::new(id, &job_spec, TriggeredBy::JobRegister, now);
                eval.scheduler = SchedulerType::ALL[usize::from(job) % SchedulerType::ALL.len()];
                eval.priority = priority;
                eval.create_index = n;
                eval.modify_index = n;
                eval.wait = wait_ms.map(|ms| Duration::from_millis(ms.into()));
                self.made.push(eval.clone());
                self.broker.enqueue(eval, now);
                self.enqueued(id);
            }
            Op::EnqueueAgain(i) if !self.made.is_empty() => {
                let eval = self.made[i % self.made.len()].clone();
                let id = eval.id;
                self.broker.enqueue(eval, now);
                self.enqueued(id);
            }
            Op::Dequeue(mask) => {
                let types: Vec<SchedulerType> = SchedulerType::ALL
                    .into_iter()
                    .filter(|&t| mask & (1 << t as u8) != 0)
                    .collect();
                if let Some(d) = self.broker.dequeue(&types, now, &mut self.rng) {
                    assert!(types.contains(&d.eval.scheduler));
                    self.handed_out(d);
                }
            }
            Op::Ack(i) => {
                if let Some(d) = self.delivery(i) {
                    if self.broker.ack(d.eval.id, d.token, now).is_ok() {
                        self.acked(&d);
                    }
                }
            }
            Op::Nack(i) => {
                if let Some(d) = self.delivery(i) {
                    if self.broker.nack(d.eval.id, d.token, now).is_ok() {
                        self.requeued.remove(&d.eval.id);
                    }
                }
            }
            Op::Reset(i) | Op::Pause(i) | Op::Resume(i) => {
                if let Some(d) = self.delivery(i) {
                    let call = match op {
                        Op::Reset(_) => EvalBroker::outstanding_reset,
                        Op::Pause(_) => EvalBroker::pause_nack_timeout,
                        _ => EvalBroker::resume_nack_timeout,
                    };
                    let current = self.broker.outstanding(d.eval.id) == Some(d.token);
                    let result = call(&mut self.broker, d.eval.id, d.token, now);
                    assert_eq!(result.is_ok(), current, "{op:?}: {result:?}");
                }
            }
            Op::Requeue(i) => {
                if let Some(d) = self.delivery(i) {
                    let mut copy = (*d.eval).clone();
                    copy.modify_index += 1000;
                    if self.broker.outstanding(d.eval.id) == Some(d.token) {
                        self.requeued.insert(d.eval.id, d.token);
                    }
                    self.broker.enqueue_all([(copy, Some(d.token))], now);
                    self.enqueued(d.eval.id);
                }
            }
            Op::Advance(ms) => {
                self.now = now.saturating_add(Duration::from_millis(ms.into()));
                self.broker.tick(self.now);
            }
            Op::TakeFailed => {
                for d in self.broker.take_failed(now, &mut self.rng) {
                    self.handed_out(d);
                }
            }
            Op::TakeCancelable(max) => {
                for eval in self.broker.take_cancelable(max.into()) {
                    assert!(self.live.remove(&eval.id), "{} canceled twice", eval.id);
                    assert!(!self.requeued.contains_key(&eval.id));
                }
            }
            Op::SetEnabled(enabled) => {
                self.broker.set_enabled(enabled);
                if !enabled {
                    self.live.clear();
                    self.requeued.clear();
                    self.raised.clear();
                }
            }
            Op::Raise { job, index } => {
                let key = Job::new(format!("job-{job}"), JobType::Service, Vec::new()).key();
                let index = Index::from(index);
                if self
                    .broker
                    .raise_waiting(&key.namespace, key.id.as_str(), index)
                {
                    let floor = self.raised.entry(key).or_default();
                    *floor = (*floor).max(index);
                }
            }
            Op::EnqueueAgain(_) => {}
        }
        self.check();
    }

    fn check(&mut self) {
        self.broker.assert_consistent();
        assert_eq!(
            self.broker.tracked_ids(),
            self.live,
            "tracked evals differ from the model"
        );
        let broker = &self.broker;
        // Requeues die with their delivery (nacked by hand or by its timer).
        self.requeued
            .retain(|&id, &mut token| broker.outstanding(id) == Some(token));
        let mut running: HashSet<JobKey> = HashSet::new();
        for d in &self.deliveries {
            if broker.outstanding(d.eval.id) == Some(d.token) {
                assert!(
                    running.insert(d.eval.job_key()),
                    "two deliveries of job {}",
                    d.eval.job_key()
                );
            }
        }
    }

    /// Runs the broker dry, acking everything; every eval it held must finish.
    fn drain(&mut self) {
        self.broker.set_enabled(true);
        for d in self.deliveries.clone() {
            if self.broker.ack(d.eval.id, d.token, self.now).is_ok() {
                self.acked(&d);
            }
        }
        for _ in 0..100 {
            if self.broker.stats().total.tracked() == 0 {
                break;
            }
            self.now = self.now.saturating_add(Duration::from_secs(600));
            self.broker.tick(self.now);
            let mut out = Vec::new();
            while let Some(d) = self
                .broker
                .dequeue(&SchedulerType::ALL, self.now, &mut self.rng)
            {
                out.push(d);
            }
            out.extend(self.broker.take_failed(self.now, &mut self.rng));
            for d in out {
                self.broker
                    .ack(d.eval.id, d.token, self.now)
                    .expect("a fresh delivery acks");
                self.acked(&d);
            }
            for eval in self.broker.take_cancelable(usize::MAX) {
                self.live.remove(&eval.id);
            }
            self.check();
        }
        // The peak is a high-water mark: it outlives the evals it counted.
        assert_eq!(
            BrokerStats {
                peak_job_evals: 0,
                ..self.broker.stats()
            },
            BrokerStats::default(),
            "the broker did not drain"
        );
        assert!(self.live.is_empty(), "evals lost: {:?}", self.live);
        assert!(self.broker.tracked_ids().is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_call_sequences_keep_invariants(ops in prop::collection::vec(op(), 1..120)) {
        let mut model = Model::new();
        for op in ops {
            model.apply(op);
        }
        model.drain();
    }
}
