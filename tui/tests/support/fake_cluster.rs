//! A server answering the console's load RPCs (node list, job list, job allocations,
//! evaluation list) page by page from a cluster it makes up as it answers, for the load's
//! test and benchmark: the console may not depend on the server crate, and a million
//! allocations held as messages would dwarf the console being measured.
//!
//! Every allocation is a copy of its job's template (one task with its events and client
//! history, about what a running allocation weighs on the wire) with its own id, name index,
//! node and status; every node has a real node's attributes.

use drover_core::{
    AllocStateEntry, ClientStatus, JobKey, TaskEvent, TaskRunState, TaskState, Timestamp, mock,
};
use drover_proto::v1 as pb;
use pb::eval_service_server::{EvalService, EvalServiceServer};
use pb::job_service_server::{JobService, JobServiceServer};
use pb::operator_service_server::{OperatorService, OperatorServiceServer};
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// One job of the made-up cluster.
#[derive(Clone, Debug)]
pub struct FakeJob {
    pub id: String,
    pub allocs: u64,
    /// Listed, but gone by the time its allocations are asked for (NOT_FOUND).
    pub purged: bool,
}

/// What the server makes up.
#[derive(Clone, Debug)]
pub struct FakeCluster {
    pub nodes: u64,
    pub jobs: Vec<FakeJob>,
    /// Items per answer, as a server's `limits.max_list_page`.
    pub page: u64,
}

/// The node list's index, which every answer gives.
const INDEX: u64 = 1_000;

impl FakeCluster {
    /// `nodes` nodes and `allocs` allocations spread evenly over `jobs` jobs, in pages of
    /// 500 (a server's default).
    pub fn even(nodes: u64, allocs: u64, jobs: u64) -> Self {
        FakeCluster {
            nodes,
            jobs: (0..jobs)
                .map(|j| FakeJob {
                    id: format!("job-{j}"),
                    allocs: allocs / jobs + u64::from(j < allocs % jobs),
                    purged: false,
                })
                .collect(),
            page: 500,
        }
    }

    /// Serves the cluster on a free loopback port until the process ends; returns the
    /// address to dial.
    pub async fn serve(self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free loopback port");
        let address = listener.local_addr().expect("its address").to_string();
        let router = self.router(&mut tonic::transport::Server::builder());
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        tokio::spawn(router.serve_with_incoming(incoming));
        address
    }

    /// The load's services on `builder`, for a server that adds more of its own.
    pub fn router(
        self,
        builder: &mut tonic::transport::Server,
    ) -> tonic::transport::server::Router {
        let api = Api(Arc::new(self));
        builder
            .add_service(OperatorServiceServer::new(api.clone()))
            .add_service(JobServiceServer::new(api.clone()))
            .add_service(EvalServiceServer::new(api))
    }

    fn node(&self, n: u64) -> pb::NodeListEntry {
        let mut node = mock::node(n);
        for (key, value) in [
            ("os.name", "ubuntu"),
            ("os.version", "24.04"),
            (
                "cpu.modelname",
                "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
            ),
            ("cpu.numcores", "2"),
            ("memory.totalbytes", "8589934592"),
            ("driver.raw_exec", "1"),
            ("drover.version", "0.1.0"),
            ("drover.agent.address", "http://10.0.0.1:4648"),
        ] {
            node.attributes.insert(key.into(), value.into());
        }
        pb::NodeListEntry {
            node: Some(pb::Node::from(&node)),
            live_allocs: 0,
            allocated: None,
            health_time_left_ms: None,
        }
    }

    fn job_entry(&self, job: &FakeJob) -> pb::JobListEntry {
        let core = mock::service_job(&job.id, 10);
        let mut entry = drover_proto::convert::job_list_entry(&core, None);
        entry.summary = Some(pb::JobSummary {
            total_allocs: u32::try_from(job.allocs).unwrap_or(u32::MAX),
            ..Default::default()
        });
        entry
    }

    /// What every allocation of `job` shares.
    fn template(&self, job: &FakeJob) -> pb::Allocation {
        let core = mock::service_job(&job.id, 10);
        let mut alloc = mock::alloc(0, &core, mock::node_id(0), 0);
        let at = |s: u64| Timestamp::from_millis(1_767_225_600_000 + s * 1_000);
        let event = |s: u64, kind: &str, message: &str| TaskEvent::new(at(s), kind, message);
        alloc.task_states.insert(
            "server",
            TaskState {
                state: TaskRunState::Running,
                failed: false,
                restarts: 0,
                started_at: Some(at(2)),
                finished_at: None,
                events: vec![
                    event(0, "Received", "Task received by client"),
                    event(1, "Task Setup", "Building Task Directory"),
                    event(2, "Started", "Task started by client"),
                ],
                usage: None,
            },
        );
        alloc.state_history = vec![
            AllocStateEntry {
                client_status: ClientStatus::Pending,
                time: at(0),
            },
            AllocStateEntry {
                client_status: ClientStatus::Running,
                time: at(2),
            },
        ]
        .into();
        alloc.create_time = at(0);
        alloc.modify_time = at(2);
        pb::Allocation::from(&alloc)
    }

