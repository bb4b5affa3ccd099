//! Operator controls over gRPC that must tell the truth (issue 14): check-and-set
//! registration, deregistration of jobs with blocked evals, the scheduler settings that
//! pause the broker and reject registrations, health that follows leadership, and bounds
//! on what a node may send.

use crate::common;

use common::api::Api;
use common::*;
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

/// Registers a service job on a cluster with no nodes and waits for its blocked eval.
async fn job_with_blocked_eval(a: &Api, id: &str) -> EvalId {
    a.jobs()
        .register(register_request(&mock::service_job(id, 1), None))
        .await
        .expect("registered");
    let key = JobKey::default_ns(id);
    let snap = wait_until(&a.h, "a blocked eval", |s| {
        s.evals_by_job(&key)
            .any(|e| e.status == EvalStatus::Blocked)
    })
    .await;
    snap.evals_by_job(&key)
        .find(|e| e.status == EvalStatus::Blocked)
        .unwrap()
        .id
}

async fn eval_status(a: &Api, id: EvalId) -> i32 {
    a.evals()
        .get(pb::GetEvalRequest {
            query: None,
            eval_id: id.to_string(),
        })
        .await
        .expect("eval readable")
        .into_inner()
        .evaluation
        .unwrap()
        .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deregistering_a_job_cancels_its_blocked_eval_and_the_job_reaches_dead() {
    let a = Api::start(|_| {}).await;
    for (id, purge) in [("stopped", false), ("purged", true)] {
        let blocked = job_with_blocked_eval(&a, id).await;
        a.jobs()
            .deregister(pb::DeregisterJobRequest {
                namespace: String::new(),
                job_id: id.into(),
                purge,
            })
            .await
            .expect("deregistered");
        assert_eq!(
            eval_status(&a, blocked).await,
            pb::EvalStatus::Canceled as i32,
            "{id}: the blocked eval is cancelled with the deregistration"
        );
        let key = JobKey::default_ns(id);
        wait_until(&a.h, "every eval of the job done", |s| {
            s.evals_by_job(&key).all(|e| e.is_terminal())
        })
        .await;
        if !purge {
            let job = a
                .jobs()
                .get(pb::GetJobRequest {
                    namespace: String::new(),
                    job_id: id.into(),
                    query: None,
                })
                .await
                .unwrap()
                .into_inner()
                .job
                .unwrap();
            assert_eq!(job.status, pb::JobStatus::Dead as i32, "{job:?}");
        }
        let blocked_list = a
            .evals()
            .blocked_list(pb::BlockedListRequest {})
            .await
            .unwrap()
            .into_inner();
        assert!(
            blocked_list
                .evaluations
                .iter()
                .all(|e| e.eval_id != blocked.to_string()),
            "{id}: the leader's tracker dropped it: {blocked_list:?}"
        );
        let listed = a
            .evals()
            .list(pb::ListEvalsRequest {
                status: pb::EvalStatus::Blocked as i32,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(
            listed.evaluations.iter().all(|e| e.job_id != id),
            "{id}: EvalService.List shows no blocked eval: {listed:?}"
        );
    }
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_answers_the_job_version_when_the_namespace_is_empty() {
    let a = Api::start(|_| {}).await;
    let mut job = mock::service_job("versioned", 1);
    job.namespace = "".into();
    let first = a
        .jobs()
        .register(register_request(&job, None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.job_version, 0);
    job.groups[0].count = 2;
    let second = a
        .jobs()
        .register(register_request(&job, None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.job_version, 1, "{second:?}");
    a.stop().await;
}

async fn set_scheduler_config(a: &Api, change: impl FnOnce(&mut SchedulerConfig)) {
    let mut config = SchedulerConfig::default();
    change(&mut config);
    a.operator()
        .scheduler_set_config(pb::SchedulerSetConfigRequest {
            config: Some((&config).into()),
            cas_index: None,
        })
        .await
        .expect("scheduler config set");
}

async fn broker_stats(a: &Api) -> pb::BrokerStatsResponse {
    a.evals()
        .broker_stats(pb::BrokerStatsRequest {})
        .await
        .expect("broker stats")
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_broker_takes_evals_in_and_hands_none_out_until_resumed() {
    let a = Api::start(|_| {}).await;
    join_many(&a.h, 1).await;
    set_scheduler_config(&a, |c| c.pause_eval_broker = true).await;
    eventually(&a.h, "the broker reports paused", || async {
        broker_stats(&a).await.paused
    })
    .await;
    let r = a
        .jobs()
        .register(register_request(&mock::batch_job("held", 1), None))
        .await
        .expect("a paused broker still accepts registrations")
        .into_inner();
    eventually(&a.h, "the eval is held ready", || async {
        broker_stats(&a)
            .await
            .stats
            .and_then(|s| s.total)
            .unwrap_or_default()
            .ready
            == 1
    })
    .await;
    let got =
        a.h.eval_source()
            .dequeue(&SchedulerType::ALL, std::time::Duration::from_millis(300))
            .await
            .expect("dequeue answers");
    assert!(got.is_none(), "a paused broker hands out nothing: {got:?}");
    let eval_id: EvalId = r.eval_id.parse().unwrap();
    assert_eq!(
        a.h.snapshot().eval(&eval_id).unwrap().status,
        EvalStatus::Pending
    );

    set_scheduler_config(&a, |c| c.pause_eval_broker = false).await;
    wait_until(&a.h, "the held eval is scheduled once resumed", |s| {
        s.eval(&eval_id)
            .is_some_and(|e| e.status == EvalStatus::Complete)
    })
    .await;
    assert!(!broker_stats(&a).await.paused);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_registrations_fail_the_precondition_naming_the_setting() {
    let a = Api::start(|_| {}).await;
    set_scheduler_config(&a, |c| c.reject_job_registration = true).await;
    let err = a
        .jobs()
        .register(register_request(&mock::service_job("refused", 1), None))
        .await
        .expect_err("registration refused");
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    assert!(
        err.message().contains("reject_job_registration"),
        "{}",
        err.message()
    );
    assert!(a.h.snapshot().job(&JobKey::default_ns("refused")).is_none());
    set_scheduler_config(&a, |c| c.reject_job_registration = false).await;
    a.jobs()
        .register(register_request(&mock::service_job("refused", 1), None))
        .await
        .expect("accepted once the setting is cleared");
    a.stop().await;
}

async fn health_of(a: &Api, service: &str) -> i32 {
    a.health()
        .check(tonic_health::pb::HealthCheckRequest {
            service: service.into(),
        })
        .await
        .expect("health answers")
        .into_inner()
        .status
}

const JOBS: &str = "drover.v1.JobService";
const RAFT: &str = "drover.v1.RaftService";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_leadership_per_service() {
    use tonic_health::pb::health_check_response::ServingStatus;
    let serving = ServingStatus::Serving as i32;
    let not_serving = ServingStatus::NotServing as i32;

    let a = Api::start(|_| {}).await;
    eventually(
        &a.h,
        "a single server with its leader reports SERVING",
        || async { health_of(&a, JOBS).await == serving && health_of(&a, "").await == serving },
    )
    .await;
    assert_eq!(health_of(&a, RAFT).await, serving);
    a.stop().await;

    // Two voters, the other one never comes up: no quorum, so no leader, ever.
    let a = Api::start_leaderless(|c| {
        c.cluster_secret = Some("a-secret-for-two-servers".into());
        c.bootstrap = drover_server::raft::Bootstrap::Cluster(
            [
                (1, "127.0.0.1:1".to_string()),
                (2, "127.0.0.1:9".to_string()),
            ]
            .into(),
        );
    })
    .await;
    eventually(&a.h, "an election was tried and failed", || async {
        a.h.raft_metrics().current_term >= 2
    })
    .await;
    assert_eq!(a.h.leader(), None);
    assert_eq!(
        health_of(&a, JOBS).await,
        not_serving,
        "no leader: NOT_SERVING"
    );
    assert_eq!(health_of(&a, "").await, not_serving);
    assert_eq!(
        health_of(&a, RAFT).await,
        serving,
        "the Raft transport answers so a leader can be elected"
    );
    a.stop().await;
}

fn node_registration(n: u64) -> pb::RegisterNodeRequest {
    pb::RegisterNodeRequest {
        node: Some((&mock::node(n)).into()),
    }
}

async fn refused_registration(
    a: &Api,
    mutate: impl FnOnce(&mut pb::NodeRegistration),
) -> tonic::Status {
    let mut req = node_registration(1);
    mutate(req.node.as_mut().unwrap());
    a.nodes().register(req).await.expect_err("refused")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_fields_are_bounded_naming_the_field_and_the_limit() {
    let a = Api::start(|_| {}).await;
    let e = refused_registration(&a, |n| n.name = "x".repeat(1 << 20)).await;
    assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
    assert!(
        e.message().contains("name: 1048576 bytes"),
        "{}",
        e.message()
    );
    assert!(
        e.message().contains("limits.max_node_name_bytes"),
        "{}",
        e.message()
    );

    let e = refused_registration(&a, |n| {
        n.attributes = (0..100_000)
            .map(|i| (format!("a{i}"), "v".into()))
            .collect()
    })
    .await;
    assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
    assert!(
        e.message().contains("attributes: 100000 entries"),
        "{}",
        e.message()
    );

    let e = refused_registration(&a, |n| {
        n.resources.as_mut().unwrap().cpu_mhz = Some(u64::MAX)
    })
    .await;
    assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
    assert!(e.message().contains("resources.cpu"), "{}", e.message());

    let e = refused_registration(&a, |n| {
        let total = n.resources.as_ref().unwrap().memory_mb;
        n.reserved.as_mut().unwrap().memory_mb = total.map(|m| m + 1);
    })
    .await;
    assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
    assert!(e.message().contains("reserved.memory"), "{}", e.message());
    assert_eq!(
        a.h.snapshot().nodes().count(),
        0,
        "nothing refused was stored"
    );

    // A heartbeat's snapshot id is bounded too.
    let reg = a
        .nodes()
        .register(node_registration(1))
        .await
        .expect("a sane node registers")
        .into_inner();
    let e = a
        .nodes()
        .update_status(pb::UpdateNodeStatusRequest {
            auth: Some(pb::NodeAuth {
                node_id: reg.node_id.clone(),
                secret_id: reg.secret_id.clone(),
            }),
            readiness: pb::Readiness::Ready as i32,
            last_snapshot: Some("s".repeat(10 << 20)),
        })
        .await
        .expect_err("a 10 MB snapshot id is refused");
    assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
    assert!(e.message().contains("last_snapshot"), "{}", e.message());
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_list_pages_return_every_node_once() {
    let a = Api::start(|c| c.max_list_page = 4).await;
    for n in 1..=11 {
        a.nodes()
            .register(node_registration(n))
            .await
            .expect("registered");
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = a
            .operator()
            .node_list(pb::NodeListRequest {
                page_size: 3,
                next_token: token,
                ..Default::default()
            })
            .await
            .expect("a page")
            .into_inner();
        assert!(
            page.nodes.len() <= 3,
            "{} nodes in a page of 3",
            page.nodes.len()
        );
        seen.extend(page.nodes.into_iter().map(|e| e.node.unwrap().id));
        pages += 1;
        if page.next_token.is_empty() {
            break;
        }
        token = page.next_token;
    }
    assert_eq!(pages, 4);
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        (seen.len(), sorted.len()),
        (11, 11),
        "every node exactly once"
    );

    // Without a page size the server's maximum applies; the client helper follows pages.
    let first = a
        .operator()
        .node_list(pb::NodeListRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.nodes.len(), 4);
    let all = drover_proto::paging::node_list_all(&a.operator(), pb::NodeListRequest::default())
        .await
        .unwrap();
    assert_eq!(all.nodes.len(), 11);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_eval_and_alloc_lists_page_and_the_client_helpers_follow_them() {
    use drover_proto::paging::{eval_list_all, job_allocations_all, job_list_all};
    let a = Api::start(|c| c.max_list_page = 2).await;
    join_many(&a.h, 1).await;
    for i in 0..4 {
        a.jobs()
            .register(register_request(
                &mock::batch_job(&format!("b{i}"), 1),
                None,
            ))
            .await
            .unwrap();
    }
    a.jobs()
        .register(register_request(&mock::batch_job("many", 5), None))
        .await
        .unwrap();
    wait_until(&a.h, "the five allocations placed", |s| {
        s.allocs_by_job(&JobKey::default_ns("many")).count() == 5
    })
    .await;

    let first = a
        .jobs()
        .list(pb::ListJobsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        first.jobs.len(),
        2,
        "a page holds at most limits.max_list_page"
    );
    assert!(!first.next_token.is_empty());
    let jobs = job_list_all(&a.jobs(), pb::ListJobsRequest::default())
        .await
        .unwrap();
    let ids: Vec<_> = jobs.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["b0", "b1", "b2", "b3", "many"]);

    let allocs = job_allocations_all(
        &a.jobs(),
        pb::JobAllocationsRequest {
            job_id: "many".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(allocs.allocations.len(), 5);
    let listed = job_allocations_all(
        &a.jobs(),
        pb::JobAllocationsRequest {
            job_id: "many".into(),
            list_fields_only: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let ids = |l: &pb::JobAllocationsResponse| -> Vec<String> {
        l.allocations.iter().map(|a| a.id.clone()).collect()
    };
    assert_eq!(
        ids(&listed),
        ids(&allocs),
        "the same allocations, paged alike"
    );
    for (lean, full) in listed.allocations.iter().zip(&allocs.allocations) {
        assert_eq!(lean.node_id, full.node_id);
        assert_eq!(lean.resources, full.resources);
        assert!(!full.eval_id.is_empty() && full.metrics.is_some());
        assert!(
            lean.eval_id.is_empty() && lean.metrics.is_none(),
            "{lean:?}"
        );
    }

    let evals = eval_list_all(&a.evals(), pb::ListEvalsRequest::default())
        .await
        .unwrap();
    let mut ids: Vec<_> = evals.evaluations.iter().map(|e| e.id.clone()).collect();
    let listed = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), listed, "no eval listed twice");
    assert!(listed >= 5, "{listed} evals");
    let limited = eval_list_all(
        &a.evals(),
        pb::ListEvalsRequest {
            limit: 3,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(limited.evaluations.len(), 3, "the limit holds across pages");
    a.stop().await;
}
