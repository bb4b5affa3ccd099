//! Prometheus metrics, served as text on `GET /metrics` when the config names an address.
//!
//! Why `prometheus-client`: it keeps a registry per value instead of a process-global
//! recorder, so several servers in one process (the tests start many) each report their
//! own figures, and its types are Prometheus' own (counters, gauges, histograms with
//! label families). The endpoint is a tiny axum app: axum is already in the tree under
//! tonic.
//!
//! Two kinds of figures: counters and histograms updated where things happen (heartbeats
//! handled, Raft commit latency per command kind, which for `command="apply_plan"` is
//! the plan applier's commit latency; API call latency per method; eval latency from
//! creation to ack; plan apply latency from the applier taking a plan to its answer;
//! allocations placed), and gauges read from the server's structures when
//! scraped (broker depth per scheduler and state, blocked evals, plan queue depth,
//! workers per status, nodes per health), so they cost nothing between scrapes.
//!
//! This module is the registry and knows nothing of the server: what it renders from comes
//! in as [`Readings`]. The listener that gathers them from a [`crate::ServerHandle`] on
//! each scrape is [`crate::scrape`], above it.

use drover_core::leader::LeaderStats;
use drover_core::node_health::gauges_of;
use drover_core::state::StateSnapshot;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

fn commit_histogram() -> Histogram {
    // 250 µs to about 8 s.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
}

