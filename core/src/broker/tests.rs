//! One test per rule of the broker (see BEHAVIOUR.md, "Eval broker").

use super::*;
use crate::{Job, JobType, TriggeredBy};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

use SchedulerType::{Batch, Core, Service, SysBatch, System};

const SECOND: Duration = Duration::from_secs(1);

/// A broker with a seeded rng, a clock and an eval factory.
struct Fixture {
    broker: EvalBroker,
    rng: ChaCha8Rng,
    now: Timestamp,
    next_index: Index,
}

impl Fixture {
    fn new() -> Self {
        Self::with_config(BrokerConfig::default())
    }

    fn with_config(config: BrokerConfig) -> Self {
        let mut broker = EvalBroker::new(config);
        broker.set_enabled(true);
        Self {
            broker,
            rng: ChaCha8Rng::seed_from_u64(7),
            now: Timestamp::from_millis(1_000_000),
            next_index: 1,
        }
    }

    /// A pending eval of `job` whose ids and indexes grow with each call.
    fn eval(&mut self, job: &str, sched: SchedulerType, priority: u8) -> Evaluation {
        let n = self.next_index;
        self.next_index += 1;
        let job = Job::new(job, JobType::Service, Vec::new());
        let mut eval = Evaluation::new(
            EvalId::from_bytes((u128::from(n) << 96).to_be_bytes()),
            &job,
            TriggeredBy::JobRegister,
            self.now,
        );
        eval.scheduler = sched;
        eval.priority = priority;
        eval.create_index = n;
        eval.modify_index = n;
        eval
    }

    fn enqueue(&mut self, eval: &Evaluation) {
        self.broker.enqueue(eval.clone(), self.now);
    }

    /// Makes and enqueues an eval; returns its id.
    fn add(&mut self, job: &str, sched: SchedulerType, priority: u8) -> EvalId {
        let eval = self.eval(job, sched, priority);
        self.enqueue(&eval);
        eval.id
    }

    fn dequeue(&mut self, types: &[SchedulerType]) -> Option<Dequeued> {
        self.broker.dequeue(types, self.now, &mut self.rng)
    }

    fn dequeue_all_types(&mut self) -> Option<Dequeued> {
        self.dequeue(&SchedulerType::ALL)
    }

    fn advance(&mut self, by: Duration) {
        self.now = self.now.saturating_add(by);
        self.broker.tick(self.now);
    }

    fn ack(&mut self, d: &Dequeued) -> Result<(), BrokerError> {
        self.broker.ack(d.eval.id, d.token, self.now)
    }

    fn nack(&mut self, d: &Dequeued) -> Result<(), BrokerError> {
        self.broker.nack(d.eval.id, d.token, self.now)
    }

    fn stats(&self) -> QueueCounts {
        self.broker.assert_consistent();
        self.broker.stats().total
    }
}

fn counts(ready: usize, unacked: usize, pending: usize, waiting: usize) -> QueueCounts {
    QueueCounts {
        ready,
        unacked,
        pending,
        waiting,
        ..QueueCounts::default()
    }
}

#[test]
fn priority_order() {
    // (priorities enqueued in this order, expected dequeue order by position)
    let cases: &[(&[u8], &[usize])] = &[
        (&[50, 70, 30], &[1, 0, 2]),
        (&[10, 20, 30, 40], &[3, 2, 1, 0]),
        (&[100, 100, 1], &[0, 1, 2]),
    ];
    for (priorities, expected) in cases {
        let mut f = Fixture::new();
        let ids: Vec<EvalId> = priorities
            .iter()
            .enumerate()
            .map(|(i, &p)| f.add(&format!("job-{i}"), Service, p))
            .collect();
        let got: Vec<EvalId> =
            std::iter::from_fn(|| f.dequeue(&[Service]).map(|d| d.eval.id)).collect();
        let want: Vec<EvalId> = expected.iter().map(|&i| ids[i]).collect();
        assert_eq!(got, want, "priorities {priorities:?}");
    }
}

