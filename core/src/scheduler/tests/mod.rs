//! Scheduler scenarios: build nodes, a job and existing allocations, run the scheduler
//! through the harness (real plan checks, real FSM), and compare the plan.

mod deployments;
mod disconnect;
mod generic;
mod ports;
mod props;
mod system;

use super::testing::Harness;
use crate::fsm::{AllocClientUpdate, Command};
use crate::mock;
use crate::types::*;
use std::collections::BTreeMap;

pub const NOW: Timestamp = Timestamp(1_700_000_000_000);

/// One scenario's world.
pub struct World {
    pub h: Harness,
    next_eval: u64,
}

/// What a plan did, counted.
#[derive(Debug, Default, PartialEq, Eq, Clone)]
pub struct Counts {
    pub placed: usize,
    pub stopped: usize,
    pub lost: usize,
    pub unknown: usize,
    pub in_place: usize,
    pub preempted: usize,
}

impl World {
    pub fn new() -> Self {
        Self {
            h: Harness::new(NOW),
            next_eval: 1,
        }
    }

    /// `n` ready nodes `node-0..n` (4,000 MHz, 8,192 MB each).
    pub fn with_nodes(n: u64) -> Self {
        let mut w = Self::new();
        for i in 0..n {
            w.h.upsert_node(mock::node(i));
        }
        w
    }

    /// Drains `node` and marks everything it runs to move, as the drainer does once the
    /// pacing lets it (tests of the drainer itself live in `leader/tests/drain.rs`).
    pub fn drain_and_mark(&mut self, node: NodeId) {
        self.drain_and_mark_forced(node, false)
    }

    /// [`Self::drain_and_mark`], with `-force` (or a deadline passed) when `force`.
    pub fn drain_and_mark_forced(&mut self, node: NodeId, force: bool) {
        let drain = DrainStrategy {
            deadline: None,
            force,
            ignore_system_jobs: false,
            started_at: NOW,
        };
        self.h.apply(Command::NodeDrain {
            node_id: node,
            drain: Some(drain),
            now: NOW,
            evals: vec![],
        });
        let allocs = self
            .h
            .state
            .allocs_by_node(&node)
            .filter(|a| !a.is_terminal())
            .map(|a| a.id)
            .collect();
        self.h.apply(Command::AllocsMigrate {
            allocs,
            evals: vec![],
            now: NOW,
        });
    }

    pub fn node(&mut self, node: Node) -> NodeId {
        let id = node.id;
        self.h.upsert_node(node);
        id
    }

    pub fn register(&mut self, job: &Job) -> Evaluation {
        self.next_eval += 1;
        self.h.register(job, 1000 + self.next_eval)
    }

    /// Registers the job, runs its eval and returns the eval.
    pub fn run_job(&mut self, job: &Job) -> Evaluation {
        let eval = self.register(job);
        self.run(&eval);
        eval
    }

    pub fn run(&mut self, eval: &Evaluation) {
        self.h.plans.clear();
        self.h.created.clear();
        self.h.updated.clear();
        self.h.reblocked.clear();
        self.h
            .process(eval, 7)
            .unwrap_or_else(|e| panic!("scheduling failed: {e}"));
    }

    /// A node-update eval for `job` (what the server writes when a node changes).
    pub fn node_eval(&mut self, job: &Job, trigger: TriggeredBy) -> Evaluation {
        self.next_eval += 1;
        let key = job.key();
        let stored = self
            .h
            .state
            .job(&key)
            .map(|j| (**j).clone())
            .unwrap_or_else(|| job.clone());
        let mut e = Evaluation::new(mock::eval_id(1000 + self.next_eval), &stored, trigger, NOW);
        e.job_modify_index = stored.job_modify_index;
        self.h.apply(Command::EvalUpsert {
            evals: vec![e.clone()],
        });
        (**self.h.state.eval(&e.id).unwrap()).clone()
    }

    pub fn counts(&self) -> Counts {
        let Some(plan) = self.h.last_plan() else {
            return Counts::default();
        };
        let mut c = Counts::default();
        for a in plan.node_allocation.values().flatten() {
            // New allocations leave the scheduler with no create index; in-place updates are
            // copies of stored ones.
            if a.create_index != 0 {
                c.in_place += 1
            } else {
                c.placed += 1
            }
        }
        for t in plan.node_update.values().flatten() {
            match (t.desired_status, t.client_status) {
                (DesiredStatus::Run, Some(ClientStatus::Unknown)) => c.unknown += 1,
                (DesiredStatus::Run, _) => {}
                (_, Some(ClientStatus::Lost)) => c.lost += 1,
                _ => c.stopped += 1,
            }
        }
        c.preempted = plan.node_preemptions.values().map(Vec::len).sum();
        c
    }

    /// Live (desired run, not client-terminal) allocations of the job, by name.
    pub fn live(&self, job: &Job) -> BTreeMap<String, Vec<std::sync::Arc<Allocation>>> {
        let mut m: BTreeMap<String, Vec<_>> = BTreeMap::new();
        for a in self.h.state.allocs_by_job(&job.key()) {
            if a.desired_status == DesiredStatus::Run && !a.client_terminal() {
                m.entry(a.name.to_string()).or_default().push(a.clone());
            }
        }
        m
    }

    pub fn live_count(&self, job: &Job) -> usize {
        self.live(job).values().map(Vec::len).sum()
    }

    /// Reports a client status for every live allocation of the job.
    pub fn set_client_status(&mut self, job: &Job, status: ClientStatus) {
        let allocs: Vec<_> = self.live(job).into_values().flatten().collect();
        self.client_update(&allocs, status);
    }

    pub fn client_update(&mut self, allocs: &[std::sync::Arc<Allocation>], status: ClientStatus) {
        let mut by_node: BTreeMap<NodeId, Vec<AllocClientUpdate>> = BTreeMap::new();
        for a in allocs {
            by_node
                .entry(a.node_id)
                .or_default()
                .push(AllocClientUpdate {
                    deployment_health: None,
                    alloc_id: a.id,
                    client_status: status,
                    client_description: Default::default(),
                    task_states: Default::default(),
                });
        }
        for (node_id, updates) in by_node {
            self.h.apply(Command::AllocClientUpdate {
                node_id,
                updates,
                evals: vec![],
                now: self.h.now,
            });
        }
    }

    pub fn set_node_status(&mut self, node: NodeId, status: NodeStatus) {
        self.h.apply(Command::NodeStatus {
            node_id: node,
            status,
            description: String::new(),
            now: self.h.now,
            evals: vec![],
        });
    }

    /// The eval as the scheduler last wrote it.
    pub fn stored_eval(&self, id: EvalId) -> Evaluation {
        (**self.h.state.eval(&id).unwrap()).clone()
    }

    pub fn advance(&mut self, d: std::time::Duration) {
        self.h.now = self.h.now.saturating_add(d);
    }
}
