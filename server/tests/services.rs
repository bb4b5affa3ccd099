//! The service catalog over gRPC: what an agent's allocation updates register, what
//! `ServiceService.List` and `Info` answer, a blocking read that wakes on a change, a node
//! that may not register another node's allocation, and registrations that end with their
//! allocation.

use crate::common;

use common::api::Api;
use common::*;
use drover_core::fsm::AllocClientUpdate;
use drover_core::types::*;
use drover_proto::convert::{AllocUpdates, ClientAllocUpdate};
use drover_proto::v1 as pb;
use drover_proto::v1::service_service_client::ServiceServiceClient;
use drover_server::ServerHandle;
use std::time::{Duration, Instant};
use tonic::Code;

fn report(
    alloc: &Allocation,
    status: ClientStatus,
    health: Option<ServiceHealth>,
) -> ClientAllocUpdate {
    ClientAllocUpdate {
        update: AllocClientUpdate {
            alloc_id: alloc.id,
            client_status: status,
            client_description: Default::default(),
            task_states: Default::default(),
            deployment_health: None,
        },
        infra_failure: false,
        services: health.map(|health| {
            vec![ServiceRegistration {
                tags: vec!["primary".into()],
                ..db_instance(
                    alloc,
                    health,
                    vec![CheckState {
                        name: "alive".into(),
                        check_type: CheckType::Tcp,
                        status: health.into(),
                        output: format!("db is {}", health.as_str()),
                        http_status: None,
                        time: Timestamp(1_700_000_000_000),
                    }],
                )
            }]
        }),
    }
}

async fn send(
    h: &ServerHandle,
    agent: &Agent,
    updates: Vec<ClientAllocUpdate>,
) -> Result<u64, String> {
    h.update_allocs(AllocUpdates {
        auth: agent.creds.clone(),
        updates,
    })
    .await
    .map_err(|e| e.to_string())
}

fn info(name: &str, wait_index: u64) -> pb::ServiceInfoRequest {
    pb::ServiceInfoRequest {
        query: None,
        namespace: String::new(),
        name: name.into(),
        wait_index,
        max_wait_ms: 10_000,
        job_id: String::new(),
        alloc_id: String::new(),
    }
}

/// Two agents and the job `shop`, one allocation placed on each.
async fn shop_on_two_agents(a: &Api) -> (Vec<Agent>, Vec<Allocation>) {
    let agents = join_many(&a.h, 2).await;
    register(&a.h, big_service_job("shop", 2)).await;
    let snap = wait_until(&a.h, "2 placed", |s| live_allocs(s, "shop").len() == 2).await;
    (agents, live_allocs(&snap, "shop"))
}

