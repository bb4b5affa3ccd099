//! `drover job periodic force JOB`: launch a periodic job's child now, outside its
//! schedule, and follow the child's evaluation (as Nomad's `job periodic force`).

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::monitor::monitor;
use crate::output;
use drover_proto::v1 as pb;
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum PeriodicCommand {
    /// Launch a child of a periodic job now (the schedule is unchanged) and follow its
    /// evaluation
    Force {
        /// The periodic job
        job_id: String,
        /// Return once launched, without following the evaluation
        #[arg(long)]
        detach: bool,
        /// Show full ids
        #[arg(long)]
        verbose: bool,
    },
}

pub async fn run(
    client: &Client,
    cmd: PeriodicCommand,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let PeriodicCommand::Force {
        job_id,
        detach,
        verbose,
    } = cmd;
    let answer = client
        .jobs()
        .periodic_force(pb::PeriodicForceRequest {
            namespace: client.namespace().to_string(),
            job_id: job_id.clone(),
        })
        .await
        .map_err(rpc_failed(format_args!("forcing periodic job {job_id:?}")))?
        .into_inner();
    write!(
        out,
        "{}",
        output::key_values(&[
            ("Launched Job ID", answer.child_job_id.clone()),
            ("Evaluation ID", answer.eval_id.clone()),
        ])
    )?;
    if detach {
        return Ok(Exit::OK);
    }
    writeln!(out)?;
    monitor(client, &answer.eval_id, verbose, out).await
}
