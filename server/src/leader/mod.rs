//! The leader's duties at runtime: started when this server becomes the Raft leader,
//! stopped when it stops being it. Every decision is core's [`LeaderEngine`]; this module
//! holds the lock around it, the wake-ups, the spawned tasks and the Raft writes.
//!
//! ```text
//!  raft metrics ──► monitor ── leader? ──► establish: barrier, restore broker / blocked /
//!                                           heartbeats / health / periodic from state
//!                                  │
//!                 ┌────────────────┴──────────────────┐
//!                 ▼                                   ▼
//!   leader loop (leader_loop.rs)             plan applier (plan_applier.rs)
//!   select! over: applied-entry events,      pops plans by priority, checks them with
//!   the earliest due time of broker /        PlanApplier (overlay while the previous
//!   heartbeats / health / periodic /         write is in flight), commits ApplyPlan
//!   sweeps, and wake-ups                     through Raft, answers the worker
//! ```
//!
//! **Concurrency choice.** The pure core structures (broker, blocked evals, plan queue,
//! heartbeat timers, health tracker, periodic launcher) live together in one
//! [`LeaderEngine`] behind one `tokio::sync::Mutex`. Every critical section is short and synchronous (a few
//! core calls; Raft writes happen after the lock is released), and the callers are many and
//! of different kinds: workers dequeue / ack / nack / submit plans, the handle resets
//! heartbeat timers and registers nodes, the leader loop applies events and fires timers,
//! the plan applier pops plans. With message passing each of those would need a request and
//! reply type and a blocking dequeue would need a waiters list inside the loop; a mutex plus
//! three `Notify`s (evals ready, plans ready, wake the loop) keeps each caller's code
//! straight-line. Dequeue waits on `evals_ready` outside the lock, so a worker waiting for
//! work never holds it.

mod heartbeat;
mod leader_loop;
mod plan_applier;
mod reaper;
mod source;

pub use drover_core::leader::LeaderStats;

use crate::clock::now;
use crate::config::ServerConfig;
use crate::error::ServerError;
use crate::raft::{RaftNode, StateHandle};
use crate::write::Writer;
use drover_core::Index;
use drover_core::fsm::Event;
use drover_core::leader::{LeaderConfig, LeaderEngine};
use openraft::ServerState;
use plan_applier::PendingPlan;
use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{Mutex, MutexGuard, Notify, broadcast, watch};
use tokio::task::JoinHandle;

/// The leader's engine as this runtime holds it: plans carry their worker's reply channel.
pub(crate) type LeaderCore = LeaderEngine<PendingPlan>;

/// Shared by the handle, the workers (as their [`crate::worker::EvalSource`]) and the
/// leader's tasks. Lives as long as the server; its core is enabled only while leading.
pub struct Leadership {
    pub(crate) core: Mutex<LeaderCore>,
    /// Evals may have become ready: waiting dequeues look again.
    pub(crate) evals_ready: Notify,
    /// A plan was queued for the applier.
    pub(crate) plans_ready: Notify,
    /// Something changed a due time: the leader loop recomputes its sleep.
    pub(crate) wake: Notify,
    pub(crate) config: ServerConfig,
    pub(crate) state: StateHandle,
    pub(crate) writer: Writer,
    /// What handling one heartbeat costs, smoothed; the TTLs handed out follow it.
    pub(crate) heartbeat_cost: heartbeat::HeartbeatCost,
    events: broadcast::Sender<Arc<Vec<Event>>>,
    leading: watch::Sender<bool>,
    /// This value's own `Arc`, for tasks it spawns.
    me: Weak<Leadership>,
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("leading", &*self.leading.borrow())
            .finish_non_exhaustive()
    }
}

