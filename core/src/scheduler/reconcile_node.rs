//! The per-node diff of the system and sysbatch schedulers (the shape of Nomad's
//! `reconcile_node.go`): what one live allocation needs, from its own state and its
//! node's, as a pure function.
//!
//! One rule for both job types: a node that takes no new work (ineligible, offlined,
//! suspended, still initializing) keeps what it runs. Only a node that no longer matches
//! the job (datacenter, constraints), a drain that does not spare system jobs, or a node
//! that is down loses its allocation. A disconnected node keeps its allocation `unknown`
//! (still wanted) until the end of the group's disconnect window, with a follow-up eval at
//! that time; if the node is back by then the same allocation continues.

use crate::types::*;

/// What one live allocation of a system or sysbatch job needs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum NodeBucket {
    /// Keep it as it is.
    Ignore,
    /// It runs an older job version on a node that still runs the job: update it.
    Update,
    /// Its node is draining and does not spare system jobs: stop it.
    Migrate,
    /// Its node no longer matches the job (datacenter, constraints): stop it.
    Stop,
    /// Its node is down or gone, or disconnected past the window: it is lost.
    Lost,
    /// Its node is disconnected inside the window: mark it `unknown` (desired status stays
    /// run) with a follow-up eval due at `due`, the window's end.
    Disconnecting { due: Timestamp },
    /// Its node is back and its client reported it again: it continues; the reconnect is
    /// recorded (once) in its state history.
    Reconnecting,
}

/// Everything the decision reads besides the allocation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeFacts<'a> {
    /// `None` when the node is gone from state.
    pub node: Option<&'a Node>,
    /// The node's datacenter and attributes still satisfy the job and the group.
    pub matches_job: bool,
    pub job_version: u64,
    pub now: Timestamp,
    /// The eval being processed: when it is the allocation's own disconnect follow-up, the
    /// window is over.
    pub eval: EvalId,
}

/// The bucket of a live allocation (wanted running, not client-terminal) of `group`.
pub(crate) fn bucket(alloc: &Allocation, group: &TaskGroup, facts: NodeFacts<'_>) -> NodeBucket {
    let Some(node) = facts.node else {
        return NodeBucket::Lost;
    };
    match node.status {
        NodeStatus::Down => NodeBucket::Lost,
        NodeStatus::Disconnected => disconnected(alloc, group, node, facts),
        NodeStatus::Ready | NodeStatus::Initializing => {
            if alloc.links.get().migrate {
                // The drainer marked it: system allocations move last, and not at all
                // when the drain spares them.
                NodeBucket::Migrate
            } else if !facts.matches_job {
                NodeBucket::Stop
            } else if alloc.last_state() == Some(ClientStatus::Unknown) {
                // Back from a disconnect: settled once its client has reported, never before
                // (until then it holds the node, so nothing else is placed there).
                if alloc.client_status == ClientStatus::Unknown {
                    NodeBucket::Ignore
                } else {
                    NodeBucket::Reconnecting
                }
            } else if alloc.job_version != facts.job_version {
                NodeBucket::Update
            } else {
                NodeBucket::Ignore
            }
        }
    }
}

