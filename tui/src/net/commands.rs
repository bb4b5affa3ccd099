//! Carries out the operator's commands. Each outcome is reported back as a sentence for the
//! status bar; the change itself reaches the views through the event stream (or, for
//! workers, which are not on it, through a fresh worker list).

use crate::app::{Command, Update};
use crate::model::decode_worker;
use drover_core::{Allocation, NodeId};
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1 as pb;
use pb::alloc_service_client::AllocServiceClient;
use pb::job_service_client::JobServiceClient;
use pb::operator_service_client::OperatorServiceClient;
use pb::worker_service_client::WorkerServiceClient;

/// Runs one command and returns the updates it produced (always at least its outcome).
pub async fn execute(channel: &Channel, command: Command) -> Vec<Update> {
    let worker_command = matches!(
        command,
        Command::PauseWorker { .. }
            | Command::ResumeWorker { .. }
            | Command::PauseAllWorkers
            | Command::ResumeAllWorkers
            | Command::SetWorkerCount { .. }
    );
    let mut updates = match run(channel, command).await {
        Ok(Outcome::Said(text)) => vec![Update::CommandDone(Ok(text))],
        Ok(Outcome::Alloc(alloc)) => vec![Update::AllocDetail(alloc)],
        Err(text) => vec![Update::CommandDone(Err(text))],
    };
    if worker_command {
        let mut workers = WorkerServiceClient::new(channel.clone())
            .max_decoding_message_size(super::MAX_ANSWER_BYTES);
        if let Ok(list) = workers.list(pb::ListWorkersRequest::default()).await {
            updates.push(Update::Workers(
                list.into_inner()
                    .workers
                    .into_iter()
                    .map(decode_worker)
                    .collect(),
            ));
        }
    }
    updates
}

enum Outcome {
    Said(String),
    Alloc(Box<Allocation>),
}

/// `what failed: the server's message`, in the house style.
fn failed(what: impl std::fmt::Display, status: tonic::Status) -> String {
    format!("{what} failed: {}", status.message())
}

/// Runs `call` for every node, stopping at the first refusal.
async fn each_node<F, Fut>(nodes: &[NodeId], verb: &str, mut call: F) -> Result<Outcome, String>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), tonic::Status>>,
{
    for node in nodes {
        call(node.to_string())
            .await
            .map_err(|status| failed(format_args!("{verb} node {}", node.short()), status))?;
    }
    Ok(Outcome::Said(match nodes {
        [one] => format!("{verb} node {}", one.short()),
        many => format!("{verb} {} nodes", many.len()),
    }))
}

fn selector(server_id: String, target: pb::worker_selector::Target) -> Option<pb::WorkerSelector> {
    Some(pb::WorkerSelector {
        target: Some(target),
        server_id,
    })
}

