//! Scheduler properties under random clusters and event sequences.

use super::*;
use crate::mock;
use proptest::prelude::*;

fn node_sized(i: u64, cpu: u64, mem: u64) -> Node {
    let mut n = mock::node(i);
    n.resources = Resources::new(cpu, mem, 100_000);
    n
}

fn assert_no_node_overcommitted(w: &World) -> Result<(), TestCaseError> {
    for node in w.h.state.nodes() {
        let used: Resources =
            w.h.state
                .allocs_by_node(&node.id)
                .filter(|a| a.uses_resources())
                .map(|a| a.resources)
                .sum();
        prop_assert!(
            node.allocatable().covers(&used),
            "node {} over-committed: {used:?} > {:?}",
            node.name,
            node.allocatable()
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_committed_plan_over_commits_a_node(
        nodes in prop::collection::vec((500u64..4000, 256u64..4096), 1..6),
        jobs in prop::collection::vec((0u8..3, 1u32..8, 50u64..1500, 64u64..1500), 1..6),
    ) {
        let mut w = World::new();
        for (i, (cpu, mem)) in nodes.iter().enumerate() {
            w.node(node_sized(i as u64, *cpu, *mem));
        }
        for (j, (kind, count, cpu, mem)) in jobs.iter().enumerate() {
            let job_type = [JobType::Service, JobType::Batch, JobType::System][*kind as usize];
            let mut job = mock::job_of(&format!("j{j}"), job_type, if job_type == JobType::System { 1 } else { *count });
            job.groups[0].tasks[0].resources = Resources::new(*cpu, *mem, 0);
            job.priority = 10 + (j as u8 * 15) % 90;
            w.run_job(&job);
            assert_no_node_overcommitted(&w)?;
        }
    }

    #[test]
    fn a_system_job_never_has_two_live_allocations_on_one_node(
        events in prop::collection::vec((0u8..5, 0u64..5), 1..25),
    ) {
        let mut w = World::with_nodes(3);
        let mut job = mock::system_job("sys");
        job.update.max_parallel = 1;
        w.run_job(&job);
        let mut version = 0;
        for (kind, n) in events {
            match kind {
                0 => { w.node(mock::node(n)); }
                1 => { if w.h.state.node(&mock::node_id(n)).is_some() { w.set_node_status(mock::node_id(n), NodeStatus::Down) } }
                2 => { if w.h.state.node(&mock::node_id(n)).is_some() { w.set_node_status(mock::node_id(n), NodeStatus::Ready) } }
                3 => {
                    version += 1;
                    job.groups[0].tasks[0].env.insert("V".into(), version.to_string());
                    w.register(&job);
                }
                _ => w.set_client_status(&job, ClientStatus::Running),
            }
            let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
            w.run(&eval);
            let mut per_node = std::collections::BTreeMap::<NodeId, usize>::new();
            for a in w.live(&job).values().flatten() {
                *per_node.entry(a.node_id).or_default() += 1;
            }
            prop_assert!(per_node.values().all(|c| *c <= 1), "two live allocations on one node: {per_node:?}");
        }
    }

    #[test]
    fn a_rolling_update_keeps_live_allocations_within_count_plus_max_parallel(
        count in 1u32..12,
        max_parallel in 1u32..5,
        steps in prop::collection::vec(0u8..3, 1..20),
    ) {
        let mut w = World::with_nodes(6);
        let mut job = mock::service_job("web", count);
        job.update.max_parallel = max_parallel;
        w.run_job(&job);
        let mut version = 0;
        for step in steps {
            match step {
                0 => {
                    version += 1;
                    job.groups[0].tasks[0].env.insert("V".into(), version.to_string());
                    w.run_job(&job);
                }
                1 => w.set_client_status(&job, ClientStatus::Running),
                _ => {
                    let eval = w.node_eval(&job, TriggeredBy::RollingUpdate);
                    w.run(&eval);
                }
            }
            let live = w.live_count(&job) as u32;
            prop_assert!(live <= count + max_parallel, "{live} live > {count} + {max_parallel}");
        }
    }

    #[test]
    fn a_reconnect_is_never_handled_twice(
        events in prop::collection::vec(0u8..4, 1..20),
    ) {
        let mut w = World::with_nodes(2);
        let mut job = mock::service_job("web", 2);
        job.groups[0].disconnect = Some(DisconnectPolicy { lost_after: Some(mock::SEC * 600), ..Default::default() });
        w.run_job(&job);
        w.set_client_status(&job, ClientStatus::Running);
        let node = mock::node_id(0);
        let mut marks: std::collections::BTreeMap<AllocId, (usize, usize)> = Default::default();
        for e in events {
            match e {
                0 => w.set_node_status(node, NodeStatus::Disconnected),
                1 => w.set_node_status(node, NodeStatus::Ready),
                2 => {
                    let on_node: Vec<_> = w.h.state.allocs_by_node(&node)
                        .filter(|a| a.desired_status == DesiredStatus::Run && !a.client_terminal())
                        .cloned().collect();
                    if w.h.state.node(&node).unwrap().status == NodeStatus::Ready {
                        w.client_update(&on_node, ClientStatus::Running);
                    }
                }
                _ => {}
            }
            let eval = w.node_eval(&job, TriggeredBy::NodeUpdate);
            w.run(&eval);
            for plan in &w.h.plans {
                for t in plan.node_update.values().flatten() {
                    let entry = marks.entry(t.alloc_id).or_default();
                    match (t.desired_status, t.client_status) {
                        (DesiredStatus::Run, Some(ClientStatus::Unknown)) => entry.0 += 1,
                        (DesiredStatus::Run, Some(_)) => entry.1 += 1,
                        _ => {}
                    }
                }
            }
            for (id, (disconnects, reconnects)) in &marks {
                prop_assert!(reconnects <= disconnects, "alloc {id:?}: {reconnects} reconnects for {disconnects} disconnects");
            }
        }
    }
}