#[test]
fn fifo_within_priority() {
    let mut f = Fixture::new();
    // Enqueued newest first: the create index, not arrival, decides.
    let mut evals: Vec<Evaluation> = (0..4)
        .map(|i| f.eval(&format!("job-{i}"), Batch, 50))
        .collect();
    // Two evals with the same create index fall back to the id order.
    evals[3].create_index = evals[2].create_index;
    for eval in evals.iter().rev() {
        f.enqueue(eval);
    }
    let got: Vec<EvalId> = std::iter::from_fn(|| f.dequeue(&[Batch]).map(|d| d.eval.id)).collect();
    let want: Vec<EvalId> = evals.iter().map(|e| e.id).collect();
    assert_eq!(got, want);
}

#[test]
fn fairness_across_tied_types() {
    let mut f = Fixture::new();
    for i in 0..200 {
        f.add(&format!("service-{i}"), Service, 50);
        f.add(&format!("batch-{i}"), Batch, 50);
    }
    // A higher priority elsewhere always wins, randomness or not.
    f.add("core", Core, 90);
    assert_eq!(
        f.dequeue(&[Service, Core, Batch]).unwrap().eval.scheduler,
        Core
    );

    let mut services = 0;
    for _ in 0..200 {
        // A type listed twice must not get twice the share.
        let d = f.dequeue(&[Service, Batch, Batch]).unwrap();
        services += usize::from(d.eval.scheduler == Service);
    }
    assert!(
        (70..=130).contains(&services),
        "service got {services} of 200 tied dequeues"
    );
}

#[test]
fn per_job_serialization() {
    let mut f = Fixture::new();
    let a1 = f.add("a", Service, 50);
    let a2 = f.add("a", Service, 50);
    let b1 = f.add("b", Service, 50);
    assert_eq!(f.stats(), counts(2, 0, 1, 0));

    let first = f.dequeue(&[Service]).unwrap();
    assert_eq!(first.eval.id, a1);
    assert_eq!(f.dequeue(&[Service]).unwrap().eval.id, b1);
    assert!(
        f.dequeue(&[Service]).is_none(),
        "a2 waits while a1 is unacked"
    );

    f.ack(&first).unwrap();
    let second = f.dequeue(&[Service]).unwrap();
    assert_eq!(second.eval.id, a2);
    assert_eq!(second.wait_index, second.eval.modify_index);
    assert_eq!(f.stats(), counts(0, 2, 0, 0));
}

#[test]
fn token_mismatch_refused() {
    type Call = fn(&mut EvalBroker, EvalId, Token, Timestamp) -> Result<(), BrokerError>;
    let calls: &[(&str, Call)] = &[
        ("ack", EvalBroker::ack),
        ("nack", EvalBroker::nack),
        ("outstanding_reset", EvalBroker::outstanding_reset),
        ("pause_nack_timeout", EvalBroker::pause_nack_timeout),
        ("resume_nack_timeout", EvalBroker::resume_nack_timeout),
    ];
    for (name, call) in calls {
        let mut f = Fixture::new();
        let d = f.add("a", Service, 50);
        let ready = f.add("b", Service, 10);
        let out = f.dequeue(&[Service]).unwrap();
        assert_eq!(out.eval.id, d);
        let wrong = Token::from_u128(out.token.as_u128() ^ 1);
        let now = f.now;

        let err = call(&mut f.broker, d, wrong, now).unwrap_err();
        assert_eq!(err, BrokerError::TokenMismatch(d), "{name}");
        assert_eq!(err.to_string(), format!("token mismatch for eval {d}"));
        let err = call(&mut f.broker, ready, out.token, now).unwrap_err();
        assert_eq!(err, BrokerError::NotOutstanding(ready), "{name}");
        assert_eq!(err.to_string(), format!("eval {ready} is not outstanding"));
        assert_eq!(
            f.broker.outstanding(d),
            Some(out.token),
            "{name} left the delivery alone"
        );

        f.broker.set_enabled(false);
        let err = call(&mut f.broker, d, out.token, now).unwrap_err();
        assert_eq!(
            (err, err.to_string().as_str()),
            (BrokerError::Disabled, "broker is disabled")
        );
    }
}

