//! `drover alloc logs`: a task's stdout or stderr, passed on by the server from the agent
//! of the allocation's node, written to stdout byte for byte.

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::resolve::{self, Kind};
use drover_proto::v1 as pb;
use std::io::Write;

/// Lines `-tail` shows when `-n` does not say.
const DEFAULT_TAIL_LINES: u64 = 10;

#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    /// The allocation's id, or a unique prefix of it (with -job: the job's id)
    alloc_id: String,
    /// Read the logs of one of this job's allocations (the newest running one), as
    /// Nomad's `alloc logs -job` does: the first argument is then the job's id
    #[arg(long)]
    job: bool,
    /// The task (needed when the allocation has several)
    task: Option<String>,
    /// Show stderr instead of stdout
    #[arg(long)]
    stderr: bool,
    /// Keep printing what the task writes until interrupted (or the allocation ends)
    #[arg(short = 'f', long)]
    follow: bool,
    /// Start near the end: the last -n lines (10 unless -n says)
    #[arg(long)]
    tail: bool,
    /// How many lines from the end to start at (implies -tail)
    #[arg(short = 'n', value_name = "LINES")]
    lines: Option<u64>,
}

impl LogsArgs {
    fn tail_lines(&self) -> Option<u64> {
        match (self.lines, self.tail) {
            (Some(n), _) => Some(n),
            (None, true) => Some(DEFAULT_TAIL_LINES),
            (None, false) => None,
        }
    }
}

/// The newest of `job_id`'s allocations that runs (or, failing that, the newest of all).
async fn job_alloc(client: &Client, job_id: &str) -> Result<String, CliError> {
    let action = format!("listing the allocations of job {job_id:?}");
    let allocs = drover_proto::paging::job_allocations_all(
        &client.jobs(),
        pb::JobAllocationsRequest {
            namespace: client.namespace().to_string(),
            job_id: job_id.to_string(),
            ..Default::default()
        },
    )
    .await
    .map_err(rpc_failed(&action))?
    .allocations;
    let running = pb::ClientStatus::Running as i32;
    allocs
        .iter()
        .filter(|a| a.client_status == running)
        .max_by_key(|a| a.create_index)
        .or_else(|| allocs.iter().max_by_key(|a| a.create_index))
        .map(|a| a.id.clone())
        .ok_or_else(|| CliError::Usage(format!("job {job_id:?} has no allocations yet")))
}

pub async fn run(client: &Client, args: LogsArgs, out: &mut dyn Write) -> Result<Exit, CliError> {
    let alloc_id = if args.job {
        job_alloc(client, &args.alloc_id).await?
    } else {
        resolve::id(client, Kind::Alloc, &args.alloc_id).await?
    };
    let request = pb::AllocLogsRequest {
        alloc_id: alloc_id.clone(),
        task: args.task.clone().unwrap_or_default(),
        stderr: args.stderr,
        follow: args.follow,
        tail_lines: args.tail_lines(),
    };
    let action = format_args!("reading the logs of allocation {alloc_id:?}").to_string();
    let mut stream = client
        .alloc_logs()
        .logs(request)
        .await
        .map_err(rpc_failed(&action))?
        .into_inner();
    while let Some(chunk) = stream.message().await.map_err(rpc_failed(&action))? {
        out.write_all(&chunk.data)?;
        out.flush()?;
    }
    Ok(Exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LogsArgs,
    }

    #[test]
    fn tail_and_n_choose_where_reading_starts() {
        let cases: [(&[&str], Option<u64>); 4] = [
            (&["a1"], None),
            (&["a1", "--tail"], Some(10)),
            (&["a1", "-n", "3"], Some(3)),
            (&["a1", "--tail", "-n", "0"], Some(0)),
        ];
        for (argv, want) in cases {
            let cli = Cli::try_parse_from(std::iter::once("logs").chain(argv.iter().copied()))
                .expect("parses");
            assert_eq!(cli.args.tail_lines(), want, "{argv:?}");
        }
    }
}
