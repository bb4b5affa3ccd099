//! The Raft state machine: core's FSM over an in-memory [`StateStore`].
//!
//! openraft owns the [`StateMachine`] and hands it committed entries in batches; it applies
//! them to its working copy of the store, then publishes the result for readers in one step:
//! a short lock swaps in an O(1) clone of the store, and a `watch` carries the new applied
//! index. Readers ([`StateHandle`]) take O(1) snapshots and never block the FSM for longer
//! than that swap. The events of each applied entry then go to the [`EventSink`], which must
//! not block (a broadcast channel drops them for subscribers that lag).
//!
//! The store lives in memory; what makes it durable is the Raft log plus the snapshot file.
//! On start the state machine loads the latest snapshot (state, last applied log id and
//! membership) and openraft re-applies the committed log after it.

use super::snapshot_data::SnapshotData;
use super::snapshot_store::{SnapshotError, SnapshotStore};
use super::types::{
    ApplyResponse, Entry, LogId, ServerId, Snapshot, SnapshotMeta, StorageError, StoredMembership,
    TypeConfig,
};
use drover_core::Index;
use drover_core::fsm::{self, Event, decode_snapshot, encode_snapshot, encode_snapshot_to};
use drover_core::state::{StateSnapshot, StateStore};
use openraft::storage::RaftStateMachine;
use openraft::{AnyError, EntryPayload, OptionalSend, RaftSnapshotBuilder, StorageIOError};
use std::fmt;
use std::io::Cursor;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// Where the events of applied entries go. Called on the FSM's path, once per applied entry
/// that produced events, in index order: it must return at once (never wait on a subscriber).
pub trait EventSink: Send + Sync + fmt::Debug + 'static {
    fn publish(&self, events: Arc<Vec<Event>>);

    /// The state was replaced by a snapshot from the leader, up to `index`: the events of the
    /// entries it covers were not published here, so subscribers should resynchronize.
    fn snapshot_installed(&self, index: Index) {
        let _ = index;
    }
}

/// A broadcast channel is a ready sink: a full channel overwrites its oldest message, and a
/// subscriber that falls behind gets `Lagged` instead of slowing the sender.
impl EventSink for broadcast::Sender<Arc<Vec<Event>>> {
    fn publish(&self, events: Arc<Vec<Event>>) {
        // An error only means there is no subscriber right now.
        let _ = self.send(events);
    }
}

struct Published {
    store: StateStore,
    index: Index,
}

struct Shared {
    published: Mutex<Published>,
    applied: watch::Sender<Index>,
    /// How many snapshots from the leader replaced the state: an install publishes no
    /// events, so what follows state by its events looks again when this moves.
    installs: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Published> {
        // The lock only guards a pointer swap; a panic elsewhere cannot leave it half-written.
        self.published.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, store: &StateStore, index: Index) {
        {
            let mut p = self.lock();
            p.store = store.snapshot();
            p.index = index;
        }
        // After the store, so whoever sees the index also sees the state it names.
        self.applied.send_replace(index);
    }
}

/// A cheap, cloneable read handle on the applied state.
#[derive(Clone)]
pub struct StateHandle {
    shared: Arc<Shared>,
}

impl fmt::Debug for StateHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateHandle")
            .field("applied_index", &self.applied_index())
            .finish()
    }
}

/// The state did not reach an index in time.
#[derive(
    Clone, Copy, PartialEq, Eq, Debug, thiserror::Error, serde::Serialize, serde::Deserialize,
)]
#[error("state did not reach index {wanted} within {waited:?} (applied index is {applied})")]
pub struct WaitTimeout {
    pub wanted: Index,
    pub applied: Index,
    pub waited: Duration,
}

impl StateHandle {
    /// An O(1), immutable snapshot of the applied state.
    pub fn snapshot(&self) -> StateSnapshot {
        self.shared.lock().store.snapshot()
    }

    /// A snapshot together with the Raft index it reflects (every entry up to it applied).
    pub fn indexed_snapshot(&self) -> (Index, StateSnapshot) {
        let p = self.shared.lock();
        (p.index, p.store.snapshot())
    }

    /// The index of the last applied entry (commands, blank and membership entries alike).
    pub fn applied_index(&self) -> Index {
        *self.shared.applied.borrow()
    }

    /// A receiver that sees every advance of the applied index.
    pub fn watch_applied(&self) -> watch::Receiver<Index> {
        self.shared.applied.subscribe()
    }

    /// A receiver that changes whenever a snapshot from the leader replaces the state (it
    /// publishes no events for the entries it covers).
    pub fn watch_installs(&self) -> watch::Receiver<u64> {
        self.shared.installs.subscribe()
    }