#[test]
fn ack_after_nack_timeout_refused() {
    let mut f = Fixture::new();
    f.add("a", Service, 50);
    let d = f.dequeue(&[Service]).unwrap();
    // No tick in between: the call itself sees the timer has fired.
    f.now = f.now.saturating_add(f.broker.config().nack_timeout);
    let err = f.ack(&d).unwrap_err();
    assert_eq!(err, BrokerError::NackTimeoutReached(d.eval.id));
    assert_eq!(
        err.to_string(),
        format!("nack timeout reached for eval {}", d.eval.id)
    );
    assert_eq!(
        f.stats(),
        counts(0, 0, 0, 1),
        "nacked by the timer, backing off"
    );

    // Redelivered under a new token; the old one stays refused.
    f.advance(SECOND);
    let again = f.dequeue(&[Service]).unwrap();
    assert_eq!(again.eval.id, d.eval.id);
    assert_ne!(again.token, d.token);
    assert_eq!(f.ack(&d), Err(BrokerError::NackTimeoutReached(d.eval.id)));
    f.ack(&again).unwrap();
    assert_eq!(f.ack(&again), Err(BrokerError::NotOutstanding(d.eval.id)));
}

#[test]
fn nack_delays() {
    let config = BrokerConfig::default();
    for (deliveries, delay) in [(0, 0), (1, 1), (2, 20), (3, 40), (5, 80)] {
        assert_eq!(
            config.nack_delay(deliveries),
            SECOND * delay,
            "after delivery {deliveries}"
        );
    }

    let mut f = Fixture::with_config(BrokerConfig {
        delivery_limit: 10,
        ..config
    });
    let id = f.add("a", Service, 50);
    for delivery in 1..=3u32 {
        let d = f.dequeue(&[Service]).unwrap();
        f.nack(&d).unwrap();
        let delay = f.broker.config().nack_delay(delivery);
        assert_eq!(f.broker.next_deadline(), Some(f.now.saturating_add(delay)));
        f.advance(delay - Duration::from_millis(1));
        assert!(
            f.dequeue(&[Service]).is_none(),
            "ready before its back-off after {delivery}"
        );
        f.advance(Duration::from_millis(1));
        assert_eq!(f.stats(), counts(1, 0, 0, 0));
        assert_eq!(f.broker.evals[&id].deliveries, delivery);
    }
}

#[test]
fn delivery_limit_to_failed_and_follow_up() {
    let mut f = Fixture::new();
    let id = f.add("a", Batch, 50);
    let next = f.add("a", Batch, 50);
    for _ in 0..3 {
        f.advance(SECOND * 60);
        let d = f.dequeue(&[Batch]).unwrap();
        assert_eq!(d.eval.id, id);
        f.nack(&d).unwrap();
    }
    let stats = f.broker.stats();
    assert_eq!(
        stats.total,
        QueueCounts {
            failed: 1,
            pending: 1,
            ..QueueCounts::default()
        }
    );
    assert_eq!(stats.for_type(Batch).failed, 1);
    assert!(
        f.dequeue(&[Batch]).is_none(),
        "a failed eval still holds its job"
    );

    let taken = f.broker.take_failed(f.now, &mut f.rng);
    assert_eq!(taken.len(), 1);
    assert_eq!(f.stats(), counts(0, 1, 1, 0));
    let config = f.broker.config().clone();
    let out = failed_follow_up(&taken[0].eval, &config, f.now, &mut f.rng);
    assert_eq!(out.failed.status, EvalStatus::Failed);
    assert_eq!(
        out.failed.status_description,
        "evaluation reached delivery limit (3)"
    );
    assert_eq!(out.failed.next_eval, Some(out.follow_up.id));
    let fu = &out.follow_up;
    assert_eq!(
        (fu.status, fu.triggered_by),
        (EvalStatus::Pending, TriggeredBy::FailedFollowUp)
    );
    assert_eq!(
        (fu.previous_eval, &fu.job_id, fu.scheduler),
        (Some(id), &taken[0].eval.job_id, Batch)
    );
    let wait = fu.wait.unwrap();
    assert!(
        wait >= SECOND * 60 && wait < SECOND * 360,
        "follow-up waits {wait:?}"
    );
    assert_ne!(fu.id, id);

    // The leader's ack releases the job to its next eval.
    f.ack(&taken[0]).unwrap();
    assert_eq!(f.dequeue(&[Batch]).unwrap().eval.id, next);

    // A failed eval the leader took but never acked returns to the failed queue.
    let mut f = Fixture::with_config(BrokerConfig {
        delivery_limit: 1,
        ..BrokerConfig::default()
    });
    f.add("b", Service, 50);
    let d = f.dequeue(&[Service]).unwrap();
    f.nack(&d).unwrap();
    assert_eq!(f.broker.take_failed(f.now, &mut f.rng).len(), 1);
    f.advance(f.broker.config().nack_timeout);
    assert_eq!(f.broker.stats().total.failed, 1);
}

