//! Disconnect and reconnect scenarios (BEHAVIOUR.md "Heartbeats, disconnect and reconnect").

use super::*;
use crate::mock;
use std::time::Duration;

const WINDOW: Duration = Duration::from_secs(300);

fn tolerant_job(replace: bool, reconcile: ReconcileStrategy) -> Job {
    let mut job = mock::service_job("web", 2);
    job.groups[0].disconnect = Some(DisconnectPolicy {
        lost_after: Some(WINDOW),
        replace,
        reconcile,
        stop_on_client_after: None,
    });
    job
}

/// Two nodes, `job` running one allocation on each, node 0 then disconnected and its
/// node-update eval processed. Returns the original allocation on node 0.
fn disconnected(job: &Job) -> (World, std::sync::Arc<Allocation>) {
    let mut w = World::with_nodes(2);
    w.run_job(job);
    w.set_client_status(job, ClientStatus::Running);
    let original = w
        .live(job)
        .into_values()
        .flatten()
        .find(|a| a.node_id == mock::node_id(0))
        .unwrap();
    w.set_node_status(mock::node_id(0), NodeStatus::Disconnected);
    let eval = w.node_eval(job, TriggeredBy::NodeUpdate);
    w.run(&eval);
    (w, original)
}

/// Node 0 comes back: heartbeat (ready), then the client reports its allocation running.
fn reconnect(w: &mut World, original: &Allocation) {
    w.set_node_status(mock::node_id(0), NodeStatus::Ready);
    let current = w.h.state.alloc(&original.id).unwrap().clone();
    w.client_update(&[current], ClientStatus::Running);
}

#[test]
fn disconnect_marks_unknown_with_one_follow_up_and_places_a_stand_in() {
    let job = tolerant_job(true, ReconcileStrategy::BestScore);
    let (w, original) = disconnected(&job);
    let c = w.counts();
    assert_eq!((c.unknown, c.placed, c.lost), (1, 1, 0));
    let plan = w.h.last_plan().unwrap();
    assert_eq!(plan.evals.len(), 1);
    let follow = &plan.evals[0];
    assert_eq!(
        (follow.triggered_by, follow.wait_until),
        (
            TriggeredBy::MaxDisconnectTimeout,
            Some(NOW.saturating_add(WINDOW))
        )
    );
    let a = w.h.state.alloc(&original.id).unwrap();
    assert_eq!(
        (a.desired_status, a.client_status),
        (DesiredStatus::Run, ClientStatus::Unknown)
    );
    assert_eq!(a.links.get().follow_up_eval_id, Some(follow.id));
    let stand_in = plan.node_allocation.values().flatten().next().unwrap();
    assert_eq!(stand_in.name, original.name);
}

#[test]
fn disconnect_without_replace_places_nothing() {
    let job = tolerant_job(false, ReconcileStrategy::BestScore);
    let (w, _) = disconnected(&job);
    assert_eq!(
        w.counts(),
        Counts {
            unknown: 1,
            ..Counts::default()
        }
    );
}

#[test]
fn disconnect_past_the_window_stops_the_allocation_as_lost() {
    let job = tolerant_job(false, ReconcileStrategy::BestScore);
    let (mut w, original) = disconnected(&job);
    let follow =
        w.h.state
            .alloc(&original.id)
            .unwrap()
            .links
            .get()
            .follow_up_eval_id
            .unwrap();
    w.advance(WINDOW);
    let follow = w.stored_eval(follow);
    w.run(&follow);
    let c = w.counts();
    assert_eq!((c.lost, c.placed), (1, 1));
    assert_eq!(
        w.h.state.alloc(&original.id).unwrap().client_status,
        ClientStatus::Lost
    );
}

#[test]
fn a_node_without_a_disconnect_window_is_lost_at_once() {
    let job = mock::service_job("web", 2);
    let (w, _) = disconnected(&job);
    let c = w.counts();
    assert_eq!((c.lost, c.placed, c.unknown), (1, 1, 0));
}

