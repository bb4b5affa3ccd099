//! Rollouts under deployments: the facts of Nomad's `reconcile_test.go` for canaries,
//! `max_parallel` against health, promotion, pause and failure, carried over to drover's
//! reconciler through the harness (real plan checks, real FSM, which keeps the counts).

use super::*;
use std::sync::Arc;

fn counts(placed: usize, stopped: usize) -> Counts {
    Counts {
        placed,
        stopped,
        ..Counts::default()
    }
}

/// A service job of `count` whose `update` block makes rollouts deployments.
fn job(count: u32, max_parallel: u32, canary: u32) -> Job {
    let mut job = mock::service_job("web", count);
    job.update.max_parallel = max_parallel;
    job.update.deployment = Some(DeploymentStrategy {
        canary,
        ..DeploymentStrategy::default()
    });
    job
}

fn v2(job: &mut Job) {
    let env = &mut job.groups[0].tasks[0].env;
    let next = env
        .get("VERSION")
        .map_or(2, |v| v.parse::<u32>().unwrap_or(1) + 1);
    env.insert("VERSION".into(), next.to_string());
}

fn deployment(w: &World, job: &Job) -> Arc<Deployment> {
    w.h.state
        .latest_deployment(&job.key())
        .expect("the job has a deployment")
}

/// Live allocations of the job's stored version `version`.
fn of_version(w: &World, job: &Job, version: u64) -> Vec<Arc<Allocation>> {
    w.live(job)
        .into_values()
        .flatten()
        .filter(|a| a.job_version == version)
        .collect()
}

/// The agent's verdict on `allocs`, as their nodes report it.
fn report_health(w: &mut World, allocs: &[Arc<Allocation>], healthy: bool) {
    for a in allocs {
        let status = if healthy {
            ClientStatus::Running
        } else {
            ClientStatus::Failed
        };
        w.h.apply(Command::AllocClientUpdate {
            node_id: a.node_id,
            updates: vec![AllocClientUpdate {
                alloc_id: a.id,
                client_status: status,
                client_description: Default::default(),
                task_states: Default::default(),
                deployment_health: Some(healthy),
            }],
            evals: vec![],
            now: w.h.now,
        });
    }
}

/// Ten nodes running `job(count, max_parallel, canary)`'s version 0 (every allocation
/// running and healthy), with version 1 (`v2`) registered and scheduled once.
fn rolling(count: u32, max_parallel: u32, canary: u32) -> (World, Job, Job) {
    let mut w = World::with_nodes(10);
    let first = job(count, max_parallel, canary);
    let mut next = first.clone();
    v2(&mut next);
    w.run_job(&first);
    let all = of_version(&w, &first, 0);
    report_health(&mut w, &all, true);
    let eval = w.register(&next);
    w.run(&eval);
    (w, first, next)
}

/// A status change of deployment `id`, as the watcher or an operator writes it.
fn set_status(
    id: DeploymentId,
    status: DeploymentStatus,
    description: &str,
    revert: Option<Job>,
    now: Timestamp,
) -> Command {
    Command::DeploymentStatus {
        updates: vec![DeploymentStatusUpdate {
            deployment_id: id,
            status,
            description: description.into(),
        }],
        revert,
        evals: vec![],
        now,
    }
}

fn follow_up(w: &mut World, job: &Job) {
    let eval = w.node_eval(job, TriggeredBy::DeploymentWatcher);
    w.run(&eval);
}

#[test]
fn a_first_version_under_an_update_block_is_a_deployment_of_every_placement() {
    let mut w = World::with_nodes(4);
    let job = job(3, 1, 0);
    w.run_job(&job);
    assert_eq!(
        w.counts(),
        counts(3, 0),
        "a new job is placed whole, not paced"
    );
    let d = deployment(&w, &job);
    assert_eq!((d.status, d.job_version), (DeploymentStatus::Running, 0));
    let g = &d.groups["web"];
    assert_eq!((g.desired_total, g.placed, g.desired_canaries), (3, 3, 0));
    assert!(g.require_progress_by.is_some());
    for a in of_version(&w, &job, 0) {
        assert_eq!(a.links.get().deployment.as_ref().map(|l| l.id), Some(d.id));
    }
}