#[test]
fn nack_timer_pause_resume() {
    let mut f = Fixture::new();
    let id = f.add("a", Service, 50);
    let d = f.dequeue(&[Service]).unwrap();
    f.broker.pause_nack_timeout(id, d.token, f.now).unwrap();
    f.broker.pause_nack_timeout(id, d.token, f.now).unwrap();
    assert_eq!(
        f.broker.next_deadline(),
        None,
        "a paused delivery has no timer"
    );
    f.advance(SECOND * 600);
    assert_eq!(f.broker.outstanding(id), Some(d.token));

    f.broker.resume_nack_timeout(id, d.token, f.now).unwrap();
    assert_eq!(
        f.broker.next_deadline(),
        Some(f.now.saturating_add(SECOND * 60))
    );
    f.advance(SECOND * 59);
    assert_eq!(f.broker.outstanding(id), Some(d.token));
    f.advance(SECOND);
    assert_eq!(f.broker.outstanding(id), None);
    assert_eq!(
        f.broker.pause_nack_timeout(id, d.token, f.now),
        Err(BrokerError::NackTimeoutReached(id))
    );
}

#[test]
fn outstanding_reset_extends_timer() {
    let mut f = Fixture::new();
    let id = f.add("a", Service, 50);
    let d = f.dequeue(&[Service]).unwrap();
    f.advance(SECOND * 50);
    f.broker.outstanding_reset(id, d.token, f.now).unwrap();
    f.advance(SECOND * 50);
    assert_eq!(
        f.broker.outstanding(id),
        Some(d.token),
        "reset at 50 s moved the timeout to 110 s"
    );
    f.advance(SECOND * 10);
    assert_eq!(f.broker.outstanding(id), None);
    assert_eq!(
        f.broker.outstanding_reset(id, d.token, f.now),
        Err(BrokerError::NackTimeoutReached(id))
    );

    // While paused, a reset confirms the delivery but does not start the timer.
    f.advance(SECOND);
    let d = f.dequeue(&[Service]).unwrap();
    f.broker.pause_nack_timeout(id, d.token, f.now).unwrap();
    f.broker.outstanding_reset(id, d.token, f.now).unwrap();
    assert_eq!(f.broker.next_deadline(), None);
}

#[test]
fn wait_and_wait_until() {
    let mut f = Fixture::new();
    let t0 = f.now;
    // (job, wait, wait_until offset from t0 in seconds, due offset from t0 in seconds)
    let cases: &[(&str, Option<u64>, Option<i64>, u32)] = &[
        ("wait", Some(5), None, 5),
        ("until", None, Some(8), 8),
        ("both-wait-later", Some(12), Some(3), 12),
        ("both-until-later", Some(2), Some(15), 15),
        ("until-past", None, Some(-100), 0),
        ("zero-wait", Some(0), None, 0),
    ];
    let mut due = Vec::new();
    for &(job, wait, until, at) in cases {
        let mut eval = f.eval(job, Service, 50);
        eval.wait = wait.map(Duration::from_secs);
        eval.wait_until = until.map(|s| Timestamp::from_millis((t0.0 as i64 + s * 1000) as u64));
        f.enqueue(&eval);
        due.push((at, eval.id));
    }
    assert_eq!(f.stats(), counts(2, 0, 0, 4));
    assert_eq!(
        f.broker.next_deadline(),
        Some(t0.saturating_add(SECOND * 5))
    );

    due.sort();
    let mut elapsed = 0;
    for (at, id) in due {
        if at > elapsed {
            f.advance(SECOND * (at - elapsed) - Duration::from_millis(1));
            assert!(f.dequeue(&[Service]).is_none(), "{id} ready before {at} s");
            f.advance(Duration::from_millis(1));
            elapsed = at;
        }
        assert_eq!(
            f.dequeue(&[Service]).map(|d| d.eval.id),
            Some(id),
            "due at {at} s"
        );
    }

    // A delayed eval of a busy job waits behind its outstanding eval once due.
    let busy = f.add("busy", Batch, 50);
    let mut later = f.eval("busy", Batch, 50);
    later.wait = Some(SECOND);
    f.enqueue(&later);
    f.advance(SECOND);
    assert_eq!(f.broker.stats().for_type(Batch), &counts(1, 0, 1, 0));
    assert_eq!(f.dequeue(&[Batch]).unwrap().eval.id, busy);
}