impl Leadership {
    pub(crate) fn new(
        config: ServerConfig,
        state: StateHandle,
        writer: Writer,
        events: broadcast::Sender<Arc<Vec<Event>>>,
    ) -> Result<Arc<Self>, ServerError> {
        let engine_config = LeaderConfig {
            broker: config.broker.clone(),
            blocked: config.blocked,
            heartbeat: config.heartbeat.clone(),
            health: config.health.clone(),
            gc: config.gc.clone(),
            limits: config.limits.clone(),
        };
        // The engine is deterministic given its seed; the runtime seeds it afresh each start.
        let core = LeaderCore::new(engine_config, rand::random())?;
        Ok(Arc::new_cyclic(|me| Self {
            core: Mutex::new(core),
            evals_ready: Notify::new(),
            heartbeat_cost: heartbeat::HeartbeatCost::default(),
            plans_ready: Notify::new(),
            wake: Notify::new(),
            config,
            state,
            writer,
            events,
            leading: watch::channel(false).0,
            me: me.clone(),
        }))
    }

    /// Whether this server's leader duties are running.
    pub fn is_leading(&self) -> bool {
        *self.leading.borrow()
    }

    /// A receiver that sees leadership start and stop.
    pub fn watch_leading(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// The core, if this server leads; `NotLeader` otherwise.
    pub(crate) async fn lock_enabled(&self) -> Result<MutexGuard<'_, LeaderCore>, ServerError> {
        let core = self.core.lock().await;
        if core.is_answering() {
            Ok(core)
        } else {
            Err(ServerError::NotLeader {
                leader_id: None,
                leader_addr: None,
            })
        }
    }

    pub(crate) async fn stats(&self) -> Result<LeaderStats, ServerError> {
        Ok(self.lock_enabled().await?.stats())
    }

    /// Rebuilds every core structure from state as of `index` and enables them.
    async fn establish(&self) -> Index {
        let (index, snap) = self.state.indexed_snapshot();
        let restored = self.core.lock().await.establish(&snap, now());
        tracing::info!(
            index,
            ready = restored.ready,
            pending = restored.pending,
            blocked = restored.blocked,
            nodes = restored.nodes,
            periodic = restored.periodic,
            "leader duties established"
        );
        self.writer.metrics().leader_established();
        self.leading.send_replace(true);
        self.evals_ready.notify_waiters();
        index
    }

    /// The lease lapsed while this server still leads: leader-only answers stop at once,
    /// the duties' state is kept (see [`LeaderCore::suspend`]).
    async fn suspend(&self) {
        self.core.lock().await.suspend();
        self.writer.metrics().lease_lapsed();
        self.leading.send_replace(false);
        self.evals_ready.notify_waiters();
    }

    /// A quorum answered again: answers and timers resume where they stopped.
    async fn resume(&self) {
        self.core.lock().await.resume(now());
        self.leading.send_replace(true);
        self.wake.notify_one();
        self.evals_ready.notify_waiters();
    }

    /// Disables and empties every core structure; waiting workers get errors.
    async fn revoke(&self) {
        // Dropping the reply senders answers every waiting worker with an error.
        let dropped = self.core.lock().await.revoke().len();
        self.leading.send_replace(false);
        self.evals_ready.notify_waiters();
        tracing::info!(plans_dropped = dropped, "leader duties revoked");
    }
}