#[test]
fn reconnect_keeps_the_original_and_stops_the_stand_in_once() {
    let job = tolerant_job(true, ReconcileStrategy::BestScore);
    let (mut w, original) = disconnected(&job);
    let stand_in =
        w.h.last_plan()
            .unwrap()
            .node_allocation
            .values()
            .flatten()
            .next()
            .unwrap()
            .id;
    reconnect(&mut w, &original);
    let eval = w.node_eval(&job, TriggeredBy::Reconnect);
    w.run(&eval);
    assert_eq!(
        w.counts(),
        Counts {
            stopped: 1,
            ..Counts::default()
        }
    );
    let a = w.h.state.alloc(&original.id).unwrap();
    assert_eq!(
        (a.desired_status, a.client_status, a.last_state()),
        (
            DesiredStatus::Run,
            ClientStatus::Running,
            Some(ClientStatus::Running)
        )
    );
    assert_eq!(
        w.h.state.alloc(&stand_in).unwrap().desired_status,
        DesiredStatus::Stop
    );
    // Handled once: the next eval has nothing to do.
    let again = w.node_eval(&job, TriggeredBy::NodeUpdate);
    w.run(&again);
    assert!(w.h.plans.is_empty(), "a reconnect is never handled twice");
    assert_eq!(w.live_count(&job), 2);
}

#[test]
fn reconnect_after_a_version_change_keeps_the_stand_in() {
    let mut job = tolerant_job(true, ReconcileStrategy::BestScore);
    let (mut w, original) = disconnected(&job);
    job.groups[0].tasks[0].env.insert("V".into(), "2".into());
    job.update.max_parallel = 0;
    w.run_job(&job);
    reconnect(&mut w, &original);
    let eval = w.node_eval(&job, TriggeredBy::Reconnect);
    w.run(&eval);
    assert_eq!(
        w.h.state.alloc(&original.id).unwrap().desired_status,
        DesiredStatus::Stop
    );
    assert_eq!(w.live_count(&job), 2);
}

#[test]
fn reconnect_with_keep_replacement_stops_the_original() {
    let job = tolerant_job(true, ReconcileStrategy::KeepReplacement);
    let (mut w, original) = disconnected(&job);
    reconnect(&mut w, &original);
    let eval = w.node_eval(&job, TriggeredBy::Reconnect);
    w.run(&eval);
    assert_eq!(
        w.h.state.alloc(&original.id).unwrap().desired_status,
        DesiredStatus::Stop
    );
    assert_eq!(w.live_count(&job), 2);
}

#[test]
fn reconnect_waits_for_the_client_to_report() {
    let job = tolerant_job(true, ReconcileStrategy::BestScore);
    let (mut w, original) = disconnected(&job);
    w.set_node_status(mock::node_id(0), NodeStatus::Ready);
    let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
    w.run(&eval);
    assert!(w.h.plans.is_empty(), "heartbeat alone decides nothing");
    assert_eq!(
        w.h.state.alloc(&original.id).unwrap().client_status,
        ClientStatus::Unknown
    );
}

#[test]
fn stop_after_client_disconnect_waits_then_replaces_through_a_follow_up() {
    let mut job = mock::service_job("web", 2);
    job.groups[0].stop_after_client_disconnect = Some(Duration::from_secs(60));
    let mut w = World::with_nodes(2);
    w.run_job(&job);
    let original = w
        .live(&job)
        .into_values()
        .flatten()
        .find(|a| a.node_id == mock::node_id(0))
        .unwrap();
    w.set_node_status(mock::node_id(0), NodeStatus::Down);
    let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
    w.run(&eval);
    let plan = w.h.last_plan().unwrap();
    assert!(plan.node_allocation.is_empty());
    let follow = plan.evals[0].id;
    assert_eq!(
        w.h.state
            .alloc(&original.id)
            .unwrap()
            .links
            .get()
            .follow_up_eval_id,
        Some(follow)
    );
    w.advance(Duration::from_secs(60));
    let follow = w.stored_eval(follow);
    w.run(&follow);
    let c = w.counts();
    assert_eq!((c.lost, c.placed), (1, 1));
}

