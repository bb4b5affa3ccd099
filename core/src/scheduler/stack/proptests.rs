//! Whatever the cluster and the plan, a selected node can take the allocation: its usage once
//! the plan (with the new placement) is applied stays within its allocatable resources.

use super::testkit::{Cluster, alloc_on};
use super::*;
use crate::mock;
use crate::scheduler::feasible::usage_after_plan;
use proptest::prelude::*;
use rand::SeedableRng;

#[derive(Debug, Clone)]
struct Spec {
    /// (cpu, memory, reserved memory) per node.
    nodes: Vec<(u64, u64, u64)>,
    /// (node, cpu, memory, stopped in the plan) per existing allocation.
    existing: Vec<(usize, u64, u64, bool)>,
    ask: (u64, u64),
    count: u32,
    limit: u8,
    spread: bool,
    seed: u64,
}

fn spec() -> impl Strategy<Value = Spec> {
    (1usize..8).prop_flat_map(|n| {
        (
            prop::collection::vec((100u64..4000, 256u64..8192, 0u64..512), n),
            prop::collection::vec((0..n, 0u64..2000, 0u64..4000, any::<bool>()), 0..12),
            (1u64..1500, 1u64..3000),
            1u32..30,
            0u8..4,
            any::<bool>(),
            any::<u64>(),
        )
            .prop_map(|(nodes, existing, ask, count, limit, spread, seed)| Spec {
                nodes,
                existing,
                ask,
                count,
                limit,
                spread,
                seed,
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn selected_nodes_always_fit(spec in spec()) {
        let mut c = Cluster::new();
        let ids: Vec<NodeId> = spec
            .nodes
            .iter()
            .enumerate()
            .map(|(i, &(cpu, memory, reserved))| {
                c.node(i as u64, |n| {
                    n.resources = Resources::new(cpu, memory, 100_000);
                    n.reserved = Resources::new(0, reserved, 0);
                })
            })
            .collect();
        if spec.spread {
            c.config(SchedulerConfig {
                algorithm: SchedulerAlgorithm::Spread,
                ..SchedulerConfig::default()
            });
        }
        let other = mock::service_job("other", 1);
        c.job(&other);
        let existing: Vec<Allocation> = spec
            .existing
            .iter()
            .enumerate()
            .map(|(i, &(n, cpu, memory, _))| {
                alloc_on(i as u64, &other, ids[n], Resources::new(cpu, memory, 0))
            })
            .collect();
        if !existing.is_empty() {
            c.allocs(existing);
        }

        let mut job = mock::service_job("web", spec.count);
        job.groups[0].tasks[0].resources = Resources::new(spec.ask.0, spec.ask.1, 0);
        let limit = match spec.limit {
            0 => CandidateLimit::All,
            1 => CandidateLimit::Log2,
            n => CandidateLimit::Fixed(usize::from(n)),
        };
        let mut plan = Plan::new(mock::eval_id(1), 50, None, 0);
        for (i, &(n, _, _, stop)) in spec.existing.iter().enumerate() {
            if stop {
                plan.append_update(ids[n], AllocTransition::stop(mock::alloc_id(i as u64), "stop"));
            }
        }
        let mut s = Stack::new(&c.store, &job, limit);
        s.set_nodes(
            c.store.nodes().collect(),
            &mut rand_chacha::ChaCha8Rng::seed_from_u64(spec.seed),
        );
        for i in 0..spec.count {
            let Some(r) = s.select(&job.groups[0], &plan, &SelectOptions::default()) else {
                // Nothing fits: then no node has room, as the metrics say.
                prop_assert_eq!(s.metrics().nodes_exhausted as usize, ids.len());
                break;
            };
            let mut a = mock::alloc(1_000 + u64::from(i), &job, r.node.id, i);
            a.resources = job.groups[0].resources();
            plan.append_alloc(a);
            let after = usage_after_plan(&c.store, &plan, r.node.id);
            prop_assert!(
                r.node.allocatable().covers(&after),
                "{:?} over {:?}", after, r.node.allocatable()
            );
        }
        for id in &ids {
            let node = c.store.node(id).unwrap();
            let after = usage_after_plan(&c.store, &plan, *id);
            let before = c.store.node_usage(id);
            // Nodes the plan placed on fit; others are as they were (possibly over-full from
            // the generated existing allocations, which the stack did not choose).
            if plan.node_allocation.contains_key(id) {
                prop_assert!(node.allocatable().covers(&after));
            } else {
                prop_assert!(before.covers(&after));
            }
        }
    }
}