/// The running leader tasks of one term.
struct Duties {
    cancel: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Duties {
    /// Establishes the duties once a quorum confirms this leader and the state has applied
    /// everything up to the read point Raft names (its first entry of this term at least).
    /// `None` when it cannot yet, and the monitor retries while this server still leads.
    /// Every wait here is bounded: openraft's own `ensure_linearizable` waits for that
    /// entry to apply without a limit, and an entry whose quorum was stopped before it
    /// committed never applies. Cancelling this future is safe up to the restore, which
    /// changes nothing before it holds the core's lock.
    async fn start(shared: &Arc<Leadership>, raft: &RaftNode) -> Option<Duties> {
        // Subscribe before the barrier, so no entry applied after the restore is missed;
        // events at or below the restore index are skipped.
        let events = shared.events.subscribe();
        match raft.raft().get_read_log_id().await {
            Ok((Some(read_point), _)) => {
                let limit = shared.config.plan_wait_limit;
                if let Err(e) = shared.state.wait_for_index(read_point.index, limit).await {
                    tracing::warn!(
                        error = %e,
                        index = read_point.index,
                        "leader barrier not applied in time; retrying"
                    );
                    return None;
                }
            }
            Ok((None, _)) => {}
            Err(e) => {
                tracing::info!(error = %e, "leadership not confirmed by a quorum; retrying while leading");
                return None;
            }
        }
        let index = shared.establish().await;
        let (cancel, cancel_rx) = watch::channel(false);
        let tasks = vec![
            tokio::spawn(leader_loop::run(
                shared.clone(),
                events,
                index,
                cancel_rx.clone(),
            )),
            tokio::spawn(plan_applier::run(
                shared.clone(),
                shared.state.snapshot().latest_index(),
                cancel_rx,
            )),
        ];
        Some(Duties { cancel, tasks })
    }

    async fn stop(self, shared: &Leadership) {
        self.cancel.send_replace(true);
        // Leader-only answers (node heartbeats above all) stop now, not once the tasks
        // have wound down: a leader whose lease lapsed must not acknowledge anything more.
        shared.revoke().await;
        shared.wake.notify_one();
        shared.plans_ready.notify_one();
        for task in self.tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                tracing::warn!("leader task did not stop in time; aborting it");
                abort.abort();
            }
        }
        // Whatever a task queued while winding down is answered with an error too.
        shared.revoke().await;
    }
}

/// How long a leader keeps acting after its last acknowledgement from a quorum: a little
/// less than the time a follower refuses to vote after hearing from it (openraft's leader
/// lease is the longest election timeout), so no new leader can be elected while the old
/// one still acts. Past it, a leader cut off from the others stops its duties (it answers
/// "not the leader" to nodes and leader-only calls) until a quorum answers again or a new
/// leader is elected: Raft's check-quorum, which openraft 0.9 leaves to the application.
pub fn lease(timings: &crate::config::RaftTimings) -> Duration {
    timings
        .election_timeout_max
        .saturating_sub(timings.heartbeat_interval)
}

/// Whether a leader described by `m` still holds its lease of `lease` (see [`lease`]). A
/// single voter is its own quorum; a leader not yet acknowledged at all has just been
/// elected by a quorum. Every heartbeat asks, so the voters (which openraft collects into
/// a new set) are counted only when the acknowledgement is too old.
pub(crate) fn lease_holds(
    m: &openraft::RaftMetrics<u64, openraft::BasicNode>,
    lease: Duration,
) -> bool {
    let limit = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    m.millis_since_quorum_ack.is_none_or(|ms| ms <= limit)
        || m.membership_config.membership().voter_ids().count() <= 1
}

/// Resolves once this server leads with a lapsed lease of `lease` (see [`lease`]); never
/// while it follows, or leads with its lease holding. Raft reports its metrics on every
/// tick, so a lapse is seen within one.
pub(crate) async fn lease_lapsed(raft: &RaftNode, lease: Duration) {
    let me = raft.node_id();
    let mut metrics = raft.metrics();
    let lapsed = metrics
        .wait_for(|m| m.current_leader == Some(me) && !lease_holds(m, lease))
        .await
        .is_ok();
    if !lapsed {
        // Raft stopped: the write's own future ends it.
        std::future::pending::<()>().await;
    }
}

