//! `drover operator scheduler get-config|set-config`: the cluster-wide scheduler settings;
//! and the `operator` command group itself, which also holds `workers`.

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::output::{self, key_values};
use crate::raft::RaftCommand;
use crate::workers::{self, WorkerCommand};
use drover_core::{SchedulerAlgorithm, SchedulerConfig};
use drover_proto::v1 as pb;
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum OperatorCommand {
    /// The scheduler configuration (algorithm, preemption, pausing the eval broker)
    #[command(subcommand)]
    Scheduler(SchedulerCommand),
    /// The scheduler workers of each server: list, pause, resume, resize
    #[command(subcommand)]
    Workers(WorkerCommand),
    /// The servers that form the cluster: list, add, remove, hand leadership over
    #[command(subcommand)]
    Raft(RaftCommand),
}

#[derive(Debug, clap::Subcommand)]
pub enum SchedulerCommand {
    /// Show the scheduler configuration
    GetConfig {
        /// Print the configuration as JSON
        #[arg(long)]
        json: bool,
    },
    /// Change the scheduler configuration; settings not given keep their value
    SetConfig(SetConfigArgs),
}

#[derive(Debug, clap::Args)]
pub struct SetConfigArgs {
    /// binpack or spread
    #[arg(long)]
    scheduler_algorithm: Option<String>,
    /// Hold every new evaluation in the broker (nothing is scheduled)
    #[arg(long)]
    pause_eval_broker: Option<bool>,
    /// Refuse job registrations
    #[arg(long)]
    reject_job_registration: Option<bool>,
    #[arg(long)]
    preempt_system_scheduler: Option<bool>,
    #[arg(long)]
    preempt_sysbatch_scheduler: Option<bool>,
    #[arg(long)]
    preempt_batch_scheduler: Option<bool>,
    #[arg(long)]
    preempt_service_scheduler: Option<bool>,
    /// Apply only if the configuration's modify index is still this
    #[arg(long)]
    check_index: Option<u64>,
}

pub async fn run(
    client: &Client,
    cmd: OperatorCommand,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    match cmd {
        OperatorCommand::Workers(cmd) => workers::run(client, cmd, out).await,
        OperatorCommand::Raft(cmd) => crate::raft::run(client, cmd, out).await,
        OperatorCommand::Scheduler(SchedulerCommand::GetConfig { json }) => {
            let config = get_config(client).await?;
            if json {
                output::print_json(out, &config)?;
            } else {
                write!(out, "{}", config_details(&config))?;
            }
            Ok(Exit::OK)
        }
        OperatorCommand::Scheduler(SchedulerCommand::SetConfig(args)) => {
            let mut config = get_config(client).await?;
            apply(&mut config, &args)?;
            let answer = client
                .operator()
                .scheduler_set_config(pb::SchedulerSetConfigRequest {
                    config: Some((&config).into()),
                    cas_index: args.check_index,
                })
                .await
                .map_err(rpc_failed("updating the scheduler configuration"))?
                .into_inner();
            if answer.updated {
                writeln!(out, "Scheduler configuration updated!")?;
                Ok(Exit::OK)
            } else {
                Err(CliError::Usage(format!(
                    "scheduler configuration not updated: modify index {} is stale",
                    args.check_index.unwrap_or_default()
                )))
            }
        }
    }
}

pub(crate) async fn get_config(client: &Client) -> Result<SchedulerConfig, CliError> {
    let answer = client
        .operator()
        .scheduler_get_config(pb::SchedulerGetConfigRequest { query: None })
        .await
        .map_err(rpc_failed("querying the scheduler configuration"))?
        .into_inner();
    let config = answer
        .config
        .ok_or_else(|| CliError::IncompleteAnswer("scheduler configuration".into()))?;
    Ok(SchedulerConfig::try_from(config)?)
}

fn apply(config: &mut SchedulerConfig, args: &SetConfigArgs) -> Result<(), CliError> {
    if let Some(name) = &args.scheduler_algorithm {
        config.algorithm = SchedulerAlgorithm::parse(name).ok_or_else(|| {
            CliError::Usage(format!(
                "unknown scheduler algorithm {name:?} (binpack or spread)"
            ))
        })?;
    }
    let set = |field: &mut bool, value: Option<bool>| {
        if let Some(v) = value {
            *field = v;
        }
    };
    set(&mut config.pause_eval_broker, args.pause_eval_broker);
    set(
        &mut config.reject_job_registration,
        args.reject_job_registration,
    );
    set(&mut config.preemption.system, args.preempt_system_scheduler);
    set(
        &mut config.preemption.sysbatch,
        args.preempt_sysbatch_scheduler,
    );
    set(&mut config.preemption.batch, args.preempt_batch_scheduler);
    set(
        &mut config.preemption.service,
        args.preempt_service_scheduler,
    );
    Ok(())
}

pub fn config_details(c: &SchedulerConfig) -> String {
    key_values(&[
        ("Scheduler Algorithm", c.algorithm.as_str().to_string()),
        (
            "Preemption System Scheduler",
            c.preemption.system.to_string(),
        ),
        (
            "Preemption SysBatch Scheduler",
            c.preemption.sysbatch.to_string(),
        ),
        ("Preemption Batch Scheduler", c.preemption.batch.to_string()),
        (
            "Preemption Service Scheduler",
            c.preemption.service.to_string(),
        ),
        ("Pause Eval Broker", c.pause_eval_broker.to_string()),
        (
            "Reject Job Registration",
            c.reject_job_registration.to_string(),
        ),
        ("Modify Index", c.modify_index.to_string()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config() {
        insta::assert_snapshot!(config_details(&SchedulerConfig::default()));
    }

    #[test]
    fn set_config_changes_only_what_is_given() {
        let mut config = SchedulerConfig::default();
        let args = SetConfigArgs {
            scheduler_algorithm: Some("spread".into()),
            pause_eval_broker: Some(true),
            reject_job_registration: None,
            preempt_system_scheduler: Some(false),
            preempt_sysbatch_scheduler: None,
            preempt_batch_scheduler: None,
            preempt_service_scheduler: None,
            check_index: None,
        };
        apply(&mut config, &args).expect("valid");
        assert_eq!(config.algorithm, SchedulerAlgorithm::Spread);
        assert!(config.pause_eval_broker);
        assert!(!config.preemption.system);
        assert!(config.preemption.sysbatch, "untouched");
        let bad = SetConfigArgs {
            scheduler_algorithm: Some("random".into()),
            ..args
        };
        let err = apply(&mut config, &bad).expect_err("unknown algorithm");
        assert!(err.to_string().contains("\"random\""), "{err}");
    }
}