fn disconnected(
    alloc: &Allocation,
    group: &TaskGroup,
    node: &Node,
    facts: NodeFacts<'_>,
) -> NodeBucket {
    let Some(window) = group.disconnect_window() else {
        return NodeBucket::Lost;
    };
    if alloc.client_status != ClientStatus::Unknown {
        let due = node.status_updated_at.saturating_add(window);
        return if facts.now < due {
            NodeBucket::Disconnecting { due }
        } else {
            NodeBucket::Lost
        };
    }
    let since = match alloc.state_history.last() {
        Some(e) if e.client_status == ClientStatus::Unknown => e.time,
        _ => node.status_updated_at,
    };
    let due = since.saturating_add(window);
    if facts.now >= due || alloc.links.get().follow_up_eval_id == Some(facts.eval) {
        NodeBucket::Lost
    } else if alloc.links.get().follow_up_eval_id.is_none() {
        // Unknown without a follow-up (written before this rule): give it one, so it cannot
        // stay unknown for ever.
        NodeBucket::Disconnecting { due }
    } else {
        NodeBucket::Ignore
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock;
    use std::time::Duration;

    const T0: Timestamp = Timestamp(1_700_000_000_000);

    fn at(secs: u64) -> Timestamp {
        T0.saturating_add(Duration::from_secs(secs))
    }

    /// How the node stands in a row.
    #[derive(Clone, Copy, Debug)]
    enum N {
        Gone,
        Ready,
        Initializing,
        Down,
        /// Disconnected since 10 s.
        Disconnected,
        Ineligible,
        Offlined,
        Lost,
        Draining,
        DrainingSparingSystem,
    }

    /// How the allocation stands in a row.
    #[derive(Clone, Copy, Debug)]
    enum A {
        Running,
        /// Running, and marked by the drainer to move.
        Marked,
        OldVersion,
        /// Unknown since 12 s (marked after the node went disconnected).
        Unknown,
        UnknownWithFollowUp,
        /// Unknown since 12 s; this eval is its follow-up.
        UnknownDue,
        /// Was unknown; its client reported it running again.
        Reported,
    }

    /// The bucket for one row: node state, allocation state, whether the node matches the
    /// job, the group's window, and the time of the eval.
    fn check(n: N, a: A, matches_job: bool, window: Option<u64>, now: u64) -> NodeBucket {
        let job = mock::system_job("sys");
        let mut group = job.groups[0].clone();
        group.disconnect = window.map(|w| DisconnectPolicy {
            lost_after: Some(Duration::from_secs(w)),
            ..DisconnectPolicy::default()
        });
        let mut node = mock::node(1);
        node.status_updated_at = T0;
        match n {
            N::Ready | N::Gone => {}
            N::Initializing => node.status = NodeStatus::Initializing,
            N::Down => node.status = NodeStatus::Down,
            N::Disconnected => {
                node.status = NodeStatus::Disconnected;
                node.status_updated_at = at(10);
            }
            N::Ineligible => node.eligibility = Eligibility::Ineligible,
            N::Offlined => node.health = NodeHealth::Offlined,
            N::Lost => node.health = NodeHealth::Suspended(SuspendReason::Lost),
            N::Draining | N::DrainingSparingSystem => {
                node.drain = Some(DrainStrategy {
                    deadline: None,
                    force: false,
                    ignore_system_jobs: matches!(n, N::DrainingSparingSystem),
                    started_at: T0,
                });
            }
        }
        let mut alloc = mock::alloc(1, &job, node.id, 0);
        alloc.record_client_status(ClientStatus::Running, at(1));
        let eval = mock::eval_id(7);
        match a {
            A::Running => {}
            A::Marked => alloc.links.update(|l| l.migrate = true),
            A::OldVersion => alloc.job_version = job.version + 1,
            A::Unknown | A::UnknownWithFollowUp | A::UnknownDue | A::Reported => {
                alloc.record_client_status(ClientStatus::Unknown, at(12));
                alloc.links.update(|l| {
                    l.follow_up_eval_id = match a {
                        A::Unknown => None,
                        A::UnknownDue => Some(eval),
                        _ => Some(mock::eval_id(3)),
                    }
                });
                if matches!(a, A::Reported) {
                    alloc.client_status = ClientStatus::Running;
                }
            }
        }
        let facts = NodeFacts {
            node: (!matches!(n, N::Gone)).then_some(&node),
            matches_job,
            job_version: if matches!(a, A::OldVersion) {
                job.version
            } else {
                alloc.job_version
            },
            now: at(now),
            eval,
        };
        bucket(&alloc, &group, facts)
    }

    #[test]
    fn every_bucket() {
        use NodeBucket::*;
        let due = |s| Disconnecting { due: at(s) };
        // (node, allocation, node matches the job, window in s, now in s, bucket)
        let cases: &[(N, A, bool, Option<u64>, u64, NodeBucket)] = &[
            (N::Ready, A::Running, true, None, 20, Ignore),
            (N::Ready, A::OldVersion, true, None, 20, Update),
            (N::Ready, A::Running, false, None, 20, Stop),
            (N::Gone, A::Running, true, Some(30), 20, Lost),
            (N::Down, A::Running, true, Some(30), 20, Lost),
            // A drain moves what the drainer marked (system allocations last, never when
            // the drain spares them: it never marks those).
            (N::Draining, A::Marked, true, None, 20, Migrate),
            (N::Draining, A::Running, true, None, 20, Ignore),
            (N::DrainingSparingSystem, A::Running, true, None, 20, Ignore),
            // No new work here, but what runs stays (item 2 of issue 14).
            (N::Ineligible, A::Running, true, None, 20, Ignore),
            (N::Offlined, A::Running, true, None, 20, Ignore),
            (N::Lost, A::Running, true, None, 20, Ignore),
            (N::Initializing, A::Running, true, None, 20, Ignore),
            (N::Ineligible, A::OldVersion, true, None, 20, Update),
            // Disconnected: unknown with a follow-up at the window's end, then lost.
            (N::Disconnected, A::Running, true, Some(30), 20, due(40)),
            (N::Disconnected, A::Running, true, Some(30), 40, Lost),
            (N::Disconnected, A::Running, true, None, 20, Lost),
            (
                N::Disconnected,
                A::UnknownWithFollowUp,
                true,
                Some(30),
                20,
                Ignore,
            ),
            (N::Disconnected, A::Unknown, true, Some(30), 20, due(42)),
            (
                N::Disconnected,
                A::UnknownWithFollowUp,
                true,
                Some(30),
                42,
                Lost,
            ),
            (N::Disconnected, A::UnknownDue, true, Some(30), 41, Lost),
            // Back: wait for the client, then the same allocation continues.
            (N::Ready, A::UnknownWithFollowUp, true, Some(30), 20, Ignore),
            (N::Ready, A::Reported, true, Some(30), 20, Reconnecting),
            (N::Ineligible, A::Reported, true, Some(30), 20, Reconnecting),
            (N::Ready, A::Reported, false, Some(30), 20, Stop),
        ];
        for &(n, a, matches_job, window, now, want) in cases {
            assert_eq!(
                check(n, a, matches_job, window, now),
                want,
                "{n:?} {a:?} matches={matches_job} window={window:?} now={now}"
            );
        }
    }
}