/// A system or sysbatch job on three nodes whose group tolerates [`WINDOW`], running, with
/// node 0 then disconnected and its node-update eval processed. Returns the allocation on
/// node 0.
fn per_node_disconnected(job_type: JobType) -> (World, Job, std::sync::Arc<Allocation>) {
    let mut job = mock::job_of("everywhere", job_type, 1);
    job.groups[0].disconnect = Some(DisconnectPolicy {
        lost_after: Some(WINDOW),
        ..DisconnectPolicy::default()
    });
    let mut w = World::with_nodes(3);
    w.run_job(&job);
    w.set_client_status(&job, ClientStatus::Running);
    let original = w
        .live(&job)
        .into_values()
        .flatten()
        .find(|a| a.node_id == mock::node_id(0))
        .unwrap();
    w.set_node_status(mock::node_id(0), NodeStatus::Disconnected);
    let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
    w.run(&eval);
    (w, job, original)
}

/// Issue 14, item 1 (Nomad's reconnect fix for system jobs), for both per-node types:
/// unknown with a follow-up at the window's end, then either the same allocation continues
/// (back inside the window) or it is lost (the window passed), never a second allocation
/// on the node.
#[test]
fn per_node_jobs_keep_their_allocation_through_a_disconnect() {
    for job_type in [JobType::System, JobType::SysBatch] {
        // Inside the window: unknown, still wanted, one follow-up due at the window's end.
        let (mut w, job, original) = per_node_disconnected(job_type);
        let c = w.counts();
        assert_eq!(
            (c.unknown, c.placed, c.lost, c.stopped),
            (1, 0, 0, 0),
            "{job_type:?}"
        );
        let plan = w.h.last_plan().unwrap();
        assert_eq!(plan.evals.len(), 1, "{job_type:?}");
        let follow = plan.evals[0].clone();
        assert_eq!(
            (follow.triggered_by, follow.wait_until),
            (
                TriggeredBy::MaxDisconnectTimeout,
                Some(NOW.saturating_add(WINDOW))
            ),
            "{job_type:?}"
        );
        let a = w.h.state.alloc(&original.id).unwrap().clone();
        assert_eq!(
            (
                a.desired_status,
                a.client_status,
                a.links.get().follow_up_eval_id
            ),
            (DesiredStatus::Run, ClientStatus::Unknown, Some(follow.id)),
            "{job_type:?}"
        );

        // Back before the window ends: the node's eval waits for the client; its report
        // settles the reconnect on the same allocation.
        let (mut back, _, _) = per_node_disconnected(job_type);
        back.set_node_status(mock::node_id(0), NodeStatus::Ready);
        let eval = back.node_eval(&job, TriggeredBy::NodeUpdate);
        back.run(&eval);
        assert_eq!(
            back.counts(),
            Counts::default(),
            "{job_type:?}: waits for the client"
        );
        reconnect(&mut back, &original);
        let eval = back.node_eval(&job, TriggeredBy::Reconnect);
        back.run(&eval);
        let c = back.counts();
        assert_eq!(
            (c.placed, c.stopped, c.lost, c.unknown),
            (0, 0, 0, 0),
            "{job_type:?}"
        );
        let a = back.h.state.alloc(&original.id).unwrap();
        assert_eq!(
            (a.desired_status, a.client_status, a.last_state()),
            (
                DesiredStatus::Run,
                ClientStatus::Running,
                Some(ClientStatus::Running)
            ),
            "{job_type:?}: the same allocation continues, its reconnect recorded"
        );
        let on_node_0 = back
            .live(&job)
            .values()
            .flatten()
            .filter(|a| a.node_id == mock::node_id(0))
            .count();
        assert_eq!(on_node_0, 1, "{job_type:?}: never two on the node");

        // The window passes first: the follow-up marks it lost; nothing new goes there.
        w.advance(WINDOW);
        w.run(&follow);
        let c = w.counts();
        assert_eq!((c.lost, c.placed), (1, 0), "{job_type:?}");
        let a = w.h.state.alloc(&original.id).unwrap();
        assert_eq!(a.client_status, ClientStatus::Lost, "{job_type:?}");
    }
}

/// A per-node job without a disconnect block loses the allocation of a disconnected node
/// at once.
#[test]
fn per_node_jobs_without_a_window_lose_the_allocation() {
    let mut w = World::with_nodes(2);
    let job = mock::system_job("sys");
    w.run_job(&job);
    w.set_client_status(&job, ClientStatus::Running);
    w.set_node_status(mock::node_id(0), NodeStatus::Disconnected);
    let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
    w.run(&eval);
    let c = w.counts();
    assert_eq!((c.lost, c.unknown, c.placed), (1, 0, 0));
}