#[test]
fn requeue_on_ack_and_dropped_on_nack() {
    for acked in [true, false] {
        let mut f = Fixture::new();
        let id = f.add("a", Service, 50);
        let d = f.dequeue(&[Service]).unwrap();
        let mut unblocked = (*d.eval).clone();
        unblocked.status_description = "unblocked".into();
        unblocked.modify_index += 10;
        let wrong = Token::from_u128(d.token.as_u128() ^ 1);
        f.broker.enqueue_all(
            [
                (unblocked.clone(), Some(wrong)),
                (unblocked.clone(), Some(d.token)),
            ],
            f.now,
        );
        assert_eq!(f.stats(), counts(0, 1, 0, 0), "held, not enqueued");

        if acked {
            f.ack(&d).unwrap();
            assert_eq!(f.stats(), counts(1, 0, 0, 0));
            let again = f.dequeue(&[Service]).unwrap();
            assert_eq!(
                (again.eval.id, again.eval.status_description.as_str()),
                (id, "unblocked")
            );
            assert_eq!(again.wait_index, unblocked.modify_index);
            f.ack(&again).unwrap();
            assert_eq!(f.stats(), QueueCounts::default(), "requeued only once");
        } else {
            f.nack(&d).unwrap();
            f.advance(SECOND);
            let again = f.dequeue(&[Service]).unwrap();
            assert_eq!(
                (again.eval.id, again.eval.status_description.as_str()),
                (id, "")
            );
            f.ack(&again).unwrap();
            assert_eq!(f.stats(), QueueCounts::default(), "the requeue was dropped");
        }
    }
}

/// Pending evals collapse as they arrive (Nomad 1.4's fix for registration storms): a job
/// holds at most one ready-or-running eval and one pending one, and each newcomer either
/// replaces the pending one or is superseded by it at once.
#[test]
fn collapse_on_arrival() {
    let mut f = Fixture::new();
    f.add("a", Service, 50);
    let mut pending = Vec::new();
    for (priority, modify_index) in [(50, 10), (70, 5), (70, 9), (60, 20), (30, 30)] {
        let mut eval = f.eval("a", Service, priority);
        eval.modify_index = modify_index;
        f.enqueue(&eval);
        pending.push(eval.id);
        assert_eq!(
            f.stats().pending,
            1,
            "one pending eval per job at any moment"
        );
    }
    // Highest priority wins, then the highest modify index.
    let survivor = pending[2];
    assert_eq!(
        f.stats(),
        QueueCounts {
            ready: 1,
            pending: 1,
            cancelable: 4,
            ..QueueCounts::default()
        }
    );
    assert_eq!(f.broker.stats().peak_job_evals, 2);
    let d = f.dequeue(&[Service]).unwrap();
    f.ack(&d).unwrap();
    assert_eq!(
        f.stats(),
        QueueCounts {
            ready: 1,
            cancelable: 4,
            ..QueueCounts::default()
        }
    );
    assert_eq!(f.dequeue(&[Service]).unwrap().eval.id, survivor);
    let mut canceled: Vec<EvalId> = f.broker.take_cancelable(10).iter().map(|e| e.id).collect();
    canceled.sort();
    let mut want: Vec<EvalId> = pending.into_iter().filter(|&id| id != survivor).collect();
    want.sort();
    assert_eq!(canceled, want);
    assert_eq!(f.stats().cancelable, 0);
}

