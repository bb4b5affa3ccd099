//! The per-job index's copied fields are checked against the allocation they summarise.

use super::{JobAlloc, StateStore};
use crate::mock;
use crate::types::*;

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
        let a = &e.alloc;
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
            (e.slot, e.desired_status, e.client_status, e.last_state),
            (
                a.name_index(),
                a.desired_status,
                a.client_status,
                a.last_state()
            )
        );
    }
    s.check_consistency().expect("consistent");
}

/// Each copied field, made stale on its own, is reported by `check_consistency`.
#[test]
fn stale_copied_fields_break_consistency() {
    let stale: [(&str, fn(&mut JobAlloc)); 9] = [
        ("id", |e| e.id = mock::alloc_id(99)),
        ("node", |e| e.node_id = mock::node_id(99)),
        ("group", |e| e.group = "other".into()),
        ("job version", |e| e.job_version += 1),
        ("create index", |e| e.create_index += 1),
        ("slot", |e| e.slot = Some(7)),
        ("desired status", |e| e.desired_status = DesiredStatus::Stop),
        ("client status", |e| e.client_status = ClientStatus::Failed),
        ("last state", |e| e.last_state = Some(ClientStatus::Unknown)),
    ];
    for (field, break_it) in stale {
        let (mut s, key) = store_with_allocs();
        let index_key = s.allocs_by_job.keys().next().expect("an entry").clone();
        let id = index_key.1;
        let entry = s.allocs_by_job.get_mut(&index_key).expect("the entry");
        break_it(entry);
        assert!(!entry.is_current(), "{field}");
        let err = s.check_consistency().expect_err(field);
        assert_eq!(
            err,
            format!(
                "allocs_by_job entry of alloc {id} disagrees with the allocation it summarises"
            ),
            "{field}"
        );
        assert_eq!(s.job_allocs(&key).count(), 2, "{field}");
    }
}