    /// Waits until every entry up to `index` is applied and returns a snapshot that includes
    /// them, or gives up after `timeout`.
    pub async fn wait_for_index(
        &self,
        index: Index,
        timeout: Duration,
    ) -> Result<StateSnapshot, WaitTimeout> {
        let (applied, snap) = self.indexed_snapshot();
        if applied >= index {
            return Ok(snap);
        }
        let mut rx = self.watch_applied();
        // The sender lives in `shared`, which this handle keeps alive, so the wait ends only
        // by reaching the index or by the timeout.
        let reached = tokio::time::timeout(timeout, rx.wait_for(|i| *i >= index)).await;
        match reached {
            Ok(Ok(_)) => Ok(self.snapshot()),
            _ => Err(WaitTimeout {
                wanted: index,
                applied: self.applied_index(),
                waited: timeout,
            }),
        }
    }
}

/// The state machine openraft drives. See the module docs.
pub struct StateMachine {
    node_id: ServerId,
    store: StateStore,
    last_applied: Option<LogId>,
    last_membership: StoredMembership,
    shared: Arc<Shared>,
    snapshots: Arc<SnapshotStore>,
    events: Option<Arc<dyn EventSink>>,
    builds: u64,
    /// While the committed entries after the snapshot are applied again at start-up, nothing
    /// is published until this index is: no reader exists yet, and a published copy would
    /// share every tree with the working store, so each replayed write would copy its path
    /// (and the next publish free the old one). Zero once reached.
    replay_until: Index,
}

impl fmt::Debug for StateMachine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateMachine")
            .field("node_id", &self.node_id)
            .field("last_applied", &self.last_applied)
            .field("snapshots", &self.snapshots)
            .finish_non_exhaustive()
    }
}

fn decode_state(meta: &SnapshotMeta, data: &[u8]) -> Result<StateStore, SnapshotError> {
    decode_snapshot(data).map_err(|source| SnapshotError::Decode {
        snapshot_id: meta.snapshot_id.clone(),
        source,
    })
}

fn snapshot_error(meta: Option<&SnapshotMeta>, write: bool, e: SnapshotError) -> StorageError {
    tracing::error!(error = %e, "raft snapshot storage failed");
    let sig = meta.map(|m| m.signature());
    let e = AnyError::new(&e);
    if write {
        StorageIOError::write_snapshot(sig, e).into()
    } else {
        StorageIOError::read_snapshot(sig, e).into()
    }
}

async fn blocking<T, F>(f: F) -> Result<T, SnapshotError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, SnapshotError> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| SnapshotError::Task {
            reason: e.to_string(),
        })?
}

impl StateMachine {
    /// Opens the state machine on the snapshot dir `dir`: loads the current snapshot if there
    /// is one. `events` receives the events of every entry applied from now on.
    pub fn open(
        node_id: ServerId,
        dir: &Path,
        events: Option<Arc<dyn EventSink>>,
    ) -> Result<StateMachine, SnapshotError> {
        Self::open_replaying(node_id, dir, events, None)
    }

    /// [`open`](Self::open) for a start-up that will apply the log again up to `committed`
    /// (the log's committed hint): readers see nothing (index 0) until that index is applied,
    /// and the replay writes the store in place instead of behind a published copy.
    pub fn open_replaying(
        node_id: ServerId,
        dir: &Path,
        events: Option<Arc<dyn EventSink>>,
        committed: Option<Index>,
    ) -> Result<StateMachine, SnapshotError> {
        let started = std::time::Instant::now();
        let (snapshots, current) = SnapshotStore::open(dir)?;
        let read = started.elapsed();
        let (store, last_applied, last_membership) = match current {
            Some((meta, data)) => {
                let store = decode_state(&meta, &data)?;
                // A restart's first phases, each timed: reading the file, then decoding it
                // and rebuilding every index.
                tracing::info!(
                    snapshot_id = %meta.snapshot_id,
                    last_applied = ?meta.last_log_id.map(|l| l.index),
                    jobs = store.job_count(),
                    nodes = store.node_count(),
                    allocs = store.alloc_count(),
                    bytes = data.len(),
                    read_ms = read.as_millis() as u64,
                    decode_ms = (started.elapsed() - read).as_millis() as u64,
                    "state loaded from snapshot"
                );
                (store, meta.last_log_id, meta.last_membership)
            }
            None => (StateStore::new(), None, StoredMembership::default()),
        };
        let index = last_applied.map_or(0, |l| l.index);
        let replay_until = committed.filter(|&c| c > index).unwrap_or(0);
        let published = if replay_until > 0 {
            Published {
                store: StateStore::new(),
                index: 0,
            }
        } else {
            Published {
                store: store.snapshot(),
                index,
            }
        };
        let shared = Arc::new(Shared {
            applied: watch::channel(published.index).0,
            installs: watch::channel(0).0,
            published: Mutex::new(published),
        });
        Ok(StateMachine {
            node_id,
            store,
            last_applied,
            last_membership,
            shared,
            snapshots: Arc::new(snapshots),
            events,
            builds: 0,
            replay_until,
        })
    }

    /// The index of the last entry applied, published or not.
    pub fn applied_index(&self) -> Index {
        self.last_applied.map_or(0, |l| l.index)
    }

    /// A read handle on the applied state; it stays valid after openraft takes the machine.
    pub fn handle(&self) -> StateHandle {
        StateHandle {
            shared: self.shared.clone(),
        }
    }

