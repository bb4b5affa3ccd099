//! Client reports read against state: whose fault a failure is, and which evals it calls for.

use super::*;
use crate::fsm::{Command, apply};
use crate::mock;
use crate::state::StateStore;
use crate::types::*;

const T0: Timestamp = Timestamp(1_700_000_000_000);

/// Node 1's report of alloc 1 reaching `status` (`infra`: the agent blamed the node), in
/// the [`state`] that `others` make.
fn check(
    others: &[(u64, u64, ClientStatus)],
    status: ClientStatus,
    infra: bool,
) -> Result<ClientReport, ClientReportError> {
    report(&state(others), 1, 1, status, infra)
}

fn report(
    snap: &crate::state::StateSnapshot,
    node: u64,
    alloc: u64,
    status: ClientStatus,
    infra: bool,
) -> Result<ClientReport, ClientReportError> {
    let node = snap.node(&mock::node_id(node)).unwrap().clone();
    assess(
        snap,
        &node,
        vec![ClientAllocUpdate {
            update: update(alloc, status),
            infra_failure: infra,
            services: None,
        }],
    )
}

/// State with nodes 1..=4, job `web`, and alloc 1 on node 1 (version 0, running) plus one
/// alloc per entry of `others`: (node, job version, client status), numbered from 2.
fn state(others: &[(u64, u64, ClientStatus)]) -> crate::state::StateSnapshot {
    let mut store = StateStore::new();
    let mut index = 0;
    let mut write = |store: &mut StateStore, cmd: Command| {
        index += 1;
        let kind = cmd.kind();
        apply(store, index, cmd).unwrap_or_else(|e| panic!("{kind} refused: {e}"));
    };
    for n in 1..=4 {
        write(
            &mut store,
            Command::NodeRegister {
                node: mock::node(n),
                now: T0,
            },
        );
    }
    let job = mock::service_job("web", 1 + others.len() as u32);
    write(
        &mut store,
        Command::JobRegister {
            job: job.clone(),
            eval: None,
            now: T0,
        },
    );
    let mut allocs = vec![mock::alloc(1, &job, mock::node_id(1), 0)];
    for (i, (node, version, _)) in others.iter().enumerate() {
        let mut a = mock::alloc(2 + i as u64, &job, mock::node_id(*node), 1 + i as u32);
        a.job_version = *version;
        allocs.push(a);
    }
    write(&mut store, mock::place(mock::eval_id(0), allocs, T0));
    for (i, (node, _, status)) in others.iter().enumerate() {
        write(
            &mut store,
            Command::AllocClientUpdate {
                node_id: mock::node_id(*node),
                updates: vec![update(2 + i as u64, *status)],
                evals: Vec::new(),
                now: T0,
            },
        );
    }
    store.snapshot()
}

fn update(alloc: u64, status: ClientStatus) -> AllocClientUpdate {
    AllocClientUpdate {
        deployment_health: None,
        alloc_id: mock::alloc_id(alloc),
        client_status: status,
        client_description: Default::default(),
        task_states: Default::default(),
    }
}

use ClientStatus::{Complete, Failed, Running};

#[test]
fn whose_fault_a_failure_is() {
    // (case, other allocations, reported status, agent blamed the node, counts against it)
    let cases: &[(&str, &[(u64, u64, ClientStatus)], ClientStatus, bool, bool)] = &[
        ("agent blames the node", &[], Failed, true, true),
        ("a lone failure is the job's", &[], Failed, false, false),
        (
            "fails everywhere",
            &[(1, 0, Failed), (2, 0, Failed), (3, 0, Failed)],
            Failed,
            false,
            false,
        ),
        (
            "fails here, runs elsewhere",
            &[(1, 0, Failed), (2, 0, Running), (3, 0, Complete)],
            Failed,
            false,
            true,
        ),
        (
            "first failure here",
            &[(2, 0, Running), (3, 0, Running)],
            Failed,
            false,
            false,
        ),
        (
            "also runs here",
            &[
                (1, 0, Failed),
                (1, 0, Running),
                (2, 0, Running),
                (3, 0, Running),
            ],
            Failed,
            false,
            false,
        ),
        (
            "runs elsewhere only once",
            &[(1, 0, Failed), (2, 0, Running)],
            Failed,
            false,
            false,
        ),
        (
            "another version runs elsewhere",
            &[(1, 0, Failed), (2, 1, Running), (3, 1, Running)],
            Failed,
            false,
            false,
        ),
        (
            "not a failure",
            &[(1, 0, Failed), (2, 0, Running), (3, 0, Running)],
            Complete,
            false,
            false,
        ),
    ];
    for (case, others, status, infra, counts) in cases {
        let report = check(others, *status, *infra).unwrap();
        assert_eq!(
            report.node_failures.len(),
            usize::from(*counts),
            "{case}: {report:?}"
        );
    }
}

#[test]
fn a_failure_that_only_happens_here_names_the_job_version() {
    let report = check(
        &[(1, 0, Failed), (2, 0, Running), (3, 0, Running)],
        Failed,
        false,
    )
    .unwrap();
    assert_eq!(
        report.node_failures,
        ["job web version 0 failed 2 times here but runs on other nodes (2 allocations)"]
    );
}

#[test]
fn failures_and_reconnects_call_for_evals() {
    let report = check(&[], Failed, false).unwrap();
    assert_eq!(
        report.eval_jobs.values().collect::<Vec<_>>(),
        [&TriggeredBy::AllocFailure]
    );
    assert!(check(&[], Running, false).unwrap().eval_jobs.is_empty());
}

#[test]
fn a_node_reports_only_its_own_allocations() {
    let snap = state(&[(2, 0, Running)]);
    assert_eq!(
        report(&snap, 1, 9, Running, false).unwrap_err(),
        ClientReportError::UnknownAlloc(mock::alloc_id(9))
    );
    assert_eq!(
        report(&snap, 1, 2, Running, false).unwrap_err(),
        ClientReportError::NotOnNode {
            alloc_id: mock::alloc_id(2),
            node_id: mock::node_id(1)
        }
    );
    assert!(report(&snap, 2, 2, Running, false).is_ok());
}
