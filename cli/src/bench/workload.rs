//! What one benchmark run asks of the cluster: its simulated nodes and its service jobs.
//!
//! Every run gets a fresh run id that names its datacenter, its nodes and its jobs, so a run
//! against a shared server (`--address`) places only on its own nodes and counts only its
//! own allocations, whatever else that server holds or an earlier run left behind.

use super::error::BenchError;
use drover_agent::sim::{NodeResources, SimConfig};
use drover_core::types::{
    DEFAULT_MAX_DYNAMIC_PORT, DEFAULT_MIN_DYNAMIC_PORT, GroupNetwork, Job, JobType, PortAsk,
    ReschedulePolicy, Resources, Task, TaskGroup,
};
use std::time::{SystemTime, UNIX_EPOCH};

/// The one group of every benchmark job.
pub const GROUP: &str = "load";

/// The shape of a run, checked so that every allocation it asks for can be placed.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub run_id: String,
    pub nodes: u32,
    pub jobs: u32,
    pub count: u32,
    /// What one allocation asks for.
    pub cpu_mhz: u64,
    pub memory_mb: u64,
    /// Dynamic ports per allocation (its group's `network` block); 0: no block.
    pub ports: u32,
    /// What one simulated node offers.
    pub node: NodeResources,
    /// The simulator's `cancel_rate`: heartbeats first sent as calls cancelled at once.
    pub cancel_rate: f64,
    /// The simulator's `register_services`: allocations register their jobs' services.
    pub register_services: bool,
}

impl Workload {
    /// A run of `jobs` jobs of `count` allocations on `nodes` nodes of the simulator's
    /// default size. Refuses a run whose allocations cannot all fit, naming the flag.
    pub fn new(
        nodes: u32,
        jobs: u32,
        count: u32,
        cpu_mhz: u64,
        memory_mb: u64,
    ) -> Result<Workload, BenchError> {
        let workload = Workload {
            run_id: fresh_run_id(),
            nodes,
            jobs,
            count,
            cpu_mhz,
            memory_mb,
            ports: 0,
            node: SimConfig::default().resources,
            cancel_rate: 0.0,
            register_services: false,
        };
        workload.check_fits()?;
        Ok(workload)
    }

    /// The same run with `ports` dynamic ports per allocation, checked to fit the nodes'
    /// dynamic ranges too.
    pub fn with_ports(mut self, ports: u32) -> Result<Workload, BenchError> {
        self.ports = ports;
        self.check_fits()?;
        Ok(self)
    }

    /// Every allocation the run asks for.
    pub fn allocations(&self) -> u64 {
        u64::from(self.jobs) * u64::from(self.count)
    }

    /// How many allocations fit on one node, by its scarcer dimension (ports included: a
    /// simulated node offers the default dynamic range).
    pub fn per_node(&self) -> u64 {
        let range = u64::from(DEFAULT_MAX_DYNAMIC_PORT - DEFAULT_MIN_DYNAMIC_PORT) + 1;
        let by_ports = range.checked_div(u64::from(self.ports)).unwrap_or(u64::MAX);
        (self.node.cpu_mhz / self.cpu_mhz.max(1))
            .min(self.node.memory_mb / self.memory_mb.max(1))
            .min(by_ports)
    }

    fn check_fits(&self) -> Result<(), BenchError> {
        let too_big = |flag, asked: u64, offered: u64, unit: &str| BenchError::Setting {
            flag,
            reason: format!(
                "an allocation of {asked} {unit} does not fit on a simulated node of {offered} {unit}"
            ),
        };
        if self.cpu_mhz > self.node.cpu_mhz {
            return Err(too_big("--cpu", self.cpu_mhz, self.node.cpu_mhz, "MHz"));
        }
        if self.memory_mb > self.node.memory_mb {
            return Err(too_big(
                "--memory",
                self.memory_mb,
                self.node.memory_mb,
                "MB",
            ));
        }
        let room = self.per_node() * u64::from(self.nodes);
        if self.allocations() > room {
            return Err(BenchError::Setting {
                flag: "--nodes",
                reason: format!(
                    "{} nodes hold at most {room} allocations of {} MHz, {} MB and {} dynamic \
                     ports, but --jobs {} x --count {} asks for {}",
                    self.nodes,
                    self.cpu_mhz,
                    self.memory_mb,
                    self.ports,
                    self.jobs,
                    self.count,
                    self.allocations()
                ),
            });
        }
        Ok(())
    }

    /// The datacenter of the run's nodes, the only one its jobs may use.
    pub fn datacenter(&self) -> String {
        format!("bench-{}", self.run_id)
    }

    /// What every job id of this run starts with.
    pub fn job_prefix(&self) -> String {
        format!("bench-{}-", self.run_id)
    }

    pub fn job_id(&self, n: u32) -> String {
        format!("{}{n:05}", self.job_prefix())
    }