    fn publish(&mut self) {
        let index = self.applied_index();
        if index < self.replay_until {
            return;
        }
        self.replay_until = 0;
        self.shared.publish(&self.store, index);
    }
}

/// Builds a snapshot from an O(1) copy of the state taken when openraft asked for it.
pub struct SnapshotBuilder {
    store: StateStore,
    meta: SnapshotMeta,
    snapshots: Arc<SnapshotStore>,
}

impl fmt::Debug for SnapshotBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotBuilder")
            .field("snapshot_id", &self.meta.snapshot_id)
            .finish_non_exhaustive()
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let store = self.store.clone();
        let meta = self.meta.clone();
        let snapshots = self.snapshots.clone();
        let data = blocking(move || {
            match snapshots.write_with(&meta, |out| encode_snapshot_to(&store, out))? {
                Some((file, start)) => Ok(SnapshotData::file(file, start)),
                // A newer snapshot was installed meanwhile and kept; this one is still
                // answered whole, from memory, as the state it was asked for.
                None => Ok(SnapshotData::Memory(Cursor::new(encode_snapshot(&store)))),
            }
        })
        .await
        .map_err(|e| snapshot_error(Some(&self.meta), true, e))?;
        Ok(Snapshot {
            meta: self.meta.clone(),
            snapshot: Box::new(data),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.last_applied, self.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ApplyResponse>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries = entries.into_iter();
        let mut responses = Vec::with_capacity(entries.size_hint().0);
        let mut events = Vec::new();
        // One applier for the run: the allocation indexes of an entry's writes may be
        // written on the helper thread while the next entries apply. Dropped (the store
        // whole) before publishing.
        let mut applier = fsm::Applier::new(&mut self.store);
        for entry in entries {
            let index = entry.log_id.index;
            let result = match entry.payload {
                EntryPayload::Blank => Ok(()),
                EntryPayload::Normal(cmd) => {
                    let kind = cmd.kind();
                    match applier.apply(index, cmd) {
                        Ok(evs) => {
                            if !evs.is_empty() {
                                events.push(Arc::new(evs));
                            }
                            Ok(())
                        }
                        Err(e) => {
                            tracing::debug!(index, kind, error = %e, "command refused");
                            Err(e)
                        }
                    }
                }
                EntryPayload::Membership(m) => {
                    tracing::info!(index, membership = %m, "membership applied");
                    self.last_membership = StoredMembership::new(Some(entry.log_id), m);
                    Ok(())
                }
            };
            self.last_applied = Some(entry.log_id);
            responses.push(ApplyResponse { index, result });
        }
        drop(applier);
        if responses.is_empty() {
            return Ok(responses);
        }
        self.publish();
        if let Some(sink) = &self.events {
            for evs in events {
                sink.publish(evs);
            }
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        self.builds += 1;
        let snapshot_id = match self.last_applied {
            Some(l) => format!(
                "{}-{}-{}-{}",
                l.leader_id.term, l.leader_id.node_id, l.index, self.builds
            ),
            None => format!("none-{}", self.builds),
        };
        SnapshotBuilder {
            store: self.store.snapshot(),
            meta: SnapshotMeta {
                last_log_id: self.last_applied,
                last_membership: self.last_membership.clone(),
                snapshot_id,
            },
            snapshots: self.snapshots.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotData>, StorageError> {
        Ok(Box::new(SnapshotData::receiving()))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<SnapshotData>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_bytes().await.map_err(|e| {
            snapshot_error(
                Some(meta),
                false,
                SnapshotError::Task {
                    reason: format!("cannot read the received snapshot: {e}"),
                },
            )
        })?;
        let snapshots = self.snapshots.clone();
        let m = meta.clone();
        // Decode first: a snapshot that does not decode is refused before it replaces anything.
        let store = blocking(move || {
            let store = decode_state(&m, &data)?;
            snapshots.write(&m, &data)?;
            Ok(store)
        })
        .await
        .map_err(|e| snapshot_error(Some(meta), true, e))?;
        self.store = store;
        self.last_applied = meta.last_log_id;
        self.last_membership = meta.last_membership.clone();
        // A snapshot replaces whatever a replay was rebuilding: readers get it at once.
        self.replay_until = 0;
        self.publish();
        let index = meta.last_log_id.map_or(0, |l| l.index);
        tracing::info!(
            snapshot_id = %meta.snapshot_id,
            last_applied = index,
            "snapshot installed"
        );
        if let Some(sink) = &self.events {
            sink.snapshot_installed(index);
        }
        self.shared.installs.send_modify(|n| *n += 1);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let snapshots = self.snapshots.clone();
        // The file itself, not its bytes: a follower catching up is sent chunks read from
        // disk, so a large snapshot is never held in memory to be sent.
        let current = blocking(move || snapshots.open_current())
            .await
            .map_err(|e| snapshot_error(None, false, e))?;
        Ok(current.map(|(meta, file, start)| Snapshot {
            meta,
            snapshot: Box::new(SnapshotData::file(file, start)),
        }))
    }
}