    fn alloc(&self, template: &pb::Allocation, job: usize, i: u64) -> pb::Allocation {
        let mut alloc = template.clone();
        alloc.id = drover_core::AllocId::from_bytes(id_bytes(job as u64, i)).to_string();
        alloc.name = drover_core::Allocation::name_for(&alloc.job_id, "web", i as u32).into();
        alloc.node_id = mock::node_id(i % self.nodes.max(1)).to_string();
        alloc.client_status = if i % 50 == 1 {
            pb::ClientStatus::Failed as i32
        } else {
            pb::ClientStatus::Running as i32
        };
        alloc
    }

    /// The page of `0..total` that `token` asks for, and the token of the next one.
    fn page_of(&self, token: &str, total: u64) -> Result<(std::ops::Range<u64>, String), Status> {
        let start = if token.is_empty() {
            0
        } else {
            token
                .parse()
                .map_err(|_| Status::invalid_argument("bad page token"))?
        };
        let end = (start + self.page).min(total);
        let next = if end < total {
            end.to_string()
        } else {
            String::new()
        };
        Ok((start..end, next))
    }
}

/// Distinct, random-looking id bytes for allocation `i` of job `job`.
fn id_bytes(job: u64, i: u64) -> [u8; 16] {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&mix(job + 1).to_be_bytes());
    bytes[8..].copy_from_slice(&mix(i.wrapping_add(0x9e37_79b9_7f4a_7c15)).to_be_bytes());
    bytes
}

#[derive(Clone, Debug)]
struct Api(Arc<FakeCluster>);

fn unserved<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not part of the fake cluster"))
}

#[tonic::async_trait]
impl OperatorService for Api {
    async fn node_list(
        &self,
        request: Request<pb::NodeListRequest>,
    ) -> Result<Response<pb::NodeListResponse>, Status> {
        let cluster = &self.0;
        let (range, next_token) = cluster.page_of(&request.get_ref().next_token, cluster.nodes)?;
        Ok(Response::new(pb::NodeListResponse {
            nodes: range.map(|n| cluster.node(n)).collect(),
            counts: Some(pb::NodeHealthCounts {
                healthy: cluster.nodes,
                ..Default::default()
            }),
            index: INDEX,
            health_periods: Some(pb::HealthPeriods {
                lost_grace_ms: 60_000,
                flaky_cool_down_ms: 900_000,
            }),
            next_token,
        }))
    }

    async fn node_get(
        &self,
        _: Request<pb::NodeGetRequest>,
    ) -> Result<Response<pb::NodeGetResponse>, Status> {
        unserved()
    }

    async fn node_offline(
        &self,
        _: Request<pb::NodeOfflineRequest>,
    ) -> Result<Response<pb::NodeOfflineResponse>, Status> {
        unserved()
    }

    async fn node_online(
        &self,
        _: Request<pb::NodeOnlineRequest>,
    ) -> Result<Response<pb::NodeOnlineResponse>, Status> {
        unserved()
    }

    async fn node_purge(
        &self,
        _: Request<pb::NodePurgeRequest>,
    ) -> Result<Response<pb::NodePurgeResponse>, Status> {
        unserved()
    }

    async fn node_drain(
        &self,
        _: Request<pb::NodeDrainRequest>,
    ) -> Result<Response<pb::NodeDrainResponse>, Status> {
        unserved()
    }

    async fn node_eligibility(
        &self,
        _: Request<pb::NodeEligibilityRequest>,
    ) -> Result<Response<pb::NodeEligibilityResponse>, Status> {
        unserved()
    }

    async fn scheduler_get_config(
        &self,
        _: Request<pb::SchedulerGetConfigRequest>,
    ) -> Result<Response<pb::SchedulerGetConfigResponse>, Status> {
        unserved()
    }

    async fn scheduler_set_config(
        &self,
        _: Request<pb::SchedulerSetConfigRequest>,
    ) -> Result<Response<pb::SchedulerSetConfigResponse>, Status> {
        unserved()
    }

