//! Simulated nodes register their allocations' services against a real server as the real
//! agent does: one registration per allocation of a group offering a service, on the
//! node and port the allocation holds, passing; none for a job without services; and none
//! left once the job stops.

use drover_agent::sim::{SimConfig, Simulator};
use drover_core::mock;
use drover_core::types::{GroupNetwork, Job, PortAsk, ServiceHealth};
use drover_tests::{DEADLINE, TestServer, eventually};

/// Job `id` of `count` allocations; with `service`, its group offers `<id>-web` on its
/// port `http` with one tcp check.
fn job(id: &str, count: u32, service: bool) -> Job {
    let mut job = mock::service_job(id, count);
    let group = &mut job.groups[0];
    group.network = Some(GroupNetwork {
        ports: vec![PortAsk::dynamic("http")],
    });
    if service {
        group
            .services
            .push(mock::tcp_service("${NOMAD_JOB_NAME}-web", "http", "sim"));
    }
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_nodes_register_their_allocations_services_until_they_stop() {
    let server = TestServer::start().await;
    let sim = Simulator::start(SimConfig {
        register_services: true,
        ..server.sim_config(3, 9)
    })
    .await
    .expect("simulator starts");
    let shop = server.register(job("shop", 3, true)).await;
    server.register(job("plain", 2, false)).await;

    let handle = server.handle();
    eventually("every allocation of shop registered", DEADLINE, || {
        let snap = handle.snapshot();
        let running = snap
            .allocs_by_job(&shop)
            .filter(|a| drover_core::state::alloc_listed(a))
            .count();
        let listed = snap.service_instances("default", "shop-web").count();
        std::future::ready((running == 3 && listed == 3).then_some(()))
    })
    .await;
    let snap = handle.snapshot();
    for r in snap.service_instances("default", "shop-web") {
        let alloc = snap.alloc(&r.alloc_id).expect("its allocation");
        let port = alloc
            .ports
            .iter()
            .find(|p| p.label == "http")
            .expect("port");
        assert_eq!(r.node_id, alloc.node_id, "{}", r.id);
        assert_eq!(
            (r.address, r.port),
            (Some(port.host_ip), port.value),
            "{}",
            r.id
        );
        assert_eq!(r.health, ServiceHealth::Passing, "simulated checks pass");
        assert_eq!(r.tags, ["sim"]);
    }
    assert_eq!(
        snap.service_count(),
        3,
        "the job without services registers none"
    );

    handle
        .deregister_job(shop, false)
        .await
        .expect("the job stops");
    eventually(
        "the stopped allocations' registrations gone",
        DEADLINE,
        || std::future::ready((handle.snapshot().service_count() == 0).then_some(())),
    )
    .await;
    sim.shutdown().await;
    server.stop().await;
}