#[test]
fn cancel_batches_paced() {
    assert_eq!(BrokerConfig::default().cancel_batch_size, CANCEL_BATCH_SIZE);
    assert_eq!(BrokerConfig::default().cancel_sweep_interval, SECOND * 5);

    let config = BrokerConfig {
        cancel_batch_size: 3,
        ..BrokerConfig::default()
    };
    let mut f = Fixture::with_config(config);
    f.add("a", Service, 50);
    for _ in 0..11 {
        f.add("a", Service, 50);
    }
    // Superseded as they arrived: ten cancelable before any ack, the first sweep due now.
    assert_eq!(f.stats().cancelable, 10);
    assert_eq!(f.broker.next_cancel_sweep(), Some(Timestamp::ZERO));
    let d = f.dequeue(&[Service]).unwrap();
    f.ack(&d).unwrap();
    assert_eq!(f.stats().cancelable, 10);

    // (what the reaper does, seconds since the ack, batch size it gets)
    let steps: &[(&str, u32, usize)] = &[
        ("ack", 0, 3),
        ("sweep", 0, 3),
        ("sweep", 1, 0),
        ("sweep", 4, 0),
        ("sweep", 5, 3),
        ("ack", 6, 1),
        ("ack", 7, 0),
        ("sweep", 20, 0),
    ];
    let t0 = f.now;
    for &(what, at, want) in steps {
        let now = t0.saturating_add(SECOND * at);
        let batch = match what {
            "ack" => f.broker.cancel_batch_after_ack(),
            _ => f.broker.sweep_cancelable(now),
        };
        assert_eq!(batch.len(), want, "{what} at {at} s");
        assert!(batch.iter().all(|e| e.status == EvalStatus::Pending));
    }
    assert_eq!(f.broker.next_cancel_sweep(), None);
    assert_eq!(f.stats(), counts(1, 0, 0, 0));
}

#[test]
fn enqueue_duplicate_is_noop() {
    let mut f = Fixture::with_config(BrokerConfig {
        delivery_limit: 1,
        ..BrokerConfig::default()
    });
    // One eval in each state.
    let ready = f.eval("ready", Service, 10);
    let unacked = f.eval("unacked", Service, 90);
    let pending = f.eval("unacked", Service, 90);
    let mut waiting = f.eval("waiting", Service, 50);
    waiting.wait = Some(SECOND * 30);
    let failed = f.eval("failed", Batch, 50);
    for eval in [&ready, &unacked, &pending, &waiting, &failed] {
        f.enqueue(eval);
    }
    let d = f.dequeue(&[Batch]).unwrap();
    f.nack(&d).unwrap();
    let d = f.dequeue(&[Service]).unwrap();
    assert_eq!(d.eval.id, unacked.id);
    let before = f.stats();
    assert_eq!(
        before,
        QueueCounts {
            ready: 1,
            unacked: 1,
            pending: 1,
            waiting: 1,
            failed: 1,
            cancelable: 0
        }
    );

    for eval in [&ready, &unacked, &pending, &waiting, &failed] {
        let mut copy = eval.clone();
        copy.priority = 100;
        copy.wait = None;
        f.enqueue(&copy);
        f.broker.enqueue_all([(copy, None)], f.now);
        assert_eq!(f.stats(), before, "re-enqueue of {}", eval.job_id);
    }
    assert_eq!(f.broker.outstanding(unacked.id), Some(d.token));

    // Terminal evals are never tracked.
    for status in [
        EvalStatus::Complete,
        EvalStatus::Failed,
        EvalStatus::Canceled,
    ] {
        let mut eval = f.eval("done", Service, 50);
        eval.status = status;
        f.enqueue(&eval);
        assert_eq!(f.stats(), before, "{status} eval");
    }
}

#[test]
fn disable_drops_and_restore() {
    let mut f = Fixture::new();
    let mut delayed = f.eval("d", System, 50);
    delayed.wait = Some(SECOND);
    f.enqueue(&delayed);
    f.add("a", Service, 50);
    f.add("a", Service, 50);
    f.add("b", Batch, 50);
    let d = f.dequeue(&[Batch]).unwrap();
    assert_ne!(f.stats(), QueueCounts::default());

    f.broker.set_enabled(false);
    assert_eq!(f.stats(), QueueCounts::default());
    assert_eq!(f.broker.next_deadline(), None);
    assert!(!f.broker.has_ready(&SchedulerType::ALL));
    assert!(f.dequeue_all_types().is_none());
    assert_eq!(f.ack(&d), Err(BrokerError::Disabled));
    f.add("c", Service, 50);
    assert_eq!(
        f.stats(),
        QueueCounts::default(),
        "a disabled broker takes nothing"
    );
    assert!(f.broker.take_failed(f.now, &mut f.rng).is_empty());

    // The new leader restores from state: the oldest eval of each job runs first.
    let newer = f.eval("x", SysBatch, 50);
    let older = f.eval("x", SysBatch, 50);
    let (mut newer, mut older) = (newer, older);
    std::mem::swap(&mut newer.create_index, &mut older.create_index);
    let mut blocked = f.eval("y", Service, 50);
    blocked.status = EvalStatus::Blocked;
    let mut complete = f.eval("z", Service, 50);
    complete.status = EvalStatus::Complete;
    f.broker
        .restore([newer.clone(), blocked, complete, older.clone()], f.now);
    assert!(f.broker.is_enabled());
    assert_eq!(f.stats(), counts(1, 0, 1, 0));
    let d = f.dequeue_all_types().unwrap();
    assert_eq!(d.eval.id, older.id);
    assert_ne!(f.broker.outstanding(d.eval.id), None);
}

