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
    assert_eq!(a.follow_up_eval_id, Some(follow.id));
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
        w.h.state.alloc(&original.id).unwrap().follow_up_eval_id,
        Some(follow)
    );
    w.advance(Duration::from_secs(60));
    let follow = w.stored_eval(follow);
    w.run(&follow);
    let c = w.counts();
    assert_eq!((c.lost, c.placed), (1, 1));
}
