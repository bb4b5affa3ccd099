//! `drover operator workers list|pause|resume|config`: each server's scheduler workers.

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::output::{self, OutputArgs, Table, key_values};
use drover_core::{SchedulerType, Timestamp};
use drover_proto::WireEnum;
use drover_proto::v1 as pb;
use serde::Serialize;
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum WorkerCommand {
    /// List the workers with their status and what they are doing
    List {
        #[command(flatten)]
        target: ServerArg,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Pause one worker, or all with -all: it parks at its next dequeue
    Pause {
        #[command(flatten)]
        which: WorkerArgs,
    },
    /// Resume one paused worker, or all paused workers with -all
    Resume {
        #[command(flatten)]
        which: WorkerArgs,
    },
    /// Show a server's worker pool settings or, given -count or -schedulers, change them
    Config {
        /// How many workers to run (0 up to the server's CPU count)
        #[arg(long)]
        count: Option<u32>,
        /// Scheduler types the workers take, comma separated (service,batch,system,sysbatch);
        /// `_core` is always added
        #[arg(long, value_delimiter = ',')]
        schedulers: Option<Vec<String>>,
        #[command(flatten)]
        target: ServerArg,
        /// Print the settings as JSON
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, clap::Args)]
pub struct ServerArg {
    /// The server whose workers to act on; the one answering when absent
    #[arg(long)]
    server_id: Option<String>,
}

/// One worker by id or all with `-all`; naming neither is a usage error that names both.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["worker_id", "all"])))]
pub struct WorkerArgs {
    /// The worker's id, as `workers list` shows it
    worker_id: Option<String>,
    /// Every worker of the server (or of every server, without -server-id)
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    target: ServerArg,
}

impl WorkerArgs {
    fn selector(&self) -> pb::WorkerSelector {
        let target = match &self.worker_id {
            Some(id) => pb::worker_selector::Target::WorkerId(id.clone()),
            None => pb::worker_selector::Target::All(true),
        };
        pb::WorkerSelector {
            target: Some(target),
            server_id: self.target.server_id.clone().unwrap_or_default(),
        }
    }
}

/// One worker as `workers list` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct WorkerRow {
    pub id: String,
    pub server_id: String,
    pub enabled_schedulers: Vec<SchedulerType>,
    pub started: Timestamp,
    pub status: String,
    pub workload_status: String,
}

impl WorkerRow {
    fn decode(w: pb::WorkerInfo) -> Result<WorkerRow, CliError> {
        let enabled_schedulers = w
            .enabled_schedulers
            .iter()
            .enumerate()
            .map(|(i, v)| SchedulerType::from_wire(&format!("enabled_schedulers[{i}]"), *v))
            .collect::<Result<Vec<_>, _>>()?;
        let status = pb::WorkerStatus::try_from(w.status)
            .map(|s| output::wire_name(s.as_str_name(), "WORKER_STATUS_"))
            .unwrap_or_else(|_| format!("unknown({})", w.status));
        let workload_status = pb::WorkloadStatus::try_from(w.workload_status)
            .map(|s| output::wire_name(s.as_str_name(), "WORKLOAD_STATUS_"))
            .unwrap_or_else(|_| format!("unknown({})", w.workload_status));
        Ok(WorkerRow {
            id: w.id,
            server_id: w.server_id,
            enabled_schedulers,
            started: Timestamp::from_millis(w.started_unix_ms),
            status,
            workload_status,
        })
    }
}

/// Prints the workers a pause or resume answered with, as `drover operator worker list` does.
fn print_workers(out: &mut dyn Write, workers: Vec<pb::WorkerInfo>) -> Result<(), CliError> {
    write!(
        out,
        "{}",
        worker_table(&decode_all(workers)?, output::now())
    )?;
    Ok(())
}

fn decode_all(workers: Vec<pb::WorkerInfo>) -> Result<Vec<WorkerRow>, CliError> {
    workers.into_iter().map(WorkerRow::decode).collect()
}

