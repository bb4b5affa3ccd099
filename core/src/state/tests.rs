//! The per-job index's copied fields are checked against the allocation they summarise, and
//! the tainted-node index follows the nodes and the allocations that name them.

use super::{AllocChange, JobAlloc, JobAllocs, NodeTaint, Slot, StateStore};
use crate::mock;
use crate::types::*;
use std::sync::Arc;

/// A store with one job and two of its allocations, as the FSM's write primitives leave it.
fn store_with_allocs() -> (StateStore, JobKey) {
    let mut s = StateStore::new();
    let job = mock::service_job("web", 2);
    s.put_job(1, job.clone());
    for i in 0..2u32 {
        let mut a = mock::alloc(u64::from(i), &job, mock::node_id(u64::from(i)), i);
        a.record_client_status(ClientStatus::Running, Timestamp::ZERO);
        s.put_alloc(2 + u64::from(i), a);
    }
    s.refresh_job_status(4, &job.key());
    (s, job.key())
}

#[test]
fn written_entries_copy_their_allocation() {
    let (s, key) = store_with_allocs();
    let entries: Vec<&JobAlloc> = s.job_allocs(&key).collect();
    assert_eq!(entries.len(), 2);
    for e in entries {
        let a = s.job_alloc(e).expect("the entry's allocation");
        assert_eq!(
            (
                e.id,
                e.node_id,
                e.group.as_str(),
                e.job_version,
                e.create_index
            ),
            (
                a.id,
                a.node_id,
                a.task_group.as_str(),
                a.job_version,
                a.create_index
            )
        );
        assert_eq!(
            (
                e.slot.get(),
                e.desired_status,
                e.client_status,
                e.last_state,
                e.migrate
            ),
            (
                a.name_index(),
                a.desired_status,
                a.client_status,
                a.last_state(),
                a.links.get().migrate
            )
        );
    }
    s.check_consistency().expect("consistent");
}

/// A write that changes none of an entry's fields (a report of task events alone) leaves
/// the job's entries as they were, shared with a snapshot taken before it: nothing of them
/// is copied. A write that changes one copies them.
#[test]
fn a_write_that_changes_no_copied_field_leaves_the_entries_shared() {
    let (mut s, key) = store_with_allocs();
    let before = s.snapshot();
    let shared =
        |now: &StateStore| match (before.allocs_by_job.get(&key), now.allocs_by_job.get(&key)) {
            (Some(JobAllocs::Few(x)), Some(JobAllocs::Few(y))) => Arc::ptr_eq(x, y),
            other => panic!("a job of two allocations keeps them in a slice: {other:?}"),
        };
    let id = s.job_allocs(&key).next().expect("an entry").id;
    let mut a = (**s.alloc(&id).expect("the allocation")).clone();
    a.client_description = "a task event".into();
    s.put_alloc(10, a.clone());
    assert!(shared(&s), "an unchanged entry was written");
    a.record_client_status(ClientStatus::Failed, Timestamp::ZERO);
    s.put_alloc(11, a);
    assert!(!shared(&s), "a changed entry was not written");
    s.check_consistency().expect("consistent");
}

/// Each copied field, made stale on its own, is reported by `check_consistency`.
#[test]
fn stale_copied_fields_break_consistency() {
    let stale: [(&str, fn(&mut JobAlloc)); 10] = [
        ("id", |e| e.id = mock::alloc_id(99)),
        ("node", |e| e.node_id = mock::node_id(99)),
        ("group", |e| e.group = "other".into()),
        ("job version", |e| e.job_version += 1),
        ("create index", |e| e.create_index += 1),
        ("slot", |e| e.slot = Slot::of(Some(7))),
        ("desired status", |e| e.desired_status = DesiredStatus::Stop),
        ("client status", |e| e.client_status = ClientStatus::Failed),
        ("last state", |e| e.last_state = Some(ClientStatus::Unknown)),
        ("migrate", |e| e.migrate = true),
    ];
    for (field, break_it) in stale {
        let (mut s, key) = store_with_allocs();
        let entries = s.allocs_by_job.get_mut(&key).expect("the job's entries");
        let id = entries.iter().next().expect("an entry").id;
        let entry = entries.few_entry_mut(&id).expect("the entry");
        let derived = JobAlloc::new(s.allocs.get(&id).expect("the allocation"));
        break_it(entry);
        assert_ne!(*entry, derived, "{field}");
        let shown = entry.id;
        let err = s.check_consistency().expect_err(field);
        assert_eq!(
            err,
            format!(
                "allocs_by_job entry of alloc {shown} disagrees with the allocation it summarises"
            ),
            "{field}"
        );
        assert_eq!(s.job_allocs(&key).count(), 2, "{field}");
    }
}

