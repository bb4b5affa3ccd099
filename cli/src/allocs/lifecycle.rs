//! `drover alloc stop` and `alloc restart`.

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::monitor::monitor;
use crate::resolve::{self, Kind};
use drover_proto::v1 as pb;
use std::io::Write;

/// Stops the allocation and, unless `detach`, follows the evaluation that replaces it.
pub async fn stop(
    client: &Client,
    alloc_id: &str,
    detach: bool,
    verbose: bool,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let alloc_id = resolve::id(client, Kind::Alloc, alloc_id).await?;
    let answer = client
        .allocs()
        .stop(pb::AllocStopRequest {
            alloc_id: alloc_id.clone(),
        })
        .await
        .map_err(rpc_failed(format_args!("stopping allocation {alloc_id:?}")))?
        .into_inner();
    if detach {
        writeln!(out, "Allocation {alloc_id:?} stopped")?;
        writeln!(out, "Evaluation ID: {}", answer.eval_id)?;
        return Ok(Exit::OK);
    }
    monitor(client, &answer.eval_id, verbose, out).await
}

/// Restarts the allocation's running tasks (or `task`) in place.
pub async fn restart(
    client: &Client,
    alloc_id: &str,
    task: Option<String>,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let alloc_id = resolve::id(client, Kind::Alloc, alloc_id).await?;
    let answer = client
        .allocs()
        .restart(pb::AllocRestartRequest {
            alloc_id: alloc_id.clone(),
            task: task.unwrap_or_default(),
        })
        .await
        .map_err(rpc_failed(format_args!(
            "restarting allocation {alloc_id:?}"
        )))?
        .into_inner();
    for task in &answer.tasks {
        writeln!(out, "Restarting task {task:?} of allocation {alloc_id:?}")?;
    }
    Ok(Exit::OK)
}