/// The agent `alloc` was placed on.
fn agent_of(agents: &[Agent], alloc: &Allocation) -> Agent {
    agents
        .iter()
        .find(|g| g.creds.node_id == alloc.node_id)
        .expect("its node")
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_lists_what_agents_register_and_blocking_reads_wake_on_change() {
    let a = Api::start(|_| {}).await;
    let (agents, allocs) = shop_on_two_agents(&a).await;
    let agent_of = |alloc: &Allocation| agent_of(&agents, alloc);
    let (first, second) = (&allocs[0], &allocs[1]);

    // A node may not register another node's allocation.
    let err = send(
        &a.h,
        &agent_of(second),
        vec![report(
            first,
            ClientStatus::Running,
            Some(ServiceHealth::Passing),
        )],
    )
    .await
    .expect_err("refused");
    assert!(err.contains("not on") || err.contains("node"), "{err}");

    send(
        &a.h,
        &agent_of(first),
        vec![report(
            first,
            ClientStatus::Running,
            Some(ServiceHealth::Passing),
        )],
    )
    .await
    .expect("own allocation");
    let mut client = ServiceServiceClient::new(a.channel.clone());
    let list = client
        .list(pb::ListServicesRequest {
            namespace: String::new(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(list.services.len(), 1, "{list:?}");
    let entry = &list.services[0];
    assert_eq!(
        (entry.name.as_str(), entry.instances, entry.tags.clone()),
        ("db", 1, vec!["primary".to_owned()])
    );
    assert_eq!(entry.health, pb::ServiceHealth::Passing as i32);

    // A blocking read on the catalog's index wakes when the second instance registers.
    let index = list.index;
    let waiter = {
        let mut client = client.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let got = client
                .info(info("db", index))
                .await
                .expect("info")
                .into_inner();
            (got, started.elapsed())
        })
    };
    // Time for the read to reach the server; whether it did or not, it must not answer
    // before the catalog changes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiter.is_finished(),
        "a blocking read at the current index answered before any change"
    );
    let changed_at = Instant::now();
    send(
        &a.h,
        &agent_of(second),
        vec![report(
            second,
            ClientStatus::Running,
            Some(ServiceHealth::Critical),
        )],
    )
    .await
    .expect("own allocation");
    let (got, waited) = waiter.await.expect("waiter");
    assert!(got.index > index);
    assert_eq!(got.instances.len(), 2, "{got:?}");
    assert!(
        changed_at.elapsed() < Duration::from_secs(5),
        "woke {waited:?} after the read was sent"
    );
    let healths: Vec<i32> = got.instances.iter().map(|r| r.health).collect();
    assert!(
        healths.contains(&(pb::ServiceHealth::Critical as i32)),
        "{got:?}"
    );
    // Each instance answers its checks' latest results as its agent reported them.
    let checks: Vec<(&str, &str, i32, &str, u64)> = got
        .instances
        .iter()
        .flat_map(|r| &r.checks)
        .map(|c| {
            (
                c.name.as_str(),
                c.check_type.as_str(),
                c.status,
                c.output.as_str(),
                c.time_ms,
            )
        })
        .collect();
    for (status, output) in [
        (pb::CheckStatus::Passing, "db is passing"),
        (pb::CheckStatus::Critical, "db is critical"),
    ] {
        assert!(
            checks.contains(&("alive", "tcp", status as i32, output, 1_700_000_000_000)),
            "{checks:?}"
        );
    }

    // Narrowed to one job, or to one allocation (any service name).
    let scoped = |job_id: &str, alloc_id: &str| pb::ServiceInfoRequest {
        job_id: job_id.into(),
        alloc_id: alloc_id.into(),
        ..info("", 0)
    };
    let of_job = client
        .info(scoped("shop", ""))
        .await
        .expect("job's services")
        .into_inner();
    assert_eq!(of_job.instances.len(), 2, "{of_job:?}");
    let of_alloc = client
        .info(scoped("", &first.id.to_string()))
        .await
        .expect("allocation's services")
        .into_inner();
    let ids: Vec<&str> = of_alloc
        .instances
        .iter()
        .map(|r| r.alloc_id.as_str())
        .collect();
    assert_eq!(ids, vec![first.id.to_string()], "{of_alloc:?}");
    let named_other = client
        .info(pb::ServiceInfoRequest {
            name: "web".into(),
            ..scoped("shop", "")
        })
        .await
        .expect("job's services named web")
        .into_inner();
    assert!(named_other.instances.is_empty(), "{named_other:?}");
    let refused = [
        (scoped("nope", ""), Code::NotFound),
        (scoped("", &AllocId::random().to_string()), Code::NotFound),
        (scoped("", "not-an-id"), Code::InvalidArgument),
        (scoped("shop", &first.id.to_string()), Code::InvalidArgument),
    ];
    for (req, code) in refused {
        let err = client.info(req.clone()).await.expect_err("refused");
        assert_eq!(err.code(), code, "{req:?}: {err:?}");
    }

    // The allocation ends: its registration goes.
    send(
        &a.h,
        &agent_of(first),
        vec![report(first, ClientStatus::Complete, None)],
    )
    .await
    .expect("own allocation");
    let got = client.info(info("db", 0)).await.expect("info").into_inner();
    assert_eq!(got.instances.len(), 1, "{got:?}");
    assert_eq!(got.instances[0].alloc_id, second.id.to_string());

    // An unknown name answers no instances; a missing one is refused.
    let none = client
        .info(info("nope", 0))
        .await
        .expect("info")
        .into_inner();
    assert!(none.instances.is_empty());
    let err = client.info(info("", 0)).await.expect_err("refused");
    assert_eq!(err.code(), Code::InvalidArgument);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_read_answers_the_catalog_as_it_is_when_its_wait_runs_out() {
    let a = Api::start(|_| {}).await;
    let mut client = ServiceServiceClient::new(a.channel.clone());
    let started = Instant::now();
    let got = client
        .list(pb::ListServicesRequest {
            namespace: "*".into(),
            wait_index: 1_000_000,
            max_wait_ms: 300,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert!(got.services.is_empty());
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_list_with_checks_wakes_on_a_check_change_the_worst_health_hides() {
    let a = Api::start(|_| {}).await;
    let (agents, allocs) = shop_on_two_agents(&a).await;
    let agent_of = |alloc: &Allocation| agent_of(&agents, alloc);
    let (first, second) = (&allocs[0], &allocs[1]);
    for (alloc, health) in [
        (first, ServiceHealth::Critical),
        (second, ServiceHealth::Passing),
    ] {
        send(
            &a.h,
            &agent_of(alloc),
            vec![report(alloc, ClientStatus::Running, Some(health))],
        )
        .await
        .expect("own allocation");
    }
    let list = |wait_index: u64, with_checks: bool| pb::ListServicesRequest {
        wait_index,
        max_wait_ms: 10_000,
        with_checks,
        ..Default::default()
    };
    let statuses = |answer: &pb::ListServicesResponse| -> Vec<(String, i32, Vec<i32>)> {
        answer
            .services
            .iter()
            .flat_map(|s| &s.checks)
            .map(|i| {
                (
                    i.alloc_id.clone(),
                    i.health,
                    i.checks.iter().map(|c| c.status).collect(),
                )
            })
            .collect()
    };
    let mut client = ServiceServiceClient::new(a.channel.clone());
    let plain = client
        .list(list(0, false))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(
        statuses(&plain),
        vec![],
        "checks only when asked: {plain:?}"
    );
    let before = client.list(list(0, true)).await.expect("list").into_inner();
    let mut expected = vec![
        (
            first.id.to_string(),
            pb::ServiceHealth::Critical as i32,
            vec![pb::CheckStatus::Critical as i32],
        ),
        (
            second.id.to_string(),
            pb::ServiceHealth::Passing as i32,
            vec![pb::CheckStatus::Passing as i32],
        ),
    ];
    let mut got = statuses(&before);
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "{before:?}");
    let entry = &before.services[0];
    assert_eq!(entry.instances, 2);
    assert_eq!(entry.checks[0].checks[0].name, "alive");
    assert!(
        entry.checks.iter().all(|i| i.node_id.len() == 36),
        "{entry:?}"
    );

    // The second instance's check turns warning: the service's worst health stays
    // critical, but a blocking list with checks wakes and shows it.
    let waiter = {
        let mut client = client.clone();
        let index = before.index;
        tokio::spawn(async move { client.list(list(index, true)).await })
    };
    send(
        &a.h,
        &agent_of(second),
        vec![report(
            second,
            ClientStatus::Running,
            Some(ServiceHealth::Warning),
        )],
    )
    .await
    .expect("own allocation");
    let after = waiter
        .await
        .expect("waiter")
        .expect("blocking list")
        .into_inner();
    assert!(after.index > before.index, "{after:?}");
    assert_eq!(
        after.services[0].health,
        pb::ServiceHealth::Critical as i32,
        "{after:?}"
    );
    let second_checks: Vec<i32> = statuses(&after)
        .into_iter()
        .filter(|(alloc, ..)| *alloc == second.id.to_string())
        .flat_map(|(_, _, checks)| checks)
        .collect();
    assert_eq!(
        second_checks,
        vec![pb::CheckStatus::Warning as i32],
        "{after:?}"
    );
    a.stop().await;
}

/// A blocking read of one service wakes for that service's changes only: a change of
/// another service answers nothing, and the answer's index is the service's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_read_of_one_service_sleeps_through_other_services_changes() {
    let a = Api::start(|_| {}).await;
    let (agents, allocs) = shop_on_two_agents(&a).await;
    let (first, second) = (&allocs[0], &allocs[1]);
    let db_at = send(
        &a.h,
        &agent_of(&agents, first),
        vec![report(
            first,
            ClientStatus::Running,
            Some(ServiceHealth::Passing),
        )],
    )
    .await
    .expect("db registered");
    let mut client = ServiceServiceClient::new(a.channel.clone());
    let seen = client.info(info("db", 0)).await.expect("info").into_inner();
    assert_eq!(seen.index, db_at, "the service's own index");

    let mut web = report(second, ClientStatus::Running, Some(ServiceHealth::Passing));
    for r in web.services.iter_mut().flatten() {
        r.service_name = "web".into();
    }
    let read_db = |wait_ms: u64| {
        let mut client = client.clone();
        tokio::spawn(async move {
            client
                .info(pb::ServiceInfoRequest {
                    max_wait_ms: wait_ms,
                    ..info("db", db_at)
                })
                .await
                .expect("info")
                .into_inner()
        })
    };
    let waiter = read_db(1_500);
    let web_at = send(&a.h, &agent_of(&agents, second), vec![web])
        .await
        .expect("web registered");
    assert!(web_at > db_at);
    let got = waiter.await.expect("waiter");
    assert_eq!(
        (got.index, got.instances.len()),
        (db_at, 1),
        "web's registration did not wake the read of db: {got:?}"
    );

    let waiter = read_db(10_000);
    let changed_at = send(
        &a.h,
        &agent_of(&agents, first),
        vec![report(
            first,
            ClientStatus::Running,
            Some(ServiceHealth::Critical),
        )],
    )
    .await
    .expect("db's health changes");
    let got = waiter.await.expect("waiter");
    assert_eq!(got.index, changed_at, "{got:?}");
    assert_eq!(got.instances[0].health, pb::ServiceHealth::Critical as i32);
}
