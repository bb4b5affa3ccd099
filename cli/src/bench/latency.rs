//! `drover bench --scenario latency`: how long one small job takes from the `Register`
//! call to its evaluation's COMPLETE event on idle nodes, one job at a time, and where
//! that time goes as the client sees it on the event stream:
//!
//! ```text
//!  Register call ──▶ answered ──▶ first allocation event ──▶ eval COMPLETE event
//!  └─ commit: the job and its eval in the Raft log
//!                    └─ schedule: broker hand-off, scheduling, plan apply, event delivery
//!                                                  └─ finish: the eval's update written
//! ```

use super::error::BenchError;
use super::progress::Progress;
use super::report::secs;
use super::server_figures::ServerFigures;
use super::workload::Workload;
use crate::client::Client;
use crate::error::rpc_failed;
use drover_proto::v1 as pb;
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Duration;
use tokio::time::Instant;

/// Percentiles of one phase, in milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Spread {
    /// Nearest-rank percentiles of `samples`; zeros when there are none.
    pub fn of(samples: &[Duration]) -> Spread {
        let mut ms: Vec<f64> = samples.iter().map(|d| secs(*d) * 1000.0).collect();
        ms.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            if ms.is_empty() {
                return 0.0;
            }
            let i = ((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1;
            (ms[i] * 1000.0).round() / 1000.0
        };
        Spread {
            p50_ms: rank(0.50),
            p90_ms: rank(0.90),
            p99_ms: rank(0.99),
            max_ms: rank(1.0),
        }
    }
}

/// What the latency scenario measured.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyReport {
    pub scenario: &'static str,
    pub server_address: String,
    pub nodes: u64,
    pub samples: u64,
    pub count_per_job: u64,
    /// Register call → eval COMPLETE event.
    pub total: Spread,
    /// Register call → its answer (the job and its eval committed).
    pub commit: Spread,
    /// Answer → the first allocation event of the job (plan committed and delivered).
    pub schedule: Spread,
    /// First allocation event → the eval's COMPLETE event.
    pub finish: Spread,
    /// The server's own figures over the timed jobs.
    pub server: ServerFigures,
}

impl LatencyReport {
    pub fn render(&self) -> String {
        let mut text = format!(
            "latency: {} jobs of {} allocations, one at a time, on {} idle nodes ({})\n\n",
            self.samples, self.count_per_job, self.nodes, self.server_address
        );
        let _ = writeln!(
            text,
            "{:<10} {:>9} {:>9} {:>9} {:>9}",
            "phase (ms)", "p50", "p90", "p99", "max"
        );
        for (name, s) in [
            ("total", &self.total),
            ("commit", &self.commit),
            ("schedule", &self.schedule),
            ("finish", &self.finish),
        ] {
            let _ = writeln!(
                text,
                "{name:<10} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
                s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms
            );
        }
        text.push('\n');
        text.push_str(&crate::output::key_values(&self.server.pairs()));
        text
    }
}

/// One job's three marks, from its Register call.
#[derive(Clone, Copy, Debug)]
struct Marks {
    answered: Duration,
    first_alloc: Duration,
    complete: Duration,
}

/// Registers `workload.jobs` jobs one after the other and times each.
pub async fn measure(
    client: &Client,
    workload: &Workload,
    deadline: Instant,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<LatencyReport, BenchError> {
    let topics = [pb::Topic::Evaluation, pb::Topic::Allocation]
        .into_iter()
        .map(|t| pb::TopicFilter {
            topic: t.into(),
            keys: Vec::new(),
        })
        .collect();
    let mut stream = client
        .events()
        .subscribe(pb::SubscribeRequest {
            from_index: 0,
            topics,
        })
        .await
        .map_err(rpc_failed("subscribing to events"))?
        .into_inner();
    let mut marks = Vec::new();
    for n in 0..workload.jobs {
        progress.tick(|| format!("{n} of {} jobs timed", workload.jobs));
        let job = workload.job(n);
        let job_id = job.id.to_string();
        let started = Instant::now();
        let answer = client
            .jobs()
            .register(pb::RegisterJobRequest {
                job: Some((&job).into()),
                enforce_index: None,
            })
            .await
            .map_err(|s| BenchError::Register {
                job: job_id.clone(),
                message: s.message().to_string(),
            })?
            .into_inner();
        let answered = started.elapsed();
        let mut first_alloc = None;
        let complete = loop {
            let batch = tokio::time::timeout_at(deadline, stream.message())
                .await
                .map_err(|_| BenchError::Deadline {
                    what: "jobs timed",
                    done: u64::from(n),
                    wanted: u64::from(workload.jobs),
                    timeout,
                })?
                .map_err(rpc_failed("following events"))?
                .ok_or_else(|| BenchError::Setting {
                    flag: "--scenario latency",
                    reason: "the server ended the event stream".into(),
                })?;
            let mut done = None;
            for event in batch.events {
                match event.payload {
                    Some(pb::event::Payload::Allocation(a))
                        if a.job_id == job_id && first_alloc.is_none() =>
                    {
                        first_alloc = Some(started.elapsed());
                    }
                    Some(pb::event::Payload::Evaluation(e))
                        if e.id == answer.eval_id
                            && e.status == pb::EvalStatus::Complete as i32 =>
                    {
                        done = Some(started.elapsed());
                    }
                    _ => {}
                }
            }
            if let Some(at) = done {
                break at;
            }
        };
        marks.push(Marks {
            answered,
            first_alloc: first_alloc.unwrap_or(complete),
            complete,
        });
    }
    let phase = |f: fn(&Marks) -> Duration| Spread::of(&marks.iter().map(f).collect::<Vec<_>>());
    Ok(LatencyReport {
        scenario: "latency",
        server_address: client.address().to_string(),
        nodes: u64::from(workload.nodes),
        samples: u64::from(workload.jobs),
        count_per_job: u64::from(workload.count),
        total: phase(|m| m.complete),
        commit: phase(|m| m.answered),
        schedule: phase(|m| m.first_alloc.saturating_sub(m.answered)),
        finish: phase(|m| m.complete.saturating_sub(m.first_alloc)),
        server: ServerFigures::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|m| Duration::from_millis(*m))
                .collect::<Vec<_>>()
        };
        let cases: [(&[u64], [f64; 4]); 3] = [
            (&[], [0.0; 4]),
            (&[7], [7.0; 4]),
            (&[10, 1, 9, 2, 8, 3, 7, 4, 6, 5], [5.0, 9.0, 10.0, 10.0]),
        ];
        for (samples, [p50, p90, p99, max]) in cases {
            let s = Spread::of(&ms(samples));
            assert_eq!(
                (s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms),
                (p50, p90, p99, max),
                "{samples:?}"
            );
        }
    }
}
