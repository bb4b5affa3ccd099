//! Following one evaluation to its end, as `job run`, `job stop` and `job dispatch` do
//! unless `-detach`: the status changes, the allocations it placed, and why any
//! placements failed.

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::evals;
use crate::output;
use drover_core::{Allocation, EvalStatus, SchedulerType};
use drover_proto::WireEnum;
use drover_proto::v1 as pb;
use std::io::Write;
use std::time::Duration;

/// How often the evaluation is read again while it is still pending.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Reads of a still-pending evaluation before the workers are asked whether anything will
/// take it (a second: a busy cluster answers within it).
const POLLS_BEFORE_WORKER_CHECK: u32 = 10;

/// Follows `eval_id` until it is complete, failed or canceled, printing as it goes.
/// Ctrl-C leaves it running on the server; only the watching stops.
pub async fn monitor(
    client: &Client,
    eval_id: &str,
    verbose: bool,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    writeln!(
        out,
        "==> Monitoring evaluation {:?}",
        output::id(eval_id, verbose)
    )?;
    let mut last_status: Option<EvalStatus> = None;
    let mut polls = 0u32;
    let eval = loop {
        let eval = evals::get(client, eval_id).await?;
        match last_status {
            None => writeln!(out, "    {}", evals::trigger_line(&eval, verbose))?,
            Some(previous) if previous != eval.status => writeln!(
                out,
                "    Evaluation status changed: {:?} -> {:?}",
                previous.as_str(),
                eval.status.as_str()
            )?,
            Some(_) => {}
        }
        last_status = Some(eval.status);
        if eval.is_terminal() {
            break eval;
        }
        polls += 1;
        if polls == POLLS_BEFORE_WORKER_CHECK
            && eval.status == EvalStatus::Pending
            && let Some(why) = scheduling_paused(client, eval.scheduler).await
        {
            writeln!(out, "    {why}")?;
        }
        out.flush()?;
        tokio::time::sleep(POLL_INTERVAL).await;
    };
    for alloc in placed_by(client, &eval.namespace, eval.job_id.as_str(), eval_id).await? {
        writeln!(
            out,
            "    Allocation {:?} created: node {:?}, group {:?}",
            output::id(alloc.id, verbose),
            output::id(alloc.node_id, verbose),
            alloc.task_group
        )?;
    }
    let short = output::id(eval_id, verbose);
    if eval.status == EvalStatus::Failed {
        writeln!(
            out,
            "==> Evaluation {short:?} finished with status \"failed\": {}",
            eval.status_description
        )?;
        return Ok(Exit::PLACEMENT_FAILURES);
    }
    if eval.failed_tg_allocs.is_empty() {
        writeln!(
            out,
            "==> Evaluation {short:?} finished with status {:?}",
            eval.status.as_str()
        )?;
        return Ok(Exit::OK);
    }
    writeln!(
        out,
        "==> Evaluation {short:?} finished with status {:?} but failed to place all allocations:",
        eval.status.as_str()
    )?;
    for line in evals::placement_failures(&eval.failed_tg_allocs).lines() {
        writeln!(out, "    {line}")?;
    }
    if let Some(blocked) = eval.blocked_eval {
        writeln!(
            out,
            "    Evaluation {:?} waiting for additional capacity to place remainder",
            output::id(blocked, verbose)
        )?;
    }
    Ok(Exit::PLACEMENT_FAILURES)
}

/// Why nothing will take an evaluation of `scheduler`'s type, when no answering server has
/// a started worker for it: an operator paused them or configured the type away. None
/// when some worker takes it, or the workers cannot be listed (no operator read grant).
async fn scheduling_paused(client: &Client, scheduler: SchedulerType) -> Option<String> {
    let answer = client
        .workers()
        .list(pb::ListWorkersRequest::default())
        .await
        .ok()?
        .into_inner();
    let wire = scheduler.to_wire();
    let takers: Vec<_> = answer
        .workers
        .iter()
        .filter(|w| w.enabled_schedulers.contains(&wire))
        .collect();
    if takers
        .iter()
        .any(|w| w.status == pb::WorkerStatus::Started as i32)
    {
        return None;
    }
    Some(if takers.is_empty() {
        format!(
            "Scheduling is paused: no worker takes {} evaluations (drover operator workers config -schedulers)",
            scheduler.as_str()
        )
    } else {
        "Scheduling is paused: every scheduler worker is paused; \
         the evaluation waits (drover operator workers resume -all)"
            .to_string()
    })
}

/// The allocations `eval_id` created for its job; none once the job is gone (a purge
/// removes it while its last evaluation still runs).
async fn placed_by(
    client: &Client,
    namespace: &str,
    job_id: &str,
    eval_id: &str,
) -> Result<Vec<Allocation>, CliError> {
    let answer = drover_proto::paging::job_allocations_all(
        &client.jobs(),
        pb::JobAllocationsRequest {
            namespace: namespace.to_string(),
            job_id: job_id.to_string(),
            ..Default::default()
        },
    )
    .await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(status) if status.code() == tonic::Code::NotFound => return Ok(Vec::new()),
        Err(status) => {
            return Err(rpc_failed(format_args!(
                "listing allocations of job {job_id:?}"
            ))(status));
        }
    };
    let mut placed = Vec::new();
    for alloc in answer.allocations {
        if alloc.eval_id == eval_id {
            placed.push(Allocation::try_from(alloc)?);
        }
    }
    placed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(placed)
}
