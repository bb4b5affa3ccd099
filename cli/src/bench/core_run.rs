//! The c1m workload through drover's core alone, in this process and without IO: the
//! scheduler, the plan applier's check and the FSM write, one job after another (issue
//! 19's `core` figure). Set beside the end-to-end rate it shows how much of the time goes
//! around core (gRPC, Raft, the log on disk, watches, events).

use super::workload::Workload;
use drover_core::scheduler::testing::Harness;
use drover_core::{Resources, Timestamp, mock};
use serde::Serialize;
use std::time::Instant;

/// What the in-process run placed and how fast.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CoreRun {
    pub placed: u64,
    pub secs: f64,
    pub placements_per_sec: f64,
}

/// Places `workload` on its nodes through core at `now`.
pub fn run(workload: &Workload, now: Timestamp) -> CoreRun {
    let mut h = Harness::new(now);
    for n in 0..u64::from(workload.nodes) {
        let mut node = mock::node(n);
        node.datacenter = workload.datacenter();
        node.resources = Resources::new(
            workload.node.cpu_mhz,
            workload.node.memory_mb,
            workload.node.disk_mb,
        );
        h.upsert_node(node);
    }
    let started = Instant::now();
    for j in 0..workload.jobs {
        let eval = h.register(&workload.job(j), u64::from(j) + 1);
        // The scheduler's generator is the seed mixed with the eval id: seeds spread apart
        // so that no two of these evals draw the same allocation ids.
        let seed = (u64::from(j) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        if let Err(e) = h.process(&eval, seed) {
            tracing::warn!(job = j, error = %e, "core run: scheduling failed");
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let placed = h.state.alloc_count() as u64;
    CoreRun {
        placed,
        secs,
        placements_per_sec: placed as f64 / secs.max(1e-9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_run_places_the_whole_workload() {
        let workload = Workload::new(10, 4, 5, 10, 16).expect("fits");
        let run = run(&workload, Timestamp::from_millis(1_700_000_000_000));
        assert_eq!(run.placed, 20, "{run:?}");
        assert!(run.placements_per_sec > 0.0);
    }
}
