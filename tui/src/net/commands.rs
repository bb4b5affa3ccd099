//! Carries out the operator's commands. Each outcome is reported back as a sentence for the
//! status bar; the change itself reaches the views through the event stream (or, for
//! workers, which are not on it, through a fresh worker list).
//!
//! Every call goes to the server followed, or the next that answers ([`Servers::call`]).
//! Worker commands reach each server's own pool: a server acts on its own workers (and
//! answers NOT_FOUND for another server's), so a command for one worker is tried on each
//! server until one knows it, and one for every worker goes to every server.

use super::servers::{Servers, unreached};
use crate::app::{Command, Update};
use drover_core::{Allocation, NodeId, SampledUsage};
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1 as pb;
use pb::alloc_service_client::AllocServiceClient;
use pb::deployment_service_client::DeploymentServiceClient;
use pb::job_service_client::JobServiceClient;
use pb::operator_service_client::OperatorServiceClient;
use pb::worker_service_client::WorkerServiceClient;
use std::collections::BTreeSet;
use tonic::Status;

/// Runs one command and returns the updates it produced (always at least its outcome).
pub async fn execute(servers: &Servers, command: Command) -> Vec<Update> {
    let worker_command = matches!(
        command,
        Command::PauseWorker { .. }
            | Command::ResumeWorker { .. }
            | Command::PauseAllWorkers
            | Command::ResumeAllWorkers
            | Command::SetWorkerCount { .. }
    );
    let mut updates = match run(servers, command).await {
        Ok(Outcome::Said(text)) => vec![Update::CommandDone(Ok(text))],
        Ok(Outcome::Alloc(alloc)) => vec![Update::AllocDetail(alloc)],
        Ok(Outcome::NodeUsage(node, usage)) => vec![Update::NodeUsage(node, usage)],
        Err(text) => vec![Update::CommandDone(Err(text))],
    };
    if worker_command && let Some(workers) = super::poll::all_workers(servers).await {
        updates.push(Update::Workers(workers));
    }
    updates
}

enum Outcome {
    Said(String),
    Alloc(Box<Allocation>),
    NodeUsage(NodeId, Option<SampledUsage>),
}

/// `what failed: the server's message`, in the house style.
fn failed(what: impl std::fmt::Display, status: Status) -> String {
    format!("{what} failed: {}", status.message())
}

fn operator(channel: Channel) -> OperatorServiceClient<Channel> {
    OperatorServiceClient::new(channel).max_decoding_message_size(super::MAX_ANSWER_BYTES)
}

fn deployments(channel: Channel) -> DeploymentServiceClient<Channel> {
    DeploymentServiceClient::new(channel).max_decoding_message_size(super::MAX_ANSWER_BYTES)
}

fn workers(channel: Channel) -> WorkerServiceClient<Channel> {
    WorkerServiceClient::new(channel).max_decoding_message_size(super::MAX_ANSWER_BYTES)
}