#[test]
fn stats_per_type() {
    let mut f = Fixture::with_config(BrokerConfig {
        delivery_limit: 1,
        ..BrokerConfig::default()
    });
    f.add("s1", Service, 50);
    f.add("s2", Service, 50);
    f.add("s2", Service, 50);
    f.add("b1", Batch, 50);
    f.add("sys", System, 50);
    let mut later = f.eval("sb", SysBatch, 50);
    later.wait = Some(SECOND);
    f.enqueue(&later);
    f.add("gc", Core, 50);
    let d = f.dequeue(&[Batch]).unwrap();
    f.dequeue(&[System]).unwrap();
    f.nack(&d).unwrap();

    let stats = f.broker.stats();
    let want = [
        (Service, counts(2, 0, 1, 0)),
        (
            Batch,
            QueueCounts {
                failed: 1,
                ..QueueCounts::default()
            },
        ),
        (System, counts(0, 1, 0, 0)),
        (SysBatch, counts(0, 0, 0, 1)),
        (Core, counts(1, 0, 0, 0)),
    ];
    for (t, counts) in want {
        assert_eq!(stats.for_type(t), &counts, "{t}");
    }
    assert_eq!(stats.iter().count(), SchedulerType::ALL.len());
    assert_eq!(
        stats.total,
        QueueCounts {
            ready: 3,
            unacked: 1,
            pending: 1,
            waiting: 1,
            failed: 1,
            cancelable: 0
        }
    );
    assert_eq!(stats.total.tracked(), 7);
    f.broker.assert_consistent();
}

#[test]
fn token_round_trips_as_uuid_text() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let token = Token::generate(42, &mut rng);
    let text = token.to_string();
    assert_eq!(text.len(), 36);
    assert_eq!(text.parse::<Token>().unwrap(), token);
    assert_eq!(token.as_u128() as u64, 42);
}

#[test]
fn a_paused_broker_takes_evals_in_but_hands_none_out_until_resumed() {
    let mut f = Fixture::new();
    f.broker.set_paused(true);
    assert!(f.broker.is_paused());
    let low = f.add("low", Service, 20);
    let high = f.add("high", Service, 80);
    assert_eq!(f.stats(), counts(2, 0, 0, 0), "enqueues are accepted");
    assert!(!f.broker.has_ready(&[Service]));
    assert!(
        f.dequeue_all_types().is_none(),
        "a paused broker hands out nothing"
    );
    f.advance(SECOND);
    assert!(f.dequeue_all_types().is_none());
    f.broker.set_paused(false);
    assert!(f.broker.has_ready(&[Service]));
    let got: Vec<EvalId> =
        std::iter::from_fn(|| f.dequeue(&[Service]).map(|d| d.eval.id)).collect();
    assert_eq!(got, vec![high, low], "resuming keeps the usual order");
}

/// Where job "j"'s evals stand when a node change asks to join its waiting eval.
#[derive(Clone, Copy, Debug)]
enum JobIs {
    Unknown,
    Ready,
    Unacked,
    PendingBehindUnacked,
    BackingOffAfterNack,
    DelayedByItsOwnWait,
    Failed,
    Idle,
}