async fn run(channel: &Channel, command: Command) -> Result<Outcome, String> {
    let operator = OperatorServiceClient::new(channel.clone())
        .max_decoding_message_size(super::MAX_ANSWER_BYTES);
    let mut workers = WorkerServiceClient::new(channel.clone())
        .max_decoding_message_size(super::MAX_ANSWER_BYTES);
    use pb::worker_selector::Target;
    match command {
        Command::Offline(nodes) => {
            each_node(&nodes, "offlined", |node_id| {
                let mut c = operator.clone();
                async move {
                    c.node_offline(pb::NodeOfflineRequest { node_id }).await?;
                    Ok(())
                }
            })
            .await
        }
        Command::Online(nodes) => {
            each_node(&nodes, "onlined", |node_id| {
                let mut c = operator.clone();
                async move {
                    c.node_online(pb::NodeOnlineRequest { node_id }).await?;
                    Ok(())
                }
            })
            .await
        }
        Command::Drain { nodes, deadline } => {
            let deadline_ms = deadline.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            each_node(&nodes, "draining", |node_id| {
                let mut c = operator.clone();
                async move {
                    c.node_drain(pb::NodeDrainRequest {
                        node_id,
                        enable: true,
                        deadline_ms,
                        ..Default::default()
                    })
                    .await?;
                    Ok(())
                }
            })
            .await
        }
        Command::EndDrain(nodes) => {
            each_node(&nodes, "ended the drain of", |node_id| {
                let mut c = operator.clone();
                async move {
                    c.node_drain(pb::NodeDrainRequest {
                        node_id,
                        enable: false,
                        mark_eligible: true,
                        ..Default::default()
                    })
                    .await?;
                    Ok(())
                }
            })
            .await
        }
        Command::SetEligibility { nodes, eligible } => {
            let (eligibility, verb) = if eligible {
                (pb::Eligibility::Eligible, "made eligible")
            } else {
                (pb::Eligibility::Ineligible, "made ineligible")
            };
            each_node(&nodes, verb, |node_id| {
                let mut c = operator.clone();
                async move {
                    c.node_eligibility(pb::NodeEligibilityRequest {
                        node_id,
                        eligibility: eligibility.into(),
                    })
                    .await?;
                    Ok(())
                }
            })
            .await
        }
        Command::PauseWorker {
            server_id,
            worker_id,
        } => {
            let workers_sel = selector(server_id, Target::WorkerId(worker_id.clone()));
            workers
                .pause(pb::PauseWorkersRequest {
                    workers: workers_sel,
                })
                .await
                .map_err(|s| failed(format_args!("pause worker {worker_id}"), s))?;
            Ok(Outcome::Said(format!("pausing worker {worker_id}")))
        }
        Command::ResumeWorker {
            server_id,
            worker_id,
        } => {
            let workers_sel = selector(server_id, Target::WorkerId(worker_id.clone()));
            workers
                .resume(pb::ResumeWorkersRequest {
                    workers: workers_sel,
                })
                .await
                .map_err(|s| failed(format_args!("resume worker {worker_id}"), s))?;
            Ok(Outcome::Said(format!("resuming worker {worker_id}")))
        }
        Command::PauseAllWorkers => {
            let answer = workers
                .pause(pb::PauseWorkersRequest {
                    workers: selector(String::new(), Target::All(true)),
                })
                .await
                .map_err(|s| failed("pause every worker", s))?;
            Ok(Outcome::Said(format!(
                "pausing {} worker(s)",
                answer.into_inner().workers.len()
            )))
        }
        Command::ResumeAllWorkers => {
            let answer = workers
                .resume(pb::ResumeWorkersRequest {
                    workers: selector(String::new(), Target::All(true)),
                })
                .await
                .map_err(|s| failed("resume every worker", s))?;
            Ok(Outcome::Said(format!(
                "resuming {} worker(s)",
                answer.into_inner().workers.len()
            )))
        }
        Command::SetWorkerCount { server_id, count } => {
            let what = format_args!("set the worker count of server {server_id}").to_string();
            let current = workers
                .get_config(pb::GetWorkerConfigRequest {
                    server_id: server_id.clone(),
                })
                .await
                .map_err(|s| failed(&what, s))?
                .into_inner();
            let mut config = current.config.unwrap_or_default();
            config.count = count;
            workers
                .set_config(pb::SetWorkerConfigRequest {
                    server_id,
                    config: Some(config),
                })
                .await
                .map_err(|s| failed(&what, s))?;
            Ok(Outcome::Said(format!("running {count} worker(s)")))
        }
        Command::StopJob(job) => {
            let mut jobs = JobServiceClient::new(channel.clone())
                .max_decoding_message_size(super::MAX_ANSWER_BYTES);
            jobs.deregister(pb::DeregisterJobRequest {
                namespace: job.namespace.to_string(),
                job_id: job.id.to_string(),
                purge: false,
            })
            .await
            .map_err(|s| failed(format_args!("stop job {}", job.id), s))?;
            Ok(Outcome::Said(format!("stopping job {}", job.id)))
        }
        Command::RestartAlloc(id) => {
            let mut allocs = AllocServiceClient::new(channel.clone());
            let answer = allocs
                .restart(pb::AllocRestartRequest {
                    alloc_id: id.to_string(),
                    task: String::new(),
                })
                .await
                .map_err(|s| failed(format_args!("restart allocation {}", id.short()), s))?
                .into_inner();
            Ok(Outcome::Said(format!(
                "restarted {} of allocation {}",
                match answer.tasks.as_slice() {
                    [] => "no running task".to_owned(),
                    [one] => format!("task {one}"),
                    many => format!("tasks {}", many.join(", ")),
                },
                id.short()
            )))
        }
        Command::StopAlloc(id) => {
            let mut allocs = AllocServiceClient::new(channel.clone());
            allocs
                .stop(pb::AllocStopRequest {
                    alloc_id: id.to_string(),
                })
                .await
                .map_err(|s| failed(format_args!("stop allocation {}", id.short()), s))?;
            Ok(Outcome::Said(format!(
                "stopping allocation {}, a replacement is being placed",
                id.short()
            )))
        }
        Command::FetchAlloc(id) => {
            let mut c = operator.clone();
            let answer = c
                .alloc_get(pb::AllocGetRequest {
                    query: None,
                    alloc_id: id.to_string(),
                })
                .await
                .map_err(|s| failed(format_args!("load allocation {}", id.short()), s))?
                .into_inner();
            let alloc = answer
                .allocation
                .ok_or_else(|| format!("load allocation {} failed: empty answer", id.short()))?;
            let alloc = Allocation::try_from(alloc)
                .map_err(|e| format!("load allocation {} failed: {e}", id.short()))?;
            Ok(Outcome::Alloc(Box::new(alloc)))
        }
    }
}