pub async fn run(
    client: &Client,
    cmd: WorkerCommand,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    match cmd {
        WorkerCommand::List { target, output } => {
            let answer = client
                .workers()
                .list(pb::ListWorkersRequest {
                    server_id: target.server_id.unwrap_or_default(),
                })
                .await
                .map_err(rpc_failed("listing workers"))?
                .into_inner();
            let rows = decode_all(answer.workers)?;
            if output.json {
                output::print_json(out, &rows)?;
            } else {
                write!(out, "{}", worker_table(&rows, output::now()))?;
            }
            for missing in &answer.unreachable {
                eprintln!("! server {missing}: its workers are not listed");
            }
        }
        WorkerCommand::Pause { which } => {
            let answer = client
                .workers()
                .pause(pb::PauseWorkersRequest {
                    workers: Some(which.selector()),
                })
                .await
                .map_err(rpc_failed(describe("pausing", &which)))?
                .into_inner();
            print_workers(out, answer.workers)?;
        }
        WorkerCommand::Resume { which } => {
            let answer = client
                .workers()
                .resume(pb::ResumeWorkersRequest {
                    workers: Some(which.selector()),
                })
                .await
                .map_err(rpc_failed(describe("resuming", &which)))?
                .into_inner();
            print_workers(out, answer.workers)?;
        }
        WorkerCommand::Config {
            count,
            schedulers,
            target,
            json,
        } => {
            let server_id = target.server_id.unwrap_or_default();
            let current = client
                .workers()
                .get_config(pb::GetWorkerConfigRequest {
                    server_id: server_id.clone(),
                })
                .await
                .map_err(rpc_failed("querying the worker configuration"))?
                .into_inner();
            let max_count = current.max_count;
            let mut config = current
                .config
                .ok_or_else(|| CliError::IncompleteAnswer("worker configuration".into()))?;
            if count.is_some() || schedulers.is_some() {
                if let Some(count) = count {
                    config.count = count;
                }
                if let Some(names) = schedulers {
                    config.enabled_schedulers = parse_schedulers(&names)?;
                }
                let answer = client
                    .workers()
                    .set_config(pb::SetWorkerConfigRequest {
                        server_id,
                        config: Some(config),
                    })
                    .await
                    .map_err(rpc_failed("updating the worker configuration"))?
                    .into_inner();
                config = answer
                    .config
                    .ok_or_else(|| CliError::IncompleteAnswer("worker configuration".into()))?;
            }
            let view = PoolView::decode(config, max_count)?;
            if json {
                output::print_json(out, &view)?;
            } else {
                write!(out, "{}", pool_details(&view))?;
            }
        }
    }
    Ok(Exit::OK)
}

fn describe(verb: &str, which: &WorkerArgs) -> String {
    match &which.worker_id {
        Some(id) => format!("{verb} worker {id:?}"),
        None => format!("{verb} all workers"),
    }
}

fn parse_schedulers(names: &[String]) -> Result<Vec<i32>, CliError> {
    names
        .iter()
        .map(|name| {
            SchedulerType::parse(name.trim())
                .map(WireEnum::to_wire)
                .ok_or_else(|| {
                    CliError::Usage(format!(
                        "unknown scheduler {name:?} (service, batch, system, sysbatch, _core)"
                    ))
                })
        })
        .collect()
}

/// A server's worker pool settings.
#[derive(Clone, Debug, Serialize)]
pub struct PoolView {
    pub count: u32,
    pub enabled_schedulers: Vec<SchedulerType>,
    /// The most workers the server accepts (its CPU count).
    pub max_count: u32,
}

impl PoolView {
    fn decode(config: pb::WorkerConfig, max_count: u32) -> Result<PoolView, CliError> {
        let decoded = drover_proto::convert::WorkerPoolConfig::try_from(config)?;
        Ok(PoolView {
            count: decoded.count,
            enabled_schedulers: decoded.enabled.into_iter().collect(),
            max_count,
        })
    }
}

pub fn pool_details(view: &PoolView) -> String {
    key_values(&[
        ("Workers", view.count.to_string()),
        ("Max Workers", view.max_count.to_string()),
        ("Schedulers", scheduler_list(&view.enabled_schedulers)),
    ])
}

fn scheduler_list(types: &[SchedulerType]) -> String {
    types
        .iter()
        .map(|t| t.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

pub fn worker_table(rows: &[WorkerRow], now: Timestamp) -> String {
    if rows.is_empty() {
        return "No workers\n".into();
    }
    let mut table = Table::new([
        "ID",
        "Server",
        "Status",
        "Workload",
        "Schedulers",
        "Started",
    ]);
    for w in rows {
        table.row([
            w.id.clone(),
            w.server_id.clone(),
            w.status.clone(),
            w.workload_status.clone(),
            scheduler_list(&w.enabled_schedulers),
            output::ago(w.started, now),
        ]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_rows_decode_and_render() {
        let info =
            |id: &str, status: pb::WorkerStatus, workload: pb::WorkloadStatus| pb::WorkerInfo {
                id: id.into(),
                server_id: "1".into(),
                enabled_schedulers: vec![
                    SchedulerType::Service.to_wire(),
                    SchedulerType::Core.to_wire(),
                ],
                started_unix_ms: 1_700_000_000_000,
                status: status.into(),
                workload_status: workload.into(),
            };
        let rows = decode_all(vec![
            info(
                "1-0",
                pb::WorkerStatus::Started,
                pb::WorkloadStatus::WaitingToDequeue,
            ),
            info("1-1", pb::WorkerStatus::Paused, pb::WorkloadStatus::Paused),
        ])
        .expect("decodes");
        insta::assert_snapshot!(worker_table(
            &rows,
            Timestamp::from_millis(1_700_000_065_000)
        ));
    }

    #[test]
    fn scheduler_names() {
        assert_eq!(
            parse_schedulers(&["service".into(), " batch".into()]).expect("valid"),
            vec![
                SchedulerType::Service.to_wire(),
                SchedulerType::Batch.to_wire()
            ]
        );
        let err = parse_schedulers(&["nope".into()]).expect_err("unknown");
        assert!(err.to_string().contains("\"nope\""), "{err}");
    }
}
