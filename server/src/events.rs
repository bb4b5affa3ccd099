//! The retained event buffer behind `EventService/Subscribe`: the most recent applied
//! entries' events, bounded by an event count, read by subscribers through a cursor.
//!
//! The FSM publishes into it on its apply path, so publishing only takes a short lock,
//! appends, drops the oldest batches past the bound and bumps a watch: it never waits on a
//! subscriber. Each subscriber keeps its own cursor (the next index it wants) and reads
//! at its own pace; one that a bound overtakes finds its cursor below the buffer's floor
//! and is told to resubscribe. That way a slow subscriber costs the server nothing but the
//! buffer it already holds.
//!
//! Invariant: every event with an index at or above [`EventRing::floor`] that this server
//! applied since it started is in the buffer, in index order.

use crate::raft::EventSink;
use drover_core::Index;
use drover_core::fsm::Event;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{broadcast, watch};

/// The default bound: events retained for replay.
pub const DEFAULT_EVENT_BUFFER: usize = 16 * 1024;

/// A subscriber's cursor fell below what the buffer still holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("index {wanted} is no longer buffered; the oldest index still buffered is {floor}")]
pub struct Behind {
    pub wanted: Index,
    pub floor: Index,
}

#[derive(Debug, Default)]
struct Retained {
    /// One applied entry's events per batch, in index order; never empty batches.
    batches: VecDeque<Arc<Vec<Event>>>,
    /// Events in `batches`.
    events: usize,
    /// The lowest index every later event of is retained; `None` until the server knows
    /// where its history starts (the first publish or [`EventRing::start_at`]).
    floor: Option<Index>,
}

/// See the module docs.
#[derive(Debug)]
pub struct EventRing {
    capacity: usize,
    retained: Mutex<Retained>,
    /// The index of the newest batch, for subscribers waiting for more.
    newest: watch::Sender<Index>,
}

fn batch_index(batch: &[Event]) -> Index {
    batch.first().map_or(0, |e| e.index)
}

