//! The stream a node agent follows: its whole allocation set first, then only what changed.
//!
//! A busy node holds a hundred allocations; a plan that places one more used to send all of
//! them again, and with every node touched by every large plan that was quadratic in the
//! cluster's allocations. The stream now remembers what it sent (each allocation's server
//! modify index) and sends the difference.
//!
//! Only what the servers changed is sent (`alloc_modify_index`, Nomad's `AllocModifyIndex`):
//! a node's own report (client status, task states) changes the stored allocation too, but
//! the node already knows it, and sending every allocation back to its node after the node
//! reported it running doubled the watch's work during a large placement.
//!
//! An agent that reconnects (after a server restart, a failover, a network cut) names what
//! it holds, and its first message is the difference from that, not the whole set: ten
//! thousand nodes reconnecting at once to a restarted server otherwise had it encode a
//! million allocations while it was taking its first writes.

use super::node_watch::{Changes, NodeWakeups};
use crate::error::ServerError;
use drover_core::state::StateSnapshot;
use drover_core::types::{AllocId, Allocation, JobKey};
use drover_proto::convert::{NodeCredentials, WireEnum};
use drover_proto::v1 as pb;
use std::sync::Arc;
use std::time::Duration;
use tonic::Status;

/// How long a watch waits for a wake-up before it walks its node's set anyway: a backstop
/// only. Every change that touches the node wakes it (its removal too), and so does a
/// snapshot install, which publishes no events. Each look costs a snapshot, the node's
/// authentication and a walk, so with tens of thousands of idle watches a short poll
/// cost an idle server more than their heartbeats did (at 5 s, two looks for every
/// heartbeat at 50,000 nodes). A client that goes away drops the stream; no poll is
/// needed for that.
const WATCH_POLL: Duration = Duration::from_secs(60);

/// What the stream has sent of one allocation: a different server modify index
/// ([`sent_index`]) means the servers changed it.
type Sent = (AllocId, u64);

/// The index a watch compares: the last change the servers made, not the node's reports.
fn sent_index(a: &Allocation) -> u64 {
    a.alloc_modify_index
}

/// What to send after `sent`, given the node's allocations `now` as the by-node index
/// holds them (id and server modify index, both sorted by id): the ids of the new or
/// changed allocations, and the ids that left the set. `next_sent` is refilled with what
/// will have been sent of `now`.
///
/// It walks the index's own entries: a busy node holds a hundred allocations and is woken
/// for every change to any of them, and collecting, sorting and cloning the set on each
/// wake-up came to about a fifth of the server's CPU during a large placement. The walk
/// reads no allocation; only the changed ones are read, by id, afterwards.
fn difference(
    sent: &[Sent],
    now: impl Iterator<Item = Sent>,
    next_sent: &mut Vec<Sent>,
) -> (Vec<AllocId>, Vec<AllocId>) {
    let mut changed = Vec::new();
    let mut removed = Vec::new();
    next_sent.clear();
    let mut sent = sent.iter().peekable();
    for (id, index) in now {
        next_sent.push((id, index));
        // Ids sent before and now gone sort before this one.
        while let Some(s) = sent.next_if(|s| s.0 < id) {
            removed.push(s.0);
        }
        match sent.next_if(|s| s.0 == id) {
            Some(s) if s.1 == index => {}
            _ => changed.push(id),
        }
    }
    removed.extend(sent.map(|s| s.0));
    (changed, removed)
}

/// What to send after `sent` when only the allocations `ids` (sorted) may have changed;
/// `now` finds each on this node as it is now. `sent` is updated in place.
fn apply_changes<'a>(
    sent: &mut Vec<Sent>,
    ids: &[AllocId],
    now: impl Fn(&AllocId) -> Option<&'a Arc<Allocation>>,
) -> (Vec<&'a Arc<Allocation>>, Vec<AllocId>) {
    let mut changed = Vec::new();
    let mut removed = Vec::new();
    for id in ids {
        match (sent.binary_search_by(|s| s.0.cmp(id)), now(id)) {
            (Ok(at), Some(a)) => {
                if sent[at].1 != sent_index(a) {
                    sent[at].1 = sent_index(a);
                    changed.push(a);
                }
            }
            (Err(at), Some(a)) => {
                sent.insert(at, (a.id, sent_index(a)));
                changed.push(a);
            }
            (Ok(at), None) => {
                sent.remove(at);
                removed.push(*id);
            }
            (Err(_), None) => {}
        }
    }
    (changed, removed)
}

