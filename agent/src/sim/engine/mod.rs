//! The one task that drives every virtual node.
//!
//! All node state lives here, owned by a single loop: no locks, and no task per node for
//! heartbeats, timers or reports. One timer wheel (`DelayQueue`) holds every heartbeat,
//! task exit and node's report flush; calls run as futures inside the loop, at most
//! `max_in_flight` at once (the rest wait in a backlog). A heartbeat is such a call too: it
//! takes its node's heartbeat stream out of the node's state, sends one heartbeat and reads
//! its answer, and hands the stream back with the outcome, so a stream between heartbeats
//! costs no task. Only the watch streams run as small tasks of their own (see
//! [`super::watch`]), because each must be read as messages arrive.
//!
//! A node's [`Phase`] enforces the reconnect order of BEHAVIOUR.md: a node that comes back
//! heartbeats first, then re-reads its allocations, and only then reports.
//!
//! Bring-up runs in the same loop: every node registers and sends its first heartbeat
//! (then keeps heartbeating while the others come up, so early nodes never miss a TTL),
//! and the watches open only once all are up. Every registration and first heartbeat is a
//! Raft write, and the server re-reads every open watch on every write, so watches opened
//! early would cost it reads quadratic in the node count.

mod launch;
mod outcomes;
mod queue;

use super::SimStats;
use super::connections::Connections;
use super::driver::{Behaviour, JobKey, NodeAllocs};
use super::layout::Layout;
use super::watch::{self, WatchEvent};
use super::{ServiceWrite, SimConfig, SimError};
use drover_core::types::{AllocId, Job, NodeId};
use drover_proto::v1 as pb;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use queue::CallQueue;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tokio_util::time::{DelayQueue, delay_queue};

/// What the [`super::Simulator`] handle asks of the loop.
#[derive(Debug)]
pub(crate) enum Control {
    Silence(Vec<u32>, oneshot::Sender<()>),
    Restore(Vec<u32>, oneshot::Sender<()>),
    FailInfra(u32, u32),
    Stats(oneshot::Sender<SimStats>),
    WatchServiceWrites(mpsc::UnboundedSender<ServiceWrite>),
}

/// Answers [`super::Simulator::start`] once every node is up, with their ids in node order.
pub(crate) type StartReply = oneshot::Sender<Result<Vec<NodeId>, SimError>>;

/// Where a node is in its conversation with the servers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// Registering and sending its first heartbeat; no watch yet.
    Starting,
    /// Heartbeats, watches and reports.
    Connected,
    /// Cut off: no heartbeat, no watch, no report; its tasks keep running.
    Silent,
    /// Back (or registered again): waiting for a heartbeat to be accepted.
    Reconnecting,
    /// Heartbeat accepted: waiting for the first watch message before reporting.
    Resyncing,
}

#[derive(Debug)]
struct Node {
    auth: pb::NodeAuth,
    phase: Phase,
    heartbeat_timer: Option<delay_queue::Key>,
    heartbeat_in_flight: bool,
    /// The node's heartbeat stream, kept between heartbeats (taken by the one in flight).
    beat_stream: Option<crate::beat_stream::BeatStream>,
    report_in_flight: bool,
    /// Its flush timer is set: its updates go out when it fires.
    report_queued: bool,
    watch: Option<AbortHandle>,
    /// Tells the current watch task's messages from those of one already replaced.
    watch_generation: u32,
    allocs: NodeAllocs,
}

#[derive(Debug)]
enum Timer {
    Heartbeat(u32),
    TaskExit {
        node: u32,
        alloc: AllocId,
        task: u16,
    },
    /// Node `n`'s pending updates are due: `report_interval` after the first of them, as
    /// the real agent's reporter sends them. Each node keeps its own phase; one timer for
    /// all would send every node's report in the same instant, a burst no cluster of
    /// independent nodes makes.
    Flush(u32),
    Rewatch(u32),
}

#[derive(Clone, Debug)]
enum Call {
    Heartbeat(u32),
    Report(u32),
    Register(u32),
    /// Read a job version as node `n`, for every allocation waiting on it.
    ReadJob(u32, JobKey),
}