    async fn alloc_get(
        &self,
        _: Request<pb::AllocGetRequest>,
    ) -> Result<Response<pb::AllocGetResponse>, Status> {
        unserved()
    }

    async fn alloc_list(
        &self,
        _: Request<pb::AllocListRequest>,
    ) -> Result<Response<pb::AllocListResponse>, Status> {
        unserved()
    }
}

#[tonic::async_trait]
impl JobService for Api {
    async fn list(
        &self,
        request: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        let cluster = &self.0;
        let total = cluster.jobs.len() as u64;
        let (range, next_token) = cluster.page_of(&request.get_ref().next_token, total)?;
        Ok(Response::new(pb::ListJobsResponse {
            jobs: range
                .map(|j| cluster.job_entry(&cluster.jobs[j as usize]))
                .collect(),
            index: INDEX,
            next_token,
        }))
    }

    async fn allocations(
        &self,
        request: Request<pb::JobAllocationsRequest>,
    ) -> Result<Response<pb::JobAllocationsResponse>, Status> {
        let cluster = &self.0;
        let request = request.into_inner();
        let wanted = JobKey::new(&request.namespace, &request.job_id);
        let Some((at, job)) = cluster
            .jobs
            .iter()
            .enumerate()
            .find(|(_, j)| !j.purged && JobKey::default_ns(&j.id) == wanted)
        else {
            return Err(Status::not_found(format!("job {wanted} not found")));
        };
        let (range, next_token) = cluster.page_of(&request.next_token, job.allocs)?;
        let template = cluster.template(job);
        Ok(Response::new(pb::JobAllocationsResponse {
            allocations: range.map(|i| cluster.alloc(&template, at, i)).collect(),
            index: INDEX,
            next_token,
        }))
    }

    async fn register(
        &self,
        _: Request<pb::RegisterJobRequest>,
    ) -> Result<Response<pb::RegisterJobResponse>, Status> {
        unserved()
    }

    async fn plan(
        &self,
        _: Request<pb::PlanJobRequest>,
    ) -> Result<Response<pb::PlanJobResponse>, Status> {
        unserved()
    }

    async fn deregister(
        &self,
        _: Request<pb::DeregisterJobRequest>,
    ) -> Result<Response<pb::DeregisterJobResponse>, Status> {
        unserved()
    }

    async fn get(
        &self,
        _: Request<pb::GetJobRequest>,
    ) -> Result<Response<pb::GetJobResponse>, Status> {
        unserved()
    }

    async fn versions(
        &self,
        _: Request<pb::JobVersionsRequest>,
    ) -> Result<Response<pb::JobVersionsResponse>, Status> {
        unserved()
    }

    async fn evaluations(
        &self,
        _: Request<pb::JobEvaluationsRequest>,
    ) -> Result<Response<pb::JobEvaluationsResponse>, Status> {
        unserved()
    }

    async fn summary(
        &self,
        _: Request<pb::JobSummaryRequest>,
    ) -> Result<Response<pb::JobSummaryResponse>, Status> {
        unserved()
    }

    async fn dispatch(
        &self,
        _: Request<pb::DispatchJobRequest>,
    ) -> Result<Response<pb::DispatchJobResponse>, Status> {
        unserved()
    }

    async fn periodic_force(
        &self,
        _: Request<pb::PeriodicForceRequest>,
    ) -> Result<Response<pb::PeriodicForceResponse>, Status> {
        unserved()
    }
}

#[tonic::async_trait]
impl EvalService for Api {
    async fn list(
        &self,
        _: Request<pb::ListEvalsRequest>,
    ) -> Result<Response<pb::ListEvalsResponse>, Status> {
        Ok(Response::new(pb::ListEvalsResponse {
            evaluations: Vec::new(),
            index: INDEX,
            next_token: String::new(),
        }))
    }

    async fn get(
        &self,
        _: Request<pb::GetEvalRequest>,
    ) -> Result<Response<pb::GetEvalResponse>, Status> {
        unserved()
    }

    async fn blocked_list(
        &self,
        _: Request<pb::BlockedListRequest>,
    ) -> Result<Response<pb::BlockedListResponse>, Status> {
        unserved()
    }

    async fn broker_stats(
        &self,
        _: Request<pb::BrokerStatsRequest>,
    ) -> Result<Response<pb::BrokerStatsResponse>, Status> {
        unserved()
    }

    async fn plan_queue_stats(
        &self,
        _: Request<pb::PlanQueueStatsRequest>,
    ) -> Result<Response<pb::PlanQueueStatsResponse>, Status> {
        unserved()
    }
}