fn eval_histogram() -> Histogram {
    // 1 ms to about 9 min: an eval may wait in the broker behind many others.
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

/// Every metric of one server.
pub struct Metrics {
    registry: Registry,
    heartbeats: Counter,
    commit_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    rpc_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    /// Each method's histogram in `rpc_seconds`, by its `&'static` label: every API call
    /// records its latency, and a label key built per call cost three allocations. Bounded
    /// by the methods the API serves (see `api::timing::method_label`).
    rpc_by_method: std::sync::RwLock<std::collections::HashMap<&'static str, Histogram>>,
    eval_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    plan_apply_seconds: Histogram,
    placements: Counter,
    broker_evals: Family<Labels, Gauge>,
    blocked_evals: Gauge,
    plan_queue_depth: Gauge,
    plans_enqueued: Gauge,
    workers: Family<Labels, Gauge>,
    nodes: Family<Labels, Gauge>,
    leader: Gauge,
    leader_establishments: Counter,
    leader_lease_lapses: Counter,
    applied_index: Gauge,
    raft_log_appends: Counter,
    raft_log_entries: Counter,
    raft_log_bytes: Counter,
    watch_allocations: Counter,
    /// Scrapes refresh the gauges and encode under this lock, so two concurrent scrapes
    /// never interleave a clear and a set.
    scrape: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("drover");
        let m = Metrics {
            heartbeats: Counter::default(),
            commit_seconds: Family::new_with_constructor(commit_histogram),
            rpc_seconds: Family::new_with_constructor(commit_histogram),
            rpc_by_method: Default::default(),
            eval_seconds: Family::new_with_constructor(eval_histogram),
            plan_apply_seconds: commit_histogram(),
            placements: Counter::default(),
            broker_evals: Family::default(),
            blocked_evals: Gauge::default(),
            plan_queue_depth: Gauge::default(),
            plans_enqueued: Gauge::default(),
            workers: Family::default(),
            nodes: Family::default(),
            leader: Gauge::default(),
            leader_establishments: Counter::default(),
            leader_lease_lapses: Counter::default(),
            applied_index: Gauge::default(),
            raft_log_appends: Counter::default(),
            raft_log_entries: Counter::default(),
            raft_log_bytes: Counter::default(),
            watch_allocations: Counter::default(),
            scrape: tokio::sync::Mutex::new(()),
            registry: Registry::default(),
        };
        registry.register(
            "heartbeats",
            "Node heartbeats this server handled",
            m.heartbeats.clone(),
        );
        registry.register(
            "raft_commit_seconds",
            "Time from proposing a Raft entry to its commit and apply, per command kind \
             (command=\"apply_plan\" is the plan applier's commit latency)",
            m.commit_seconds.clone(),
        );
        registry.register(
            "rpc_seconds",
            "Time from an API call's arrival to its answer's headers, per gRPC method \
             (for a streaming method, until the stream starts); method=\"other\" for \
             paths the API does not serve",
            m.rpc_seconds.clone(),
        );
        registry.register(
            "eval_seconds",
            "Time from an evaluation's creation (the register, node update or timer that \
             made it) to its ack by a worker, per scheduler type",
            m.eval_seconds.clone(),
        );
        registry.register(
            "plan_apply_seconds",
            "Time from the plan applier taking a plan to its answer to the worker: checks, \
             waiting for state, and the commit",
            m.plan_apply_seconds.clone(),
        );
        registry.register(
            "placements",
            "Allocations committed by the plan applier (placements and in-place updates)",
            m.placements.clone(),
        );
        registry.register(
            "broker_evals",
            "Evaluations in the leader's broker per scheduler type and state",
            m.broker_evals.clone(),
        );
        registry.register(
            "blocked_evals",
            "Blocked evaluations the leader tracks",
            m.blocked_evals.clone(),
        );
        registry.register(
            "plan_queue_depth",
            "Plans waiting for the leader's plan applier",
            m.plan_queue_depth.clone(),
        );
        registry.register(
            "plans_enqueued",
            "Plans submitted to this leader's plan queue since it took office",
            m.plans_enqueued.clone(),
        );
        registry.register(
            "workers",
            "Scheduler workers of this server per status and workload status",
            m.workers.clone(),
        );
        registry.register("nodes", "Nodes per health set", m.nodes.clone());
        registry.register(
            "leader",
            "1 while this server runs the leader duties",
            m.leader.clone(),
        );
        registry.register(
            "leader_establishments",
            "Times this server rebuilt the leader duties from state (each leadership it won)",
            m.leader_establishments.clone(),
        );
        registry.register(
            "leader_lease_lapses",
            "Times no quorum answered this leader within its lease, so its duties were \
             suspended until one did or it stopped leading",
            m.leader_lease_lapses.clone(),
        );
        registry.register(
            "applied_index",
            "The newest Raft index applied to this server's state",
            m.applied_index.clone(),
        );
        registry.register(
            "raft_log_appends",
            "Raft log append transactions this server committed (each one fsync)",
            m.raft_log_appends.clone(),
        );
        registry.register(
            "raft_log_entries",
            "Raft log entries this server appended",
            m.raft_log_entries.clone(),
        );
        registry.register(
            "raft_log_bytes",
            "Encoded bytes of the Raft log entries this server appended",
            m.raft_log_bytes.clone(),
        );
        registry.register(
            "watch_allocations",
            "Allocations this server sent on nodes' allocation watches (a node that \
             reconnects names what it holds and is sent only what differs)",
            m.watch_allocations.clone(),
        );
        Metrics { registry, ..m }
    }

    pub(crate) fn heartbeat(&self) {
        self.heartbeats.inc();
    }

    pub(crate) fn leader_established(&self) {
        self.leader_establishments.inc();
    }

    pub(crate) fn lease_lapsed(&self) {
        self.leader_lease_lapses.inc();
    }

    /// How often this server established the leader duties and how often their lease
    /// lapsed, since it started.
    pub fn leadership_counts(&self) -> (u64, u64) {
        (
            self.leader_establishments.get(),
            self.leader_lease_lapses.get(),
        )
    }

    pub(crate) fn watch_sent(&self, allocations: usize) {
        self.watch_allocations.inc_by(allocations as u64);
    }

    pub(crate) fn committed(&self, command: &'static str, took: Duration) {
        self.commit_seconds
            .get_or_create(&vec![("command", command.to_string())])
            .observe(took.as_secs_f64());
    }

    pub(crate) fn rpc(&self, method: &'static str, took: Duration) {
        let seconds = took.as_secs_f64();
        // A poisoned lock only means a panic elsewhere mid-insert of a shared handle.
        let known = self.rpc_by_method.read().unwrap_or_else(|p| p.into_inner());
        if let Some(histogram) = known.get(method) {
            histogram.observe(seconds);
            return;
        }
        drop(known);
        let histogram = self
            .rpc_seconds
            .get_or_create(&vec![("method", method.to_string())])
            .clone();
        histogram.observe(seconds);
        self.rpc_by_method
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(method, histogram);
    }

    pub(crate) fn eval_acked(&self, scheduler: &'static str, took: Duration) {
        self.eval_seconds
            .get_or_create(&vec![("scheduler", scheduler.to_string())])
            .observe(took.as_secs_f64());
    }

    pub(crate) fn plan_applied(&self, took: Duration, placed: usize) {
        self.plan_apply_seconds.observe(took.as_secs_f64());
        self.placements
            .inc_by(u64::try_from(placed).unwrap_or(u64::MAX));
    }

    fn set(family: &Family<Labels, Gauge>, labels: Labels, value: usize) {
        family
            .get_or_create(&labels)
            .set(i64::try_from(value).unwrap_or(i64::MAX));
    }

    /// Sets the gauges from `readings`, then encodes everything as Prometheus text.
    pub async fn render(&self, readings: &Readings) -> String {
        let _scrape = self.scrape.lock().await;
        self.refresh(readings);
        let mut out = String::new();
        if let Err(e) = encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "metrics encoding failed");
        }
        out
    }

    fn refresh(&self, readings: &Readings) {
        let snap = &readings.state;
        self.applied_index
            .set(i64::try_from(snap.latest_index()).unwrap_or(i64::MAX));
        self.leader.set(i64::from(readings.leader.is_some()));
        let counts = gauges_of(snap);
        for (health, n) in [
            ("healthy_free", counts.free),
            ("healthy_running", counts.running),
            ("suspended_new", counts.suspended_new),
            ("suspended_lost", counts.suspended_lost),
            ("suspended_flaky", counts.suspended_flaky),
            ("offlined", counts.offlined),
        ] {
            Self::set(&self.nodes, vec![("health", health.into())], n);
        }
        self.broker_evals.clear();
        if let Some(stats) = &readings.leader {
            for (t, q) in stats.broker.iter() {
                for (state, n) in [
                    ("ready", q.ready),
                    ("unacked", q.unacked),
                    ("pending", q.pending),
                    ("waiting", q.waiting),
                    ("cancelable", q.cancelable),
                    ("failed", q.failed),
                ] {
                    let labels = vec![("scheduler", t.as_str().into()), ("state", state.into())];
                    Self::set(&self.broker_evals, labels, n);
                }
            }
            self.blocked_evals
                .set(i64::try_from(stats.blocked.total_blocked).unwrap_or(i64::MAX));
            self.plan_queue_depth
                .set(i64::try_from(stats.plan_queue.depth).unwrap_or(i64::MAX));
            self.plans_enqueued
                .set(i64::try_from(stats.plan_queue.enqueued).unwrap_or(i64::MAX));
        } else {
            self.blocked_evals.set(0);
            self.plan_queue_depth.set(0);
        }
        // The log keeps its own counts; the counters catch up to them.
        let log = readings.raft_log;
        for (counter, now) in [
            (&self.raft_log_appends, log.appends),
            (&self.raft_log_entries, log.entries),
            (&self.raft_log_bytes, log.bytes),
        ] {
            counter.inc_by(now.saturating_sub(counter.get()));
        }
        self.workers.clear();
        for (&(status, workload), &n) in &readings.workers {
            let labels = vec![("status", status.into()), ("workload", workload.into())];
            Self::set(&self.workers, labels, n);
        }
    }
}

/// What the gauges are read from at a scrape.
#[derive(Debug)]
pub struct Readings {
    /// The applied state.
    pub state: StateSnapshot,
    /// The leader's counters, while this server leads.
    pub leader: Option<LeaderStats>,
    /// This server's workers, counted per (status, workload).
    pub workers: std::collections::BTreeMap<(&'static str, &'static str), usize>,
    /// What the Raft log appended since the server started.
    pub raft_log: crate::raft::log_store::LogCounts,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_call_of_a_method_counts_in_its_one_series() {
        let metrics = Metrics::new();
        for _ in 0..3 {
            metrics.rpc(
                "/drover.v1.NodeService/UpdateStatus",
                Duration::from_micros(40),
            );
        }
        metrics.rpc("other", Duration::from_millis(2));
        let text = metrics
            .render(&Readings {
                state: StateSnapshot::default(),
                leader: None,
                workers: Default::default(),
                raft_log: Default::default(),
            })
            .await;
        for want in [
            "drover_rpc_seconds_count{method=\"/drover.v1.NodeService/UpdateStatus\"} 3",
            "drover_rpc_seconds_count{method=\"other\"} 1",
        ] {
            assert!(text.contains(want), "{want} in\n{text}");
        }
    }
}
