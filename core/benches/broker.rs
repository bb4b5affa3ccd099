//! Eval broker throughput: enqueue -> dequeue -> ack cycles with 10,000 jobs queued.
//!
//! Each iteration dequeues the best ready eval, acks it, and enqueues that job's next eval
//! (a fresh id and create index), so the ready queues stay at 10,000 evals across all
//! five scheduler types throughout. Throughput is reported in cycles per second.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use drover_core::broker::{BrokerConfig, EvalBroker};
use drover_core::{EvalId, Evaluation, Job, JobType, SchedulerType, Timestamp, TriggeredBy};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const JOBS: u64 = 10_000;

fn eval(job: &Job, n: u64, rng: &mut impl Rng) -> Evaluation {
    let mut eval = Evaluation::new(
        EvalId::from_bytes(rng.random::<u128>().to_le_bytes()),
        job,
        TriggeredBy::JobRegister,
        Timestamp::ZERO,
    );
    eval.scheduler = SchedulerType::ALL[(n % 5) as usize];
    eval.priority = [30, 50, 70][(n % 3) as usize];
    eval.create_index = n;
    eval.modify_index = n;
    eval
}

fn cycles(c: &mut Criterion) {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut broker = EvalBroker::new(BrokerConfig::default());
    broker.set_enabled(true);
    let now = Timestamp::from_millis(1_700_000_000_000);
    for n in 0..JOBS {
        let job = Job::new(format!("job-{n}"), JobType::Service, Vec::new());
        broker.enqueue(eval(&job, n, &mut rng), now);
    }
    assert_eq!(broker.stats().total.ready, JOBS as usize);

    let mut next_index = JOBS;
    let mut group = c.benchmark_group("broker");
    group.throughput(Throughput::Elements(1));
    group.bench_function("enqueue_dequeue_ack_10k_jobs", |b| {
        b.iter(|| {
            let d = broker
                .dequeue(&SchedulerType::ALL, now, &mut rng)
                .expect("work is queued");
            broker.ack(d.eval.id, d.token, now).expect("fresh delivery");
            // The broker let go of the eval on ack, so this takes it back without a copy.
            let mut next = Arc::unwrap_or_clone(d.eval);
            next.id = EvalId::from_bytes(rng.random::<u128>().to_le_bytes());
            next_index += 1;
            next.create_index = next_index;
            next.modify_index = next_index;
            broker.enqueue(next, now);
        })
    });
    group.finish();
    assert_eq!(broker.stats().total.ready, JOBS as usize);
}

criterion_group!(benches, cycles);
criterion_main!(benches);
