//! Operator controls over gRPC that must tell the truth (issue 14): check-and-set
//! registration, deregistration of jobs with blocked evals, the scheduler settings that
//! pause the broker and reject registrations, health that follows leadership, and bounds
//! on what a node may send.

mod common;

use common::api::Api;
use drover_core::mock;
use drover_core::types::*;
use drover_proto::v1 as pb;
use tonic::Code;

fn register_request(job: &Job, enforce_index: Option<u64>) -> pb::RegisterJobRequest {
    pb::RegisterJobRequest {
        job: Some(job.into()),
        enforce_index,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_check_and_set_registrations_commit_exactly_one() {
    let a = Api::start(|_| {}).await;
    let job = mock::service_job("cas", 1);
    let mut calls = Vec::new();
    for _ in 0..16 {
        let mut jobs = a.jobs();
        let req = register_request(&job, Some(0));
        calls.push(tokio::spawn(async move { jobs.register(req).await }));
    }
    let mut won = 0;
    for call in calls {
        match call.await.unwrap() {
            Ok(_) => won += 1,
            Err(e) => {
                assert_eq!(e.code(), Code::FailedPrecondition, "{}", e.message());
                assert!(e.message().contains("enforced index 0"), "{}", e.message());
            }
        }
    }
    assert_eq!(won, 1, "exactly one check-and-set registration commits");
    let snap = a.h.snapshot();
    let key = JobKey::default_ns("cas");
    // The winner's registration eval (and the blocked eval it leaves, with no nodes) only.
    let registrations = snap
        .evals_by_job(&key)
        .filter(|e| e.previous_eval.is_none())
        .count();
    assert_eq!(registrations, 1, "refused writes add no eval");

    // The current index is accepted; a stale one is refused.
    let at = snap.job(&key).unwrap().job_modify_index;
    let mut changed = job.clone();
    changed.groups[0].count = 2;
    let r = a
        .jobs()
        .register(register_request(&changed, Some(at)))
        .await
        .expect("current index accepted")
        .into_inner();
    assert_eq!(r.job_version, 1);
    let err = a
        .jobs()
        .register(register_request(&job, Some(at)))
        .await
        .expect_err("stale index refused");
    assert_eq!(err.code(), Code::FailedPrecondition);
    a.stop().await;
}