#[test]
fn a_job_without_an_update_block_gets_no_deployment() {
    let mut w = World::with_nodes(4);
    let job = mock::service_job("web", 3);
    w.run_job(&job);
    assert_eq!(w.counts(), counts(3, 0));
    assert!(w.h.state.latest_deployment(&job.key()).is_none());
}

#[test]
fn max_parallel_counts_the_deployments_allocations_not_yet_healthy() {
    // Nomad: the limit is max_parallel less every allocation of the deployment that has
    // not reported healthy; each one turning healthy frees one place.
    for (max_parallel, healthy_then, placed_then) in [(2, 0, 0), (2, 1, 1), (2, 2, 2), (3, 1, 1)] {
        let (mut w, _, next) = rolling(10, max_parallel, 0);
        let mp = max_parallel as usize;
        assert_eq!(
            w.counts(),
            counts(mp, mp),
            "first round, max_parallel {max_parallel}"
        );
        let new = of_version(&w, &next, 1);
        report_health(&mut w, &new[..healthy_then], true);
        follow_up(&mut w, &next);
        assert_eq!(
            w.counts(),
            counts(placed_then, placed_then),
            "max_parallel {max_parallel}, {healthy_then} healthy"
        );
        let d = deployment(&w, &next);
        assert_eq!(d.job_version, 1);
        assert_eq!(d.groups["web"].placed as usize, mp + placed_then);
    }
}

#[test]
fn an_unhealthy_allocation_stops_the_rollout_and_is_not_replaced() {
    let (mut w, first, next) = rolling(5, 2, 0);
    let new = of_version(&w, &next, 1);
    report_health(&mut w, &new[..1], true);
    report_health(&mut w, &new[1..2], false);
    follow_up(&mut w, &next);
    assert_eq!(
        w.counts(),
        counts(0, 0),
        "nothing more while one is unhealthy"
    );
    let g = &deployment(&w, &next).groups["web"];
    assert_eq!((g.healthy, g.unhealthy), (1, 1));
    assert_eq!(
        of_version(&w, &first, 0).len(),
        3,
        "the old version keeps running"
    );
}

#[test]
fn canaries_run_beside_the_old_version_until_promotion() {
    let (mut w, first, next) = rolling(3, 1, 1);
    assert_eq!(
        w.counts(),
        counts(1, 0),
        "one canary, nothing of v1 stopped"
    );
    let plan = w.h.last_plan().unwrap();
    assert_eq!(
        plan.annotations.as_ref().unwrap().desired_tg_updates["web"].canary,
        1
    );
    let d = deployment(&w, &next);
    let g = &d.groups["web"];
    assert_eq!((g.desired_canaries, g.placed_canaries.len()), (1, 1));
    assert!(d.requires_promotion());
    assert_eq!(d.description, deployment_describe::RUNNING_NEEDS_PROMOTION);
    let canary = of_version(&w, &next, 1);
    assert!(canary[0].links.get().deployment.as_ref().unwrap().canary);
    report_health(&mut w, &canary, true);
    follow_up(&mut w, &next);
    assert_eq!(
        w.counts(),
        counts(0, 0),
        "a healthy canary waits for promotion"
    );
    assert_eq!(of_version(&w, &first, 0).len(), 3);

    let promote = mock::eval(4000, &next);
    w.h.apply(Command::DeploymentPromote {
        deployment_id: d.id,
        groups: vec![],
        eval: promote.clone(),
        now: w.h.now,
    });
    w.run(&(**w.h.state.eval(&promote.id).unwrap()).clone());
    // The canary takes its old namesake's place; one more (max_parallel) rolls.
    assert_eq!(w.counts(), counts(1, 2));
    assert_eq!(w.live_count(&next), 3);
    let g = &deployment(&w, &next).groups["web"];
    assert!(g.promoted);
    let new = of_version(&w, &next, 1);
    report_health(&mut w, &new, true);
    follow_up(&mut w, &next);
    assert_eq!(w.counts(), counts(1, 1), "the last one");
    let new = of_version(&w, &next, 1);
    report_health(&mut w, &new, true);
    let g = &deployment(&w, &next).groups["web"];
    assert_eq!((g.placed, g.healthy), (3, 3));
    assert!(g.is_complete());
    assert!(of_version(&w, &first, 0).is_empty());
}

