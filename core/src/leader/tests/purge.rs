//! Operator purge played through: the node is forgotten by state and by the engine, and
//! each job that had work on it gets one eval, written after the node is gone.

use super::*;
use crate::leader::{NodePurgeError, node_purge};
use crate::state::NodeTaint;

impl Sim {
    /// Purges node `n` as the server does: decides, then writes the commands in order.
    fn purge(&mut self, n: u64) -> Result<NodePurge, NodePurgeError> {
        let snap = self.store.snapshot();
        let purge = node_purge(&snap, mock::node_id(n), self.now, &mut self.engine.rng)?;
        for cmd in purge.commands.clone() {
            self.write(cmd);
        }
        Ok(purge)
    }
}

#[test]
fn a_purged_node_is_gone_and_each_job_with_work_on_it_gets_one_eval() {
    let mut sim = Sim::leading();
    sim.healthy_node(1);
    sim.healthy_node(2);
    let web = mock::service_job("web", 2);
    let report = mock::batch_job("report", 1);
    let agent = mock::system_job("agent");
    let done = mock::batch_job("done", 1);
    let elsewhere = mock::service_job("elsewhere", 1);
    for (n, job) in [&web, &report, &agent, &done, &elsewhere]
        .into_iter()
        .enumerate()
    {
        sim.register_job(job, n as u64 + 1);
    }
    sim.place(&web, 1, 1);
    sim.place(&web, 2, 1);
    sim.place(&report, 3, 1);
    sim.place(&agent, 4, 1);
    sim.place(&elsewhere, 5, 2);
    sim.place(&done, 6, 1);
    sim.write(Command::AllocClientUpdate {
        node_id: mock::node_id(1),
        updates: vec![crate::fsm::AllocClientUpdate {
            alloc_id: mock::alloc_id(6),
            client_status: ClientStatus::Complete,
            client_description: Default::default(),
            task_states: Default::default(),
            deployment_health: None,
        }],
        evals: vec![],
        now: sim.now,
    });
    sim.dequeue_all();

    let purge = sim.purge(1).unwrap();
    let [
        Command::NodeDeregister { node_ids, .. },
        Command::EvalUpsert { evals },
    ] = purge.commands.as_slice()
    else {
        panic!("not a deregistration then evals: {:?}", purge.commands);
    };
    assert_eq!(node_ids, &[mock::node_id(1)]);
    assert_eq!(
        evals.iter().map(|e| e.id).collect::<Vec<_>>(),
        purge.eval_ids
    );

    let snap = sim.store.snapshot();
    assert!(snap.node(&mock::node_id(1)).is_none(), "node 1 is gone");
    assert!(snap.node(&mock::node_id(2)).is_some());
    // Its allocations stay until a scheduler marks them lost; it sees the node gone.
    assert_eq!(snap.allocs_by_node(&mock::node_id(1)).count(), 5);
    assert!(matches!(
        snap.node_taint(&mock::node_id(1)),
        NodeTaint::Gone
    ));
    // One eval per job with unfinished work on the node, whatever its type.
    let mut jobs: Vec<(String, JobType)> = purge
        .eval_ids
        .iter()
        .map(|id| {
            let e = snap.eval(id).expect("eval written");
            assert_eq!(e.triggered_by, TriggeredBy::NodeUpdate);
            assert_eq!(e.node_id, Some(mock::node_id(1)));
            assert_eq!(e.status, EvalStatus::Pending);
            (
                e.job_id.to_string(),
                snap.job(&e.job_key()).unwrap().job_type,
            )
        })
        .collect();
    jobs.sort();
    assert_eq!(
        jobs,
        vec![
            ("agent".to_string(), JobType::System),
            ("report".to_string(), JobType::Batch),
            ("web".to_string(), JobType::Service),
        ]
    );
    // The evals reach the broker.
    let mut handed_out = sim.dequeue_all();
    handed_out.sort();
    let mut wanted = purge.eval_ids.clone();
    wanted.sort();
    assert_eq!(handed_out, wanted);

    // The engine forgot the node: its heartbeat timer never fires, no health sweep
    // writes for it.
    let decided_before = sim.decided.len();
    let until = sim.expiry(1).saturating_add(SEC * 3600);
    while sim.now < until {
        sim.advance(SEC * 5);
        sim.heartbeat(2);
    }
    let about_node_1: Vec<&str> = sim.decided[decided_before..]
        .iter()
        .filter(|c| format!("{c:?}").contains(&mock::node_id(1).to_string()))
        .map(Command::kind)
        .collect();
    assert!(
        about_node_1.is_empty(),
        "writes for the purged node: {about_node_1:?}"
    );
    assert!(sim.store.snapshot().node(&mock::node_id(1)).is_none());
}

#[test]
fn purging_a_node_without_work_writes_only_its_deregistration() {
    let mut sim = Sim::leading();
    sim.healthy_node(1);
    let purge = sim.purge(1).unwrap();
    assert!(purge.eval_ids.is_empty());
    assert!(matches!(
        purge.commands.as_slice(),
        [Command::NodeDeregister { .. }]
    ));
    assert_eq!(sim.store.snapshot().node_count(), 0);
}

#[test]
fn purging_an_unknown_node_is_refused_naming_it() {
    let mut sim = Sim::leading();
    sim.healthy_node(1);
    let index = sim.index;
    let err = sim.purge(9).unwrap_err();
    assert_eq!(err, NodePurgeError::NotFound(mock::node_id(9)));
    assert_eq!(
        err.to_string(),
        format!("node {} not found", mock::node_id(9))
    );
    assert_eq!(sim.index, index, "nothing written");
}
