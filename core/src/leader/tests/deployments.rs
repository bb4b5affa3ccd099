//! The deployment watcher: health reports and deadlines in, promotion, failure (with
//! revert) and success out.

use super::*;

/// A service job of `count` under an update block, version `version` registered.
fn job(count: u32, canary: u32, auto_promote: bool, auto_revert: bool) -> Job {
    let mut job = mock::service_job("web", count);
    job.update.deployment = Some(DeploymentStrategy {
        canary,
        auto_promote,
        auto_revert,
        progress_deadline: 600 * SEC,
        ..DeploymentStrategy::default()
    });
    job
}

/// Places `allocs` allocations (the first `canaries` of them canaries) for a new
/// deployment of the job's current version; returns the deployment id and the allocs.
fn deploy(sim: &mut Sim, job: &Job, allocs: u64, canaries: u32) -> (DeploymentId, Vec<AllocId>) {
    let stored = sim.store.job(&job.key()).cloned().unwrap();
    let id = DeploymentId::from_bytes([stored.version as u8 + 1; 16]);
    let strategy = stored.update.deployment.clone().unwrap();
    let group = DeploymentGroup {
        desired_total: stored.groups[0].count,
        desired_canaries: canaries,
        auto_promote: strategy.auto_promote,
        auto_revert: strategy.auto_revert,
        progress_deadline: strategy.progress_deadline,
        ..Default::default()
    };
    let deployment = Deployment {
        id,
        namespace: stored.namespace.clone(),
        job_id: stored.id.clone(),
        job_version: stored.version,
        job_create_index: stored.create_index,
        status: DeploymentStatus::Running,
        description: deployment_describe::RUNNING.into(),
        groups: [(stored.groups[0].name.clone(), group)].into(),
        create_time: sim.now,
        create_index: 0,
        modify_index: 0,
    };
    let base = 100 * (stored.version + 1);
    let placed: Vec<Allocation> = (0..allocs)
        .map(|i| {
            let mut a = mock::alloc(base + i, &stored, mock::node_id(1), i as u32);
            a.client_status = ClientStatus::Running;
            a.links.update(|l| {
                l.deployment = Some(AllocDeployment {
                    id,
                    canary: (i as u32) < canaries,
                    health: None,
                })
            });
            a
        })
        .collect();
    let ids = placed.iter().map(|a| a.id).collect();
    let mut cmd = mock::place(mock::eval_id(0), placed, sim.now);
    if let Command::ApplyPlan { plan, .. } = &mut cmd {
        plan.deployment = Some(deployment);
    }
    sim.write(cmd);
    (id, ids)
}

fn report(sim: &mut Sim, allocs: &[AllocId], healthy: bool) {
    report_verdict(sim, allocs, healthy, Some(healthy));
}

/// Reports the allocations running (or failed) with the agent's verdict, if it sent one.
fn report_verdict(sim: &mut Sim, allocs: &[AllocId], healthy: bool, verdict: Option<bool>) {
    for id in allocs {
        sim.write(Command::AllocClientUpdate {
            node_id: mock::node_id(1),
            updates: vec![crate::fsm::AllocClientUpdate {
                alloc_id: *id,
                client_status: if healthy {
                    ClientStatus::Running
                } else {
                    ClientStatus::Failed
                },
                client_description: Default::default(),
                task_states: Default::default(),
                deployment_health: verdict,
            }],
            evals: vec![],
            now: sim.now,
        });
    }
}

fn status(sim: &Sim, id: DeploymentId) -> (DeploymentStatus, String) {
    let d = sim.store.deployment(&id).unwrap();
    (d.status, d.description.clone())
}

fn watcher_evals(sim: &Sim) -> usize {
    sim.decided
        .iter()
        .map(|c| match c {
            Command::EvalUpsert { evals } => evals
                .iter()
                .filter(|e| e.triggered_by == TriggeredBy::DeploymentWatcher)
                .count(),
            Command::DeploymentStatus { evals, .. } => evals.len(),
            Command::DeploymentPromote { .. } => 1,
            _ => 0,
        })
        .sum()
}

fn leading_with(job: &Job) -> Sim {
    let mut sim = Sim::leading();
    // Written directly: no heartbeat timer, so the node stays as it is while time passes.
    sim.write(Command::NodeRegister {
        node: mock::node(1),
        now: sim.now,
    });
    sim.register_job(job, 1);
    sim
}

#[test]
fn a_deployment_whose_allocations_all_turn_healthy_succeeds_and_its_version_is_stable() {
    let job = job(3, 0, false, false);
    let mut sim = leading_with(&job);
    let (id, allocs) = deploy(&mut sim, &job, 3, 0);
    report(&mut sim, &allocs[..1], true);
    assert_eq!(status(&sim, id).0, DeploymentStatus::Running);
    assert_eq!(
        watcher_evals(&sim),
        1,
        "a healthy allocation asks for the next ones"
    );
    report(&mut sim, &allocs[1..], true);
    assert_eq!(
        status(&sim, id),
        (
            DeploymentStatus::Successful,
            deployment_describe::SUCCESSFUL.into()
        )
    );
    assert!(sim.store.job(&job.key()).unwrap().stable);
}