    /// Job `n`: one group of `count` mock tasks, which the simulated nodes run until stopped.
    pub fn job(&self, n: u32) -> Job {
        // The simulated nodes run `mock` tasks (they advertise no other driver).
        let mut task = Task::raw_exec("work", "/bin/true");
        task.driver = "mock".into();
        task.resources = Resources::new(self.cpu_mhz, self.memory_mb, 0);
        let mut job = Job::new(
            self.job_id(n),
            JobType::Service,
            vec![TaskGroup::new(GROUP, self.count, vec![task])],
        );
        job.datacenters = vec![self.datacenter()];
        if self.ports > 0 {
            job.groups[0].network = Some(GroupNetwork {
                ports: (0..self.ports)
                    .map(|i| PortAsk::dynamic(format!("p{i}")))
                    .collect(),
            });
        }
        job
    }

    /// System job `n`: one allocation on every node of the run's datacenter.
    pub fn system_job(&self, n: u32) -> Job {
        let mut job = self.job(n);
        job.job_type = JobType::System;
        job.groups[0].count = 1;
        job.groups[0].reschedule = ReschedulePolicy::disabled();
        job
    }

    /// The simulator's settings: the run's nodes in the run's datacenter, calling `server`.
    pub fn sim_config(&self, server: &str) -> SimConfig {
        SimConfig {
            servers: vec![server.to_string()],
            nodes: self.nodes as usize,
            name_prefix: self.datacenter(),
            datacenters: drover_agent::sim::Mix::single(self.datacenter()),
            resources: self.node,
            cancel_rate: self.cancel_rate,
            register_services: self.register_services,
            ..SimConfig::default()
        }
    }
}

/// Eight hex digits from the clock: distinct between runs started more than a few
/// nanoseconds apart, and short enough to read in job ids.
fn fresh_run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32).rotate_left(16))
        .unwrap_or(0);
    format!("{nanos:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(
        nodes: u32,
        jobs: u32,
        count: u32,
        cpu: u64,
        memory: u64,
    ) -> Result<Workload, BenchError> {
        Workload::new(nodes, jobs, count, cpu, memory)
    }

    #[test]
    fn runs_that_cannot_fit_name_the_flag() {
        let cases: &[((u32, u32, u32, u64, u64), Option<&str>)] = &[
            ((1_000, 100, 100, 10, 16), None),
            ((10_000, 100, 10_000, 10, 16), None),
            // 4,000 MHz / 10 = 400 per node: exactly full is fine, one more is not.
            ((1, 1, 400, 10, 16), None),
            ((1, 1, 401, 10, 16), Some("--nodes")),
            ((1, 1, 1, 4_001, 16), Some("--cpu")),
            ((1, 1, 1, 10, 8_193), Some("--memory")),
        ];
        // 12,001 dynamic ports per node: 400 allocations of 30 ports fit, of 31 not.
        assert!(workload(1, 1, 400, 10, 16).unwrap().with_ports(30).is_ok());
        assert!(matches!(
            workload(1, 1, 400, 10, 16).unwrap().with_ports(31),
            Err(BenchError::Setting {
                flag: "--nodes",
                ..
            })
        ));
        for ((nodes, jobs, count, cpu, memory), want) in cases {
            let got = workload(*nodes, *jobs, *count, *cpu, *memory);
            match (got, want) {
                (Ok(_), None) => {}
                (Err(BenchError::Setting { flag, .. }), Some(want)) => assert_eq!(flag, *want),
                (got, want) => {
                    panic!("{nodes}/{jobs}/{count}/{cpu}/{memory}: {got:?}, want {want:?}")
                }
            }
        }
    }

    #[test]
    fn jobs_stay_in_the_runs_datacenter_and_are_valid() {
        let w = workload(10, 3, 7, 10, 16).expect("fits");
        let job = w.job(2);
        assert_eq!(job.id.to_string(), format!("bench-{}-00002", w.run_id));
        assert!(job.id.to_string().starts_with(&w.job_prefix()));
        assert_eq!(job.datacenters, vec![w.datacenter()]);
        assert_eq!(job.groups[0].count, 7);
        let errors = drover_core::validate::validate_job(&job, &Default::default());
        assert!(errors.is_ok(), "{errors:?}");
        let sim = w.sim_config("http://127.0.0.1:1");
        assert_eq!(sim.datacenters.entries()[0].0, w.datacenter());
        assert!(sim.validate().is_ok());
        let with_ports = w.with_ports(2).expect("fits").job(0);
        let network = with_ports.groups[0].network.as_ref().expect("ports");
        assert_eq!(network.dynamic_count(), 2);
        let errors = drover_core::validate::validate_job(&with_ports, &Default::default());
        assert!(errors.is_ok(), "{errors:?}");
    }
}
