//! Test fixtures for the feasibility, ranking and stack tests: a store built through the FSM
//! from `mock` objects, as the servers would build it.

use crate::fsm::{self, Command};
use crate::mock;
use crate::state::StateStore;
use crate::types::*;

pub(crate) const T0: Timestamp = Timestamp(1_700_000_000_000);

/// A store under construction; every change goes through `fsm::apply`.
pub(crate) struct Cluster {
    pub(crate) store: StateStore,
    index: Index,
}

impl Cluster {
    pub(crate) fn new() -> Self {
        Cluster {
            store: StateStore::new(),
            index: 0,
        }
    }

    pub(crate) fn apply(&mut self, cmd: Command) {
        self.index += 1;
        fsm::apply(&mut self.store, self.index, cmd).expect("command applies");
    }

    /// Registers `mock::node(n)` after `edit` (a ready, healthy `dc1` node with 4,000 MHz and
    /// 8,192 MB, `kernel.name = linux`, `unique.hostname = host-N`).
    pub(crate) fn node(&mut self, n: u64, edit: impl FnOnce(&mut Node)) -> NodeId {
        let mut node = mock::node(n);
        edit(&mut node);
        let id = node.id;
        self.apply(Command::NodeRegister { node, now: T0 });
        id
    }

    pub(crate) fn job(&mut self, job: &Job) {
        self.apply(Command::JobRegister {
            job: job.clone(),
            eval: None,
            now: T0,
        });
    }

    pub(crate) fn allocs(&mut self, allocs: Vec<Allocation>) {
        self.apply(mock::place(mock::eval_id(0), allocs, T0));
    }

    pub(crate) fn config(&mut self, config: SchedulerConfig) {
        self.apply(Command::SchedulerConfig {
            config,
            cas_index: None,
        });
    }
}

/// A running allocation `n` of `job`'s first group on `node`, holding `resources`.
pub(crate) fn alloc_on(n: u64, job: &Job, node: NodeId, resources: Resources) -> Allocation {
    let mut a = mock::alloc(n, job, node, n as u32);
    a.resources = resources;
    a
}

/// `mock::service_job` with every task asking for `cpu` MHz and `mem` MB.
pub(crate) fn job_asking(id: &str, count: u32, cpu: u64, mem: u64) -> Job {
    let mut job = mock::service_job(id, count);
    for t in &mut job.groups[0].tasks {
        t.resources = Resources::new(cpu, mem, 0);
    }
    job
}

pub(crate) fn mem(mb: u64) -> Resources {
    Resources::new(0, mb, 0)
}