#[test]
fn an_unhealthy_allocation_fails_the_deployment_and_auto_revert_registers_the_stable_version() {
    for auto_revert in [false, true] {
        let v0 = job(2, 0, false, auto_revert);
        let mut sim = leading_with(&v0);
        let (first, allocs) = deploy(&mut sim, &v0, 2, 0);
        report(&mut sim, &allocs, true);
        assert_eq!(status(&sim, first).0, DeploymentStatus::Successful);
        let mut v1 = v0.clone();
        v1.groups[0].tasks[0].env.insert("V".into(), "1".into());
        sim.register_job(&v1, 2);
        let (second, allocs) = deploy(&mut sim, &v1, 1, 0);
        report(&mut sim, &allocs, false);
        let (st, why) = status(&sim, second);
        assert_eq!(st, DeploymentStatus::Failed);
        let job = sim.store.job(&v0.key()).unwrap().clone();
        if auto_revert {
            assert_eq!(
                why,
                format!("{} 0", deployment_describe::UNHEALTHY_REVERTED)
            );
            assert_eq!(job.version, 2, "the revert is a new version");
            assert!(!job.spec_differs(&v0), "with version 0's spec");
        } else {
            assert_eq!(why, deployment_describe::UNHEALTHY);
            assert_eq!(job.version, 1);
        }
    }
}

/// An agent may report the allocation failed before it sent a verdict (the task died as it
/// started): failed counts as unhealthy, or the deployment would wait for its deadline.
#[test]
fn a_failed_allocation_without_a_verdict_counts_as_unhealthy() {
    let v0 = job(2, 0, false, false);
    let mut sim = leading_with(&v0);
    let (id, allocs) = deploy(&mut sim, &v0, 2, 0);
    report_verdict(&mut sim, &allocs[..1], false, None);
    assert_eq!(
        status(&sim, id),
        (
            DeploymentStatus::Failed,
            deployment_describe::UNHEALTHY.into()
        )
    );
    let a = sim.store.alloc(&allocs[0]).unwrap();
    let health = a.links.get().deployment.as_ref().unwrap().health;
    assert_eq!(health.map(|h| h.healthy), Some(false));
}

#[test]
fn a_deployment_without_progress_fails_at_its_deadline() {
    let job = job(2, 0, false, false);
    let mut sim = leading_with(&job);
    let (id, allocs) = deploy(&mut sim, &job, 2, 0);
    sim.advance(599 * SEC);
    assert_eq!(status(&sim, id).0, DeploymentStatus::Running);
    report(&mut sim, &allocs[..1], true);
    sim.advance(599 * SEC);
    assert_eq!(
        status(&sim, id).0,
        DeploymentStatus::Running,
        "a healthy allocation moves the deadline on"
    );
    sim.advance(2 * SEC);
    assert_eq!(
        status(&sim, id),
        (
            DeploymentStatus::Failed,
            deployment_describe::PROGRESS_DEADLINE.into()
        )
    );
}

#[test]
fn healthy_canaries_are_promoted_only_with_auto_promote() {
    for auto_promote in [false, true] {
        let job = job(3, 1, auto_promote, false);
        let mut sim = leading_with(&job);
        let (id, allocs) = deploy(&mut sim, &job, 1, 1);
        report(&mut sim, &allocs, true);
        let d = sim.store.deployment(&id).unwrap();
        assert_eq!(
            d.groups["web"].promoted, auto_promote,
            "auto_promote {auto_promote}"
        );
        assert_eq!(d.status, DeploymentStatus::Running);
    }
}

#[test]
fn a_paused_deployment_is_not_failed_by_its_deadline() {
    let job = job(2, 0, false, false);
    let mut sim = leading_with(&job);
    let (id, _) = deploy(&mut sim, &job, 2, 0);
    sim.write(Command::DeploymentStatus {
        updates: vec![DeploymentStatusUpdate {
            deployment_id: id,
            status: DeploymentStatus::Paused,
            description: deployment_describe::PAUSED.into(),
        }],
        revert: None,
        evals: vec![],
        now: sim.now,
    });
    sim.advance(700 * SEC);
    assert_eq!(status(&sim, id).0, DeploymentStatus::Paused);
}

#[test]
fn a_new_leader_watches_the_running_deployments_it_finds() {
    let job = job(2, 0, false, false);
    let mut sim = leading_with(&job);
    let (id, _) = deploy(&mut sim, &job, 2, 0);
    let mut next = Sim::on(sim.store.clone(), sim.index);
    next.now = sim.now;
    next.lead();
    next.advance(601 * SEC);
    assert_eq!(status(&next, id).0, DeploymentStatus::Failed);
}

#[test]
fn a_resumed_deployment_gets_its_progress_deadline_anew() {
    let job = job(2, 0, false, false);
    let mut sim = leading_with(&job);
    let (id, _) = deploy(&mut sim, &job, 2, 0);
    let set = |status, description: &str, now| Command::DeploymentStatus {
        updates: vec![DeploymentStatusUpdate {
            deployment_id: id,
            status,
            description: description.into(),
        }],
        revert: None,
        evals: vec![],
        now,
    };
    sim.write(set(
        DeploymentStatus::Paused,
        deployment_describe::PAUSED,
        sim.now,
    ));
    sim.advance(700 * SEC);
    sim.write(set(
        DeploymentStatus::Running,
        deployment_describe::RUNNING,
        sim.now,
    ));
    sim.advance(599 * SEC);
    assert_eq!(status(&sim, id).0, DeploymentStatus::Running);
    sim.advance(2 * SEC);
    assert_eq!(status(&sim, id).0, DeploymentStatus::Failed);
}