/// Each allocation's job type, for those whose job the state still holds.
fn job_types<'a>(
    snap: &StateSnapshot,
    allocs: impl Iterator<Item = &'a Arc<Allocation>>,
) -> std::collections::BTreeMap<String, i32> {
    allocs
        .filter_map(|a| {
            let key = JobKey {
                namespace: a.namespace.clone(),
                id: a.job_id.clone(),
            };
            let job = snap.job(&key)?;
            Some((a.id.to_string(), job.job_type.to_wire()))
        })
        .collect()
}

/// What one watch remembers between messages.
struct Watch {
    handle: crate::ServerHandle,
    metrics: Arc<crate::metrics::Metrics>,
    auth: NodeCredentials,
    wakeups: tokio::sync::watch::Receiver<u64>,
    /// Changes when a snapshot install replaced the state: the next look walks.
    installs: tokio::sync::watch::Receiver<u64>,
    /// Which of the node's allocations changed since the last look, when known.
    changes: Arc<NodeWakeups>,
    /// The node's changes taken so far ([`NodeWakeups::changes_since`]).
    seen: u64,
    /// Whether the next look walks the node's whole set (after a quiet `WATCH_POLL`).
    walk_next: bool,
    /// What the stream has sent (sorted by id), `None` before the first message; before the
    /// first message of a stream opened with `known`, what the agent holds.
    sent: Option<Vec<Sent>>,
    /// Whether the first message of a stream opened with `known` is still due: it walks the
    /// node's set to compare it with what the agent holds, and is sent even when empty, so
    /// the agent learns that it is current.
    first_due: bool,
    /// The buffer the next `sent` is built in (the two are swapped, never reallocated).
    spare: Vec<Sent>,
    /// Set once the stream has sent its final error.
    ended: bool,
}

type WatchItem = Result<pb::WatchAllocationsResponse, Status>;

impl Watch {
    /// The next message: the node's allocation set first, then what changed whenever an
    /// applied entry that touched this node changes it (`wakeups`), or a snapshot install
    /// replaced the state (`installs`; a walk), and every `WATCH_POLL` as a backstop.
    /// `None` once the node is gone or its credentials stopped matching (after that error
    /// was sent).
    async fn next(&mut self) -> Option<WatchItem> {
        if self.ended {
            return None;
        }
        loop {
            match self.message() {
                Ok(Some(msg)) => return Some(Ok(msg)),
                Ok(None) => {}
                Err(e) => {
                    self.ended = true;
                    return Some(Err(e.into()));
                }
            }
            tokio::select! {
                changed = self.wakeups.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                installed = self.installs.changed() => {
                    if installed.is_err() {
                        return None;
                    }
                    self.walk_next = true;
                }
                _ = tokio::time::sleep(WATCH_POLL) => self.walk_next = true,
            }
        }
    }

