//! Worker pool control through the server handle.

use crate::common;

use common::*;
use drover_core::SchedulerType;
use drover_core::mock;
use drover_core::types::JobKey;
use drover_core::types::JobStatus;
use drover_proto::convert::{WorkerPoolConfig, WorkerTarget};
use drover_server::ServerError;
use drover_server::config::cpu_count;
use drover_server::worker::{WorkerStatus, WorkloadStatus};

fn all() -> WorkerTarget {
    WorkerTarget::All { server_id: None }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_workers_leave_a_job_pending_until_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    join_many(&h, 2).await;
    let paused = h.pause_workers(all()).await.unwrap();
    assert!(!paused.is_empty());
    eventually(&h, "every worker paused", || async {
        h.workers()
            .await
            .iter()
            .all(|w| w.status == WorkerStatus::Paused && w.workload == WorkloadStatus::Paused)
    })
    .await;
    // Pausing a paused worker is refused with a typed error.
    let id = paused[0].id.clone();
    let err = h
        .pause_workers(WorkerTarget::One {
            server_id: None,
            worker_id: id.clone(),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServerError::FailedPrecondition { .. }),
        "{err:?}"
    );

    let reg = register(&h, mock::service_job("held", 2)).await;
    let eval_id = reg.eval_id.unwrap();
    // The broker holds the eval and nobody takes it.
    eventually(&h, "the eval ready in the broker", || async {
        h.broker_stats().await.unwrap().broker.total.ready == 1
    })
    .await;
    let snap = h.snapshot();
    assert_eq!(live_allocs(&snap, "held").len(), 0);
    assert_eq!(
        snap.eval(&eval_id).unwrap().status,
        drover_core::EvalStatus::Pending
    );
    assert_eq!(
        snap.job(&JobKey::default_ns("held")).unwrap().status,
        JobStatus::Pending
    );

    h.resume_workers(all()).await.unwrap();
    wait_until(&h, "placed after resume", |s| {
        live_allocs(s, "held").len() == 2
    })
    .await;
    eventually(&h, "workers started again", || async {
        h.workers()
            .await
            .iter()
            .all(|w| w.status == WorkerStatus::Started)
    })
    .await;
    // Resuming a started worker is refused.
    let err = h
        .resume_workers(WorkerTarget::One {
            server_id: None,
            worker_id: id,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServerError::FailedPrecondition { .. }),
        "{err:?}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_count_zero_then_two() {
    let dir = tempfile::tempdir().unwrap();
    let (server, h) = start(dir.path()).await;
    join_many(&h, 2).await;
    let none = h
        .set_worker_config(WorkerPoolConfig {
            count: 0,
            enabled: Default::default(),
        })
        .await
        .unwrap();
    assert!(none.is_empty());
    assert!(h.workers().await.is_empty());
    assert!(
        h.worker_config()
            .await
            .enabled
            .contains(&SchedulerType::Core)
    );

    register(&h, mock::service_job("later", 2)).await;
    eventually(&h, "the eval waits in the broker", || async {
        h.broker_stats().await.unwrap().broker.total.ready == 1
    })
    .await;
    assert!(live_allocs(&h.snapshot(), "later").is_empty());

    let count = 2.min(cpu_count());
    let workers = h
        .set_worker_config(WorkerPoolConfig {
            count,
            enabled: [SchedulerType::Service].into_iter().collect(),
        })
        .await
        .unwrap();
    assert_eq!(workers.len(), count as usize);
    for w in &workers {
        assert!(
            w.enabled.contains(&SchedulerType::Core),
            "core always enabled"
        );
        assert!(w.enabled.contains(&SchedulerType::Service));
    }
    wait_until(&h, "placed by the new workers", |s| {
        live_allocs(s, "later").len() == 2
    })
    .await;

    // Invalid: more workers than CPUs. Refused, and the pool is unchanged.
    let err = h
        .set_worker_config(WorkerPoolConfig {
            count: cpu_count() + 1,
            enabled: Default::default(),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServerError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert_eq!(h.workers().await.len(), count as usize);
    server.shutdown().await.unwrap();
}