/// Watches Raft's metrics and runs the leader duties exactly while this server leads; they
/// are suspended (kept, answering nothing) while its lease has lapsed, and stopped when it
/// no longer leads.
pub(crate) async fn monitor(
    shared: Arc<Leadership>,
    raft: Arc<RaftNode>,
    mut shutdown: watch::Receiver<bool>,
) {
    let me = raft.node_id();
    let mut metrics = raft.metrics();
    let mut duties: Option<Duties> = None;
    let mut suspended = false;
    // Whether this term's start was already tried (and said so): retries log nothing new.
    let mut starting = false;
    let lease = lease(&shared.config.raft);
    loop {
        let (leader, holds) = {
            let m = metrics.borrow_and_update();
            let leader = m.current_leader == Some(me) && m.state == ServerState::Leader;
            (leader, lease_holds(&m, lease))
        };
        match (leader, holds, duties.is_some()) {
            (true, true, false) => {
                if !starting {
                    tracing::info!(server_id = me, "gained leadership");
                    starting = true;
                }
                // A stop must not wait on a quorum that may never answer again (a leader
                // whose peers were stopped first).
                duties = tokio::select! {
                    d = Duties::start(&shared, &raft) => d,
                    _ = shutdown.wait_for(|stop| *stop) => None,
                };
                suspended = false;
            }
            (true, true, true) if suspended => {
                tracing::info!(
                    server_id = me,
                    "a quorum answered within the lease again: leader duties resume"
                );
                shared.resume().await;
                suspended = false;
            }
            (true, false, true) if !suspended => {
                tracing::warn!(
                    server_id = me,
                    lease_ms = lease.as_millis() as u64,
                    "no quorum has answered within the leader's lease: leader duties suspended until one does or a new leader is elected"
                );
                shared.suspend().await;
                suspended = true;
            }
            (false, _, true) => {
                tracing::info!(server_id = me, "lost leadership");
                if let Some(d) = duties.take() {
                    d.stop(&shared).await;
                }
                suspended = false;
            }
            _ => {}
        }
        starting &= leader;
        // A server dropped without a stop closes the channel: that is a stop too, and
        // without this check every wait on the channel would end at once, in a busy loop.
        if *shutdown.borrow() || shutdown.has_changed().is_err() {
            break;
        }
        // A failed start while still leading is retried shortly. Raft reports its metrics
        // (the time since the last quorum acknowledgement with them) on every tick, so a
        // lapse and its end are both seen as metrics changes.
        let retry = leader && holds && duties.is_none();
        tokio::select! {
            changed = metrics.changed() => if changed.is_err() { break },
            _ = shutdown.changed() => {}
            _ = tokio::time::sleep(Duration::from_millis(100)), if retry => {}
        }
    }
    if let Some(d) = duties.take() {
        d.stop(&shared).await;
    }
}

#[cfg(test)]
mod tests {
    use super::lease_holds;
    use openraft::{BasicNode, Membership, RaftMetrics, StoredMembership};
    use std::collections::BTreeSet;
    use std::sync::Arc;
    use std::time::Duration;

    /// A leader holds its lease while a quorum acknowledged it within the lease, from its
    /// election on, and always when it is its own quorum.
    #[test]
    fn a_lease_holds_within_the_last_acknowledgement_or_for_a_single_voter() {
        let lease = Duration::from_millis(500);
        let rows: [(&str, u64, Option<u64>, bool); 6] = [
            ("one voter, never acknowledged", 1, None, true),
            ("one voter, acknowledged long ago", 1, Some(10_000), true),
            ("three voters, just elected", 3, None, true),
            (
                "three voters, acknowledged at the lease",
                3,
                Some(500),
                true,
            ),
            (
                "three voters, acknowledged past the lease",
                3,
                Some(501),
                false,
            ),
            (
                "three voters, acknowledged long ago",
                3,
                Some(10_000),
                false,
            ),
        ];
        for (what, voters, acked, holds) in rows {
            let mut m = RaftMetrics::<u64, BasicNode>::new_initial(1);
            let ids: BTreeSet<u64> = (1..=voters).collect();
            m.membership_config =
                Arc::new(StoredMembership::new(None, Membership::new(vec![ids], ())));
            m.millis_since_quorum_ack = acked;
            assert_eq!(lease_holds(&m, lease), holds, "{what}");
        }
    }
}
