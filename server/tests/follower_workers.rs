//! Every server schedules: with the leader's own workers paused, the followers' workers
//! dequeue from the leader's broker, submit their plans to its applier and write their
//! evals through it, so a job is placed all the same.

use crate::common;

use common::{
    agreed_leader, big_service_job, cluster_configs, join_many, live_allocs, register, wait_until,
};
use drover_core::EvalStatus;
use drover_proto::convert::WorkerTarget;
use drover_server::Server;

const SECRET: &str = "test-cluster-secret-0123";

#[tokio::test(flavor = "multi_thread")]
async fn followers_schedule_through_the_leader_while_its_own_workers_are_paused() {
    common::init_tracing();
    let (configs, _dirs) = cluster_configs(3, SECRET);
    let mut servers = Vec::new();
    for config in configs {
        servers.push(Server::start(config).await.expect("server starts"));
    }
    let leader = agreed_leader(&servers).await;
    let lh = servers[leader].handle();
    lh.pause_workers(WorkerTarget::All { server_id: None })
        .await
        .expect("the leader's workers pause");

    join_many(&lh, 3).await;
    let registered = register(&lh, big_service_job("web", 3)).await;
    let eval_id = registered.eval_id.expect("an eval");
    let snap = wait_until(&lh, "three allocations placed, the eval complete", |s| {
        live_allocs(s, "web").len() == 3
            && s.eval(&eval_id)
                .is_some_and(|e| e.status == EvalStatus::Complete)
    })
    .await;
    let nodes: std::collections::BTreeSet<_> = live_allocs(&snap, "web")
        .iter()
        .map(|a| a.node_id)
        .collect();
    assert_eq!(nodes.len(), 3, "one per node: a node holds only one");

    // A job no node can hold: a follower's worker writes its blocked eval via the leader.
    let too_big = register(&lh, big_service_job("huge", 4)).await;
    let snap = wait_until(&lh, "the unplaced allocation's blocked eval", |s| {
        let eval_id = too_big.eval_id.expect("an eval");
        s.eval(&eval_id)
            .is_some_and(|e| e.status == EvalStatus::Complete)
            && s.evals()
                .any(|e| e.job_id.to_string() == "huge" && e.status == EvalStatus::Blocked)
    })
    .await;
    assert_eq!(live_allocs(&snap, "huge").len(), 0, "every node is full");
    for s in servers {
        s.shutdown().await.expect("stops");
    }
}