/// What `node_taint` says of a node, without the node itself.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Taint {
    Settled,
    Tainted,
    Gone,
}

fn taint(s: &StateStore, n: u64) -> Taint {
    match s.node_taint(&mock::node_id(n)) {
        NodeTaint::Settled => Taint::Settled,
        NodeTaint::Tainted(node) => {
            assert_eq!(node.id, mock::node_id(n));
            Taint::Tainted
        }
        NodeTaint::Gone => Taint::Gone,
    }
}

fn with_status(n: u64, status: NodeStatus, draining: bool) -> Node {
    let mut node = mock::node(n);
    node.status = status;
    node.drain = draining.then_some(DrainStrategy {
        deadline: None,
        force: false,
        ignore_system_jobs: false,
        started_at: Timestamp::ZERO,
    });
    node
}

/// Each step, applied in order to one store, and the taint of nodes 0, 1 and 5 after it.
#[test]
fn tainted_nodes_follow_nodes_and_their_allocations() {
    use Taint::*;
    let job = mock::service_job("web", 1);
    let on = |n: u64, status: ClientStatus| {
        let mut a = mock::alloc(0, &job, mock::node_id(n), 0);
        a.record_client_status(status, Timestamp::ZERO);
        a
    };
    type Step<'a> = (&'a str, Box<dyn Fn(&mut StateStore) + 'a>, [Taint; 3]);
    let steps: Vec<Step<'_>> = vec![
        (
            "ready node 0, down node 1",
            Box::new(|s| {
                s.put_node(1, with_status(0, NodeStatus::Ready, false));
                s.put_node(1, with_status(1, NodeStatus::Down, false));
            }),
            [Settled, Tainted, Settled],
        ),
        (
            "an allocation on node 5, never registered",
            Box::new(|s| {
                s.put_alloc(2, on(5, ClientStatus::Pending));
            }),
            [Settled, Tainted, Gone],
        ),
        (
            "its status changes on the same node",
            Box::new(|s| {
                s.put_alloc(3, on(5, ClientStatus::Running));
            }),
            [Settled, Tainted, Gone],
        ),
        (
            "it moves to node 0",
            Box::new(|s| {
                s.put_alloc(4, on(0, ClientStatus::Running));
            }),
            [Settled, Tainted, Settled],
        ),
        (
            "node 0 is removed under it",
            Box::new(|s| {
                s.remove_node(5, &mock::node_id(0));
            }),
            [Gone, Tainted, Settled],
        ),
        (
            "the allocation is removed",
            Box::new(|s| {
                s.remove_alloc(6, &mock::alloc_id(0));
            }),
            [Settled, Tainted, Settled],
        ),
        (
            "node 1 is ready and draining",
            Box::new(|s| {
                s.put_node(7, with_status(1, NodeStatus::Ready, true));
            }),
            [Settled, Tainted, Settled],
        ),
        (
            "node 1 disconnects, then is initializing and not draining",
            Box::new(|s| {
                s.put_node(8, with_status(1, NodeStatus::Disconnected, false));
                assert_eq!(taint(s, 1), Tainted);
                s.put_node(9, with_status(1, NodeStatus::Initializing, false));
            }),
            [Settled, Settled, Settled],
        ),
    ];
    let mut s = StateStore::new();
    for (what, step, want) in steps {
        step(&mut s);
        assert_eq!([taint(&s, 0), taint(&s, 1), taint(&s, 5)], want, "{what}");
        let count = want.iter().filter(|t| **t != Settled).count();
        assert_eq!(s.tainted_node_count(), count, "{what}");
        s.check_consistency()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let rebuilt = StateStore::from_parts(s.to_parts());
        assert_eq!(rebuilt.tainted_node_count(), count, "{what}: rebuilt");
    }
}