/// Puts job "j" in `state`, asks [`EvalBroker::raise_waiting`] to index 1000, and checks the
/// answer and the wait index of the job's next delivery (`None`: nothing left to deliver).
fn check_raise(state: JobIs, joins: bool, next_wait: Option<Index>) {
    let mut f = Fixture::with_config(BrokerConfig {
        delivery_limit: 1,
        ..BrokerConfig::default()
    });
    let first = f.eval("j", Service, 50);
    let mut in_flight = None;
    match state {
        JobIs::Unknown => {}
        JobIs::Ready => f.enqueue(&first),
        JobIs::Unacked | JobIs::PendingBehindUnacked => {
            f.enqueue(&first);
            in_flight = f.dequeue_all_types();
            if let JobIs::PendingBehindUnacked = state {
                f.add("j", Service, 50);
            }
        }
        JobIs::BackingOffAfterNack => {
            f.broker.config.delivery_limit = 3;
            f.enqueue(&first);
            let d = f.dequeue_all_types().unwrap();
            f.nack(&d).unwrap();
        }
        JobIs::DelayedByItsOwnWait => {
            let mut e = first.clone();
            e.wait = Some(SECOND * 30);
            f.enqueue(&e);
        }
        JobIs::Failed => {
            f.enqueue(&first);
            let d = f.dequeue_all_types().unwrap();
            f.nack(&d).unwrap();
        }
        JobIs::Idle => {
            f.enqueue(&first);
            let d = f.dequeue_all_types().unwrap();
            f.ack(&d).unwrap();
        }
    }
    let ns = first.namespace.clone();
    assert_eq!(
        f.broker.raise_waiting(&ns, "j", 1000),
        joins,
        "{state:?}: joins the waiting eval"
    );
    f.broker.assert_consistent();
    if let Some(d) = in_flight {
        assert!(
            d.wait_index < 1000,
            "{state:?}: a delivery made before is unchanged"
        );
        f.ack(&d).unwrap();
    }
    f.advance(SECOND * 60);
    let mut next = f.dequeue_all_types();
    if let JobIs::Failed = state {
        next = f.broker.take_failed(f.now, &mut f.rng).pop();
    }
    assert_eq!(
        next.map(|d| d.wait_index),
        next_wait,
        "{state:?}: wait index of the next delivery"
    );
}

#[test]
fn a_node_change_joins_only_an_eval_still_to_be_handed_out() {
    // Evals get modify indexes 1, 2, ...: an unraised delivery waits for its own.
    check_raise(JobIs::Unknown, false, None);
    check_raise(JobIs::Idle, false, None);
    check_raise(JobIs::Ready, true, Some(1000));
    check_raise(JobIs::PendingBehindUnacked, true, Some(1000));
    check_raise(JobIs::BackingOffAfterNack, true, Some(1000));
    // A new eval must be made for these: the handed-out one may hold an older snapshot,
    // the delayed one would hold the change back for its whole wait, the failed one never
    // runs again.
    check_raise(JobIs::Unacked, false, None);
    check_raise(JobIs::DelayedByItsOwnWait, false, Some(1));
    check_raise(JobIs::Failed, false, Some(1));
}

#[test]
fn a_raised_index_outlives_the_collapse_of_pending_evals() {
    let mut f = Fixture::new();
    f.add("j", Service, 50);
    let first = f.dequeue_all_types().unwrap();
    f.add("j", Service, 50);
    let ns = first.eval.namespace.clone();
    assert!(f.broker.raise_waiting(&ns, "j", 500));
    // A newer eval supersedes the raised one; the job keeps the raised index.
    let newer = f.add("j", Service, 50);
    f.ack(&first).unwrap();
    let next = f.dequeue_all_types().unwrap();
    assert_eq!((next.eval.id, next.wait_index), (newer, 500));
    assert_eq!(
        f.stats(),
        QueueCounts {
            cancelable: 1,
            ..counts(0, 1, 0, 0)
        }
    );
    // Once the job has no eval left, the raise is forgotten with it.
    f.ack(&next).unwrap();
    let again = f.add("j", Service, 50);
    let d = f.dequeue_all_types().unwrap();
    assert_eq!((d.eval.id, d.wait_index), (again, d.eval.modify_index));
    assert!(!f.broker.raise_waiting(&ns, "j", 600), "handed out");
    let disabled = {
        f.broker.set_enabled(false);
        f.broker.raise_waiting(&ns, "j", 700)
    };
    assert!(!disabled, "a disabled broker has nothing waiting");
}