impl EventRing {
    /// A buffer retaining at least the newest batch and otherwise at most `capacity` events.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            retained: Mutex::new(Retained::default()),
            newest: watch::channel(0).0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Retained> {
        // A panic while holding this lock cannot leave the deque half-changed in a way
        // readers could misread, so a poisoned lock is still usable.
        self.retained.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Declares that the history starts after `applied` if nothing was published yet (the
    /// entries up to it were loaded from disk, not applied here with events).
    pub fn start_at(&self, applied: Index) {
        let mut r = self.lock();
        if r.floor.is_none() {
            r.floor = Some(applied + 1);
        }
    }

    /// The oldest index a subscriber can still start from.
    pub fn floor(&self) -> Index {
        self.lock().floor.unwrap_or(0)
    }

    /// The index of the newest retained batch (0: none yet).
    pub fn newest(&self) -> Index {
        *self.newest.borrow()
    }

    /// Every retained batch at or after `from`, at most `max` of them. Err when events at
    /// `from` may have been dropped.
    pub fn read_from(&self, from: Index, max: usize) -> Result<Vec<Arc<Vec<Event>>>, Behind> {
        let r = self.lock();
        let floor = r.floor.unwrap_or(0);
        if from < floor {
            return Err(Behind {
                wanted: from,
                floor,
            });
        }
        let start = r.batches.partition_point(|b| batch_index(b) < from);
        Ok(r.batches.range(start..).take(max).cloned().collect())
    }

    /// A receiver that changes whenever a batch is appended.
    pub fn watch(&self) -> watch::Receiver<Index> {
        self.newest.subscribe()
    }

    fn push(&self, batch: Arc<Vec<Event>>) {
        let index = batch_index(&batch);
        {
            let mut r = self.lock();
            r.floor.get_or_insert(index);
            r.events += batch.len();
            r.batches.push_back(batch);
            while r.events > self.capacity && r.batches.len() > 1 {
                if let Some(old) = r.batches.pop_front() {
                    r.events -= old.len();
                    r.floor = Some(batch_index(&old) + 1);
                }
            }
        }
        self.newest.send_replace(index);
    }

    fn reset(&self, index: Index) {
        {
            let mut r = self.lock();
            r.batches.clear();
            r.events = 0;
            r.floor = Some(index + 1);
        }
        self.newest.send_replace(index);
    }
}

/// What the FSM publishes to: the leader's live broadcast and the replay buffer.
#[derive(Debug)]
pub(crate) struct Fanout {
    pub(crate) live: broadcast::Sender<Arc<Vec<Event>>>,
    pub(crate) ring: Arc<EventRing>,
}

impl EventSink for Fanout {
    fn publish(&self, events: Arc<Vec<Event>>) {
        self.ring.push(events.clone());
        self.live.publish(events);
    }

    fn snapshot_installed(&self, index: Index) {
        self.ring.reset(index);
        self.live.snapshot_installed(index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::fsm::{EventPayload, EventType, Topic};

    fn batch(index: Index, events: usize) -> Arc<Vec<Event>> {
        Arc::new(
            (0..events)
                .map(|n| Event {
                    topic: Topic::Node,
                    event_type: EventType::NodeDeregistration,
                    key: format!("n{n}"),
                    index,
                    payload: EventPayload::NodeId(drover_core::NodeId::from_bytes([0; 16])),
                })
                .collect(),
        )
    }

    fn indexes(batches: &[Arc<Vec<Event>>]) -> Vec<Index> {
        batches.iter().map(|b| batch_index(b)).collect()
    }

    #[test]
    fn replays_from_an_index_and_drops_the_oldest_past_the_bound() {
        // (capacity, batches as (index, events), read from) -> Ok(indexes) or Err(floor)
        let cases: Vec<(usize, Vec<(Index, usize)>, Index, Result<Vec<Index>, Index>)> = vec![
            (10, vec![(5, 1), (6, 2), (8, 1)], 6, Ok(vec![6, 8])),
            (10, vec![(5, 1), (6, 2), (8, 1)], 7, Ok(vec![8])),
            (10, vec![(5, 1), (6, 2), (8, 1)], 9, Ok(vec![])),
            (10, vec![(5, 1)], 4, Err(5)),
            (3, vec![(5, 1), (6, 2), (8, 1)], 6, Ok(vec![6, 8])),
            (3, vec![(5, 1), (6, 2), (8, 1)], 5, Err(6)),
            (2, vec![(5, 1), (6, 2), (8, 1)], 6, Err(7)),
            (2, vec![(5, 1), (6, 2), (8, 1)], 7, Ok(vec![8])),
            // The newest batch stays even when it alone is past the bound.
            (1, vec![(5, 4)], 5, Ok(vec![5])),
        ];
        for (capacity, pushes, from, want) in cases {
            let ring = EventRing::new(capacity);
            for (index, n) in &pushes {
                ring.push(batch(*index, *n));
            }
            let got = ring.read_from(from, usize::MAX);
            let got = got.map(|b| indexes(&b)).map_err(|e| e.floor);
            assert_eq!(
                got, want,
                "capacity {capacity}, pushes {pushes:?}, from {from}"
            );
        }
    }

    #[test]
    fn start_at_sets_the_floor_only_before_the_first_publish() {
        let ring = EventRing::new(8);
        ring.start_at(41);
        assert_eq!(ring.floor(), 42);
        ring.start_at(50);
        assert_eq!(ring.floor(), 42);
        let other = EventRing::new(8);
        other.push(batch(3, 1));
        other.start_at(10);
        assert_eq!(other.floor(), 3);
    }

    #[test]
    fn a_snapshot_install_empties_the_buffer_above_its_index() {
        let ring = EventRing::new(8);
        ring.push(batch(3, 1));
        ring.reset(20);
        assert_eq!(
            ring.read_from(3, 10),
            Err(Behind {
                wanted: 3,
                floor: 21
            })
        );
        assert_eq!(ring.read_from(21, 10).map(|b| b.len()), Ok(0));
        assert_eq!(ring.newest(), 20);
    }
}