/// The schedulable nodes of each datacenter after each step, as `(datacenter, node)`.
fn schedulable(s: &StateStore) -> Vec<(String, u64)> {
    let number = |id: &NodeId| {
        (0..10)
            .find(|n| mock::node_id(*n) == *id)
            .expect("a test node")
    };
    s.schedulable_nodes()
        .flat_map(|(dc, set)| set.keys().map(move |id| (dc.to_owned(), number(id))))
        .collect()
}

/// Each step, applied in order to one store, and the schedulable set after it: a node is
/// listed under its datacenter only while it is ready, eligible, healthy and not draining.
#[test]
fn schedulable_nodes_follow_each_write_of_a_node() {
    let in_dc = |n: u64, dc: &str| {
        let mut node = mock::node(n);
        node.datacenter = dc.into();
        node
    };
    type Step<'a> = (
        &'a str,
        Box<dyn Fn(&mut StateStore) + 'a>,
        &'a [(&'a str, u64)],
    );
    let steps: Vec<Step<'_>> = vec![
        (
            "three ready nodes in two datacenters",
            Box::new(|s| {
                s.put_node(1, in_dc(0, "dc1"));
                s.put_node(1, in_dc(1, "dc2"));
                s.put_node(1, in_dc(2, "dc1"));
            }),
            &[("dc1", 0), ("dc1", 2), ("dc2", 1)],
        ),
        (
            "node 0 goes down, node 2 drains",
            Box::new(|s| {
                s.put_node(2, with_status(0, NodeStatus::Down, false));
                let mut draining = with_status(2, NodeStatus::Ready, true);
                draining.datacenter = "dc1".into();
                s.put_node(2, draining);
            }),
            &[("dc2", 1)],
        ),
        (
            "node 1 moves to dc1, node 0 is back in dc3",
            Box::new(|s| {
                s.put_node(3, in_dc(1, "dc1"));
                s.put_node(3, in_dc(0, "dc3"));
            }),
            &[("dc1", 1), ("dc3", 0)],
        ),
        (
            "node 1 is ineligible, node 0 is suspended",
            Box::new(|s| {
                let mut ineligible = in_dc(1, "dc1");
                ineligible.eligibility = Eligibility::Ineligible;
                s.put_node(4, ineligible);
                let mut suspended = in_dc(0, "dc3");
                suspended.health = NodeHealth::Suspended(SuspendReason::Flaky);
                s.put_node(4, suspended);
            }),
            &[],
        ),
        (
            "node 1 is eligible again, node 0 is removed",
            Box::new(|s| {
                s.put_node(5, in_dc(1, "dc1"));
                s.remove_node(5, &mock::node_id(0));
            }),
            &[("dc1", 1)],
        ),
    ];
    let mut s = StateStore::new();
    for (what, step, want) in steps {
        step(&mut s);
        let want: Vec<(String, u64)> = want.iter().map(|(d, n)| (d.to_string(), *n)).collect();
        assert_eq!(schedulable(&s), want, "{what}");
        s.check_consistency()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            schedulable(&StateStore::from_parts(s.to_parts())),
            want,
            "{what}: rebuilt"
        );
    }
}

/// A node whose stored computed class key is stale, or a schedulable set that misses a
/// node, is reported.
#[test]
fn a_stale_class_key_or_schedulable_set_breaks_consistency() {
    let mut s = StateStore::new();
    s.put_node(1, mock::node(0));
    s.check_consistency().expect("consistent");
    let mut stale = s.clone();
    let mut node = (**stale.nodes.get(&mock::node_id(0)).expect("node 0")).clone();
    node.attributes.insert("kernel.name".into(), "plan9".into());
    stale.nodes.insert(node.id, Arc::new(node));
    let err = stale.check_consistency().expect_err("stale class key");
    assert!(err.contains("stale computed class key"), "{err}");
    let mut missing = s.clone();
    missing.schedulable.clear();
    assert_eq!(
        missing.check_consistency().expect_err("missing node"),
        "schedulable disagrees with the node table"
    );
}