#[test]
fn more_canaries_than_count_are_placed_and_nothing_stopped() {
    let (w, _, next) = rolling(1, 1, 2);
    assert_eq!(w.counts(), counts(2, 0));
    assert_eq!(w.live_count(&next), 3);
}

#[test]
fn a_paused_deployment_places_nothing_in_place_of_old_allocations() {
    let (mut w, _, next) = rolling(4, 1, 0);
    let d = deployment(&w, &next);
    w.h.apply(set_status(
        d.id,
        DeploymentStatus::Paused,
        deployment_describe::PAUSED,
        None,
        w.h.now,
    ));
    let new = of_version(&w, &next, 1);
    report_health(&mut w, &new, true);
    follow_up(&mut w, &next);
    assert_eq!(w.counts(), counts(0, 0));
}

#[test]
fn a_failed_deployment_stops_its_unpromoted_canaries_and_rolls_no_further() {
    let (mut w, first, next) = rolling(3, 1, 1);
    let d = deployment(&w, &next);
    w.h.apply(set_status(
        d.id,
        DeploymentStatus::Failed,
        deployment_describe::FAILED_BY_USER,
        None,
        w.h.now,
    ));
    follow_up(&mut w, &next);
    assert_eq!(w.counts(), counts(0, 1), "the canary goes, v1 stays");
    assert_eq!(of_version(&w, &first, 0).len(), 3);
}

#[test]
fn a_newer_version_cancels_the_running_deployment() {
    let (mut w, _, next) = rolling(3, 1, 0);
    let older = deployment(&w, &next);
    let mut third = next.clone();
    v2(&mut third);
    let eval = w.register(&third);
    w.run(&eval);
    let older = w.h.state.deployment(&older.id).unwrap();
    assert_eq!(older.status, DeploymentStatus::Cancelled);
    assert_eq!(older.description, deployment_describe::NEWER_JOB);
    assert_eq!(deployment(&w, &third).job_version, 2);
}

#[test]
fn a_failed_allocation_of_the_running_deployment_is_not_rescheduled() {
    let mut w = World::with_nodes(4);
    let job = job(2, 1, 0);
    w.run_job(&job);
    let all = of_version(&w, &job, 0);
    report_health(&mut w, &all[..1], false);
    let eval = w.node_eval(&job, TriggeredBy::AllocFailure);
    w.run(&eval);
    assert_eq!(w.counts(), counts(0, 0));
    assert_eq!(deployment(&w, &job).groups["web"].unhealthy, 1);
}

/// Applies `cmd` to a copy of the world's state: the refusal, and the copy unchanged.
fn refused(w: &World, cmd: Command) -> crate::fsm::ApplyError {
    let mut s = w.h.state.clone();
    let before = s.to_parts();
    let err = crate::fsm::apply(&mut s, w.h.state.latest_index() + 1, cmd)
        .expect_err("the command is refused");
    assert_eq!(s.to_parts(), before, "a refused command changes nothing");
    err
}

fn promote(d: &Deployment, groups: &[&str], job: &Job) -> Command {
    Command::DeploymentPromote {
        deployment_id: d.id,
        groups: groups.iter().map(|g| g.to_string()).collect(),
        eval: mock::eval(4100, job),
        now: NOW,
    }
}