    /// The message due now, if any. Synchronous, so the snapshot it reads is released
    /// before the watch waits: thousands of waiting watches must not each pin an old
    /// version of the state.
    fn message(&mut self) -> Result<Option<pb::WatchAllocationsResponse>, ServerError> {
        let index = self.handle.applied_index();
        let (snap, node_id) = self.handle.node_snapshot(&self.auth)?;
        let allocs = || snap.allocs_by_node(&node_id);
        let on_node = |id: &AllocId| snap.alloc(id).filter(|a| a.node_id == node_id);
        let (changes, seen) = self
            .changes
            .changes_since(&node_id, self.seen, snap.latest_index());
        self.seen = seen;
        let Some(sent) = self.sent.as_mut() else {
            let sent: Vec<Sent> = allocs().map(|a| (a.id, sent_index(a))).collect();
            self.metrics.watch_sent(sent.len());
            self.sent = Some(sent);
            return Ok(Some(pb::WatchAllocationsResponse {
                allocations: allocs().map(|a| a.as_ref().into()).collect(),
                index,
                removed: Vec::new(),
                complete: true,
                job_types: job_types(&snap, allocs()),
            }));
        };
        let first = std::mem::take(&mut self.first_due);
        let walk = std::mem::take(&mut self.walk_next) || first;
        let (changed, removed) = match changes {
            Changes::Known(ids) if !walk => apply_changes(sent, &ids, on_node),
            _ => {
                let (changed, removed) =
                    difference(sent, snap.alloc_versions_on_node(&node_id), &mut self.spare);
                std::mem::swap(sent, &mut self.spare);
                if first {
                    // It held the agent's `known`, which may be far longer than this
                    // node's set; keep no such buffer for the stream's life.
                    self.spare = Vec::new();
                }
                // The index names them; each is read by id, on this node as the index said.
                let changed = changed.iter().filter_map(on_node).collect();
                (changed, removed)
            }
        };
        if changed.is_empty() && removed.is_empty() && !first {
            return Ok(None);
        }
        self.metrics.watch_sent(changed.len());
        Ok(Some(pb::WatchAllocationsResponse {
            job_types: job_types(&snap, changed.iter().copied()),
            allocations: changed.into_iter().map(|a| a.as_ref().into()).collect(),
            index,
            removed: removed.iter().map(ToString::to_string).collect(),
            complete: false,
        }))
    }
}