/// A tainted-node index that misses a node, or keeps one it should not, is reported.
#[test]
fn a_wrong_tainted_index_breaks_consistency() {
    let (mut s, _) = store_with_allocs();
    s.put_node(5, with_status(0, NodeStatus::Down, false));
    s.put_node(5, with_status(1, NodeStatus::Ready, false));
    s.check_consistency().expect("consistent");
    let breaks: [(&str, fn(&mut StateStore)); 3] = [
        ("down node missing", |s| {
            s.tainted_nodes.remove(&mock::node_id(0));
        }),
        ("ready node kept", |s| {
            let node = s.nodes.get(&mock::node_id(1)).cloned();
            s.tainted_nodes.insert(mock::node_id(1), node);
        }),
        ("present node said gone", |s| {
            s.tainted_nodes.insert(mock::node_id(0), None);
        }),
    ];
    check_breaks(
        &s,
        breaks,
        "tainted_nodes disagrees with the node table and the allocations",
    );
}

/// Each case breaks a copy of `s` its own way; the consistency check must name `broken`.
fn check_breaks<F: Fn(&mut StateStore)>(
    s: &StateStore,
    cases: impl IntoIterator<Item = (&'static str, F)>,
    broken: &str,
) {
    for (what, break_it) in cases {
        let mut copy = s.clone();
        break_it(&mut copy);
        assert_eq!(copy.check_consistency().expect_err(what), broken, "{what}");
    }
}

/// The per-node index must hold exactly the allocs table's keys and modify indexes: an
/// entry missing, one naming an allocation the table lacks or under another node, or one
/// with a stale index, is caught.
#[test]
fn a_wrong_key_in_the_node_index_breaks_consistency() {
    let (s, _) = store_with_allocs();
    let (key, index) = s
        .allocs_by_node
        .iter()
        .next()
        .map(|(k, i)| (*k, *i))
        .expect("an entry");
    let cases: [(&str, Box<dyn Fn(&mut StateStore)>); 4] = [
        (
            "a missing entry",
            Box::new(move |s| {
                s.allocs_by_node.remove(&key);
            }),
        ),
        (
            "an unknown allocation",
            Box::new(move |s| {
                s.allocs_by_node
                    .insert((key.0, mock::alloc_id(9_999)), index);
            }),
        ),
        (
            "another node",
            Box::new(move |s| {
                s.allocs_by_node.remove(&key);
                s.allocs_by_node
                    .insert((mock::node_id(9_999), key.1), index);
            }),
        ),
        (
            "a stale index",
            Box::new(move |s| {
                s.allocs_by_node.insert(key, index + 1);
            }),
        ),
    ];
    check_breaks(&s, cases, "allocs_by_node disagrees with the allocs table");
}

/// A prefix finds exactly the ids that start with it, whatever the table.
#[test]
fn ids_by_prefix_are_range_scans() {
    let mut s = StateStore::new();
    let job = mock::service_job("web", 1);
    let ids: [&str; 4] = [
        "a31ff64e-0000-4000-8000-000000000001",
        "a31ff64e-0000-4000-8000-000000000002",
        "a31ff6ff-0000-4000-8000-000000000003",
        "06f9cab1-0000-4000-8000-000000000004",
    ];
    for (i, id) in ids.iter().enumerate() {
        let mut a = mock::alloc(i as u64, &job, mock::node_id(1), i as u32);
        a.id = id.parse().expect("uuid");
        s.put_alloc(1 + i as u64, a);
        let mut e = mock::eval(i as u64, &job);
        e.id = id.parse().expect("uuid");
        s.put_eval(10 + i as u64, e);
    }
    // (prefix, ids found, in order)
    let cases: [(&str, &[usize]); 6] = [
        ("a31ff64e", &[0, 1]),
        ("A31FF6", &[0, 1, 2]),
        ("a31ff64e-0000-4000-8000-000000000002", &[1]),
        ("06f9", &[3]),
        ("b", &[]),
        ("0", &[3]),
    ];
    for (prefix, want) in cases {
        let p = IdPrefix::parse(prefix).expect(prefix);
        let want: Vec<String> = want.iter().map(|&i| ids[i].to_string()).collect();
        let allocs: Vec<String> = s.allocs_with_prefix(&p).map(|a| a.id.to_string()).collect();
        let evals: Vec<String> = s.evals_with_prefix(&p).map(|e| e.id.to_string()).collect();
        assert_eq!(allocs, want, "allocs {prefix:?}");
        assert_eq!(evals, want, "evals {prefix:?}");
    }
}

#[test]
fn jobs_by_prefix_stay_in_their_namespace() {
    let mut s = StateStore::new();
    for (ns, id) in [
        ("default", "web"),
        ("default", "web-2"),
        ("default", "worker"),
        ("prod", "web"),
    ] {
        let mut job = mock::service_job(id, 1);
        job.namespace = ns.into();
        s.put_job(1, job);
    }
    let found = |ns: &str, prefix: &str| -> Vec<String> {
        s.jobs_with_prefix(ns, prefix)
            .map(|j| j.id.to_string())
            .collect()
    };
    assert_eq!(found("default", "web"), ["web", "web-2"]);
    assert_eq!(found("default", "w"), ["web", "web-2", "worker"]);
    assert_eq!(found("prod", "w"), ["web"]);
    assert!(found("prod", "x").is_empty());
    assert!(found("dev", "").is_empty());
}

/// Each step, applied in order to one store, and then whether nodes 1 to 4 run a live
/// allocation, as the walk beside the usage table pairs them. Allocation `n` of job "web"
/// sits on the node given; node 9 is not in the node table and never listed.
#[test]
fn nodes_pair_with_what_their_live_allocations_hold() {
    let mut s = StateStore::new();
    let job = mock::service_job("web", 10);
    s.put_job(1, job.clone());
    for n in 1..=4 {
        s.put_node(1 + n, mock::node(n));
    }
    let placed = |n: u64, node: u64| mock::alloc(n, &job, mock::node_id(node), n as u32);
    let mut ended = placed(2, 3);
    ended.record_client_status(ClientStatus::Complete, Timestamp::ZERO);
    let mut stopped = placed(1, 2);
    stopped.record_client_status(ClientStatus::Failed, Timestamp::ZERO);
    let mut revived = stopped.clone();
    revived.client_status = ClientStatus::Running;
    revived.id = mock::alloc_id(5);
    type Step<'a> = Box<dyn Fn(&mut StateStore, Index) + 'a>;
    let steps: Vec<(&str, Step, [bool; 4])> = vec![
        ("nothing placed", Box::new(|_, _| {}), [false; 4]),
        (
            "one on node 2, one on the missing node 9",
            Box::new(|s, i| {
                s.put_alloc(i, placed(1, 2));
                s.put_alloc(i, placed(3, 9));
            }),
            [false, true, false, false],
        ),
        (
            "a complete one on node 3 holds nothing",
            Box::new(|s, i| {
                s.put_alloc(i, ended.clone());
            }),
            [false, true, false, false],
        ),
        (
            "two on node 4",
            Box::new(|s, i| {
                s.put_alloc(i, placed(4, 4));
                s.put_alloc(i, placed(6, 4));
            }),
            [false, true, false, true],
        ),
        (
            "node 2's one fails in place, another starts there",
            Box::new(|s, i| {
                s.put_alloc(i, stopped.clone());
                assert!(
                    s.node_use(&mock::node_id(2)).is_none(),
                    "an emptied node's entry goes"
                );
                s.put_alloc(i, revived.clone());
            }),
            [false, true, false, true],
        ),
        (
            "one of node 4's two is removed",
            Box::new(|s, i| {
                s.remove_alloc(i, &mock::alloc_id(4));
            }),
            [false, true, false, true],
        ),
        (
            "and the other",
            Box::new(|s, i| {
                s.remove_alloc(i, &mock::alloc_id(6));
            }),
            [false, true, false, false],
        ),
    ];
    for (i, (step, write, want)) in steps.into_iter().enumerate() {
        write(&mut s, 10 + i as u64);
        s.refresh_job_status(10 + i as u64, &job.key());
        let got: Vec<(NodeId, bool)> = s
            .nodes_with_use()
            .map(|(n, u)| (n.id, u.is_some_and(|u| u.runs_allocations())))
            .collect();
        let want: Vec<(NodeId, bool)> = (1..=4).map(mock::node_id).zip(want).collect();
        assert_eq!(got, want, "after {step}");
        s.check_consistency().expect(step);
    }
}

/// Pages read from a cursor cover a table's range once, in id order, and stay within it.
#[test]
fn pages_after_a_cursor_are_range_reads() {
    let mut s = StateStore::new();
    let (web, api) = (mock::service_job("web", 5), mock::service_job("api", 5));
    s.put_job(1, web.clone());
    s.put_job(1, api.clone());
    for n in [7, 3, 5, 1] {
        s.put_node(2, mock::node(n));
    }
    for n in 0..5 {
        s.put_alloc(3, mock::alloc(n, &web, mock::node_id(1), n as u32));
        s.put_alloc(3, mock::alloc(100 + n, &api, mock::node_id(1), n as u32));
    }
    let node = |n| mock::node_id(n);
    let nodes = |after: Option<u64>| -> Vec<NodeId> {
        s.nodes_after(after.map(node).as_ref())
            .map(|n| n.id)
            .collect()
    };
    assert_eq!(nodes(None), [node(1), node(3), node(5), node(7)]);
    assert_eq!(nodes(Some(3)), [node(5), node(7)]);
    assert_eq!(
        nodes(Some(4)),
        [node(5), node(7)],
        "a cursor need not exist"
    );
    assert!(nodes(Some(7)).is_empty());
    let mut web_ids: Vec<AllocId> = (0..5).map(mock::alloc_id).collect();
    web_ids.sort();
    let allocs = |after: Option<&AllocId>| -> Vec<AllocId> {
        s.allocs_by_job_after(&web.key(), after)
            .map(|a| a.id)
            .collect()
    };
    assert_eq!(allocs(None), web_ids);
    assert_eq!(allocs(Some(&web_ids[1])), web_ids[2..]);
    assert!(allocs(Some(&web_ids[4])).is_empty());
    assert!(allocs(Some(&AllocId::MAX)).is_empty());
}

/// A restore gives back the store it was taken from whichever order the allocations arrive
/// in, and every allocation shares its job's key strings: decoding gave each its own copy.
#[test]
fn a_restore_shares_each_jobs_key_strings() {
    let mut s = StateStore::new();
    for (j, id) in ["web", "api"].into_iter().enumerate() {
        let job = mock::service_job(id, 3);
        s.put_job(1, job.clone());
        for i in 0..3u64 {
            let n = j as u64 * 10 + i;
            s.put_alloc(2 + n, mock::alloc(n, &job, mock::node_id(i), i as u32));
        }
        s.refresh_job_status(40, &job.key());
    }
    let bytes = postcard::to_allocvec(&s.to_parts()).expect("encode");
    for reversed in [false, true] {
        let mut parts: super::StoreParts = postcard::from_bytes(&bytes).expect("decode");
        if reversed {
            parts.allocs.reverse();
        }
        let back = StateStore::from_parts(parts);
        assert_eq!(back.to_parts(), s.to_parts(), "reversed: {reversed}");
        back.check_consistency().expect("consistent");
        for a in back.allocs() {
            let key = JobKey {
                namespace: a.namespace.clone(),
                id: a.job_id.clone(),
            };
            let (shared, _) = back.summaries.get_key_value(&key).expect("a summary");
            assert!(
                Arc::ptr_eq(&a.namespace, &shared.namespace)
                    && Arc::ptr_eq(&a.job_id.0, &shared.id.0),
                "allocation {} keeps its own key strings (reversed: {reversed})",
                a.id
            );
        }
    }
}

/// One allocation write of [`batched_indexing_ends_as_writes_one_by_one`]: which
/// allocation, on which node, of which job, in which client status, or its removal.
#[derive(Clone, Debug)]
enum AllocWrite {
    Put {
        alloc: u64,
        node: u64,
        job: usize,
        status: ClientStatus,
        cpu: u64,
    },
    Remove {
        alloc: u64,
    },
}

fn alloc_write() -> impl proptest::strategy::Strategy<Value = AllocWrite> {
    use proptest::prelude::*;
    let status = prop_oneof![
        Just(ClientStatus::Pending),
        Just(ClientStatus::Running),
        Just(ClientStatus::Complete),
        Just(ClientStatus::Failed),
    ];
    prop_oneof![
        299 => (0u64..60, 1u64..8, 0usize..4, status, 1u64..4).prop_map(
            |(alloc, node, job, status, cpu)| AllocWrite::Put { alloc, node, job, status, cpu }
        ),
        1 => (0u64..60).prop_map(|alloc| AllocWrite::Remove { alloc }),
    ]
}

proptest::proptest! {
    /// Allocations written into the by-id table and indexed in batches (on two threads
    /// from a few hundred) leave the store exactly as the same writes one by one: every
    /// index, the nodes' usage, the summaries, the nodes allocations name but the table
    /// lacks. Nodes 6 and 7 are missing and job 3 is never registered, so tainted entries
    /// come and go and orphaned summaries are dropped. Removals are rare so that runs of
    /// writes reach the two-thread batches.
    #[test]
    fn batched_indexing_ends_as_writes_one_by_one(
        writes in proptest::collection::vec(alloc_write(), 1..700),
        batch in 1usize..400,
    ) {
        let jobs: Vec<Job> = (0..4).map(|j| mock::service_job(&format!("job-{j}"), 5)).collect();
        let mut base = StateStore::new();
        for (i, job) in jobs.iter().take(3).enumerate() {
            base.put_job(1 + i as u64, job.clone());
        }
        for n in 1..=5 {
            base.put_node(10 + n, mock::node(n));
        }
        let (mut one_by_one, mut batched) = (base.clone(), base);
        // A batch is one command's writes, all at its index, as the FSM's. As the FSM's
        // applier lets it, the allocation indexes may still be lent to the helper while
        // the next batches are written to the by-id table and the summaries, and indexed
        // after the batches lent before them; they land before any other write.
        let mut waiting = Vec::new();
        let mut lent = None;
        let mut index_batch = |s: &mut StateStore, index, changes: Vec<AllocChange>, land: bool| {
            if !changes.is_empty() {
                lent = s.index_alloc_changes(index, changes, lent.take());
            }
            if land && let Some(l) = lent.take() {
                s.land_indexes(l);
            }
        };
        let mut index = 100;
        for w in &writes {
            match w {
                AllocWrite::Put { alloc, node, job, status, cpu } => {
                    let mut a = mock::alloc(*alloc, &jobs[*job], mock::node_id(*node), *alloc as u32);
                    a.resources = Resources::new(*cpu * 100, 64, 0);
                    a.record_client_status(*status, Timestamp::ZERO);
                    one_by_one.put_alloc(index, a.clone());
                    // As a plan's placements are written: first as new, then, when the
                    // id is taken, as a replacement.
                    let change = match batched.insert_new_alloc(index, a) {
                        Ok(change) => change,
                        Err(taken) => batched.insert_alloc(index, Arc::unwrap_or_clone(taken)),
                    };
                    waiting.push(change);
                    if waiting.len() == batch {
                        index_batch(&mut batched, index, std::mem::take(&mut waiting), false);
                        index += 1;
                    }
                }
                AllocWrite::Remove { alloc } => {
                    // The FSM indexes what waits, and lands it, before any other write.
                    index_batch(&mut batched, index, std::mem::take(&mut waiting), true);
                    index += 1;
                    one_by_one.remove_alloc(index, &mock::alloc_id(*alloc));
                    batched.remove_alloc(index, &mock::alloc_id(*alloc));
                    index += 1;
                }
            }
        }
        index_batch(&mut batched, index, waiting, true);
        let end = index + 1;
        // As the FSM does after each command: jobs' statuses follow their summaries.
        for s in [&mut batched, &mut one_by_one] {
            for job in &jobs {
                s.refresh_job_status(end, &job.key());
            }
        }
        // Equal primary tables, each store's derived ones consistent with its own, and
        // the same table indexes: the same store.
        batched.check_consistency().map_err(proptest::test_runner::TestCaseError::fail)?;
        one_by_one.check_consistency().map_err(proptest::test_runner::TestCaseError::fail)?;
        proptest::prop_assert_eq!(batched.to_parts(), one_by_one.to_parts());
        proptest::prop_assert_eq!(batched.table_indexes(), one_by_one.table_indexes());
    }
}

/// A new allocation written under an id already taken changes nothing and comes back
/// whole, so its writer can place it as the replacement it is.
#[test]
fn a_new_allocation_under_a_taken_id_is_handed_back() {
    let (mut s, _) = store_with_allocs();
    let before = (s.to_parts(), s.table_indexes());
    let mut again = (**s.alloc(&mock::alloc_id(1)).unwrap()).clone();
    again.job_version = 7;
    let back = s.insert_new_alloc(9, again.clone()).unwrap_err();
    assert_eq!(*back, again);
    assert_eq!(
        Arc::strong_count(&back),
        1,
        "nothing else holds what came back"
    );
    assert_eq!((s.to_parts(), s.table_indexes()), before);
    s.check_consistency().unwrap();
    let fresh = mock::alloc(5, &mock::service_job("web", 2), mock::node_id(1), 5);
    let change = s.insert_new_alloc(9, fresh.clone()).unwrap();
    assert!(change.old.is_none());
    assert_eq!(*change.new, fresh);
}

/// A revision is written over the stored allocation in place, or not at all: a missing id
/// or a declined revision leaves every table and its index as they were.
#[test]
fn a_revision_is_written_in_place_or_declined() {
    let (mut s, _) = store_with_allocs();
    let before = (s.to_parts(), s.table_indexes());
    assert!(
        s.revise_alloc(9, &mock::alloc_id(7), |_| unreachable!())
            .is_none()
    );
    assert!(s.revise_alloc(9, &mock::alloc_id(1), |_| None).is_none());
    assert_eq!((s.to_parts(), s.table_indexes()), before);
    let stored = s.alloc(&mock::alloc_id(1)).unwrap().clone();
    let change = s
        .revise_alloc(9, &mock::alloc_id(1), |a| {
            Some(a.with_client_report(ClientStatus::Complete, "done".into(), TaskStates::new()))
        })
        .expect("a revision");
    assert!(Arc::ptr_eq(change.old.as_ref().unwrap(), &stored));
    assert_eq!(change.new.client_status, ClientStatus::Complete);
    assert!(Arc::ptr_eq(
        s.alloc(&mock::alloc_id(1)).unwrap(),
        &change.new
    ));
    assert_eq!(s.table_index(super::Table::Allocs), 9);
    s.index_alloc_change(9, &change);
    s.check_consistency().unwrap();
    assert!(
        Arc::ptr_eq(&change.new.job_id.0, &stored.job_id.0),
        "a revision keeps the shared key strings"
    );
}

/// A large job's index holds sixteen entries per B-tree leaf, and a small job's one slice
/// holds them side by side: each byte here is megabytes at millions of allocations.
#[test]
fn a_job_alloc_is_80_bytes() {
    assert_eq!(std::mem::size_of::<JobAlloc>(), 80);
}

#[test]
fn a_slot_reads_back_what_the_name_gave() {
    for index in [
        None,
        Some(0),
        Some(7),
        Some(999_999_999),
        Some(u32::MAX - 1),
    ] {
        assert_eq!(Slot::of(index).get(), index);
    }
    assert_eq!(Slot::of(Some(u32::MAX)).get(), None);
}