#[derive(Debug)]
enum Done {
    Heartbeat(u32, super::calls::Beat),
    Report(u32, Vec<AllocId>, Result<(), tonic::Status>),
    Register(u32, Result<(NodeId, pb::NodeAuth), SimError>),
    ReadJob(JobKey, Option<Arc<Job>>),
}

/// A job version as the engine knows it, shared by every node that runs it.
#[derive(Debug)]
enum JobEntry {
    /// Being read; the allocations (node, id) waiting for it.
    Reading(Vec<(u32, AllocId)>),
    /// Read (`None`: it could not be, and its allocations register nothing).
    Known(Option<Arc<Job>>),
}

/// How long to wait before retrying a failed heartbeat or a dropped watch.
const RETRY: Duration = Duration::from_millis(500);

pub(crate) struct Engine {
    config: Arc<SimConfig>,
    behaviour: Behaviour,
    layout: Arc<Layout>,
    conns: Arc<Connections>,
    nodes: Vec<Node>,
    timers: DelayQueue<Timer>,
    rpcs: FuturesUnordered<BoxFuture<'static, Done>>,
    /// Calls waiting for a slot.
    waiting: CallQueue,
    /// Heartbeats in flight.
    heartbeating: usize,
    /// Registrations in flight.
    registering: usize,
    /// The servers answered that they have no heartbeat stream: heartbeats go as unary
    /// calls from then on.
    unary_heartbeats: bool,
    events_tx: mpsc::UnboundedSender<WatchEvent>,
    events: mpsc::UnboundedReceiver<WatchEvent>,
    rng: ChaCha8Rng,
    /// The jobs of the allocations, by version, with services on. Bounded by the job
    /// versions the servers placed allocations of.
    jobs: HashMap<JobKey, JobEntry>,
    /// Who hears of every accepted report that carried registrations.
    service_writes: Option<mpsc::UnboundedSender<ServiceWrite>>,
    stats: SimStats,
    ids: Vec<NodeId>,
    /// Nodes still coming up, and who waits for them all; `None` once started.
    starting: Option<(usize, StartReply)>,
    /// Set when bring-up failed: the loop ends.
    failed: bool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("nodes", &self.nodes.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

enum Step {
    Control(Option<Control>),
    Watch(WatchEvent),
    Done(Done),
    Timer(Timer),
}

impl Engine {
    /// An engine whose first steps register every node; `reply` hears when all are up.
    pub(crate) fn new(
        config: Arc<SimConfig>,
        layout: Arc<Layout>,
        conns: Arc<Connections>,
        reply: StartReply,
    ) -> Engine {
        let (events_tx, events) = mpsc::unbounded_channel();
        let behaviour = Behaviour {
            seed: config.seed,
            task_duration: config.task_duration,
            batch_duration: config.batch_duration,
            failure_rate: config.failure_rate,
            register_services: config.register_services,
        };
        let count = config.nodes;
        let waiting = CallQueue::new(config.max_in_flight, count);
        let mut engine = Engine {
            rng: ChaCha8Rng::seed_from_u64(config.seed.wrapping_add(1)),
            config,
            behaviour,
            layout,
            conns,
            nodes: Vec::with_capacity(count),
            timers: DelayQueue::with_capacity(count + 16),
            rpcs: FuturesUnordered::new(),
            waiting,
            heartbeating: 0,
            registering: 0,
            unary_heartbeats: false,
            events_tx,
            events,
            jobs: HashMap::new(),
            service_writes: None,
            stats: SimStats::default(),
            ids: vec![NodeId::default(); count],
            starting: Some((count, reply)),
            failed: false,
        };
        for i in 0..count {
            engine.nodes.push(Node {
                auth: pb::NodeAuth::default(),
                phase: Phase::Starting,
                heartbeat_timer: None,
                heartbeat_in_flight: true,
                beat_stream: None,
                report_in_flight: false,
                report_queued: false,
                watch: None,
                watch_generation: 0,
                allocs: NodeAllocs::default(),
            });
            engine.call(Call::Register(u32::try_from(i).unwrap_or(u32::MAX)));
        }
        engine
    }

    /// Runs until the handle is dropped or asks to stop; then stops every watch.
    pub(crate) async fn run(mut self, mut control: mpsc::UnboundedReceiver<Control>) {
        loop {
            let step = tokio::select! {
                c = control.recv() => Step::Control(c),
                Some(e) = self.events.recv() => Step::Watch(e),
                Some(d) = self.rpcs.next(), if !self.rpcs.is_empty() => Step::Done(d),
                Some(t) = self.timers.next(), if !self.timers.is_empty() => Step::Timer(t.into_inner()),
            };
            match step {
                Step::Control(None) => break,
                Step::Control(Some(c)) => self.on_control(c),
                Step::Watch(e) => self.on_watch(e),
                Step::Done(d) => self.on_done(d),
                Step::Timer(t) => self.on_timer(t),
            }
            self.drain_backlog();
            if self.failed {
                break;
            }
        }
        for node in &mut self.nodes {
            if let Some(w) = node.watch.take() {
                w.abort();
            }
        }
        tracing::info!(nodes = self.nodes.len(), "simulator stopped");
    }

    fn on_control(&mut self, c: Control) {
        match c {
            Control::Silence(nodes, done) => {
                for n in nodes {
                    self.silence(n);
                }
                let _ = done.send(());
            }
            Control::Restore(nodes, done) => {
                for n in nodes {
                    let node = &mut self.nodes[n as usize];
                    if node.phase == Phase::Silent {
                        node.phase = Phase::Reconnecting;
                        tracing::debug!(node_id = %node.auth.node_id, "simulated node back: heartbeat first");
                        self.heartbeat_now(n);
                    }
                }
                let _ = done.send(());
            }
            Control::FailInfra(n, count) => self.nodes[n as usize].allocs.fail_next_as_infra(count),
            Control::Stats(reply) => {
                let mut s = self.stats.clone();
                s.nodes = self.nodes.len();
                s.silent = self
                    .nodes
                    .iter()
                    .filter(|n| n.phase == Phase::Silent)
                    .count();
                s.watching = self.nodes.iter().filter(|n| n.watch.is_some()).count();
                s.heartbeat_streams = self
                    .nodes
                    .iter()
                    .filter(|n| n.beat_stream.is_some())
                    .count();
                s.running_allocs = self.nodes.iter().map(|n| n.allocs.running()).sum();
                s.in_flight = self.rpcs.len() + self.waiting.len();
                let _ = reply.send(s);
            }
            Control::WatchServiceWrites(tx) => self.service_writes = Some(tx),
        }
    }

    fn silence(&mut self, n: u32) {
        let node = &mut self.nodes[n as usize];
        if node.phase == Phase::Silent {
            return;
        }
        node.phase = Phase::Silent;
        // Cut off: its stream goes with its connection, and it opens another once back.
        node.beat_stream = None;
        if let Some(w) = node.watch.take() {
            w.abort();
        }
        if let Some(key) = node.heartbeat_timer.take() {
            self.timers.remove(&key);
        }
        tracing::debug!(node_id = %node.auth.node_id, "simulated node silenced");
    }

    fn on_watch(&mut self, e: WatchEvent) {
        let (n, generation) = match &e {
            WatchEvent::Allocations {
                node, generation, ..
            }
            | WatchEvent::Ended {
                node, generation, ..
            } => (*node, *generation),
        };
        let node = &mut self.nodes[n as usize];
        if generation != node.watch_generation || node.phase == Phase::Silent {
            return;
        }
        match e {
            WatchEvent::Allocations { change, .. } => {
                self.stats.watch_messages += 1;
                self.stats.watch_allocations += change.allocations.len() as u64;
                let exits = node
                    .allocs
                    .apply_server_change(&change, &self.behaviour, now_ms());
                if node.phase == Phase::Resyncing {
                    node.phase = Phase::Connected;
                    node.allocs.mark_all_dirty();
                }
                let awaiting = node.allocs.take_awaiting_jobs();
                for x in exits {
                    self.timers.insert(
                        Timer::TaskExit {
                            node: n,
                            alloc: x.alloc,
                            task: x.task,
                        },
                        x.after,
                    );
                }
                for (alloc, job) in awaiting {
                    self.find_job(n, alloc, job);
                }
                self.queue_report(n);
            }
            WatchEvent::Ended { status, .. } => {
                node.watch = None;
                tracing::debug!(node_id = %node.auth.node_id, error = ?status, "allocation watch ended; reopening");
                let wait = self.jittered(RETRY);
                self.timers.insert(Timer::Rewatch(n), wait);
            }
        }
    }

    fn on_timer(&mut self, t: Timer) {
        match t {
            Timer::Heartbeat(n) => {
                let node = &mut self.nodes[n as usize];
                node.heartbeat_timer = None;
                if node.phase != Phase::Silent && !node.heartbeat_in_flight {
                    node.heartbeat_in_flight = true;
                    self.call(Call::Heartbeat(n));
                }
            }
            Timer::TaskExit { node, alloc, task } => {
                if self.nodes[node as usize]
                    .allocs
                    .task_exited(alloc, task, now_ms())
                {
                    self.queue_report(node);
                }
            }
            Timer::Flush(n) => {
                let node = &mut self.nodes[n as usize];
                node.report_queued = false;
                if node.phase == Phase::Connected && !node.report_in_flight {
                    node.report_in_flight = true;
                    self.call(Call::Report(n));
                }
            }
            Timer::Rewatch(n) => {
                let node = &self.nodes[n as usize];
                if node.phase != Phase::Silent && node.watch.is_none() {
                    self.open_watch(n);
                }
            }
        }
    }

    /// Gives allocation `alloc` of node `n` its job, reading it first when no node did.
    fn find_job(&mut self, n: u32, alloc: AllocId, key: JobKey) {
        match self.jobs.get_mut(&key) {
            Some(JobEntry::Known(job)) => {
                let job = job.clone();
                self.nodes[n as usize].allocs.job_known(alloc, job.as_ref());
            }
            Some(JobEntry::Reading(waiting)) => waiting.push((n, alloc)),
            None => {
                self.jobs
                    .insert(key.clone(), JobEntry::Reading(vec![(n, alloc)]));
                self.call(Call::ReadJob(n, key));
            }
        }
    }

    /// A job version was read: its waiting allocations can report.
    fn job_read(&mut self, key: JobKey, job: Option<Arc<Job>>) {
        let waiting = match self.jobs.insert(key, JobEntry::Known(job.clone())) {
            Some(JobEntry::Reading(waiting)) => waiting,
            _ => Vec::new(),
        };
        for (n, alloc) in waiting {
            if self.nodes[n as usize].allocs.job_known(alloc, job.as_ref()) {
                self.queue_report(n);
            }
        }
    }

    fn heartbeat_now(&mut self, n: u32) {
        let node = &mut self.nodes[n as usize];
        if let Some(key) = node.heartbeat_timer.take() {
            self.timers.remove(&key);
        }
        if !node.heartbeat_in_flight {
            node.heartbeat_in_flight = true;
            self.call(Call::Heartbeat(n));
        }
    }

    /// The next heartbeat at a random point between half and four fifths of the TTL, so
    /// heartbeats spread out and a slow answer still lands before the server's timer.
    fn schedule_heartbeat(&mut self, n: u32, ttl: Duration) {
        let wait = ttl.mul_f64(self.rng.random_range(0.5..0.8));
        self.schedule_heartbeat_in(n, wait);
    }

    fn schedule_heartbeat_in(&mut self, n: u32, wait: Duration) {
        let key = self.timers.insert(Timer::Heartbeat(n), wait);
        if let Some(old) = self.nodes[n as usize].heartbeat_timer.replace(key) {
            self.timers.remove(&old);
        }
    }

    fn jittered(&mut self, base: Duration) -> Duration {
        base.mul_f64(self.rng.random_range(1.0..2.0))
    }

    fn queue_report(&mut self, n: u32) {
        let node = &mut self.nodes[n as usize];
        if node.report_queued || !node.allocs.has_dirty() {
            return;
        }
        node.report_queued = true;
        self.timers
            .insert(Timer::Flush(n), self.config.report_interval);
    }

    fn open_watch(&mut self, n: u32) {
        let node = &mut self.nodes[n as usize];
        node.watch_generation = node.watch_generation.wrapping_add(1);
        let handle = tokio::spawn(watch::run(
            self.conns.watch(n),
            node.auth.clone(),
            node.allocs.known(),
            n,
            node.watch_generation,
            self.events_tx.clone(),
        ));
        node.watch = Some(handle.abort_handle());
    }
}