/// The stream a node's `WatchAllocations` call returns (see [`Watch::next`]).
///
/// It is the response body itself, polled by the connection as the client reads: no task
/// and no channel per node (those were 4 KB for each of thousands of nodes), and a client
/// that goes away drops it.
///
/// `known` (sorted by id, unique) is what the agent holds from an earlier stream: the first
/// message is then the difference from it rather than the whole set.
pub(super) fn watch_stream(
    handle: crate::ServerHandle,
    auth: NodeCredentials,
    known: Option<Vec<Sent>>,
    changes: Arc<NodeWakeups>,
) -> impl futures::Stream<Item = WatchItem> + Send + 'static {
    let wakeups = changes.subscribe(auth.node_id);
    let installs = handle.state().watch_installs();
    let watch = Watch {
        metrics: handle.metrics(),
        handle,
        auth,
        wakeups,
        installs,
        changes,
        seen: 0,
        walk_next: false,
        first_due: known.is_some(),
        sent: known,
        spare: Vec::new(),
        ended: false,
    };
    futures::stream::unfold(watch, |mut watch| async move {
        let item = watch.next().await?;
        Some((item, watch))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::mock;

    /// Allocation `n` as the servers last changed it at `server_index`; the node's own
    /// reports moved its `modify_index` further, which a watch must not count as a change.
    fn alloc(n: u64, server_index: u64) -> Arc<Allocation> {
        let job = mock::service_job("web", 1);
        let mut a = mock::alloc(n, &job, mock::node_id(0), 0);
        a.alloc_modify_index = server_index;
        a.modify_index = server_index + 100;
        Arc::new(a)
    }

    /// A node's allocations from (number, server modify index) pairs, sorted by id as the
    /// store lists them.
    fn node_set(pairs: &[(u64, u64)]) -> Vec<Arc<Allocation>> {
        let mut allocs: Vec<_> = pairs.iter().map(|(n, m)| alloc(*n, *m)).collect();
        allocs.sort_unstable_by_key(|a| a.id);
        allocs
    }

    /// The ids of allocation numbers `ns`, sorted.
    fn ids(ns: &[u64]) -> Vec<AllocId> {
        let mut v: Vec<AllocId> = ns.iter().map(|n| mock::alloc_id(*n)).collect();
        v.sort_unstable();
        v
    }

    fn sent_of(allocs: &[Arc<Allocation>]) -> Vec<Sent> {
        versions(allocs).collect()
    }

    /// The node's set as the by-node index holds it.
    fn versions(allocs: &[Arc<Allocation>]) -> impl Iterator<Item = Sent> + '_ {
        allocs.iter().map(|a| (a.id, a.alloc_modify_index))
    }

    /// Each case: what was sent (alloc number, server modify index), what the node holds now, and
    /// the alloc numbers expected as changed and as removed.
    #[test]
    fn difference_sends_new_and_changed_and_names_removed() {
        type Case = (
            &'static str,
            &'static [(u64, u64)],
            &'static [(u64, u64)],
            &'static [u64],
            &'static [u64],
        );
        let cases: [Case; 6] = [
            (
                "nothing changed",
                &[(1, 5), (2, 6)],
                &[(1, 5), (2, 6)],
                &[],
                &[],
            ),
            ("one placed", &[(1, 5)], &[(1, 5), (2, 7)], &[2], &[]),
            (
                "one updated",
                &[(1, 5), (2, 6)],
                &[(1, 5), (2, 8)],
                &[2],
                &[],
            ),
            ("one collected", &[(1, 5), (2, 6)], &[(2, 6)], &[], &[1]),
            (
                "all at once",
                &[(1, 5), (2, 6), (3, 7)],
                &[(2, 9), (4, 9)],
                &[2, 4],
                &[1, 3],
            ),
            ("from empty", &[], &[(1, 1), (2, 1)], &[1, 2], &[]),
        ];
        for (what, before, now, want_changed, want_removed) in cases {
            let before = sent_of(&node_set(before));
            let now = node_set(now);
            let mut next_sent = vec![(mock::alloc_id(99), 1)];
            let (mut changed, removed) = difference(&before, versions(&now), &mut next_sent);
            assert_eq!(next_sent, sent_of(&now), "{what}: what will have been sent");
            changed.sort_unstable();
            assert_eq!(changed, ids(want_changed), "{what}: changed");
            assert_eq!(removed, ids(want_removed), "{what}: removed");
        }
    }

    /// A change only the node's own report made moves `modify_index` alone: neither the
    /// walk nor the named changes send it back.
    #[test]
    fn the_nodes_own_reports_are_not_sent_back() {
        let before = sent_of(&node_set(&[(1, 5), (2, 6)]));
        let mut now = node_set(&[(1, 5), (2, 6)]);
        for a in &mut now {
            Arc::make_mut(a).modify_index += 7;
        }
        let mut next_sent = Vec::new();
        let (changed, removed) = difference(&before, versions(&now), &mut next_sent);
        assert!(changed.is_empty() && removed.is_empty(), "walk");
        assert_eq!(next_sent, before, "walk: what was sent");
        let mut sent = before.clone();
        let (changed, removed) = apply_changes(&mut sent, &ids(&[1, 2]), |id| {
            now.iter().find(|a| a.id == *id)
        });
        assert!(changed.is_empty() && removed.is_empty(), "named");
        assert_eq!(sent, before, "named: what was sent");
    }

    /// Each case: what was sent, the allocations named as changed, what the node holds
    /// now, and the numbers expected as changed and removed; `sent` must end as the
    /// node's set.
    #[test]
    fn named_changes_update_what_was_sent_in_place() {
        type Case = (
            &'static str,
            &'static [(u64, u64)],
            &'static [u64],
            &'static [(u64, u64)],
            &'static [u64],
            &'static [u64],
        );
        let cases: [Case; 5] = [
            (
                "one updated",
                &[(1, 5), (2, 6)],
                &[2],
                &[(1, 5), (2, 8)],
                &[2],
                &[],
            ),
            ("one placed", &[(1, 5)], &[3], &[(1, 5), (3, 7)], &[3], &[]),
            (
                "one collected",
                &[(1, 5), (2, 6)],
                &[1],
                &[(2, 6)],
                &[],
                &[1],
            ),
            ("named, unchanged", &[(1, 5)], &[1], &[(1, 5)], &[], &[]),
            (
                "named, never sent, gone",
                &[(1, 5)],
                &[4],
                &[(1, 5)],
                &[],
                &[],
            ),
        ];
        for (what, before, named, now, want_changed, want_removed) in cases {
            let mut sent = sent_of(&node_set(before));
            let now = node_set(now);
            let (changed, removed) = apply_changes(&mut sent, &ids(named), |id| {
                now.iter().find(|a| a.id == *id)
            });
            let changed: Vec<AllocId> = changed.iter().map(|a| a.id).collect();
            assert_eq!(changed, ids(want_changed), "{what}: changed");
            assert_eq!(removed, ids(want_removed), "{what}: removed");
            assert_eq!(sent, sent_of(&now), "{what}: sent");
        }
    }
}
