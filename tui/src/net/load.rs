//! The read RPCs the console loads its copy of the cluster from.

use crate::app::Update;
use crate::model::{
    AllocTable, JobStrings, Snapshot, decode_alloc_with, decode_blocked, decode_job_entry,
    decode_node, decode_worker, health_periods, scheduling_stats,
};
use drover_core::{Evaluation, Node};
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1 as pb;
use pb::eval_service_client::EvalServiceClient;
use pb::job_service_client::JobServiceClient;
use pb::operator_service_client::OperatorServiceClient;
use pb::worker_service_client::WorkerServiceClient;

/// Evaluations loaded at connect time (newest first); older ones are history an operator
/// reaches through the CLI.
const EVAL_LOAD_LIMIT: u32 = 2_000;

/// Keeps what decodes and logs what does not: one bad record must not blank the console.
fn keep<T, E: std::fmt::Display>(what: &'static str, result: Result<T, E>) -> Option<T> {
    match result {
        Ok(v) => Some(v),
        Err(error) => {
            tracing::warn!(%error, what, "skipping a record the console cannot read");
            None
        }
    }
}

/// Nodes, jobs with their allocations, and recent evaluations.
pub async fn snapshot(channel: &Channel) -> Result<Snapshot, tonic::Status> {
    let operator = OperatorServiceClient::new(channel.clone())
        .max_decoding_message_size(super::MAX_ANSWER_BYTES);
    let jobs_client =
        JobServiceClient::new(channel.clone()).max_decoding_message_size(super::MAX_ANSWER_BYTES);
    let evals_client =
        EvalServiceClient::new(channel.clone()).max_decoding_message_size(super::MAX_ANSWER_BYTES);

    let nodes =
        drover_proto::paging::node_list_all(&operator, pb::NodeListRequest::default()).await?;
    let mut index = nodes.index;
    let health_periods = nodes.health_periods.as_ref().map(health_periods);
    let nodes: Vec<Node> = nodes
        .nodes
        .into_iter()
        .filter_map(|entry| entry.node)
        .filter_map(|n| keep("node", decode_node(n)))
        .collect();

    let job_list =
        drover_proto::paging::job_list_all(&jobs_client, pb::ListJobsRequest::default()).await?;
    index = index.min(job_list.index);
    let mut allocs = AllocTable::default();
    let mut jobs = Vec::with_capacity(job_list.jobs.len());
    for entry in job_list.jobs {
        let request = pb::JobAllocationsRequest {
            namespace: entry.namespace.clone(),
            job_id: entry.id.clone(),
            ..Default::default()
        };
        match drover_proto::paging::job_allocations_all(&jobs_client, request).await {
            Ok(answer) => {
                index = index.min(answer.index);
                let mut strings = JobStrings::default();
                allocs.extend(
                    answer
                        .allocations
                        .into_iter()
                        .filter_map(|a| keep("allocation", decode_alloc_with(a, &mut strings))),
                );
            }
            // Purged between the list and this read: nothing to show.
            Err(status) if status.code() == tonic::Code::NotFound => continue,
            Err(status) => return Err(status),
        }
        jobs.extend(keep("job", decode_job_entry(entry)));
    }

    let evals = drover_proto::paging::eval_list_all(
        &evals_client,
        pb::ListEvalsRequest {
            limit: EVAL_LOAD_LIMIT,
            ..Default::default()
        },
    )
    .await?;
    index = index.min(evals.index);
    let evals: Vec<Evaluation> = evals
        .evaluations
        .into_iter()
        .filter_map(|e| keep("evaluation", Evaluation::try_from(e)))
        .collect();

    Ok(Snapshot {
        health_periods,
        nodes,
        allocs,
        jobs,
        evals,
        index,
    })
}

/// Workers, broker and plan queue counters and blocked evaluations, each skipped when its
/// call fails (the broker's and tracker's are unavailable while there is no leader).
pub async fn leader_state(channel: &Channel) -> Vec<Update> {
    let mut workers = WorkerServiceClient::new(channel.clone())
        .max_decoding_message_size(super::MAX_ANSWER_BYTES);
    let mut evals =
        EvalServiceClient::new(channel.clone()).max_decoding_message_size(super::MAX_ANSWER_BYTES);
    let mut updates = Vec::new();
    match workers.list(pb::ListWorkersRequest::default()).await {
        Ok(r) => updates.push(Update::Workers(
            r.into_inner()
                .workers
                .into_iter()
                .map(decode_worker)
                .collect(),
        )),
        Err(status) => tracing::debug!(code = ?status.code(), "worker list unavailable"),
    }
    let broker = evals
        .broker_stats(pb::BrokerStatsRequest {})
        .await
        .map(|r| r.into_inner())
        .ok();
    let plans = evals
        .plan_queue_stats(pb::PlanQueueStatsRequest {})
        .await
        .map(|r| r.into_inner())
        .ok();
    if broker.is_some() || plans.is_some() {
        updates.push(Update::Scheduling(scheduling_stats(broker, plans)));
    }
    match evals.blocked_list(pb::BlockedListRequest {}).await {
        Ok(r) => updates.push(Update::Blocked(
            r.into_inner()
                .evaluations
                .into_iter()
                .map(decode_blocked)
                .collect(),
        )),
        Err(status) => tracing::debug!(code = ?status.code(), "blocked list unavailable"),
    }
    updates
}