/// Runs `request(node)` for every node, stopping at the first refusal.
async fn each_node<F>(
    servers: &Servers,
    nodes: &[NodeId],
    verb: &str,
    request: F,
) -> Result<Outcome, String>
where
    F: Fn(Channel, String) -> tonic::codegen::BoxFuture<(), Status>,
{
    for node in nodes {
        servers
            .call(|channel| request(channel, node.to_string()))
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

/// Whether a worker command's refusal may only mean the worker (or its server) lives on
/// another server than the one asked.
fn elsewhere(status: &Status) -> bool {
    status.code() == tonic::Code::NotFound
}

/// Pauses or resumes every worker of every listed server: `(workers selected, servers
/// that did it)`, or the first refusal when no server did.
async fn every_pool(servers: &Servers, pause: bool) -> Result<(usize, usize), Status> {
    let mut selected = BTreeSet::new();
    let (mut done, mut refusal) = (0, None);
    for server in servers.all() {
        let mut client = workers(server.unary.clone());
        let all = selector(String::new(), pb::worker_selector::Target::All(true));
        let answer = if pause {
            let r = client.pause(pb::PauseWorkersRequest { workers: all }).await;
            r.map(|r| r.into_inner().workers)
        } else {
            let r = client
                .resume(pb::ResumeWorkersRequest { workers: all })
                .await;
            r.map(|r| r.into_inner().workers)
        };
        match answer {
            Ok(list) => {
                done += 1;
                selected.extend(list.into_iter().map(|w| (w.server_id, w.id)));
            }
            Err(status) if unreached(&status) => {
                tracing::warn!(server = %server.url, "a server did not answer a worker command");
            }
            Err(status) => refusal = refusal.or(Some(status)),
        }
    }
    match (done, refusal) {
        (0, Some(status)) => Err(status),
        (0, None) => Err(Status::unavailable("no listed server answered")),
        _ => Ok((selected.len(), done)),
    }
}

/// Pauses or resumes one worker, on whichever server knows it.
async fn one_worker(
    servers: &Servers,
    server_id: String,
    worker_id: String,
    pause: bool,
) -> Result<Outcome, String> {
    let (verb, doing) = if pause {
        ("pause", "pausing")
    } else {
        ("resume", "resuming")
    };
    let workers_sel = selector(
        server_id,
        pb::worker_selector::Target::WorkerId(worker_id.clone()),
    );
    servers
        .call_until(
            |channel| {
                let workers_sel = workers_sel.clone();
                async move {
                    let mut client = workers(channel);
                    if pause {
                        let request = pb::PauseWorkersRequest {
                            workers: workers_sel,
                        };
                        client.pause(request).await.map(drop)
                    } else {
                        let request = pb::ResumeWorkersRequest {
                            workers: workers_sel,
                        };
                        client.resume(request).await.map(drop)
                    }
                }
            },
            elsewhere,
        )
        .await
        .map_err(|s| failed(format_args!("{verb} worker {worker_id}"), s))?;
    Ok(Outcome::Said(format!("{doing} worker {worker_id}")))
}

async fn run(servers: &Servers, command: Command) -> Result<Outcome, String> {
    match command {
        Command::Offline(nodes) => {
            each_node(servers, &nodes, "offlined", |channel, node_id| {
                Box::pin(async move {
                    let request = pb::NodeOfflineRequest { node_id };
                    operator(channel).node_offline(request).await.map(drop)
                })
            })
            .await
        }
        Command::Online(nodes) => {
            each_node(servers, &nodes, "onlined", |channel, node_id| {
                Box::pin(async move {
                    let request = pb::NodeOnlineRequest { node_id };
                    operator(channel).node_online(request).await.map(drop)
                })
            })
            .await
        }
        Command::Drain { nodes, deadline } => {
            let deadline_ms = deadline.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            each_node(servers, &nodes, "draining", move |channel, node_id| {
                Box::pin(async move {
                    let request = pb::NodeDrainRequest {
                        node_id,
                        enable: true,
                        deadline_ms,
                        ..Default::default()
                    };
                    operator(channel).node_drain(request).await.map(drop)
                })
            })
            .await
        }
        Command::EndDrain(nodes) => {
            each_node(servers, &nodes, "ended the drain of", |channel, node_id| {
                Box::pin(async move {
                    let request = pb::NodeDrainRequest {
                        node_id,
                        enable: false,
                        mark_eligible: true,
                        ..Default::default()
                    };
                    operator(channel).node_drain(request).await.map(drop)
                })
            })
            .await
        }
        Command::SetEligibility { nodes, eligible } => {
            let (eligibility, verb) = if eligible {
                (pb::Eligibility::Eligible, "made eligible")
            } else {
                (pb::Eligibility::Ineligible, "made ineligible")
            };
            each_node(servers, &nodes, verb, move |channel, node_id| {
                Box::pin(async move {
                    let request = pb::NodeEligibilityRequest {
                        node_id,
                        eligibility: eligibility.into(),
                    };
                    operator(channel).node_eligibility(request).await.map(drop)
                })
            })
            .await
        }
        Command::PauseWorker {
            server_id,
            worker_id,
        } => one_worker(servers, server_id, worker_id, true).await,
        Command::ResumeWorker {
            server_id,
            worker_id,
        } => one_worker(servers, server_id, worker_id, false).await,
        Command::PauseAllWorkers => {
            let (count, done) = every_pool(servers, true)
                .await
                .map_err(|s| failed("pause every worker", s))?;
            Ok(Outcome::Said(format!(
                "pausing {count} worker(s) on {done} of {} server(s)",
                servers.len()
            )))
        }
        Command::ResumeAllWorkers => {
            let (count, done) = every_pool(servers, false)
                .await
                .map_err(|s| failed("resume every worker", s))?;
            Ok(Outcome::Said(format!(
                "resuming {count} worker(s) on {done} of {} server(s)",
                servers.len()
            )))
        }
        Command::SetWorkerCount { server_id, count } => {
            let what = format!("set the worker count of server {server_id}");
            servers
                .call_until(
                    |channel| {
                        let server_id = server_id.clone();
                        async move {
                            let mut client = workers(channel);
                            let get = pb::GetWorkerConfigRequest {
                                server_id: server_id.clone(),
                            };
                            let current = client.get_config(get).await?.into_inner();
                            let mut config = current.config.unwrap_or_default();
                            config.count = count;
                            let set = pb::SetWorkerConfigRequest {
                                server_id,
                                config: Some(config),
                            };
                            client.set_config(set).await
                        }
                    },
                    elsewhere,
                )
                .await
                .map_err(|s| failed(&what, s))?;
            Ok(Outcome::Said(format!("running {count} worker(s)")))
        }
        Command::StopJob(job) => {
            let request = pb::DeregisterJobRequest {
                namespace: job.namespace.to_string(),
                job_id: job.id.to_string(),
                purge: false,
            };
            servers
                .call(|channel| {
                    let request = request.clone();
                    async move { JobServiceClient::new(channel).deregister(request).await }
                })
                .await
                .map_err(|s| failed(format_args!("stop job {}", job.id), s))?;
            Ok(Outcome::Said(format!("stopping job {}", job.id)))
        }
        Command::RestartAlloc(id) => {
            let request = pb::AllocRestartRequest {
                alloc_id: id.to_string(),
                task: String::new(),
            };
            let answer = servers
                .call(|channel| {
                    let request = request.clone();
                    async move { AllocServiceClient::new(channel).restart(request).await }
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
            let request = pb::AllocStopRequest {
                alloc_id: id.to_string(),
            };
            servers
                .call(|channel| {
                    let request = request.clone();
                    async move { AllocServiceClient::new(channel).stop(request).await }
                })
                .await
                .map_err(|s| failed(format_args!("stop allocation {}", id.short()), s))?;
            Ok(Outcome::Said(format!(
                "stopping allocation {}, a replacement is being placed",
                id.short()
            )))
        }
        Command::PromoteDeployment(id) => {
            let request = pb::PromoteDeploymentRequest {
                id: id.to_string(),
                groups: Vec::new(),
            };
            servers
                .call(|channel| {
                    let request = request.clone();
                    async move { deployments(channel).promote(request).await }
                })
                .await
                .map_err(|s| failed(format_args!("promote deployment {}", id.short()), s))?;
            Ok(Outcome::Said(format!(
                "promoted the canaries of deployment {}",
                id.short()
            )))
        }
        Command::PauseDeployment { id, pause } => {
            let request = pb::DeploymentIdRequest { id: id.to_string() };
            let verb = if pause { "pause" } else { "resume" };
            servers
                .call(|channel| {
                    let request = request.clone();
                    async move {
                        let mut client = deployments(channel);
                        if pause {
                            client.pause(request).await
                        } else {
                            client.resume(request).await
                        }
                    }
                })
                .await
                .map_err(|s| failed(format_args!("{verb} deployment {}", id.short()), s))?;
            Ok(Outcome::Said(format!(
                "{} deployment {}",
                if pause { "paused" } else { "resumed" },
                id.short()
            )))
        }
        Command::FailDeployment(id) => {
            let request = pb::DeploymentIdRequest { id: id.to_string() };
            servers
                .call(|channel| {
                    let request = request.clone();
                    async move { deployments(channel).fail(request).await }
                })
                .await
                .map_err(|s| failed(format_args!("fail deployment {}", id.short()), s))?;
            Ok(Outcome::Said(format!(
                "marked deployment {} failed",
                id.short()
            )))
        }
        Command::FetchAlloc(id) => {
            let request = pb::AllocGetRequest {
                query: None,
                alloc_id: id.to_string(),
            };
            let answer = servers
                .call(|channel| {
                    let request = request.clone();
                    async move { operator(channel).alloc_get(request).await }
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
        Command::FetchNodeUsage(id) => {
            let request = pb::NodeGetRequest {
                query: None,
                node_id: id.to_string(),
            };
            let answer = servers
                .call(|channel| {
                    let request = request.clone();
                    async move { operator(channel).node_get(request).await }
                })
                .await
                .map_err(|s| failed(format_args!("load node {}", id.short()), s))?
                .into_inner();
            let allocs = answer
                .allocations
                .into_iter()
                .map(Allocation::try_from)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("load node {} failed: {e}", id.short()))?;
            Ok(Outcome::NodeUsage(id, SampledUsage::of_running(&allocs)))
        }
    }
}