#[test]
fn promotion_is_refused_without_healthy_canaries_for_an_unknown_group_or_once_finished() {
    use crate::fsm::ApplyError as E;
    let (w, _, next) = rolling(3, 1, 1);
    let d = deployment(&w, &next);
    assert!(matches!(
        refused(&w, promote(&d, &[], &next)),
        E::CanariesNotHealthy {
            healthy: 0,
            desired: 1,
            ..
        }
    ));
    assert!(matches!(
        refused(&w, promote(&d, &["api"], &next)),
        E::DeploymentGroupUnknown { ref group, .. } if group == "api"
    ));
    let unknown = Deployment {
        id: DeploymentId::from_bytes([9; 16]),
        ..(*d).clone()
    };
    assert!(matches!(
        refused(&w, promote(&unknown, &[], &next)),
        E::DeploymentNotFound(_)
    ));

    // The first version's deployment had no canaries.
    let mut w = World::with_nodes(4);
    let plain = job(2, 1, 0);
    w.run_job(&plain);
    let d = deployment(&w, &plain);
    assert!(matches!(
        refused(&w, promote(&d, &[], &plain)),
        E::DeploymentWithoutCanaries(_)
    ));
    w.h.apply(set_status(
        d.id,
        DeploymentStatus::Failed,
        deployment_describe::FAILED_BY_USER,
        None,
        NOW,
    ));
    assert!(matches!(
        refused(&w, promote(&d, &[], &plain)),
        E::DeploymentNotActive { .. }
    ));
    let resume = set_status(
        d.id,
        DeploymentStatus::Running,
        deployment_describe::RUNNING,
        None,
        NOW,
    );
    assert!(matches!(refused(&w, resume), E::DeploymentNotActive { .. }));
}

#[test]
fn success_marks_the_version_stable_and_a_revert_registers_it_again() {
    let mut w = World::with_nodes(4);
    let first = job(2, 1, 0);
    w.run_job(&first);
    let d = deployment(&w, &first);
    w.h.apply(set_status(
        d.id,
        DeploymentStatus::Successful,
        deployment_describe::SUCCESSFUL,
        None,
        NOW,
    ));
    let key = first.key();
    assert!(w.h.state.job(&key).unwrap().stable);
    assert!(w.h.state.job_version(&key, 0).unwrap().stable);

    let mut next = first.clone();
    v2(&mut next);
    let eval = w.register(&next);
    w.run(&eval);
    assert!(
        !w.h.state.job(&key).unwrap().stable,
        "a new version starts unstable"
    );
    let d = deployment(&w, &next);
    let stable = (**w.h.state.job_version(&key, 0).unwrap()).clone();
    w.h.apply(set_status(
        d.id,
        DeploymentStatus::Failed,
        deployment_describe::UNHEALTHY_REVERTED,
        Some(stable),
        NOW,
    ));
    let job = w.h.state.job(&key).unwrap();
    assert_eq!((job.version, job.stable), (2, false));
    assert!(!first.spec_differs(job), "version 2 is version 0's spec");
}

#[test]
fn stopping_the_job_cancels_its_running_deployment() {
    let mut w = World::with_nodes(4);
    let first = job(2, 1, 0);
    w.run_job(&first);
    w.h.apply(Command::JobDeregister {
        job: first.key(),
        purge: false,
        eval: None,
        now: NOW,
    });
    let d = deployment(&w, &first);
    assert_eq!(d.status, DeploymentStatus::Cancelled);
    assert_eq!(d.description, deployment_describe::STOPPED_JOB);
    w.h.apply(Command::JobDeregister {
        job: first.key(),
        purge: true,
        eval: None,
        now: NOW,
    });
    assert!(
        !w.h.state.has_deployments(&first.key()),
        "a purge removes them"
    );
}
